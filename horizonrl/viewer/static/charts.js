// horizonrl viewer: SVG line charts (one or several series), used by the run and compare pages.
"use strict";

const PALETTE = ["#0969da", "#cf222e", "#1a7f37", "#8250df", "#bf8700", "#e16f24", "#1b7c83", "#6e7781"];
// Metrics that are fractions: their y-axis is [0, 1] (widened only if a value falls outside).
const RATE = /(^|\/)(success|score|frac|rate|pass_at_k|avg_at_k)(\/|$)|_frac$|_rate$/;
const isRate = (name) => RATE.test(name);
const isStepMetric = (name) => name.startsWith("schedule/") || name === "curriculum/stage";  // holds until the next step

function yRange(ys, name) {
  let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (isRate(name)) return [Math.min(0, y0), Math.max(1, y1)];
  if (y0 === y1) {  // one point or a flat line: a range around it, not +-1 around any value
    const pad = Math.abs(y0) * 0.1 || 0.5;
    [y0, y1] = [y0 >= 0 && y0 - pad < 0 ? 0 : y0 - pad, y1 + pad];
  }
  return [y0, y1];
}

function xRange(xs) {
  const [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  return x0 === x1 ? [x0 - 1, x1 + 1] : [x0, x1];
}

// series: [{label, xs, ys, color}]; opts: {xLabel, step, width, height}
function chart(name, series, opts = {}) {
  const W = opts.width || 320, H = opts.height || 170, L = 44, R = 10, T = 10, B = 24;
  const step = opts.step ?? isStepMetric(name);
  const lines = series.map((s, k) => ({ ...s, color: s.color || PALETTE[k % PALETTE.length],
    pts: s.xs.map((x, i) => [x, s.ys[i]]).filter((p) => p[0] !== null && p[1] !== null && p[1] !== undefined) }))
    .filter((s) => s.pts.length);
  const caption = h("figcaption", {}, h("b", {}, name));
  if (!lines.length) return h("figure", { class: "card chart-card", "data-metric": name }, caption, h("span", { class: "muted" }, " no values"));
  const box = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", "data-metric": name });
  const all = lines.flatMap((s) => s.pts);
  const [y0, y1] = yRange(all.map((p) => p[1]), name);
  const [x0, x1] = xRange(all.map((p) => p[0]));
  const X = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const Y = (y) => H - B - ((y - y0) / (y1 - y0)) * (H - T - B);
  box.append(svg("rect", { x: L, y: T, width: W - L - R, height: H - T - B, class: "frame" }));
  for (const y of [y0, (y0 + y1) / 2, y1]) {
    box.appendChild(svg("text", { x: L - 4, y: Y(y) + 4, class: "tick y", "text-anchor": "end" })).textContent = num(y);
  }
  const xt = new Set(all.map((p) => p[0])).size === 1 ? [all[0][0]] : [x0, x1];
  xt.forEach((x, k) => {  // the outer ticks align inwards, so wide labels stay inside the box
    const anchor = xt.length === 1 ? "middle" : k === 0 ? "start" : "end";
    box.appendChild(svg("text", { x: X(x), y: H - 8, class: "tick x", "text-anchor": anchor })).textContent = fmtX(x);
  });
  if (opts.xLabel) box.appendChild(svg("text", { x: (L + W - R) / 2, y: H - 8, class: "tick", "text-anchor": "middle" })).textContent = opts.xLabel;
  for (const s of lines) {
    let pts = s.pts.map(([x, y]) => [X(x), Y(y)]);
    if (step) pts = pts.flatMap((p, i) => (i ? [[p[0], pts[i - 1][1]], p] : [p]));
    box.append(svg("polyline", { points: pts.map((p) => p.join(",")).join(" "), class: `line${step ? " step" : ""}`, stroke: s.color, "data-series": s.label || name }));
    if (s.pts.length <= 80) for (const [x, y] of s.pts) box.append(svg("circle", { cx: X(x), cy: Y(y), r: 2.5, class: "dot", fill: s.color }));
  }
  const last = (s) => num(s.pts[s.pts.length - 1][1], 4);
  const restLabel = lines.length === 1 ? ` last ${last(lines[0])}` : "";
  const readout = h("span", { class: "muted readout" }, restLabel);
  const cursor = box.appendChild(svg("circle", { r: 4, class: "cursor", visibility: "hidden" }));
  box.addEventListener("mousemove", (e) => {  // nearest point to the pointer, by x
    const r = box.getBoundingClientRect(), sx = x0 + (((e.clientX - r.left) * W) / r.width - L) / (W - L - R) * (x1 - x0);
    const near = (pts) => pts.reduce((a, b) => (Math.abs(b[0] - sx) < Math.abs(a[0] - sx) ? b : a));
    const [x, y] = near(lines[0].pts);
    cursor.setAttribute("cx", X(x)); cursor.setAttribute("cy", Y(y)); cursor.setAttribute("visibility", "visible");
    readout.textContent = ` ${opts.xLabel || "step"} ${fmtX(x)}: ` + lines.map((s) => `${lines.length > 1 ? s.label + " " : ""}${num(near(s.pts)[1], 4)}`).join(" · ");
  });
  box.addEventListener("mouseleave", () => { cursor.setAttribute("visibility", "hidden"); readout.textContent = restLabel; });
  const legend = lines.length > 1 || opts.legend ? h("div", { class: "legend" }, lines.map((s) =>
    h("span", { class: "key" }, h("i", { style: `background:${s.color}` }), s.label))) : null;
  return h("figure", { class: "card chart-card", "data-metric": name }, h("figcaption", {}, h("b", {}, name), readout), box, legend);
}

function fmtX(x) {
  if (Math.abs(x) >= 10000) return `${num(x / 1000, 1)}k`;
  return Number.isInteger(x) ? String(x) : num(x, 2);
}
