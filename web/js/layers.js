// ---- layers: a stack's answer, one layer at a time ----------------------------------------

import { $, el, state, views } from "./state.js";
import { renderResult } from "./compute.js";
import { saveLink } from "./link.js";

// A model of L > 1 layers answers with its per-head outputs under `layers` (docs/API.md,
// "Layers"): one entry per layer, each with its heads, scale, patterns … and, when asked for,
// ΔE_l and E_{l+1}; the top level keeps the tokens, E_L − E_0, E_L and the rollout. The views of
// one layer (heatmaps, head view, gathered, walk-through, saved files) read state.result.answer
// as they do for a one-layer model: for a stack it is the chosen layer's entry over the top
// level's fields, and the answer as sent stays in state.result.stack. Layers are counted from 0,
// as the API and the embeddings they read are: layer l reads E_l and writes E_{l+1}.

export const isStack = (a) => !!(a && Array.isArray(a.layers) && a.layers.length);
// The layers drawn: those of the answer (the page asks for all of them).
export const layerIndices = (a) => (isStack(a) ? a.layers.map((x) => x.layer) : [0]);

// The answer as layer l alone. The top level's ΔE and E′ belong to the whole stack, so they are
// dropped unless the layer's entry carries its own.
export function layerView(a, l) {
  if (!isStack(a)) return a;
  const entry = a.layers.find((x) => x.layer === l) || a.layers[0];
  const v = Object.assign({}, a);
  for (const k of ["layers", "delta", "embeddings", "rollout"]) delete v[k];
  return Object.assign(v, entry);
}
// A stack's weights are {"layers": [weight set, …]}; one layer's, or a one-layer set as it is.
export const layerWeights = (w, l) => (w && Array.isArray(w.layers) ? w.layers[l] || null : w);

// E_l as rows of text, as the sentence's rows are kept: the rows sent (or the model's) for
// layer 0; the embeddings after layer l − 1 as the service computed them for l > 0 (blank
// when the answer lacks them, as E is when a vocabulary could not be fetched).
function layerInput(r, l) {
  if (l === 0 || !isStack(r.stack)) return r.sentRows;
  const prev = r.stack.layers.find((x) => x.layer === l - 1);
  return prev && prev.embeddings ? prev.embeddings.map((row) => row.map(String)) : r.sentRows.map((row) => row.map(() => ""));
}

// Points the result's views at layer l: its answer, E_l, its weights, its scores at scale 1 and
// the walk-through's numbers for one head (fetched per layer, kept per layer).
export function showLayer(r, l) {
  const ls = layerIndices(r.stack);
  r.layer = ls.includes(l) ? l : ls[0];
  r.answer = layerView(r.stack, r.layer);
  r.raw = r.rawStack ? layerView(r.rawStack, r.layer) : null;
  r.rows = layerInput(r, r.layer);
  r.weights = layerWeights(r.allWeights, r.layer);
  r.focusBy = r.focusBy || {};
  r.focus = r.focusBy[r.layer] = r.focusBy[r.layer] || {};
}
export function takeWeights(r, w) {
  r.allWeights = w;
  r.weights = layerWeights(w, r.layer || 0);
}
// A request for one head's (or one mask's) numbers asks for the layer on screen alone; its answer
// is read with layerView(answer, r.layer).
export function layerBody(r, body) {
  if (isStack(r.stack)) body.layers = [r.layer];
  return body;
}

// The names of what layer l reads and writes: E and E′ for a one-layer model, E_l and E_{l+1}.
export const layerNames = (r) => (r && isStack(r.stack)
  ? { E: `E_${r.layer}`, E2: `E_${r.layer + 1}`, dE: `ΔE_${r.layer}`, of: ` of layer ${r.layer}` }
  : { E: "E", E2: "E′", dE: "ΔE", of: "" });
// What layer l reads, in a sentence (empty for one layer).
export function layerSentence(r) {
  if (!r || !isStack(r.stack)) return "";
  const l = r.layer, L = r.stack.n_layers || r.stack.layers.length;
  const writes = `writes E_${l + 1} = E_${l} + ΔE_${l}${l + 1 === L ? ", the stack's output" : `, which layer ${l + 1} reads`}`;
  return l === 0
    ? `Layer 0 of ${L} (counted from 0): it reads E_0, the sentence's own embeddings, and ${writes}.`
    : `Layer ${l} of ${L} (counted from 0): it reads E_${l}, the embeddings after layer ${l - 1}, and ${writes}.`;
}

// The layer chosen, for every view at once: the results drawn again from the same answer.
export function setLayer(l) {
  state.layer = l;
  if (state.result) {
    showLayer(state.result, l);
    state.layer = state.result.layer;
    renderResult();
  }
  saveLink();
}

// The layer lists (the head view's, the walk-through's, the gathered view's), hidden for one layer.
function renderLayerPicks() {
  const r = state.result, stack = !!(r && isStack(r.stack));
  const ls = stack ? layerIndices(r.stack) : [];
  for (const sel of document.querySelectorAll("select.layer-pick")) {
    const label = sel.closest("label");
    if (label) label.hidden = !stack;
    sel.disabled = !stack;
    const want = ls.map((l) => `layer ${l}${l === 0 ? " (reads E_0)" : ` (reads E_${l})`}`).join("\n");
    if (sel.dataset.options !== want) {
      sel.replaceChildren(...ls.map((l, i) => el("option", { value: l, text: want.split("\n")[i] })));
      sel.dataset.options = want;
    }
    if (stack) sel.value = String(r.layer);
  }
  for (const note of document.querySelectorAll(".layer-note")) {
    note.hidden = !stack;
    note.textContent = stack ? layerSentence(r) : "";
  }
}

views.push({
  wire() {
    const p = new URLSearchParams(location.hash.slice(1));
    const l = Number(p.get("layer"));
    if (Number.isInteger(l) && l >= 0) state.layer = l;
    for (const sel of document.querySelectorAll("select.layer-pick"))
      sel.addEventListener("change", () => setLayer(+sel.value));
  },
  render: renderLayerPicks,
  link(p) {
    const r = state.result;
    if (r && isStack(r.stack) && r.layer) p.set("layer", String(r.layer));
  },
});
