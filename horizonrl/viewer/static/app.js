// horizonrl viewer: run list -> run overview -> trajectory list -> turn-by-turn replay.
// Plain JS, no build step, no external files: the page talks to the JSON API in app.py.
"use strict";

const view = document.getElementById("view");
const CHARTS = ["reward/mean", "success/mean", "score/mean", "turns/mean", "schedule/max_turns",
  "kl/mean", "loss/policy", "eval/success"];
const REPORT_COLS = [["n_items", "items"], ["n", "n"], ["success_rate", "success %", pct],
  ["mean_score", "mean score", num], ["avg_at_k", "avg@k %", pct], ["pass_at_k", "pass@k %", pct],
  ["mean_turns", "mean turns", num], ["n_failed", "failed"]];
let keyHandler = null;

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
  const data = await api("/api/runs");
  document.getElementById("root").textContent = data.root;
  if (!data.runs.length) return view.replaceChildren(h("p", {}, "No runs, eval reports or trajectory files here."));
  const rows = data.runs.map((r) => h("tr", { class: "link", onclick: () => (location.hash = `#/run/${enc(r.id)}`) },
    h("td", {}, h("a", { href: `#/run/${enc(r.id)}` }, r.id)), h("td", {}, r.kind),
    h("td", { class: "n" }, r.last_step ?? "–"), h("td", { class: "n" }, num(r.last["reward/mean"])),
    h("td", { class: "n" }, pct(r.last["success/mean"])), h("td", { class: "n" }, pct(r.eval_success)),
    h("td", { class: "n" }, r.n_sources), h("td", { class: "n" }, r.n_reports), h("td", {}, ago(r.mtime))));
  view.replaceChildren(h("h1", {}, "Runs"), h("table", {},
    heads("run", "kind", "last step#", "reward#", "success %#", "eval success %#", "trajectory files#", "reports#", "modified"),
    h("tbody", {}, rows)));
}

// ---------------------------------------------------------------- run overview
function chart(name, steps, values) {
  const W = 320, H = 170, L = 44, R = 10, T = 10, B = 24;
  const pts = steps.map((s, i) => [s, values[i]]).filter((p) => p[1] !== null);
  if (!pts.length) return h("figure", { class: "card" }, h("figcaption", {}, h("b", {}, name), h("span", { class: "muted" }, " no values")));
  const box = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart" });
  const ys = pts.map((p) => p[1]), xs = pts.map((p) => p[0]);
  let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (y0 === y1) [y0, y1] = [y0 - 1, y1 + 1];
  const [x0, x1] = [Math.min(...xs), Math.max(...xs) === Math.min(...xs) ? Math.min(...xs) + 1 : Math.max(...xs)];
  const X = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const Y = (y) => H - B - ((y - y0) / (y1 - y0)) * (H - T - B);
  box.append(svg("rect", { x: L, y: T, width: W - L - R, height: H - T - B, class: "frame" }));
  for (const [y, label] of [[y0, num(y0)], [y1, num(y1)]]) {
    box.appendChild(svg("text", { x: L - 4, y: Y(y) + 4, class: "tick", "text-anchor": "end" })).textContent = label;
  }
  for (const x of [x0, x1]) {
    box.appendChild(svg("text", { x: X(x), y: H - 8, class: "tick", "text-anchor": "middle" })).textContent = x;
  }
  box.append(svg("polyline", { points: pts.map(([x, y]) => `${X(x)},${Y(y)}`).join(" "), class: "line" }));
  if (pts.length <= 60) for (const [x, y] of pts) box.append(svg("circle", { cx: X(x), cy: Y(y), r: 2.5, class: "dot" }));
  const last = pts.length ? num(pts[pts.length - 1][1], 4) : "–";
  const readout = h("span", { class: "muted" }, ` last ${last}`);
  const cursor = box.appendChild(svg("circle", { r: 4, class: "cursor", visibility: "hidden" }));
  box.addEventListener("mousemove", (e) => {  // nearest point to the pointer, by step
    const r = box.getBoundingClientRect(), sx = x0 + (((e.clientX - r.left) * W) / r.width - L) / (W - L - R) * (x1 - x0);
    const [x, y] = pts.reduce((a, b) => (Math.abs(b[0] - sx) < Math.abs(a[0] - sx) ? b : a));
    cursor.setAttribute("cx", X(x)); cursor.setAttribute("cy", Y(y)); cursor.setAttribute("visibility", "visible");
    readout.textContent = ` step ${x}: ${num(y, 4)}`;
  });
  box.addEventListener("mouseleave", () => { cursor.setAttribute("visibility", "hidden"); readout.textContent = ` last ${last}`; });
  return h("figure", { class: "card" }, h("figcaption", {}, h("b", {}, name), readout), box);
}

function reportTable(report) {
  const rows = Object.entries(report.by_category || {});
  const cols = REPORT_COLS.filter(([k]) => k in report || rows.some(([, r]) => k in r));
  const cells = (r) => cols.map(([k, , f]) => h("td", { class: "n" }, f ? f(r[k]) : r[k] ?? "–"));
  return h("table", { class: "report" }, h("thead", {}, h("tr", {}, h("th", {}, "category"), cols.map(([, l]) => h("th", { class: "n" }, l)))),
    h("tbody", {}, rows.map(([cat, r]) => h("tr", {}, h("td", {}, cat), cells(r))),
      h("tr", { class: "total" }, h("td", {}, "all"), cells(report))));
}

async function showRun(runId) {
  const [run, metrics] = await Promise.all([api(`/api/runs/${enc(runId)}`), api(`/api/runs/${enc(runId)}/metrics`)]);
  crumbs([run.id]);
  const names = Object.keys(metrics.series);
  const charts = h("div", { class: "grid" });
  const draw = (name) => charts.append(chart(name, metrics.steps, metrics.series[name]));
  CHARTS.filter((n) => names.includes(n)).forEach(draw);
  const extra = h("select", { onchange: (e) => { if (e.target.value) draw(e.target.value); e.target.value = ""; } },
    h("option", { value: "" }, "add a metric chart…"), names.filter((n) => !CHARTS.includes(n)).map((n) => h("option", { value: n }, n)));
  const parts = [h("h1", {}, run.id), h("p", { class: "muted" }, run.path)];
  if (names.length) parts.push(h("h2", {}, `Metrics `, h("span", { class: "muted" }, `${metrics.steps.length} steps`)), charts, extra);
  for (const rep of run.reports) {
    if (!rep.report) continue;
    const title = rep.name === "." ? "Eval report" : `Eval report: ${rep.name}`;
    const src = rep.source || (rep.name === "." && run.sources.length ? run.sources[0].id : null);
    parts.push(h("h2", {}, title, " ", src ? h("a", { href: `#/run/${enc(run.id)}/src/${enc(src)}`, class: "small" }, "trajectories →") : null),
      h("p", { class: "muted" }, ["model", "env", "split", "step"].filter((k) => k in rep.report).map((k) => `${k} ${rep.report[k]}`).join(" · ")),
      reportTable(rep.report));
  }
  if (run.sources.length) {
    parts.push(h("h2", {}, "Trajectories"), h("div", { class: "chips" }, run.sources.map((s) =>
      h("a", { class: `chip ${s.kind}`, href: `#/run/${enc(run.id)}/src/${enc(s.id)}`, title: s.path },
        s.kind === "train" && s.step !== null ? `step ${s.step}` : s.kind === "eval" ? `eval: ${s.path.replace(/\/trajectories\.jsonl$/, "")}` : s.path))));
  }
  if (run.config) parts.push(h("details", {}, h("summary", {}, "config.yaml"), h("pre", {}, run.config)));
  view.replaceChildren(...parts);
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
  view.replaceChildren(h("h1", {}, source, " ", switcher),
    h("p", { class: "muted" }, `${data.n_records} trajectories, ${data.n_success} solved (${pct(data.n_success / (data.n_records || 1))} %)`,
      data.skipped_lines ? ` · ${data.skipped_lines} unreadable line(s) skipped (file still being written?)` : ""),
    filters, h("table", {}, heads("##", "item", "category", "outcome", "score#", "reward#", "turns#",
      "sampled / tokens#"), h("tbody", {}, rows)), pager);
}

// ---------------------------------------------------------------- replay
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
  const cards = rp.turns.map((turn) => h("section", { class: "turn card" },
    h("div", { class: "turn-head" }, h("b", {}, `Turn ${turn.turn + 1}`),
      turn.reward === null ? null : badge(`reward ${num(turn.reward, 4)}`, turn.reward > 0 ? "ok" : "dim")),
    block("observation", turn.observation, "obs"), block("thought", turn.thought, "thought"),
    turn.action !== null ? block("action", turn.action, "action") : block("no action parsed", turn.parse_error || turn.response, "bad"),
    h("details", {}, h("summary", {}, "raw response"), h("pre", {}, turn.response))));
  const final = h("section", { class: "turn card final" }, h("div", { class: "turn-head" }, h("b", {}, "End"), outcome(t)),
    block("final observation", rp.final_observation, "obs"),
    h("p", {}, `score ${num(t.score)} · total reward ${num(t.reward)} · ${t.num_turns} turns`,
      t.max_turns ? ` (cap ${t.max_turns})` : "", t.meta && t.meta.stop_reason ? ` · stop: ${t.meta.stop_reason}` : ""),
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
    data.tokens.n_tokens ? h("button", { class: "tokens-btn", onclick: (e) => { e.target.remove(); showTokens(runId, source, index, tokenBox, data.tokens); } }, "Show token view") : null,
    tokenBox].filter(Boolean));
  move(0);
  if (params.get("tokens")) view.querySelector(".tokens-btn")?.click();
  if (pos > 0) all[pos].scrollIntoView({ block: "nearest" });
}

async function showTokens(runId, source, index, box, stats) {
  const d = await api(`/api/runs/${enc(runId)}/trajectories/${enc(source)}/${index}/tokens`);
  const info = h("p", { class: "muted" }, `${stats.n_tokens} tokens · ${stats.n_sampled} sampled (loss_mask = 1) · prompt ${stats.prompt_length}`,
    ` · sampled per turn: ${stats.sampled_per_turn.join(", ") || "–"} · mean logprob ${num(stats.mean_logprob)} · min ${num(stats.min_logprob)}`);
  const legend = h("p", {}, h("span", { class: "tok ctx" }, "context (prompt, observations, template)"), " ",
    h("span", { class: "tok smp" }, "sampled"), " ", h("span", { class: "tok smp low" }, "sampled, p < 0.1"),
    d.pieces ? h("span", { class: "muted" }, ` · hover a token for its id and logprob · tokenizer ${d.tokenizer}`)
      : h("span", { class: "muted" }, " · no tokenizer file found for this run: token ids shown, hover for logprobs"));
  const text = h("div", { class: "tokens" });
  d.token_ids.forEach((id, i) => {
    const lp = d.logprobs[i], sampled = d.loss_mask[i] === 1;
    const cls = `tok ${sampled ? "smp" : "ctx"}${sampled && lp !== null && lp < Math.log(0.1) ? " low" : ""}`;
    const title = `#${i} id ${id}` + (lp === null || lp === undefined ? "" : ` · logprob ${lp.toFixed(4)} · p ${Math.exp(lp).toFixed(3)}`);
    text.append(h("span", { class: cls, title }, d.pieces ? d.pieces[i] : `${id} `));
  });
  box.replaceChildren(h("h2", {}, "Tokens"), info, legend, text);
}

// ---------------------------------------------------------------- routing
async function route() {
  keyHandler = null;
  const [path, query] = location.hash.replace(/^#\/?/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if (parts[0] === "run" && parts.length === 2) await showRun(parts[1]);
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
