// horizonrl viewer: compare runs (metrics overlaid, eval reports side by side) and GRPO groups.
"use strict";

// ---------------------------------------------------------------- compare runs
// x-axis by step, or by sampled tokens (the cumulative sum of `sampled_tokens/total`).
function xsOf(metrics, by) {
  if (by !== "tokens") return metrics.steps;
  const per = metrics.series["sampled_tokens/total"];
  if (!per) return metrics.steps.map(() => null);
  let total = 0;
  return per.map((v) => (total += v || 0));
}

async function showCompare(params) {
  crumbs(["compare"]);
  const [list, reports] = await Promise.all([api("/api/runs"), api("/api/reports")]);
  const trainRuns = list.runs.filter((r) => r.kind === "train");
  const chosen = (params.get("runs") || "").split(",").filter(Boolean).filter((id) => trainRuns.some((r) => r.id === id));
  const by = params.get("x") === "tokens" ? "tokens" : "step";
  const go = (changes) => {
    const p = new URLSearchParams(params);
    for (const [k, v] of Object.entries(changes)) (v === "" || v === null ? p.delete(k) : p.set(k, v));
    location.hash = `#/compare?${p}`.replace(/%2C/g, ",");
  };
  let metrics = await Promise.all(chosen.map((id) => api(`/api/runs/${enc(id)}/metrics`)));
  const names = [...new Set(metrics.flatMap((m) => Object.keys(m.series)))].sort();
  const metric = params.get("metric") || (names.includes("success/mean") ? "success/mean" : names[0]);
  const pickRuns = h("div", { class: "chips run-picker" }, trainRuns.map((r) => h("label", { class: "chip" },
    h("input", { type: "checkbox", value: r.id, checked: chosen.includes(r.id), onchange: (e) => {
      const next = e.target.checked ? [...chosen, r.id] : chosen.filter((x) => x !== r.id);
      go({ runs: next.join(",") });
    } }), " ", r.id)));
  const pickMetric = h("select", { class: "metric", onchange: (e) => go({ metric: e.target.value }) },
    names.map((n) => h("option", { value: n, selected: n === metric }, n)));
  const pickX = h("select", { class: "x-axis", onchange: (e) => go({ x: e.target.value === "tokens" ? "tokens" : "" }) },
    h("option", { value: "step", selected: by === "step" }, "x: training step"), h("option", { value: "tokens", selected: by === "tokens" }, "x: sampled tokens"));
  const charts = h("div", { class: "compare-charts" });
  const draw = () => {
    const series = (name) => chosen.map((id, k) => ({ label: id, xs: xsOf(metrics[k], by), ys: metrics[k].series[name] || [] }));
    const xLabel = by === "tokens" ? "sampled tokens" : "step";
    const parts = metric ? [chart(metric, series(metric), { width: 720, height: 300, xLabel, legend: true })] : [];
    for (const name of SCHEDULES) {
      if (metric !== name && names.includes(name)) {
        parts.push(chart(name, series(name), { width: 720, height: 160, xLabel, legend: true }));
      }
    }
    charts.replaceChildren(...parts);
  };
  draw();
  const parts = [h("h1", {}, "Compare runs"), h("p", { class: "muted" }, "Choose runs, a metric and the x-axis; the turn cap (schedule/max_turns), curriculum stage (curriculum/stage) and token cap (schedule/max_tokens) are drawn below as step lines."),
    pickRuns, h("div", { class: "filters" }, pickMetric, pickX), chosen.length ? charts : h("p", { class: "muted" }, "No run chosen yet.")];
  parts.push(...evalComparison(reports.reports, chosen, params, go));
  view.replaceChildren(...parts);
  live(async () => {
    const fresh = await Promise.all(chosen.map((id) => api(`/api/runs/${enc(id)}/metrics`)));
    if (fresh.map((m) => m.stamp).join() === metrics.map((m) => m.stamp).join()) return;
    metrics = fresh;
    draw();
  });
}

function evalComparison(reports, chosen, params, go) {
  if (!reports.length) return [];
  const key = (r) => `${r.run}|${r.name}`;
  const mine = reports.filter((r) => chosen.includes(r.run));
  const pool = mine.length >= 2 ? mine : reports;
  const a = params.get("a") || key(pool[0]), b = params.get("b") || key(pool[pool.length - 1]);
  const label = (r) => `${r.run} · ${r.name === "." ? "report" : r.name}${r.success_rate === null || r.success_rate === undefined ? "" : ` (${pct(r.success_rate)} %)`}`;
  const pick = (which, current) => h("select", { class: `eval-${which}`, onchange: (e) => go({ [which]: e.target.value }) },
    reports.map((r) => h("option", { value: key(r), selected: key(r) === current }, label(r))));
  const table = h("div", { class: "eval-compare" }, h("p", { class: "muted" }, "Loading…"));
  const [ra, rb] = [a, b].map((k) => reports.find((r) => key(r) === k));
  if (ra && rb) {
    Promise.all([ra, rb].map((r) => api(`/api/runs/${enc(r.run)}`).then((run) => (run.reports.find((x) => x.name === r.name) || {}).report || {})))
      .then(([A, B]) => table.replaceChildren(evalTable(A, B, label(ra), label(rb))))
      .catch((err) => table.replaceChildren(h("p", { class: "error" }, `Error: ${err.message}`)));
  }
  return [h("h2", {}, "Compare eval reports"), h("div", { class: "filters" }, "A ", pick("a", a), " B ", pick("b", b)), table];
}

function evalTable(A, B, la, lb) {
  const cats = [...new Set([...Object.keys(A.by_category || {}), ...Object.keys(B.by_category || {})])].sort();
  const row = (name, x, y, cls) => {
    const sa = x && x.success_rate, sb = y && y.success_rate;
    const delta = sa === undefined || sb === undefined || sa === null || sb === null ? null : 100 * (sb - sa);
    return h("tr", { class: cls || "", "data-category": name }, h("td", {}, name),
      h("td", { class: "n" }, x ? x.n_items ?? x.n ?? "–" : "–"), h("td", { class: "n a" }, pct(sa)),
      h("td", { class: "n" }, y ? y.n_items ?? y.n ?? "–" : "–"), h("td", { class: "n b" }, pct(sb)),
      h("td", { class: `n delta ${delta > 0 ? "up" : delta < 0 ? "down" : ""}` }, delta === null ? "–" : `${delta > 0 ? "+" : ""}${delta.toFixed(1)}`));
  };
  return h("table", { class: "report compare" }, h("thead", {}, h("tr", {}, h("th", {}, "category"),
    h("th", { class: "n" }, "A items"), h("th", { class: "n", title: la }, "A success %"), h("th", { class: "n" }, "B items"),
    h("th", { class: "n", title: lb }, "B success %"), h("th", { class: "n" }, "B − A (points)"))),
  h("tbody", {}, cats.map((c) => row(c, (A.by_category || {})[c], (B.by_category || {})[c])), row("all", A, B, "total")));
}

// ---------------------------------------------------------------- GRPO groups
async function showGroups(runId, source) {
  const [data, run] = await Promise.all([api(`/api/runs/${enc(runId)}/groups?source=${enc(source)}`), api(`/api/runs/${enc(runId)}`)]);
  crumbs([runId, `#/run/${enc(runId)}`], [source, `#/run/${enc(runId)}/src/${enc(source)}`], ["groups"]);
  const switcher = h("select", { onchange: (e) => (location.hash = `#/run/${enc(runId)}/groups/${enc(e.target.value)}`) },
    run.sources.map((s) => h("option", { value: s.id, selected: s.id === source }, s.path)));
  const base = `#/run/${enc(runId)}/groups/${enc(source)}`;
  const rows = data.groups.map((g) => h("tr", { class: "link", onclick: () => (location.hash = `${base}/${g.key}`) },
    h("td", {}, h("a", { href: `${base}/${g.key}` }, g.item_id)), h("td", {}, g.category), h("td", { class: "n" }, g.n),
    h("td", { class: "n" }, `${g.n_success} / ${g.n}`), h("td", {}, g.rewards.map((r) => h("span", { class: `chip ${r > 0 ? "eval" : ""}` }, num(r)))),
    h("td", {}, g.turns.join(", ")), h("td", {}, g.informative ? badge("reward variance", "ok") : badge("all equal", "dim"))));
  view.replaceChildren(h("h1", {}, `Groups of ${source} `, switcher),
    h("p", { class: "muted" }, `${data.groups.length} groups (every sample of one item in this step). GRPO scores each sample against its group; groups whose rewards are all equal teach nothing.`),
    h("table", { class: "groups" }, heads("item", "category", "samples#", "solved#", "rewards", "turns", "signal"), h("tbody", {}, rows)));
}

async function showGroup(runId, source, key) {
  const [g, list] = await Promise.all([api(`/api/runs/${enc(runId)}/groups/${enc(source)}/${key}`), api(`/api/runs/${enc(runId)}/groups?source=${enc(source)}`)]);
  const base = `#/run/${enc(runId)}/groups/${enc(source)}`;
  crumbs([runId, `#/run/${enc(runId)}`], [source, `#/run/${enc(runId)}/src/${enc(source)}`], ["groups", base], [g.item_id]);
  const at = list.groups.findIndex((x) => x.key === key);
  const nav = h("span", { class: "small" }, at > 0 ? h("a", { href: `${base}/${list.groups[at - 1].key}` }, "← previous group") : null, " ",
    at + 1 < list.groups.length ? h("a", { href: `${base}/${list.groups[at + 1].key}` }, "next group →") : null);
  const diff = g.first_difference, n = Math.max(0, ...g.samples.map((s) => s.turns.length));
  const head = h("tr", {}, h("th", {}, ""), g.samples.map((s) => h("th", { class: "sample" },
    h("a", { href: `#/run/${enc(runId)}/src/${enc(source)}/${s.index}` }, `sample ${s.sample_index ?? s.index}`), " ", outcome(s)[0])));
  const stat = (label, f, cls) => h("tr", { class: cls || "" }, h("th", {}, label), g.samples.map((s) => h("td", { class: "n" }, f(s))));
  const adv = (s) => (s.advantage === null ? (s.in_update ? "–" : "not in update") : num(s.advantage, 3));
  const turnRows = [...Array(n).keys()].map((k) => h("tr", { class: `turn-row${k === diff ? " diverged" : ""}`, "data-turn": k },
    h("th", {}, `turn ${k + 1}`, k === diff ? h("div", { class: "small" }, "first difference") : null),
    g.samples.map((s) => {
      const t = s.turns[k];
      if (!t) return h("td", { class: "ended muted" }, "—");
      return h("td", { class: `act${k === diff ? " diverged" : ""}`, title: t.thought || "" },
        t.action !== null ? h("code", {}, t.action) : h("span", { class: "bad" }, "no action parsed"),
        t.reward ? h("span", { class: "small" }, ` r=${num(t.reward)}`) : null);
    })));
  const note = !g.token_stats_saved ? "Advantages come from saved update data (logging.save_token_stats); this step has none."
    : "advantage: the mean over the sample's sampled tokens of what the update used.";
  view.replaceChildren(h("h1", {}, g.item_id, " ", h("span", { class: "muted" }, g.category), " ", nav),
    h("p", { class: "muted" }, `${g.n} samples · ${g.n_success} solved · `, diff === null ? "all samples took the same actions" : `they first differ at turn ${diff + 1}`),
    h("table", { class: "group" }, h("thead", {}, head), h("tbody", {},
      stat("reward", (s) => num(s.reward)), stat("advantage", adv, "advantage"), stat("turns", (s) => s.num_turns),
      stat("stop", (s) => s.stop_reason || "–"), turnRows)),
    h("p", { class: "muted small" }, note));
}
