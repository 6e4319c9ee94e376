// ---- what each word gathered: ΔE split into one part per key -----------------------------

import { HEAD_NAMES, dimLabels } from "./tokens.js";
import { $, el, state } from "./state.js";
import { fmt } from "./heatmap.js";
import { bar } from "./story.js";
import { matrix } from "./walkthrough.js";
import { layerNames } from "./layers.js";

// For the chosen token q and each key k: Σ_h P_h[q][k] · (V_h[k] · W_o,h), from the service's
// P, V and W_o; the parts, summed over the keys and with b_o added, are the service's ΔE[q].
function gatheredParts(a, weights, q) {
  const n = a.n_tokens, dm = a.d_model, dh = a.d_head, Wo = weights.w_o;
  return a.heads.map((head, hi) => Array.from({ length: n }, (_, k) => {
    const vw = new Array(dm).fill(0);
    const v = a.v[hi][k];
    for (let c = 0; c < dh; c++) {
      if (Wo) { const w = Wo[head * dh + c]; for (let j = 0; j < dm; j++) vw[j] += v[c] * w[j]; }
      else vw[head * dh + c] += v[c];   // no W_o: the identity
    }
    const p = a.patterns[hi][q][k];
    return vw.map((x) => p * x);
  }));
}

export function renderGathered() {
  const { answer: a, weights, rows, model } = state.result;
  const on = a.v && a.patterns && a.delta && a.heads.length === a.n_heads && !a.n_context;
  $("gathered").hidden = !on;
  if (!on) return;
  const n = a.n_tokens, dm = a.d_model, tokens = a.tokens, dims = dimLabels(model, dm);
  // In a stack's layer l: E_l (what it reads), ΔE_l and E_{l+1} (js/layers.js).
  const N = layerNames(state.result);
  const g = state.gather;
  g.q = Math.max(0, Math.min(g.q, n - 1));
  if (g.head !== "all" && !a.heads.includes(+g.head)) g.head = "all";
  $("gathered-tokens").replaceChildren(...tokens.map((t, i) =>
    el("button", { type: "button", "data-q": i, "aria-pressed": i === g.q ? "true" : "false", text: t })));
  const names = HEAD_NAMES[a.model] || [];
  const sel = $("gathered-head");
  sel.replaceChildren(el("option", { value: "all", text: "all heads, summed" }),
    ...a.heads.map((h) => el("option", { value: String(h), text: `head ${h + 1}${names[h] ? ` (${names[h]})` : ""} only` })));
  sel.value = String(g.head);
  const q = g.q, tq = tokens[q];
  const dE = a.delta[q], E2 = a.embeddings ? a.embeddings[q] : null;
  const E = rows[q].includes("") ? null : rows[q].map(Number);   // null: a vocabulary not fetched
  const scale = Math.max(...dE.map(Math.abs));
  const barRows = dims.map((name, j) => el("tr", { "data-dim": name },
    el("th", { scope: "row", text: name }),
    E ? el("td", { "data-col": "E", "data-value": String(E[j]), title: String(E[j]), text: fmt(E[j]) }) : null,
    el("td", { class: "barcell", title: `${N.dE} ${name}: ${dE[j]}` }, bar(dE[j], scale)),
    el("td", { "data-col": "dE", "data-value": String(dE[j]), title: String(dE[j]), class: dE[j] < 0 ? "neg" : null, text: fmt(dE[j]) }),
    E2 ? el("td", { "data-col": "E2", "data-value": String(E2[j]), title: String(E2[j]), text: fmt(E2[j]) }) : null));
  const bars = el("div", { class: "scroll" }, el("table", { class: "bars", "data-matrix": "gathered-bars" },
    el("caption", { text: `${N.dE} of “${tq}”: what it gathered${N.of}, per dimension` }),
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "dimension" }), E ? el("th", { scope: "col", text: N.E }) : null,
      el("th", { scope: "col", colspan: 2, text: `${N.dE} (− left, + right)` }), E2 ? el("th", { scope: "col", text: `${N.E} + ${N.dE}` }) : null)),
    el("tbody", {}, ...barRows)));
  if (!weights) {
    $("gathered-body").replaceChildren(el("div", { class: "matrices" }, bars),
      el("p", { text: "The model's weights could not be fetched, so the parts (which need W_o) are not shown." }));
    return;
  }
  const parts = gatheredParts(a, weights, q);
  const all = g.head === "all";
  const hi = all ? -1 : a.heads.indexOf(+g.head);
  const shown = all
    ? Array.from({ length: n }, (_, k) => Array.from({ length: dm }, (_, j) => parts.reduce((s, P) => s + P[k][j], 0)))
    : parts[hi];
  const sum = Array.from({ length: dm }, (_, j) => shown.reduce((s, r) => s + r[j], 0));
  const M = shown.slice(), labels = tokens.map((t) => `from ${t}`);
  let check;
  if (all) {
    const bo = weights.b_o || new Array(dm).fill(0);
    const total = sum.map((x, j) => x + bo[j]);
    const diff = total.map((x, j) => x - dE[j]);
    const maxDiff = Math.max(...diff.map(Math.abs));
    M.push(sum);
    labels.push("Σ over keys");
    if (weights.b_o) { M.push(bo); labels.push("+ b_o"); }
    M.push(total, dE, diff);
    labels.push(`= ${N.dE}, summed here`, `${N.dE}, the service's`, "difference");
    const tol = 1e-5 * (1 + Math.max(...dE.map(Math.abs)));
    const ok = maxDiff <= tol;
    check = el("p", { class: "check " + (ok ? "ok" : "bad"), id: "gathered-check", "data-max-diff": String(maxDiff), "data-ok": String(ok),
      text: ok ? `✓ The parts add up to the service's ${N.dE} for “${tq}”${weights.b_o ? " (b_o included)" : ""}: ${maxDiff === 0 ? "exactly" : `the largest difference is ${maxDiff.toExponential(1)}, float32 rounding`}.`
        : `✗ The parts do not add up to the service's ${N.dE} for “${tq}”: the largest difference is ${maxDiff.toExponential(2)}.` });
  } else {
    M.push(sum);
    labels.push(`Σ over keys: head ${+g.head + 1}'s part of ΔE`);
    check = el("p", { class: "check", id: "gathered-check",
      text: `Only head ${+g.head + 1}'s parts; choose “all heads, summed” to check them against the service's ΔE.` });
  }
  // Only the dimensions where some number is not 0: the others are 0 in every part and in ΔE.
  const cols = dims.map((_, j) => j).filter((j) => M.some((r) => r[j] !== 0));
  const table = matrix(`Where “${tq}”'s ${N.dE} came from: P[${tq}][k] · (V[k] · W_o)${all ? ", summed over heads" : `, head ${+g.head + 1}`}`,
    M.map((r) => cols.map((j) => r[j])), labels, cols.map((j) => dims[j]),
    { name: "parts", mutedZero: true, rowClass: (i) => (i === n ? "sum" : null) });
  const left = dims.length - cols.length;
  $("gathered-body").replaceChildren(el("div", { class: "matrices" }, bars, table),
    left ? el("p", { class: "hint", text: cols.length ? `The ${left} dimension${left > 1 ? "s" : ""} not shown ${left > 1 ? "are" : "is"} 0 in every part and in ΔE.` : "Every part is 0: this token gathered nothing." } ) : "", check);
}
