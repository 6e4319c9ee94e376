// ---- the walk-through ----------------------------------------------------------------

import { api } from "./api.js";
import { STEP_MAX_D, STEP_MAX_N, dimLabels, hasVocab } from "./tokens.js";
import { $, el, state, views } from "./state.js";
import { errorParts } from "./errors.js";
import { fetchRaw, modelWeights } from "./compute.js";
import { fmt } from "./heatmap.js";
import { OP_MAX_TERMS, product } from "./operations.js";
import { saveLink } from "./link.js";
import { layerBody, layerNames, layerView, takeWeights } from "./layers.js";

// Every step there can be; a step with `when` is shown only for a model that has it (RoPE,
// soft-capping, ALiBi). state.step indexes this list, so links name a step by its id.
export const STEPS = [
  { id: "E", title: "E: the embeddings" },
  { id: "W", title: "W_q, W_k, W_v" },
  { id: "Q", title: "Q = E · W_q" },
  { id: "K", title: "K = E · W_k" },
  { id: "V", title: "V = E · W_v" },
  { id: "rope", title: "RoPE: q and k rotated", when: (m) => m.rope },
  { id: "KT", title: "Kᵀ" },
  { id: "QKT", title: "Q · Kᵀ" },
  { id: "S", title: "÷ √d_k, masked" },
  { id: "softcap", title: "soft-capping", when: (m) => m.softcap },
  { id: "alibi", title: "ALiBi: − m · distance", when: (m) => m.alibi },
  { id: "P", title: "softmax, row by row" },
  { id: "Z", title: "× V" },
  { id: "dE", title: "ΔE" },
  { id: "E2", title: "E + ΔE" },
];
// A step's title; in a stack's layer l, its E is E_l and its ΔE is ΔE_l (js/layers.js).
function stepTitle(s, r) {
  const N = layerNames(r);
  if (N.E === "E") return s.title;
  if (s.id === "E") return `${N.E}: ${r.layer ? `the embeddings after layer ${r.layer - 1}` : "the embeddings"}`;
  if (s.id === "dE") return N.dE;
  if (s.id === "E2") return `${N.E} + ${N.dE}`;
  return s.title;
}
const stepOn = (i) => {
  const s = STEPS[i], m = state.result && state.result.model;
  return !!s && (!s.when || !!(m && s.when(m)));
};

export function matrix(caption, M, rowLabels, colLabels, opts = {}) {
  const head = el("tr", {}, el("th", {}), ...colLabels.map((c) => el("th", { scope: "col", text: c })));
  const rows = M.map((row, i) => el("tr", { class: opts.focusRow === i ? "focus" : opts.rowClass ? opts.rowClass(i) : null, "data-row": i },
    el("th", { scope: "row", text: rowLabels[i] }),
    ...row.map((x, j) => el("td", {
      "data-value": x === null ? "-Infinity" : String(x), "data-i": i, "data-j": j,
      title: x === null ? "masked: −∞" : String(x),
      class: x === null ? "inf" : x < 0 ? "neg" : opts.mutedZero && x === 0 ? "zero" : null, text: fmt(x) }))));
  // Each matrix scrolls sideways in its own box, never the page.
  return el("div", { class: "scroll" }, el("table", { class: "matrix", "data-matrix": opts.name || caption },
    el("caption", { text: caption }), el("thead", {}, head), el("tbody", {}, ...rows)));
}
export const indices = (n) => Array.from({ length: n }, (_, i) => String(i + 1));
const transpose = (M) => M[0].map((_, j) => M.map((row) => row[j]));

// Re-rendering replaces the step buttons: keep the keyboard where it was.
export function renderWalkthrough() {
  const a0 = document.activeElement;
  const focusStep = a0 && a0.closest && a0.closest("#step-list") ? a0.dataset.step : null;
  const focusNav = a0 && (a0.id === "step-prev" || a0.id === "step-next") ? a0.id : null;
  drawWalkthrough();
  if (focusStep) {
    const b = document.querySelector(`#step-list button[data-step="${focusStep}"]`);
    if (b) b.focus();
  } else if (focusNav && $(focusNav).disabled) {
    $("step").focus();
  }
}

// ---- which steps, which mode ----

// The full walk-through draws every token and every coordinate: the main answer carries q (asked
// for when canWalk()). Otherwise the steps follow one query token and one head (focus mode).
const SHORT = 8;             // a long vector shows its first 8 numbers, the rest on request
const DELTA_MAX = 65536;     // the focus request asks for ΔE (n × d_model) up to this many numbers
const expanded = new Set();  // the shortened matrices shown whole, by name
// Focus mode asks for its numbers when the section is on screen (as laid out now), not with
// every edit; coming on screen draws it again.
const walkOnScreen = () => {
  const b = $("walkthrough").getBoundingClientRect();
  return b.bottom > 0 && b.top < window.innerHeight;
};
state.stepToken = null;      // the query token followed (0-based; null: the last)

const focusMode = () => !!(state.result && !state.result.answer.q);
const stepHeadIndex = (a) => a.heads[Math.min(state.stepHead, a.heads.length - 1)];
const stepTokenIndex = (a) => (state.stepToken === null ? a.n_tokens - 1 : Math.min(state.stepToken, a.n_tokens - 1));
// What the model does to its scores, besides scale · Q · Kᵀ: the service's Q · Kᵀ at scale 1
// is the plain dot product only without them (a window would leave it null outside its reach).
export const plainScores = (m) => !(m && (m.softcap || m.alibi || m.window));
const smallWeights = (m) => m && m.d_model <= STEP_MAX_D && m.d_head <= STEP_MAX_D;

function drawWalkthrough() {
  const r = state.result;
  const on = !!(r && r.answer);
  $("walkthrough-on").hidden = !on;
  $("walkthrough-off").hidden = on;
  if (!on) {
    $("walkthrough-off").textContent = "The step-by-step view follows the last answer of the service: choose an example or compute a sentence.";
    return;
  }
  const a = r.answer;
  const sel = $("step-head");
  sel.replaceChildren(...a.heads.map((h, i) => el("option", { value: i, text: `head ${h + 1}` })));
  state.stepHead = Math.min(state.stepHead, a.heads.length - 1);
  sel.value = state.stepHead;
  $("step-head-label").hidden = a.heads.length < 2;
  if (state.softmaxRow !== "all") state.softmaxRow = Math.min(state.softmaxRow, a.n_tokens - 1);
  if (!stepOn(state.step)) state.step = nearestStep(state.step, 1);
  const focus = focusMode();
  const tsel = $("step-token");
  tsel.replaceChildren(...a.tokens.map((t, i) => el("option", { value: i, text: `${i + 1}: ${t}` })));
  tsel.value = stepTokenIndex(a);
  $("step-token-label").hidden = !(focus || STEPS[state.step].id === "rope");
  const on2 = STEPS.map((s, i) => i).filter(stepOn);
  $("step-list").replaceChildren(...on2.map((i, k) => el("li", {}, el("button", {
    type: "button", "data-step": STEPS[i].id, "aria-current": i === state.step ? "step" : null, text: `${k + 1}. ${stepTitle(STEPS[i], r)}` }))));
  $("step-prev").disabled = state.step === on2[0];
  $("step-next").disabled = state.step === on2[on2.length - 1];
  let content;
  if (focus) {
    const head = stepHeadIndex(a);
    const f = r.focus && r.focus[head];
    if (!f && walkOnScreen()) fetchFocus(r, head);
    content = [focusIntro(r, head)];
    if (f && f.error) content.push(el("div", { class: "error", role: "alert" }, ...errorParts(f.error.body.error, f.error.status, f.error.body.error.path || "")));
    else if (!f || !f.answer) content.push(el("p", { class: "hint", text: `Asking the service for head ${head + 1}'s steps…` }));
    else content.push(...focusContent(STEPS[state.step].id, r, f, head));
  } else content = stepContent(STEPS[state.step].id);
  // A step's parts may be null where they do not apply (replaceChildren would write "null").
  $("step").replaceChildren(...content.filter((x) => x !== null && x !== undefined));
  $("step").dataset.step = STEPS[state.step].id;
}

// The nearest step shown, from i on in the direction d (then the other way).
function nearestStep(i, d) {
  for (let j = i; j >= 0 && j < STEPS.length; j += d) if (stepOn(j)) return j;
  for (let j = i; j >= 0 && j < STEPS.length; j -= d) if (stepOn(j)) return j;
  return 0;
}

export function goStep(i) {
  const d = i < state.step ? -1 : 1;
  let j = Math.max(0, Math.min(STEPS.length - 1, i));
  while (j >= 0 && j < STEPS.length && !stepOn(j)) j += d;
  if (j < 0 || j >= STEPS.length) j = state.step;
  state.step = j;
  renderWalkthrough();
  saveLink();
}

// ---- helpers shared by both modes ----

const p_ = (text, attrs) => el("p", Object.assign({ text }, attrs || {}));
const f_ = (text) => el("p", { class: "formula", text });
const box_ = (...kids) => el("div", { class: "matrices" }, ...kids);
const kvOf = (weights, head, h) => (weights.kv_heads ? weights.kv_heads[Math.floor(head * weights.kv_heads.length / h)] : weights.heads[head]);
const dot = (x, y) => x.reduce((s, v, c) => s + v * y[c], 0);

// A matrix drawn whole, or its first SHORT columns (and rows, with shortRows) with a button that
// shows the rest. Names its cut in the caption: "the first 8 of 64".
function shortMatrix(caption, M, rowLabels, colLabels, opts) {
  const name = opts.name, open = expanded.has(name);
  const nr = M.length, nc = M[0].length;
  const kr = opts.shortRows && !open && nr > SHORT ? SHORT : nr;
  const kc = !open && nc > SHORT && !opts.wholeRows ? SHORT : nc;
  const cut = [];
  if (kc < nc) cut.push(nr === 1 ? `the first ${kc} of ${nc}` : `the first ${kc} of ${nc} columns`);
  if (kr < nr) cut.push(`the first ${kr} of ${nr} rows`);
  const m = matrix(cut.length ? `${caption} (${cut.join(", ")})` : caption, M.slice(0, kr).map((row) => row.slice(0, kc)),
    rowLabels.slice(0, kr), colLabels.slice(0, kc), opts);
  const long = (nc > SHORT && !opts.wholeRows) || (opts.shortRows && nr > SHORT);
  if (!long) return m;
  const all = opts.shortRows && nr > SHORT ? (kc < nc || (open && nc > SHORT && !opts.wholeRows) ? `${nr} × ${nc}` : `${nr} rows`) : String(nc);
  return el("div", { class: "shortened" }, m, el("button", { type: "button", class: "expand", "data-expand": name,
    "aria-expanded": open ? "true" : "false", text: open ? `Show the first ${SHORT} only` : `Show all ${all}` }));
}

// Scores computed here in float64 from the API's q and k, for a model whose own scores go
// through soft-capping or ALiBi after scale · Q · Kᵀ: each stage, masked where the API's is.
function scoreChain(qRows, K, Sapi, qIdx, a, m, head) {
  const dots = qRows.map((q) => K.map((k) => dot(q, k)));
  const keep = (M) => M.map((row, i) => row.map((x, j) => (Sapi[i][j] === null ? null : x)));
  const scaled = dots.map((row) => row.map((x) => a.scale * x));
  const c = m.softcap || null;
  const capped = c ? scaled.map((row) => row.map((x) => c * Math.tanh(x / c))) : scaled;
  const slopes = m.alibi ? alibiSlopes(m.alibi, a.n_heads) : null;
  const bias = slopes ? qIdx.map((pq) => K.map((_, pk) => -slopes[head] * Math.abs(pq - pk))) : null;
  const final = bias ? capped.map((row, i) => row.map((x, j) => x + bias[i][j])) : capped;
  return { dots, scaled: keep(scaled), capped: keep(capped), bias: bias && keep(bias), final: keep(final), c, slopes };
}

// ALiBi's slopes: the model's own, or the ALiBi paper's for h heads (2^(−8(i+1)/h) for a power
// of two; else those of the power below, then every other one of twice that).
function alibiSlopes(alibi, h) {
  if (Array.isArray(alibi)) return alibi;
  const pow2 = (n) => Array.from({ length: n }, (_, i) => 2 ** (-8 * (i + 1) / n));
  const c = 2 ** Math.floor(Math.log2(h));
  return c === h ? pow2(h) : [...pow2(c), ...pow2(2 * c).filter((_, i) => i % 2 === 0).slice(0, h - c)];
}

// RoPE's frequencies f_t = θ^(−2t/dims), with the model's scaling (docs/API.md).
function ropeFreqs(rope, dh) {
  const dims = rope.dims || dh, theta = rope.theta || 10000, sc = rope.scaling;
  return Array.from({ length: dims / 2 }, (_, t) => {
    const f = theta ** (-2 * t / dims);
    if (!sc) return f;
    if (sc.type === "linear") return f / sc.factor;
    const L = sc.original_max_position_embeddings, l = sc.low_freq_factor, u = sc.high_freq_factor, lam = 2 * Math.PI / f;
    if (lam > L / l) return f / sc.factor;
    if (lam < L / u || u === l) return f; // u = l: no band in between
    const s = (L / lam - l) / (u - l);
    return (1 - s) * f / sc.factor + s * f;
  });
}
const ropePairs = (rope, dh) => {
  const dims = rope.dims || dh;
  return Array.from({ length: dims / 2 }, (_, t) => ((rope.style || "half") === "interleaved" ? [2 * t, 2 * t + 1] : [t, t + dims / 2]));
};

// The rotation of one token's q and k, pair by pair, with its angles: p · f_t.
function ropeStep(m, dh, t, tok, qRaw, q, kRaw, k) {
  const rope = m.rope, fr = ropeFreqs(rope, dh), pairs = ropePairs(rope, dh), pos = t;
  const names = pairs.map(([i, j]) => `${i + 1} & ${j + 1}`);
  const ang = fr.map((f) => [f, pos * f, Math.cos(pos * f), Math.sin(pos * f)]);
  const rot = (raw, out) => pairs.map(([i, j], n) => {
    const [, , c, s] = ang[n];
    return [raw[i], raw[j], raw[i] * c - raw[j] * s, raw[i] * s + raw[j] * c, out[i], out[j]];
  });
  const dims = rope.dims || dh;
  return [f_(`RoPE: each pair (a, b) of q and k turns by the angle p · f_t, f_t = θ^(−2t/dims)  (θ = ${rope.theta || 10000}, dims = ${dims}, ${rope.style || "half"}${rope.scaling ? `, ${rope.scaling.type} scaling` : ""})`),
    p_(`Rotary position embedding turns each token's query and key by angles that grow with its position p, so that q · k depends on how far apart two tokens are (p_q − p_k), not on where they stand. Here: token ${t + 1} “${tok}” at position p = ${pos}; `
      + `${(rope.style || "half") === "interleaved" ? "coordinate 2t pairs with 2t + 1" : `coordinate t pairs with t + ${dims / 2}`}; (a, b) → (a·cos − b·sin, a·sin + b·cos).${dims < dh ? ` Coordinates ${dims + 1} to ${dh} are not rotated.` : ""} Every key turns the same way by its own position.`),
    box_(shortMatrix("the angles", ang, names, ["f_t", "p · f_t", "cos", "sin"], { name: "rope-angles", shortRows: true }),
      shortMatrix(`q of ${tok}`, rot(qRaw, q), names, ["a (q_raw)", "b (q_raw)", "a·cos − b·sin", "a·sin + b·cos", "a′ (service)", "b′ (service)"], { name: "rope-q", shortRows: true }),
      shortMatrix(`k of ${tok}`, rot(kRaw, k), names, ["a (k_raw)", "b (k_raw)", "a·cos − b·sin", "a·sin + b·cos", "a′ (service)", "b′ (service)"], { name: "rope-k", shortRows: true }))];
}

// The steps after scale · Q · Kᵀ for soft-capping and ALiBi, each next to the next stage.
function capStep(ch, tokens, rowLabels, last) {
  return [f_(`S ← c · tanh(S / c),  c = ${ch.c}`),
    p_(`Soft-capping (Gemma 2) squeezes every score into (−${ch.c}, ${ch.c}): small ones are nearly unchanged, large ones flatten out, so no single key can take all the weight. Computed here from the previous step.`),
    box_(matrix("S = scale · Q · Kᵀ", ch.scaled, rowLabels, tokens, { name: "softcap-in" }),
      matrix(`c · tanh(S / c)`, ch.capped, rowLabels, tokens, { name: "softcap" }),
      last ? matrix("S (the service's)", last, rowLabels, tokens, { name: "S-api" }) : null)];
}
function alibiStep(ch, tokens, rowLabels, head, last) {
  return [f_(`S[q][k] += −m · |p_q − p_k|,  m = ${fmt(ch.slopes[head])} for head ${head + 1}`),
    p_(`ALiBi (BLOOM, MPT) adds no position to the embeddings: it lowers each score by the distance between the two tokens, times a slope m of the head's own (the model's slopes: ${ch.slopes.map(fmt).join(", ")}). Far keys count less; heads with a small m look far.`),
    box_(matrix(ch.c ? "S after soft-capping" : "S = scale · Q · Kᵀ", ch.capped, rowLabels, tokens, { name: "alibi-in" }),
      matrix("−m · |p_q − p_k|", ch.bias, rowLabels, tokens, { name: "alibi-bias" }),
      matrix("S + bias", ch.final, rowLabels, tokens, { name: "alibi" }),
      matrix("S (the service's)", last, rowLabels, tokens, { name: "S-api" }))];
}

// The rows keys and values come from: the sentence's E, or for a cross-attention model the
// context C the request sent (its rows as sent, its tokens as the service echoes them).
function keySide(r, E, tokens) {
  const a = r.answer;
  if (!a.n_context) return { cross: false, name: "E", rows: E, tokens, known: true, d: a.d_model };
  const sent = JSON.parse(r.mainText).context || [];
  const ctx = a.context_tokens || sent.map((_, i) => `c${i + 1}`);
  return { cross: true, name: "C", rows: sent.map((row) => row.map(Number)), tokens: ctx, known: sent.length === a.n_context,
    d: r.model && r.model.d_context ? r.model.d_context : (sent[0] || []).length };
}

// E · W = the service's Q, K or V (before RoPE), as a product: the hover writes each sum out.
// For a cross-attention model's K and V, the input is the context C (input "C").
function projection(which, Erows, rowIdx, W, out, outName, tokens, dh, short, input = "E") {
  const w = W["w_" + which], b = W["b_" + which];
  const dims = input === "E" ? dimLabels(state.result.model, Erows[0].length) : indices(Erows[0].length);
  const mk = short ? shortMatrix : matrix;
  const A = mk(input === "E" ? layerNames(state.result).E : input, rowIdx.map((i) => Erows[i]), rowIdx.map((i) => tokens[i]), dims, { name: `${outName}-E`, shortRows: false });
  const B = mk(`W_${which}`, w, dims, indices(dh), { name: `${outName}-W`, shortRows: true });
  const C = mk(outName, out, rowIdx.map((i) => tokens[i]), indices(dh), { name: outName });
  return product({ A, B, C }, { name: `${input}·W_${which}`, what: which.toUpperCase(),
    label: (i, j) => `${which.toUpperCase()}[${tokens[rowIdx[i]]}, ${j + 1}]`,
    terms: (i, j) => Erows[rowIdx[i]].map((x, c) => [x, w[c][j]]),
    bias: b ? (i, j) => b[j] : null, total: (i, j) => out[i][j] });
}

// ---- the full walk-through: every token, every coordinate ----

function stepContent(id) {
  const { answer: a, raw, weights, rows, model } = state.result;
  const h = state.stepHead, head = a.heads[h];
  const tokens = a.tokens, dh = a.d_head, dm = a.d_model;
  const E = rows.map((r) => r.map(Number));
  const dims = dimLabels(model, dm);
  // Blank rows: a vocabulary the page could not fetch, so E is the service's alone.
  const known = !rows.some((r) => r.includes(""));
  const Em = (caption, opts) => (known ? matrix(caption, E, tokens, dims, opts) : null);
  const W = weights ? weights.heads[head] : null;
  const KV = weights ? kvOf(weights, head, a.n_heads) : null;
  const p = p_, f = f_, box = box_;
  const sub = `_${head + 1}`;
  const all = tokens.map((_, i) => i);
  const rope = model && model.rope;
  const N = layerNames(state.result), later = state.result.layer > 0;
  const qIn = rope ? a.q_raw[h] : a.q[h], kIn = rope ? a.k_raw[h] : a.k[h];
  const proj = (which, out, Wx) => (Wx && known ? projection(which, E, all, Wx, out, which.toUpperCase(), tokens, dh, false)
    : box(Em(N.E), matrix(which.toUpperCase(), out, tokens, indices(dh), { name: which.toUpperCase() })));
  // Keys and values: from E, or from the context C of a cross-attention model.
  const ks = keySide(state.result, E, tokens), keys = ks.tokens, allKeys = keys.map((_, i) => i);
  const kvProj = (which, out, Wx) => (!ks.cross ? proj(which, out, Wx)
    : Wx && ks.known ? projection(which, ks.rows, allKeys, Wx, out, which.toUpperCase(), keys, dh, false, "C")
      : box(ks.known ? matrix("C", ks.rows, keys, indices(ks.d)) : null, matrix(which.toUpperCase(), out, keys, indices(dh), { name: which.toUpperCase() })));
  const kvFrom = ks.cross ? "C" : N.E;
  const chain = () => scoreChain(a.q[h], a.k[h], a.scores[h], all, a, model, head);
  switch (id) {
  case "E":
    if (!known) return [p("This model looks its tokens up in a vocabulary this page could not show.")];
    return [f(`${N.E}  (${a.n_tokens} tokens × d_model ${dm})${model && model.dimensions ? ", one named dimension per column" : ""}`),
      p("Each token is a row vector. Attention changes these rows by adding to each one what it gathers from the others."),
      later ? p(`This layer does not read the sentence's own embeddings: it reads ${N.E}, the embeddings after layer ${state.result.layer - 1}, each row E_${state.result.layer - 1} + ΔE_${state.result.layer - 1} as the service computed it (the E + ΔE of that layer's last step).`)
        : hasVocab(model) ? p(state.result.sentTokensOnly
        ? "Here each row is the model's own: the embedding of the token (its row in the vocabulary) plus the embedding of its position. The page sent the tokens alone; the service looked them up."
        : "These rows were edited by hand: the page sent them, with the tokens as labels.") : null,
      ks.cross ? p(`This is a cross-attention model: its queries come from E, its keys and values from the context C, ${a.n_context} rows of d_context ${ks.d} (${keys.join(", ")}).`) : null,
      box(Em(N.E, { name: "E" }), ks.cross && ks.known ? matrix("C (the context)", ks.rows, keys, indices(ks.d), { name: "C" }) : null)];
  case "W":
    if (!W) return [p("The model's weights could not be fetched.")];
    return [f(`W_q${sub}, W_k${sub}, W_v${sub}  (d_model ${dm} × d_k ${dh}${ks.cross ? `; W_k and W_v d_context ${ks.d} × d_k ${dh}` : ""})`),
      p(`d_k is the width of one head's queries and keys, ${dh} here (the API calls it d_head).`),
      p((a.model ? `The head's three learned matrices${N.of}, as the model holds them (GET /v1/models/${a.model}?weights=true).`
        : "The head's three matrices as edited on this page, sent inline with the request.")
        + (weights.kv_heads ? ` This model's heads share K/V heads (${weights.kv_heads.length} for ${a.n_heads} query heads): head ${head + 1} uses K/V head ${Math.floor(head * weights.kv_heads.length / a.n_heads) + 1}.` : "")),
      box(matrix("W_q", W.w_q, dims, indices(dh), { name: "W_q" }),
        matrix("W_k", KV.w_k, ks.cross ? indices(ks.d) : dims, indices(dh), { name: "W_k" }),
        matrix("W_v", KV.w_v, ks.cross ? indices(ks.d) : dims, indices(dh), { name: "W_v" }))];
  case "Q":
    return [f(`Q = ${N.E} · W_q${W && W.b_q ? " + b_q" : ""}${rope ? "   (before RoPE: the service's q_raw)" : ""}`),
      p(`Each token's query: what it is looking for. Row ${tokens[0]} is ${tokens[0]}'s embedding times W_q.${W && known ? " Hover a cell of Q, or focus Q and use the arrow keys: its row of E and column of W_q light up, and the sum is written out." : ""}`),
      proj("q", qIn, W)];
  case "K":
    return [f(`K = ${kvFrom} · W_k${KV && KV.b_k ? " + b_k" : ""}${rope ? "   (before RoPE: the service's k_raw)" : ""}`),
      p(ks.cross ? "Each context token's key: what it offers to be found by the sentence's queries." : "Each token's key: what it offers to be found by."),
      kvProj("k", kIn, KV)];
  case "V":
    return [f(`V = ${kvFrom} · W_v${KV && KV.b_v ? " + b_v" : ""}`),
      p(ks.cross ? "Each context token's value: what it passes on to the queries that attend to it." : "Each token's value: what it passes on to those that attend to it."),
      kvProj("v", a.v[h], KV)];
  case "rope": {
    const t = stepTokenIndex(a);
    return [...ropeStep(model, dh, t, tokens[t], a.q_raw[h][t], a.q[h][t], a.k_raw[h][t], a.k[h][t]),
      box(matrix("Q (rotated)", a.q[h], tokens, indices(dh), { name: "Q-rot" }), matrix("K (rotated)", a.k[h], tokens, indices(dh), { name: "K-rot" }))];
  }
  case "KT":
    return [f("Kᵀ"), p("K turned on its side, so that each key is a column."),
      box(matrix("Kᵀ", transpose(a.k[h]), indices(dh), keys, { name: "KT" }))];
  case "QKT": {
    let C;
    if (plainScores(model)) {
      if (!raw) {
        fetchRaw();
        const e = state.result.rawError;
        return [f("Q · Kᵀ"), e ? el("div", { class: "error", role: "alert" }, ...errorParts(e.body.error, e.status, e.body.error.path || ""))
          : p("Asking the service for Q · Kᵀ before scaling and masking (scale 1, no mask)…")];
      }
      C = raw.scores[h];
    } else C = chain().dots;
    return [f("Q · Kᵀ"), p("Row q, column k: the dot product of q's query with k's key. Large when they point the same way. Hover a cell, or focus Q · Kᵀ and use the arrow keys, to see the sum."
      + (plainScores(model) ? "" : " Computed here from the service's Q and K: this model's own scores at scale 1 would already be soft-capped, carry ALiBi or stop at its window.")),
    product({ A: matrix("Q", a.q[h], tokens, indices(dh), { name: "QKT-Q" }), B: matrix("Kᵀ", transpose(a.k[h]), indices(dh), keys, { name: "QKT-KT" }),
      C: matrix("Q · Kᵀ", C, tokens, keys, { name: "QKT" }) }, { name: "Q·Kᵀ", what: "Q · Kᵀ",
      label: (i, j) => `q_${tokens[i]} · k_${keys[j]}`, terms: (i, j) => a.q[h][i].map((x, c) => [x, a.k[h][j][c]]), total: (i, j) => C[i][j] })];
  }
  case "S": {
    const plain = plainScores(model);
    return [f(`S = Q · Kᵀ / √d_k = Q · Kᵀ × ${a.scale}${Math.abs(a.scale - 1 / Math.sqrt(dh)) < 1e-6 ? `   (d_k = ${dh}: 1/√${dh})` : `   (a scale chosen here; 1/√d_k would be ${fmt(1 / Math.sqrt(dh))})`},  then −∞ where the mask (${a.mask}) forbids`),
      p(`Dividing by √d_k (d_k = d_head = ${dh}, the width of a query and a key) keeps the scores from growing with the width. Masked cells become −∞, which softmax turns into exactly 0.`
        + (plain ? "" : " Computed here from the service's Q and K; the next steps change these scores before softmax, and the last of them is the service's.")),
      box(matrix("S", plain ? a.scores[h] : chain().scaled, tokens, keys, { name: "S" }))];
  }
  case "softcap": {
    const ch = chain();
    return capStep(ch, keys, tokens, model.alibi ? null : a.scores[h]);
  }
  case "alibi":
    return alibiStep(chain(), tokens, tokens, head, a.scores[h]);
  case "P":
    return softmaxStep(a, h, tokens, undefined, keys);
  case "Z":
    return [f(`Z${sub} = P · V`), p("Each token's output from this head: the values, weighted by how much it attends to each token. Hover a cell of Z, or focus it and use the arrow keys, to see the sum."),
      product({ A: matrix("P", a.patterns[h], tokens, keys, { name: "Z-P" }), B: matrix("V", a.v[h], keys, indices(dh), { name: "Z-V" }),
        C: matrix("Z = P · V", a.head_outputs[h], tokens, indices(dh), { name: "Z" }) }, { name: "P·V", what: "Z",
        label: (i, j) => `Z[${tokens[i]}, ${j + 1}]`, terms: (i, j) => a.patterns[h][i].map((x, k) => [x, a.v[h][k][j]]), total: (i, j) => a.head_outputs[h][i][j] })];
  case "dE": {
    const last = a.n_heads - 1;
    const how = !weights ? "The heads' outputs side by side, times W_o (the model's weights could not be fetched to show it)."
      : weights.w_o ? "The heads' outputs side by side, projected back to the embedding width by W_o."
        : "This model has no W_o: it is the identity, so ΔE is the heads' outputs side by side.";
    return [f(`${N.dE} = concat(Z_1${last > 0 ? ` … Z_${last + 1}` : ""}) · W_o${weights && weights.b_o ? " + b_o" : ""}`),
      p(how),
      box(matrix(N.dE, a.delta, tokens, dims, { name: "dE" }))];
  }
  case "E2":
    return [f(`${N.E2} = ${N.E} + ${N.dE}`), p("The updated embeddings: each token, moved by what it gathered from the tokens it attended to."
      + (N.E === "E" ? "" : state.result.layer + 1 < (state.result.stack.n_layers || 0) ? ` Layer ${state.result.layer + 1} reads them as its ${N.E2}.` : " This is the last layer: they are the stack's output.")),
      box(Em(N.E), matrix(N.dE, a.delta, tokens, dims),
        matrix(`${N.E} + ${N.dE}`, a.embeddings, tokens, dims, { name: "E2" }))];
  }
  return [];
}

// The softmax worked out in the page (float64) as the texts write it, e^S, Σ, ÷ Σ, then in the
// stable form the service uses; both next to the service's P. One row, or all of them; in focus
// mode (fixed: the token followed) that token's row alone.
function softmaxStep(a, h, tokens, fixed, keys = tokens) {
  const focus = fixed !== undefined;
  const r = focus ? fixed : state.softmaxRow;
  const S = a.scores[h];
  const expRow = (row) => row.map((x) => (x === null ? 0 : Math.exp(x)));
  const sumOf = (row) => row.reduce((x, y) => x + y, 0);
  const pick = focus ? null : el("div", { class: "rowpick", role: "group", "aria-label": "Row" }, ...tokens.map((t, i) =>
    el("button", { type: "button", "data-row": i, "aria-pressed": i === r ? "true" : "false", text: t })),
  el("button", { type: "button", "data-row": "all", "aria-pressed": r === "all" ? "true" : "false", text: "all rows" }));
  const head = [
    el("p", { class: "formula", text: "P[q][k] = e^S[q][k] ÷ Σ_k e^S[q][k]" }),
    el("p", { text: "Each row of S becomes a row of weights that sum to 1: raise e to each score, add the row up (Σ), divide each by Σ. A masked score is −∞, and e^−∞ = 0." + (focus ? ` Here the row of token ${r + 1}, ${tokens[r]}:` : " Pick a row to see it worked out, or all rows:") }),
    pick,
  ];
  if (r === "all") {
    const E = S.map(expRow), sums = E.map(sumOf);
    return [...head, el("div", { class: "matrices" },
      matrix("e^S", E, tokens, keys, { name: "softmax-exp" }),
      matrix("Σ", sums.map((x) => [x]), tokens, ["Σ_k e^S"], { name: "softmax-sums" }),
      matrix("e^S ÷ Σ", E.map((row, q) => row.map((x) => x / sums[q])), tokens, keys, { name: "softmax-all" }),
      matrix("P (the service's)", a.patterns[h], tokens, keys, { name: "P" }))];
  }
  const s = S[r];
  const ex = expRow(s), sum = sumOf(ex);
  const live = s.filter((x) => x !== null);
  const max = live.length ? Math.max(...live) : 0;
  const ex2 = s.map((x) => (x === null ? 0 : Math.exp(x - max))), sum2 = sumOf(ex2);
  const terms = s.map((x, k) => (x === null ? null : [fmt(x), ex[k]])).filter(Boolean);
  const cut = (list) => (list.length > OP_MAX_TERMS ? [...list.slice(0, 3), "…", list[list.length - 1]] : list);
  const written = `Σ = ${cut(terms.map(([x]) => `e^${x.startsWith("−") ? `(${x})` : x}`)).join(" + ")} = ${cut(terms.map(([, e]) => fmt(e))).join(" + ")}${terms.length > OP_MAX_TERMS ? ` (${terms.length} terms)` : ""} = ${fmt(sum)}`;
  return [...head,
    el("p", { class: "formula", id: "softmax-sum", "data-sum": String(sum), text: written }),
    el("div", { class: "matrices" },
      matrix(`row ${tokens[r]}, by hand (Σ = ${fmt(sum)})`, [s, ex, ex.map((x) => x / sum)],
        ["S", "e^S", "÷ Σ"], keys, { name: "softmax-row" }),
      focus ? matrix(`P (the service's), row ${tokens[r]}`, [a.patterns[h][r]], [tokens[r]], keys, { name: "P" })
        : matrix("P (the service's)", a.patterns[h], tokens, keys, { name: "P", focusRow: r })),
    el("h3", { text: "The same result, the stable way" }),
    el("p", { id: "softmax-why", text: `Computers subtract the row's largest score first (here ${fmt(max)}): e^S overflows for scores past about 88 in float32, while e^(S − max) is at most 1, and since e^(S − max) = e^S ÷ e^max, the e^max cancels in the division and P is the same. The service computes it this way.` }),
    el("div", { class: "matrices" },
      matrix(`row ${tokens[r]}, stable (Σ = ${fmt(sum2)})`, [s.map((x) => (x === null ? null : x - max)), ex2, ex2.map((x) => x / sum2)],
        ["S − max", "e^(S − max)", "÷ Σ"], keys, { name: "softmax-stable" })),
  ];
}

// ---- focus mode: one query token, one head ----

// The head's own numbers, asked for once per answer and head when the section is on screen:
// the per-head outputs of that head alone (select_heads), and ΔE while it stays small; with a
// plain model, Q · Kᵀ at scale 1 without a mask too (that head alone).
async function fetchFocus(r, head) {
  r.focus = r.focus || {};
  if (r.focus[head]) return;
  const f = r.focus[head] = { answer: null, raw: null, error: null, delta: false };
  const m = r.model, a = r.answer, layer = r.layer;
  // A stack's layer on screen alone (its answer read as that layer: js/layers.js).
  const body = layerBody(r, JSON.parse(r.mainText));
  body.select_heads = [head];
  f.delta = a.n_tokens * a.d_model <= DELTA_MAX;
  body.return = ["q", "k", "v", "scores", "patterns", "head_outputs", ...(m.rope ? ["q_raw", "k_raw"] : []), ...(f.delta ? ["delta"] : [])];
  const rawBody = plainScores(m) ? Object.assign({}, body, { mask: "none", scale: 1, return: ["scores"] }) : null;
  const call = async (text) => {
    try { return await api.call("/v1/attention", text); }
    catch (e) { return { ok: false, status: 0, body: { error: { code: "unreachable", message: "could not reach the service: " + e.message } } }; }
  };
  // The weights the answer was computed with: those sent inline, else the model's (small ones).
  const [res, raw, weights] = await Promise.all([call(JSON.stringify(body)), rawBody ? call(JSON.stringify(rawBody)) : null,
    r.allWeights || body.weights || (smallWeights(m) ? modelWeights(m.name).catch(() => null) : null)]);
  if (res.ok && (!raw || raw.ok)) {
    f.answer = layerView(res.body, layer);
    f.raw = raw ? layerView(raw.body, layer) : null;
    takeWeights(r, weights);
  }
  else f.error = res.ok ? raw : res;
  if (state.result === r) renderWalkthrough();
}

function focusIntro(r, head) {
  const a = r.answer, t = stepTokenIndex(a);
  const why = [];
  if (a.n_tokens > STEP_MAX_N) why.push(`${a.n_tokens} tokens, more than ${STEP_MAX_N}`);
  if (a.d_model > STEP_MAX_D) why.push(`d_model ${a.d_model}, wider than ${STEP_MAX_D}`);
  if (a.d_head > STEP_MAX_D) why.push(`d_head ${a.d_head}, wider than ${STEP_MAX_D}`);
  if (r.model && r.model.d_context > STEP_MAX_D) why.push(`d_context ${r.model.d_context}, wider than ${STEP_MAX_D}`);
  return el("p", { class: "focus-intro", id: "step-focus", "data-token": t, "data-head": head,
    text: `Every number of every step fits on screen up to ${STEP_MAX_N} tokens and ${STEP_MAX_D} dimensions; here: ${why.join("; ")}. So these steps follow one query token, token ${t + 1} “${a.tokens[t]}”, and one head, head ${head + 1} of ${a.n_heads}` +
      `${a.n_kv_heads && a.n_kv_heads < a.n_heads ? ` (which shares K/V head ${Math.floor(head * a.n_kv_heads / a.n_heads) + 1} of ${a.n_kv_heads})` : ""}; choose others above. Long vectors show their first ${SHORT} numbers, and a button shows them all. The page asks the service for this head's numbers alone.` });
}

function focusContent(id, r, fs, head) {
  const a = r.answer, fa = fs.answer, m = r.model, weights = r.weights;
  const t = stepTokenIndex(a), tok = a.tokens[t], tokens = a.tokens, dh = a.d_head, dm = a.d_model;
  const dims = dimLabels(m, dm), cols = indices(dh);
  const E = r.rows.map((row) => row.map(Number));
  const known = !r.rows.some((row) => row.includes(""));
  const W = weights ? weights.heads[head] : null, KV = weights ? kvOf(weights, head, a.n_heads) : null;
  const rope = m.rope, all = tokens.map((_, i) => i);
  const qIn = rope ? fa.q_raw[0] : fa.q[0], kIn = rope ? fa.k_raw[0] : fa.k[0];
  const q = fa.q[0], K = fa.k[0], V = fa.v[0], S = fa.scores[0], P = fa.patterns[0], Z = fa.head_outputs[0];
  const sub = `_${head + 1}`, p = p_, f = f_, box = box_;
  const N = layerNames(r);
  const vec = (caption, x, name, labels) => shortMatrix(caption, [x], [tok], labels, { name });
  const chain = () => scoreChain([q[t]], K, [S[t]], [t], a, m, head);
  const proj = (which, rowIdx, out, Wx) => (Wx && known ? projection(which, E, rowIdx, Wx, out, which.toUpperCase(), tokens, dh, true)
    : box(known ? shortMatrix(rowIdx.length === 1 ? `${N.E} of ${tok}` : N.E, rowIdx.map((i) => E[i]), rowIdx.map((i) => tokens[i]), dims, { name: `${which.toUpperCase()}-E` }) : null,
      el("span", { class: "op-sign", text: `· W_${which}${sub} =` }),
      shortMatrix(which.toUpperCase(), out, rowIdx.map((i) => tokens[i]), cols, { name: which.toUpperCase() })));
  const ks = keySide(r, E, tokens), keys = ks.tokens, allKeys = keys.map((_, i) => i);
  const kvProj = (which, out, Wx) => (!ks.cross ? proj(which, all, out, Wx)
    : Wx && ks.known ? projection(which, ks.rows, allKeys, Wx, out, which.toUpperCase(), keys, dh, true, "C")
      : box(ks.known ? shortMatrix("C", ks.rows, keys, indices(ks.d), { name: `${which.toUpperCase()}-C` }) : null,
        el("span", { class: "op-sign", text: `· W_${which}${sub} =` }),
        shortMatrix(which.toUpperCase(), out, keys, cols, { name: which.toUpperCase() })));
  const kvFrom = ks.cross ? "C" : N.E;
  // ΔE not asked for (too large) and E not known here (a vocabulary this page could not fetch):
  // E′ − E would be E′ itself, so neither is claimed.
  const unknownDelta = p(`ΔE of all tokens would be ${(a.n_tokens * dm).toLocaleString("en")} numbers (the page asks for it up to ${DELTA_MAX.toLocaleString("en")}), and E is not known here (the model's vocabulary was not fetched), so ΔE cannot be shown as E′ − E: only the service's E′ is.`);
  const noW = !W ? p(`W_${"q, k and v"}${sub} are ${dm} × ${dh} each (${(dm * dh).toLocaleString("en")} numbers); this page fetches the weights of models up to ${STEP_MAX_D} wide only, so these steps show what the weights produce, from the service.`) : null;
  switch (id) {
  case "E":
    if (!known) return [p("This model looks its tokens up in a vocabulary this page could not show.")];
    return [f(`${N.E}  (${a.n_tokens} tokens × d_model ${dm})`),
      p(`Each token is a row vector of ${dm} numbers; the row of ${tok} is marked.` + (r.layer > 0 ? ` This layer reads ${N.E}, the embeddings after layer ${r.layer - 1}, as the service computed them.` : "")),
      box(shortMatrix(N.E, E, tokens, dims, { name: "E", focusRow: t }))];
  case "W":
    if (!W) return [f(`W_q${sub}, W_k${sub}, W_v${sub}  (d_model ${dm} × d_k ${dh})`), noW];
    return [f(`W_q${sub}, W_k${sub}, W_v${sub}  (d_model ${dm} × d_k ${dh})`),
      box(shortMatrix("W_q", W.w_q, dims, cols, { name: "W_q", shortRows: true }), shortMatrix("W_k", KV.w_k, dims, cols, { name: "W_k", shortRows: true }),
        shortMatrix("W_v", KV.w_v, dims, cols, { name: "W_v", shortRows: true }))];
  case "Q":
    return [f(`q = ${N.E}[${tok}] · W_q${sub}${W && W.b_q ? " + b_q" : ""}${rope ? "   (before RoPE: the service's q_raw)" : ""}`),
      p(`The query of ${tok}: what it is looking for.`), noW, proj("q", [t], [qIn[t]], W)];
  case "K":
    return [f(`K = ${kvFrom} · W_k${sub}${rope ? "   (before RoPE: the service's k_raw)" : ""}`),
      p(ks.cross ? `Every context token's key (this cross-attention model's keys and values come from its context C, ${a.n_context} rows): the query of one token meets the keys of all.` : "Every token's key: what it offers to be found by. The query of one token meets the keys of all."),
      noW, kvProj("k", kIn, KV)];
  case "V":
    return [f(`V = ${kvFrom} · W_v${sub}`), p(ks.cross ? "Every context token's value: what it passes on to the queries that attend to it." : "Every token's value: what it passes on to those that attend to it."), noW, kvProj("v", V, KV)];
  case "rope":
    return ropeStep(m, dh, t, tok, fa.q_raw[0][t], q[t], fa.k_raw[0][t], K[t]);
  case "KT":
    return [f("Kᵀ"), p("K turned on its side, so that each key is a column."),
      box(shortMatrix("Kᵀ", transpose(K), cols, keys, { name: "KT", shortRows: true, wholeRows: true }))];
  case "QKT": {
    const C = plainScores(m) ? [fs.raw.scores[0][t]] : chain().dots;
    return [f(`q_${tok} · Kᵀ`), p(`The dot product of ${tok}'s query with every key: ${dh} products summed per key. Hover a cell, or focus the row and use the arrow keys, to see the sum.` +
      (plainScores(m) ? " The totals are the service's (scale 1, no mask)." : " Computed here from the service's q and K: this model's own scores at scale 1 would already be soft-capped, carry ALiBi or stop at its window.")),
    product({ A: vec(`q of ${tok}`, q[t], "QKT-Q", cols), B: shortMatrix("Kᵀ", transpose(K), cols, keys, { name: "QKT-KT", shortRows: true, wholeRows: true }),
      C: matrix(`q_${tok} · Kᵀ`, C, [tok], keys, { name: "QKT" }) }, { name: "Q·Kᵀ", what: "q · Kᵀ",
      label: (i, j) => `q_${tok} · k_${keys[j]}`, terms: (i, j) => q[t].map((x, c) => [x, K[j][c]]), total: (i, j) => C[0][j] })];
  }
  case "S": {
    const plain = plainScores(m);
    return [f(`S = q · Kᵀ × ${a.scale}${Math.abs(a.scale - 1 / Math.sqrt(dh)) < 1e-6 ? `   (d_k = ${dh}: 1/√${dh})` : ""},  then −∞ where the mask (${a.mask}) forbids`),
      p(`Dividing by √d_k (d_k = d_head = ${dh}) keeps the scores from growing with the width.` + (plain ? "" : " Computed here from the service's q and K; the next steps change them before softmax.")),
      box(matrix("S", plain ? [S[t]] : chain().scaled, [tok], keys, { name: "S" }))];
  }
  case "softcap":
    return capStep(chain(), keys, [tok], m.alibi ? null : [S[t]]);
  case "alibi":
    return alibiStep(chain(), tokens, [tok], head, [S[t]]);
  case "P":
    return softmaxStep(fa, 0, tokens, t, keys);
  case "Z":
    return [f(`z = P[${tok}] · V`), p(`The output of head ${head + 1} for ${tok}: the values of all tokens, weighted by ${tok}'s row of P. Hover a cell of z, or focus it and use the arrow keys, to see the sum.`),
      product({ A: matrix(`P, row ${tok}`, [P[t]], [tok], keys, { name: "Z-P" }), B: shortMatrix("V", V, keys, cols, { name: "Z-V" }),
        C: vec(`z of ${tok}`, Z[t], "Z", cols) }, { name: "P·V", what: "z",
        label: (i, j) => `z_${tok}[${j + 1}]`, terms: (i, j) => P[t].map((x, k) => [x, V[k][j]]), total: (i, j) => Z[t][j] })];
  case "dE": {
    if (!fs.delta && !known) return [f(`${N.dE} = concat(Z_1 … Z_${a.n_heads}) · W_o`), unknownDelta];
    const d = fs.delta ? fa.delta[t] : a.embeddings[t].map((x, j) => x - E[t][j]);
    return [f(`${N.dE} = concat(Z_1 … Z_${a.n_heads}) · W_o`),
      p(`What ${tok} gathers from all ${a.n_heads} heads together, projected back to the embedding width.` + (fs.delta ? " The service's ΔE."
        : ` ΔE of all tokens would be ${(a.n_tokens * dm).toLocaleString("en")} numbers (the page asks for it up to ${DELTA_MAX.toLocaleString("en")}): here it is E′ − E, from the service's E′.`)),
      box(vec(`${N.dE} of ${tok}`, d, "dE", dims))];
  }
  case "E2": {
    if (!fs.delta && !known) return [f(`${N.E2} = ${N.E} + ${N.dE}`), unknownDelta, box(vec(`E + ΔE of ${tok}`, a.embeddings[t], "E2", dims))];
    const d = fs.delta ? fa.delta[t] : a.embeddings[t].map((x, j) => x - E[t][j]);
    return [f(`${N.E2} = ${N.E} + ${N.dE}`), p(`${tok}, moved by what it gathered.`),
      el("div", { class: "op" }, known ? vec(`${N.E} of ${tok}`, E[t], "E2-E", dims) : null, el("span", { class: "op-sign", text: "+" }),
        vec(`${N.dE} of ${tok}`, d, "E2-dE", dims), el("span", { class: "op-sign", text: "=" }), vec(`${N.E} + ${N.dE} of ${tok}`, a.embeddings[t], "E2", dims))];
  }
  }
  return [];
}

views.push({
  wire() {
    $("step-token").addEventListener("change", () => { state.stepToken = +$("step-token").value; renderWalkthrough(); saveLink(); });
    $("step").addEventListener("click", (e) => {
      const b = e.target.closest("button[data-expand]");
      if (!b) return;
      const name = b.dataset.expand;
      if (expanded.has(name)) expanded.delete(name); else expanded.add(name);
      renderWalkthrough();
      const again = document.querySelector(`#step button[data-expand="${name}"]`);
      if (again) again.focus();
    });
    new IntersectionObserver((entries) => {
      const r = state.result;
      if (entries.some((e) => e.isIntersecting) && focusMode() && !(r.focus && r.focus[stepHeadIndex(r.answer)])) renderWalkthrough();
    }).observe($("walkthrough"));
  },
});
