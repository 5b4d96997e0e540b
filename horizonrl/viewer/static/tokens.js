// horizonrl viewer: the token view of one trajectory: sampled vs context tokens, and, when the
// trainer saved them (logging.save_token_stats), what the update saw per token: advantage, the
// learner's old logprob next to the rollout's, reference logprob, KL, token reward, value, return.
"use strict";

const COLOUR_BY = [
  ["mask", "sampled / context"],
  ["advantages", "advantage"],
  ["logprob_diff", "learner − rollout logprob"],
  ["rollout_logprobs", "rollout logprob"],
  ["old_logprobs", "learner old logprob"],
  ["ref_logprobs", "reference logprob"],
  ["kl", "KL to reference"],
  ["token_rewards", "token reward"],
  ["values", "value"],
  ["returns", "return"],
];
const MISMATCH_DEFAULT = 0.1;  // nats; PPO's clip of 0.2 on the ratio is ~0.18 in log space

// Blue for negative, red for positive, intensity by |v| / scale (sequential for logprobs: all <= 0).
function tokenColour(v, scale) {
  if (v === null || v === undefined || !scale) return "";
  const a = Math.min(1, Math.abs(v) / scale) * 0.85 + 0.08;
  return v < 0 ? `rgba(9, 105, 218, ${a.toFixed(3)})` : `rgba(207, 34, 46, ${a.toFixed(3)})`;
}

async function showTokens(runId, source, index, box, stats, params) {
  const d = await api(`/api/runs/${enc(runId)}/trajectories/${enc(source)}/${index}/tokens`);
  const fields = { rollout_logprobs: d.logprobs.map((lp, i) => (d.loss_mask[i] === 1 ? lp : null)), ...d.stats };
  if (d.stats.old_logprobs) {
    fields.logprob_diff = d.stats.old_logprobs.map((v, i) => (v === null || fields.rollout_logprobs[i] === null ? null : v - fields.rollout_logprobs[i]));
  }
  const options = COLOUR_BY.filter(([k]) => k === "mask" || k in fields);
  const info = h("p", { class: "muted" }, `${stats.n_tokens} tokens · ${stats.n_sampled} sampled (loss_mask = 1) · prompt ${stats.prompt_length}`,
    ` · sampled per turn: ${stats.sampled_per_turn.join(", ") || "–"} · mean logprob ${num(stats.mean_logprob)} · min ${num(stats.min_logprob)}`);
  const saved = !d.token_stats_saved ? "This step has no saved update data (train with logging.save_token_stats=true to see advantages and learner logprobs)."
    : !d.in_update ? "This trajectory was not in the update (dropped: failed, or its group had no reward variance)."
      : "Update data saved by the trainer: colour by advantage, learner vs rollout logprob, reference / KL, token reward.";
  const colourBy = h("select", { class: "colour-by", onchange: () => paint() }, options.map(([k, l]) => h("option", { value: k, selected: k === (params && params.get("colour")) }, l)));
  const threshold = h("input", { class: "threshold", type: "number", step: "0.01", min: "0", value: (params && params.get("mismatch")) || MISMATCH_DEFAULT, onchange: () => paint() });
  const flagged = h("span", { class: "mismatch-count" });
  const legend = h("p", { class: "legend-line" });
  const text = h("div", { class: "tokens" });
  const spans = d.token_ids.map((id, i) => text.appendChild(h("span", { "data-i": i }, d.pieces ? d.pieces[i] : `${id} `)));
  function paint() {
    const by = colourBy.value, limit = Number(threshold.value) || MISMATCH_DEFAULT, vals = fields[by] || [];
    const scale = Math.max(0, ...vals.filter((v) => v !== null && v !== undefined).map(Math.abs));
    let bad = 0;
    spans.forEach((el, i) => {
      const sampled = d.loss_mask[i] === 1, lp = d.logprobs[i];
      const diff = fields.logprob_diff ? fields.logprob_diff[i] : null;
      const mismatch = diff !== null && diff !== undefined && Math.abs(diff) > limit;
      bad += mismatch;
      el.className = `tok ${sampled ? "smp" : "ctx"}${by === "mask" && sampled && lp !== null && lp < Math.log(0.1) ? " low" : ""}${mismatch ? " mismatch" : ""}${by !== "mask" ? " coloured" : ""}`;
      el.style.background = by === "mask" ? "" : tokenColour(vals[i], scale);
      el.title = [`#${i} id ${d.token_ids[i]}`, ...Object.entries(fields).filter(([, a]) => a[i] !== null && a[i] !== undefined)
        .map(([k, a]) => `${(COLOUR_BY.find(([c]) => c === k) || [k, k])[1]} ${num(a[i], 4)}`)].join(" · ");
    });
    flagged.textContent = fields.logprob_diff ? `${bad} sampled token${bad === 1 ? "" : "s"} where learner and rollout logprobs differ by more than ${limit}` : "";
    flagged.className = `mismatch-count ${bad ? "bad" : "muted"}`;
    legend.replaceChildren(...(by === "mask" ? [h("span", { class: "tok ctx" }, "context (prompt, observations, template)"), " ",
      h("span", { class: "tok smp" }, "sampled"), " ", h("span", { class: "tok smp low" }, "sampled, p < 0.1")]
      : [h("span", { class: "tok coloured", style: `background:${tokenColour(-scale, scale)}` }, `−${num(scale)}`), " … ",
        h("span", { class: "tok coloured", style: `background:${tokenColour(scale, scale)}` }, `+${num(scale)}`)]),
    fields.logprob_diff ? h("span", {}, " ", h("span", { class: "tok mismatch" }, "outlined"), " learner/rollout mismatch") : null,
    d.pieces ? h("span", { class: "muted" }, ` · hover a token for its values · tokenizer ${d.tokenizer}`)
      : h("span", { class: "muted" }, " · no tokenizer file found for this run: token ids shown, hover for values"));
  }
  paint();
  const controls = h("div", { class: "filters" }, h("label", {}, "colour by ", colourBy),
    fields.logprob_diff ? h("label", {}, " flag |learner − rollout| > ", threshold, " nats") : null, flagged);
  box.replaceChildren(h("h2", {}, "Tokens"), info, h("p", { class: "muted update-data" }, saved), controls, legend, text);
}
