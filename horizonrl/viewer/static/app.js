// horizonrl viewer: run list -> run overview -> trajectory list -> turn-by-turn replay; compare
// runs, GRPO groups (pages.js), token view (tokens.js), charts (charts.js). Plain JS, no build
// step, no external files: the page talks to the JSON API in app.py.
"use strict";

const view = document.getElementById("view");
const CHARTS = ["reward/mean", "success/mean", "score/mean", "turns/mean", "schedule/max_turns",
  "curriculum/stage", "schedule/max_tokens", "kl/mean", "loss/policy", "eval/success", "explore/success",
  "agentevol/kept"];
// Per-step schedules (turn cap, curriculum stage, token cap): the compare page draws them as step
// lines under the chosen metric.
const SCHEDULES = ["schedule/max_turns", "curriculum/stage", "schedule/max_tokens"];
// Lines of one chart: `name` itself and each `name/<part>` (per-family values, e.g. AgentEvol's
// agentevol/kept/textcraft), so the families of a multi-family run are compared in one chart.
function partSeries(metrics, name, label) {
  const parts = Object.keys(metrics.series).filter((n) => n.startsWith(`${name}/`) && !n.slice(name.length + 1).includes("/"));
  return [{ label, xs: metrics.steps, ys: metrics.series[name] || [] },
    ...parts.map((n) => ({ label: n.slice(name.length + 1), xs: metrics.steps, ys: metrics.series[n] }))];
}
const REPORT_COLS = [["n_items", "items"], ["n", "n"], ["success_rate", "success %", pct],
  ["mean_score", "mean score", num], ["avg_at_k", "avg@k %", pct], ["pass_at_k", "pass@k %", pct],
  ["mean_turns", "mean turns", num], ["n_failed", "failed"]];
let keyHandler = null;
let poller = null;
const POLL_MS = Number(new URLSearchParams(location.search).get("poll_ms")) || 2000;
// Re-run `fn` every POLL_MS while this page is shown (a run still training updates by itself).
function live(fn) {
  const tick = async () => { if (!document.hidden) { try { await fn(); } catch (err) { /* next tick */ } } };
  poller = setInterval(tick, POLL_MS);
}

// ---------------------------------------------------------------- helpers
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) el.append(c);
  return el;
}
const svg = (tag, attrs) => {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
};
function num(x, digits = 3) {
  if (x === null || x === undefined) return "–";
  if (Number.isInteger(x)) return String(x);
  if (Math.abs(x) < 0.01) return String(Number(x.toPrecision(2)));  // KL and losses are often tiny
  return Number(x).toFixed(digits).replace(/\.?0+$/, "") || "0";
}
function pct(x) { return x === null || x === undefined ? "–" : (100 * x).toFixed(1); }
const enc = encodeURIComponent;
async function api(path) {
  const res = await fetch(path);
  const body = await res.json();
  if (!res.ok) throw new Error(body.error ? body.error.message : res.statusText);
  return body;
}
function crumbs(...parts) {
  const nav = document.getElementById("crumbs");
  nav.replaceChildren(...parts.map(([label, href]) => h("span", {}, " › ", href ? h("a", { href }, label) : label)));
}
// Column headers; a trailing "#" marks a right-aligned number column ("score#").
const heads = (...names) => h("thead", {}, h("tr", {}, names.map((c) => h("th", c.endsWith("#") && c !== "#" ? { class: "n" } : {}, c.replace(/(.)#$/, "$1")))));
function badge(text, kind) { return h("span", { class: `badge ${kind}` }, text); }
function outcome(t) {
  return [t.success ? badge("solved", "ok") : badge("unsolved", "bad"),
    t.failed ? badge("failed", "warn") : null, t.truncated ? badge("truncated", "dim") : null,
    t.terminated ? badge("terminated", "dim") : null];
}
function ago(seconds) {
  const d = Date.now() / 1000 - seconds;
  if (d < 90) return "just now";
  if (d < 5400) return `${Math.round(d / 60)} min ago`;
  if (d < 129600) return `${Math.round(d / 3600)} h ago`;
  return new Date(seconds * 1000).toLocaleDateString();
}

// ---------------------------------------------------------------- run list
async function showRuns() {
  crumbs();
  const chosen = new Set();
  const button = h("button", { class: "compare-btn", disabled: true, onclick: () => (location.hash = `#/compare?runs=${[...chosen].map(enc).join(",")}`) }, "Compare selected runs");
  const body = h("tbody");
  let stamp = null;
  async function draw() {
    const data = await api("/api/runs");
    const now = JSON.stringify(data.runs.map((r) => [r.id, r.last_step, r.last, r.eval_success, r.n_sources, r.n_reports]));
    if (now === stamp) return;
    stamp = now;
    document.getElementById("root").textContent = data.root;
    body.replaceChildren(...data.runs.map((r) => h("tr", { class: "link", "data-run": r.id, onclick: (e) => { if (e.target.tagName !== "INPUT") location.hash = `#/run/${enc(r.id)}`; } },
      h("td", {}, r.kind === "train" ? h("input", { type: "checkbox", title: "compare", checked: chosen.has(r.id), onchange: (e) => {
        e.target.checked ? chosen.add(r.id) : chosen.delete(r.id); button.disabled = chosen.size < 1; } }) : null),
      h("td", {}, h("a", { href: `#/run/${enc(r.id)}` }, r.id)), h("td", {}, r.kind),
      h("td", { class: "n" }, r.last_step ?? "–"), h("td", { class: "n" }, num(r.last["reward/mean"])),
      h("td", { class: "n" }, pct(r.last["success/mean"])), h("td", { class: "n eval-success" }, pct(r.eval_success)),
      h("td", { class: "n" }, r.n_sources), h("td", { class: "n" }, r.n_reports), h("td", {}, ago(r.mtime)))));
    return data;
  }
  const data = await draw();
  if (!data.runs.length) return view.replaceChildren(h("p", {}, "No runs, eval reports or trajectory files here."));
  view.replaceChildren(h("h1", {}, "Runs"), h("table", { class: "runs" },
    heads("", "run", "kind", "last step#", "reward#", "success %#", "eval success %#", "trajectory files#", "reports#", "modified"),
    body), h("div", { class: "controls plain" }, button, h("a", { href: "#/compare" }, "compare eval reports →")));
  live(draw);
}

// ---------------------------------------------------------------- run overview
function reportTable(report) {
  const rows = Object.entries(report.by_category || {});
  const cols = REPORT_COLS.filter(([k]) => k in report || rows.some(([, r]) => k in r));
  const cells = (r) => cols.map(([k, , f]) => h("td", { class: "n" }, f ? f(r[k]) : r[k] ?? "–"));
  return h("table", { class: "report" }, h("thead", {}, h("tr", {}, h("th", {}, "category"), cols.map(([, l]) => h("th", { class: "n" }, l)))),
    h("tbody", {}, rows.map(([cat, r]) => h("tr", {}, h("td", {}, cat), cells(r))),
      h("tr", { class: "total" }, h("td", {}, "all"), cells(report))));
}

async function showRun(runId) {
  let [run, metrics] = await Promise.all([api(`/api/runs/${enc(runId)}`), api(`/api/runs/${enc(runId)}/metrics`)]);
  crumbs([run.id]);
  const names = Object.keys(metrics.series);
  const shown = CHARTS.filter((n) => names.includes(n));
  const charts = h("div", { class: "grid" });
  const count = h("span", { class: "muted step-count" });
  const drawAll = () => {
    count.textContent = `${metrics.steps.length} steps`;
    charts.replaceChildren(...shown.map((name) => chart(name, partSeries(metrics, name, run.id))));
  };
  drawAll();
  const extra = h("select", { onchange: (e) => { if (e.target.value) { shown.push(e.target.value); drawAll(); } e.target.value = ""; } },
    h("option", { value: "" }, "add a metric chart…"), names.filter((n) => !CHARTS.includes(n)).map((n) => h("option", { value: n }, n)));
  const parts = [h("h1", {}, run.id, " ", h("a", { class: "small", href: `#/compare?runs=${enc(run.id)}` }, "compare with other runs →")), h("p", { class: "muted" }, run.path)];
  if (names.length || run.kind === "train") parts.push(h("h2", {}, `Metrics `, count), charts, extra);
  for (const rep of run.reports) {
    if (!rep.report) continue;
    const title = rep.name === "." ? "Eval report" : `Eval report: ${rep.name}`;
    const src = rep.source || (rep.name === "." && run.sources.length ? run.sources[0].id : null);
    parts.push(h("h2", {}, title, " ", src ? h("a", { href: `#/run/${enc(run.id)}/src/${enc(src)}`, class: "small" }, "trajectories →") : null),
      h("p", { class: "muted" }, ["model", "env", "split", "step"].filter((k) => k in rep.report).map((k) => `${k} ${rep.report[k]}`).join(" · ")),
      reportTable(rep.report));
  }
  const chips = h("div", { class: "chips" });
  const drawChips = () => chips.replaceChildren(...run.sources.map((s) =>
    h("a", { class: `chip ${s.kind}`, href: `#/run/${enc(run.id)}/src/${enc(s.id)}`, title: s.path },
      s.kind === "train" && s.step !== null ? `step ${s.step}` : s.kind === "eval" ? `eval: ${s.path.replace(/\/trajectories\.jsonl$/, "")}` : s.path)));
  drawChips();
  const trained = run.sources.filter((s) => s.kind === "train");
  if (run.sources.length || run.kind === "train") {
    parts.push(h("h2", {}, "Trajectories ", trained.length ? h("a", { class: "small", href: `#/run/${enc(run.id)}/groups/${enc(trained[trained.length - 1].id)}` }, "GRPO groups of the last step →") : null), chips);
  }
  if (run.config) parts.push(h("details", {}, h("summary", {}, "config.yaml"), h("pre", {}, run.config)));
  view.replaceChildren(...parts);
  live(async () => {  // new steps of a run still training: redraw the charts and the step list
    const fresh = await api(`/api/runs/${enc(runId)}/metrics`);
    if (fresh.stamp === metrics.stamp) return;
    metrics = fresh;
    for (const n of CHARTS) if (n in metrics.series && !shown.includes(n)) shown.push(n);
    drawAll();
    run = await api(`/api/runs/${enc(runId)}`);
    drawChips();
  });
}

// ---------------------------------------------------------------- trajectory list
async function showList(runId, source, params) {
  const q = new URLSearchParams(params);
  q.set("source", source);
  q.set("limit", q.get("limit") || "50");
  const [data, run] = await Promise.all([api(`/api/runs/${enc(runId)}/trajectories?${q}`), api(`/api/runs/${enc(runId)}`)]);
  crumbs([runId, `#/run/${enc(runId)}`], [source]);
  const switcher = h("select", { onchange: (e) => (location.hash = `#/run/${enc(runId)}/src/${enc(e.target.value)}?${params}`) },
    run.sources.map((s) => h("option", { value: s.id, selected: s.id === source }, s.path)));
  const go = (changes) => {
    const p = new URLSearchParams(params);
    for (const [k, v] of Object.entries(changes)) (v === "" || v === null ? p.delete(k) : p.set(k, v));
    if (!("offset" in changes)) p.delete("offset");
    location.hash = `#/run/${enc(runId)}/src/${enc(source)}?${p}`;
  };
  const sel = (key, options) => h("select", { onchange: (e) => go({ [key]: e.target.value }) },
    options.map(([v, l]) => h("option", { value: v, selected: (params.get(key) || "") === v }, l)));
  const filters = h("div", { class: "filters" },
    sel("success", [["", "all outcomes"], ["true", "solved"], ["false", "unsolved"]]),
    sel("category", [["", "all categories"], ...data.categories.map((c) => [c, c])]),
    h("input", { placeholder: "item id contains…", value: params.get("item") || "", onchange: (e) => go({ item: e.target.value }) }),
    sel("sort", [["", "file order"], ["score", "sort by score"], ["turns", "sort by turns"], ["reward", "sort by reward"], ["item_id", "sort by item id"]]),
    sel("order", [["", "ascending"], ["desc", "descending"]]));
  const base = `#/run/${enc(runId)}/src/${enc(source)}`;
  const rows = data.items.map((t) => h("tr", { class: "link", onclick: () => (location.hash = `${base}/${t.index}`) },
    h("td", { class: "n" }, t.index), h("td", {}, h("a", { href: `${base}/${t.index}` }, t.item_id)), h("td", {}, t.category),
    h("td", {}, outcome(t)), h("td", { class: "n" }, num(t.score)), h("td", { class: "n" }, num(t.reward)),
    h("td", { class: "n" }, t.num_turns ?? "–"), h("td", { class: "n" }, t.n_tokens ? `${t.n_sampled} / ${t.n_tokens}` : "–")));
  const off = data.offset, lim = data.limit;
  const pager = h("div", { class: "pager" },
    h("button", { disabled: off === 0, onclick: () => go({ offset: Math.max(0, off - lim) }) }, "◀ previous"),
    h("span", {}, data.total ? ` ${off + 1}–${Math.min(off + lim, data.total)} of ${data.total} ` : " none "),
    h("button", { disabled: off + lim >= data.total, onclick: () => go({ offset: off + lim }) }, "next ▶"));
  const groupsLink = h("a", { class: "small", href: `#/run/${enc(runId)}/groups/${enc(source)}` }, "GRPO groups →");
  view.replaceChildren(h("h1", {}, source, " ", switcher, " ", groupsLink),
    h("p", { class: "muted" }, `${data.n_records} trajectories, ${data.n_success} solved (${pct(data.n_success / (data.n_records || 1))} %)`,
      data.skipped_lines ? ` · ${data.skipped_lines} unreadable line(s) skipped (file still being written?)` : ""),
    filters, h("table", {}, heads("##", "item", "category", "outcome", "score#", "reward#", "turns#",
      "sampled / tokens#"), h("tbody", {}, rows)), pager);
}

// ---------------------------------------------------------------- replay
// What the env showed besides text: a BabyAI grid (drawn) or a web page screenshot (served by app.py).
const GRID_FILL = { W: "#8c959f", F: "#d0d7de", ".": "#1f2328", "?": "#eaeef2" };
const GRID_COLOUR = { r: "#e5534b", g: "#57ab5a", b: "#539bf5", p: "#b083f0", y: "#daaa3f", e: "#adbac7" };
function drawGrid(grid) {
  const rows = grid.rows || [], n = rows.length, S = 22;
  const box = svg("svg", { viewBox: `0 0 ${n * S} ${n * S}`, class: "grid-view", width: n * S, height: n * S });
  rows.forEach((row, j) => {
    for (let i = 0; 2 * i < row.length; i++) {
      const kind = row[2 * i], colour = GRID_COLOUR[row[2 * i + 1]] || "#adbac7", x = i * S, y = j * S;
      box.append(svg("rect", { x, y, width: S, height: S, class: `cell k${kind === "?" ? "unseen" : kind}`, fill: GRID_FILL[kind] || GRID_FILL["."], stroke: "#57606a", "stroke-width": 0.5 }));
      if ("DCL".includes(kind)) box.append(svg("rect", { x: x + 2, y: y + 2, width: S - 4, height: S - 4, fill: kind === "D" ? "none" : colour, stroke: colour, "stroke-width": 2 }));
      if (kind === "L") box.appendChild(svg("text", { x: x + S / 2, y: y + S / 2 + 4, "text-anchor": "middle", class: "glyph" })).textContent = "🔒";
      if (kind === "K") box.append(svg("rect", { x: x + 8, y: y + 4, width: 6, height: 14, fill: colour }));
      if (kind === "A") box.append(svg("circle", { cx: x + S / 2, cy: y + S / 2, r: S / 3, fill: colour }));
      if (kind === "B") box.append(svg("rect", { x: x + 4, y: y + 4, width: S - 8, height: S - 8, fill: "none", stroke: colour, "stroke-width": 2.5 }));
      if (kind === "G") box.append(svg("rect", { x: x + 2, y: y + 2, width: S - 4, height: S - 4, fill: "#57ab5a" }));
    }
  });
  const [ax, ay] = grid.agent || [Math.floor(n / 2), n - 1];
  box.append(svg("polygon", { points: `${ax * S + S / 2},${ay * S + 3} ${ax * S + 4},${ay * S + S - 3} ${ax * S + S - 4},${ay * S + S - 3}`, fill: "#e5534b", class: "agent" }));
  return h("div", { class: "block view" }, h("div", { class: "label" }, "what the agent saw", grid.carrying ? ` · carrying ${grid.carrying}` : ""), box);
}
function envView(v, shot) {
  if (!v) return null;
  if (v.screenshot) return h("div", { class: "block view" }, h("div", { class: "label" }, "screenshot"), h("img", { class: "screenshot", src: shot(v.key), alt: `page after ${v.key} turns` }));
  return v.grid ? drawGrid(v.grid) : null;
}

function block(label, text, cls) {
  return text === null || text === undefined || text === "" ? null : h("div", { class: `block ${cls || ""}` }, h("div", { class: "label" }, label), h("pre", {}, text));
}

async function showReplay(runId, source, index, params) {
  const data = await api(`/api/runs/${enc(runId)}/trajectories/${enc(source)}/${index}`);
  const t = data.record, rp = data.replay, base = `#/run/${enc(runId)}/src/${enc(source)}`;
  crumbs([runId, `#/run/${enc(runId)}`], [source, base], [`#${index}`]);
  const n = rp.turns.length;
  const start = params.get("turn") === "end" ? n : Number(params.get("turn") || 1) - 1;
  let pos = Number.isInteger(start) ? start : 0;
  const shot = (key) => `/api/runs/${enc(runId)}/trajectories/${enc(source)}/${index}/screenshot/${key}`;
  const cards = rp.turns.map((turn) => h("section", { class: "turn card" },
    h("div", { class: "turn-head" }, h("b", {}, `Turn ${turn.turn + 1}`), turn.kind === "plan" ? badge("plan", "dim") : null,
      turn.reward === null ? null : badge(`reward ${num(turn.reward, 4)}`, turn.reward > 0 ? "ok" : "dim")),
    envView(turn.view, shot), block("observation", turn.observation, "obs"),
    turn.plan ? block(turn.kind === "plan" ? "plan" : "revised plan", turn.plan.map((p, i) => `${i + 1}. ${p}`).join("\n"), "thought") : null,
    turn.reflection ? block("reflection", turn.reflection, "thought") : null,
    turn.kind === "plan" ? (turn.plan ? null : block("plan (not parsed)", turn.response, "bad")) : block("thought", turn.thought, "thought"),
    turn.kind === "plan" ? null : turn.action !== null ? block("action", turn.action, "action") : block("no action parsed", turn.parse_error || turn.response, "bad"),
    h("details", {}, h("summary", {}, "raw response"), h("pre", {}, turn.response))));
  const final = h("section", { class: "turn card final" }, h("div", { class: "turn-head" }, h("b", {}, "End"), outcome(t)),
    envView(rp.final_view, shot), block("final observation", rp.final_observation, "obs"),
    h("p", {}, `score ${num(t.score)} · total reward ${num(t.reward)} · ${t.num_turns} turns`,
      t.max_turns ? ` (cap ${t.max_turns})` : "", t.meta && t.meta.stop_reason ? ` · stop: ${t.meta.stop_reason}` : "",
      t.meta && t.meta.strategy ? ` · strategy: ${t.meta.strategy}` : ""),
    t.fail_reason ? block("fail reason", t.fail_reason, "bad") : null);
  const all = [...cards, final];
  const counter = h("span", { class: "counter" });
  const showAll = h("input", { type: "checkbox", onchange: () => move(0) });
  function move(delta) {
    pos = Math.max(0, Math.min(n, pos + delta));
    all.forEach((c, i) => { c.hidden = !showAll.checked && i > pos; c.classList.toggle("current", i === pos); });
    counter.textContent = pos < n ? `turn ${pos + 1} / ${n}` : `end (${n} turns)`;
    history.replaceState(null, "", `${base}/${index}?turn=${pos < n ? pos + 1 : "end"}`);  // a link to this turn
    if (delta) all[pos].scrollIntoView({ block: "nearest", behavior: "smooth" });
  }
  const controls = h("div", { class: "controls" },
    h("button", { onclick: () => move(-n), title: "first (Home)" }, "« first"), h("button", { onclick: () => move(-1), title: "back (←)" }, "◀"),
    counter, h("button", { onclick: () => move(1), title: "forward (→)" }, "▶"), h("button", { onclick: () => move(n), title: "end (End)" }, "end »"),
    h("label", {}, showAll, " show all turns"), h("span", { class: "muted" }, "keys: ← → Home End"));
  keyHandler = (e) => {
    if (e.target.tagName === "INPUT" || e.target.tagName === "SELECT") return;
    const d = { ArrowRight: 1, ArrowLeft: -1, Home: -n, End: n }[e.key];
    if (d) { e.preventDefault(); move(d); }
  };
  const nav = h("span", { class: "small" }, index > 0 ? h("a", { href: `${base}/${index - 1}` }, "← previous trajectory") : null,
    " ", index + 1 < data.count ? h("a", { href: `${base}/${index + 1}` }, "next trajectory →") : null);
  const tokenBox = h("div");
  view.replaceChildren(...[
    h("h1", {}, t.item_id, " ", h("span", { class: "muted" }, t.category)), h("div", { class: "summary" }, outcome(t),
      ` score ${num(t.score)} · reward ${num(t.reward)} · ${t.num_turns} turns `,
      data.tokens.n_tokens ? `· ${data.tokens.n_sampled} sampled of ${data.tokens.n_tokens} tokens ` : "", nav),
    rp.system ? h("details", {}, h("summary", {}, "system prompt"), h("pre", {}, rp.system)) : null,
    rp.instruction ? h("details", {}, h("summary", {}, "task instruction"), h("pre", {}, rp.instruction)) : null,
    controls, ...all,
    data.tokens.n_tokens ? h("button", { class: "tokens-btn", onclick: (e) => { e.target.remove(); showTokens(runId, source, index, tokenBox, data.tokens, params); } }, "Show token view") : null,
    tokenBox].filter(Boolean));
  move(0);
  if (params.get("tokens")) view.querySelector(".tokens-btn")?.click();
  if (pos > 0) all[pos].scrollIntoView({ block: "nearest" });
}

// ---------------------------------------------------------------- routing
async function route() {
  keyHandler = null;
  clearInterval(poller);
  const [path, query] = location.hash.replace(/^#\/?/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if (parts[0] === "compare") await showCompare(new URLSearchParams(query));
    else if (parts[0] === "run" && parts[2] === "groups" && parts.length === 4) await showGroups(parts[1], parts[3]);
    else if (parts[0] === "run" && parts[2] === "groups" && parts.length === 5) await showGroup(parts[1], parts[3], Number(parts[4]));
    else if (parts[0] === "run" && parts.length === 2) await showRun(parts[1]);
    else if (parts[0] === "run" && parts[2] === "src" && parts.length === 4) await showList(parts[1], parts[3], new URLSearchParams(query));
    else if (parts[0] === "run" && parts[2] === "src" && parts.length === 5) await showReplay(parts[1], parts[3], Number(parts[4]), new URLSearchParams(query));
    else await showRuns();
  } catch (err) {
    view.replaceChildren(h("p", { class: "error" }, `Error: ${err.message}`), h("p", {}, h("a", { href: "#/" }, "back to runs")));
  }
}
document.addEventListener("keydown", (e) => keyHandler && keyHandler(e));
window.addEventListener("hashchange", route);
route();
