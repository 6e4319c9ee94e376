// ---- computing -----------------------------------------------------------------------

import { api } from "./api.js";
import { STEP_MAX_D, STEP_MAX_N, cellJSON, sendsTokensOnly, tokenize } from "./tokens.js";
import { $, state, views } from "./state.js";
import { clearErrors, showError } from "./errors.js";
import { sentWeights, weightsEdited, weightsJSON } from "./weights.js";
import { renderPatterns } from "./heatmap.js";
import { renderHeadView } from "./headview.js";
import { renderStory, storyOnScreen } from "./story.js";
import { renderGathered } from "./gathered.js";
import { STEPS, plainScores, renderWalkthrough } from "./walkthrough.js";
import { saveLink } from "./link.js";
import { layerView, showLayer } from "./layers.js";
import { start } from "./main.js";

const ALL_STEPS = ["q", "k", "v", "scores", "patterns", "head_outputs", "delta", "embeddings"];
// With RoPE the walk-through also shows q and k before their rotation.
const walkReturn = (m) => (m && m.rope ? [...ALL_STEPS, "q_raw", "k_raw"] : ALL_STEPS);
// Every number of every step on screen at once: small models and short sentences. Past these
// limits the walk-through follows one query token and one head (js/walkthrough.js).
const canWalk = () => state.model && state.model.d_model <= STEP_MAX_D && state.model.d_head <= STEP_MAX_D &&
  (state.model.d_context || 0) <= STEP_MAX_D && state.tokens.length <= STEP_MAX_N;

function requestText(asked, withScale) {
  const extra = Object.assign({}, asked), more = {};
  for (const v of views) if (v.request) v.request(extra, more);
  // Edited weights go inline instead of the model's name (js/weights.js), and E's rows with them:
  // an inline weight set has no vocabulary to look tokens up in.
  const inline = weightsEdited();
  const fields = [
    inline ? `"weights":${weightsJSON()}` : `"model":${JSON.stringify(state.model.name)}`,
    `"tokens":${JSON.stringify(state.tokens)}`,
  ];
  if (inline || !sendsTokensOnly())
    fields.push(`"embeddings":[${state.rows.map((r) => "[" + r.map(cellJSON).join(",") + "]").join(",")}]`);
  for (const [k, v] of Object.entries(extra)) fields.push(`${JSON.stringify(k)}:${JSON.stringify(v)}`);
  if (withScale && state.scale) fields.push(`"scale":${cellJSON(state.scale)}`);
  for (const [k, v] of Object.entries(more)) fields.push(`${JSON.stringify(k)}:${JSON.stringify(v)}`);
  return "{" + fields.join(",") + "}";
}

export async function compute() {
  if (!state.model) { start(); return; }   // the model list never came: ask again
  const walk = canWalk();
  const main = requestText({ mask: state.mask, return: walk ? walkReturn(state.model) : ["scores", "patterns", "embeddings"] }, true);
  const story = storyOnScreen();
  // A story's sentences side by side, each sent alone (tokens only), under the mask chosen.
  const cmp = story && story.compare ? story.compare.sentences.map((sentence) => ({ sentence, tokens: tokenize(sentence) })) : null;
  const key = main + "\n" + (story ? story.id : "");
  // Enter in a field fires its change and the form's submit: one request for both.
  if (key === state.inflight) return;
  state.inflight = key;
  const seq = ++state.seq;
  clearErrors();
  $("status").textContent = "Computing…";
  document.body.setAttribute("aria-busy", "true");
  // Q·Kᵀ before scaling and masking is the service's own too (scale 1, no mask), asked for
  // only when its step is shown: an edit is one request. A model whose scores at scale 1 are
  // soft-capped, carry ALiBi or stop at a window has its Q·Kᵀ computed on the page instead
  // (js/walkthrough.js, plainScores): nothing to ask for.
  const raw = walk && plainScores(state.model) ? requestText({ mask: "none", scale: 1, return: ["scores"] }) : null;
  try {
    const model = state.model, sentTokensOnly = sendsTokensOnly() && !weightsEdited(), sentRows = state.rows.map((r) => r.slice());
    const [res, weights, cmpRes] = await Promise.all([
      api.call("/v1/attention", main),
      walk ? sentWeights(state.model.name) : null,
      cmp ? Promise.all(cmp.map((c) => compareAnswer(model.name, c.tokens, state.mask))) : null,
    ]);
    if (seq !== state.seq) return;
    state.inflight = null;
    document.body.removeAttribute("aria-busy");
    if (!res.ok) {
      $("results").classList.toggle("stale", !!state.result);
      showError(res.body.error, res.status);
      $("status").textContent = "The service refused the request.";
      return;
    }
    $("results").classList.remove("stale");
    $("key-fields").hidden = !api.key;
    const timing = /compute;dur=([0-9.]+)/.exec(res.timing);
    const L = res.body.n_layers || 1;
    $("status").textContent = `Computed by the service${timing ? ` in ${Number(timing[1]).toFixed(2)} ms` : ""}: ${res.body.n_tokens} tokens, ${L > 1 ? `${L} layers of ` : ""}${res.body.n_heads} head${res.body.n_heads > 1 ? "s" : ""}, mask ${res.body.mask}.`;
    // stack, sentRows and allWeights are the answer, E and the weights as they came; answer,
    // rows and weights the layer on screen's (js/layers.js), the same for one layer.
    state.result = { stack: res.body, rawStack: null, rawText: raw, mainText: main, rawError: null, allWeights: weights, sentRows,
      model, story, sentTokensOnly, compare: cmp ? cmp.map((c, i) => Object.assign(c, { res: cmpRes[i] })) : null };
    showLayer(state.result, state.layer);
    renderResult();
    saveLink();
  } catch (e) {
    if (seq !== state.seq) return;
    state.inflight = null;
    document.body.removeAttribute("aria-busy");
    $("results").classList.toggle("stale", !!state.result);
    $("general-error").textContent = "Could not reach the service: " + e.message;
    $("status").textContent = "";
  }
}

// Every view drawn again from state.result: after an answer, or another layer chosen.
export function renderResult() {
  renderStory();
  renderPatterns();
  renderHeadView();
  renderGathered();
  renderWalkthrough();
  for (const v of views) if (v.render) v.render();
}

// Fetched once per model while the page is open (a refusal is asked again next time), so
// that an edit sends one request.
const weightsOf = new Map();
export async function modelWeights(name) {
  if (weightsOf.has(name)) return weightsOf.get(name);
  const res = await api.call(`/v1/models/${encodeURIComponent(name)}?weights=true`);
  if (!res.ok) return null;
  weightsOf.set(name, res.body.weights);
  return res.body.weights;
}
// A story's sentences do not change with an edit: each answer is kept by model, tokens and mask.
const compareAnswers = new Map();
async function compareAnswer(model, tokens, mask) {
  const body = JSON.stringify({ model, tokens, mask, return: ["delta", "embeddings"] });
  if (compareAnswers.has(body)) return compareAnswers.get(body);
  const res = await api.call("/v1/attention", body);
  if (res.ok) compareAnswers.set(body, res);
  return res;
}
// Q · Kᵀ before scaling and masking, for the step that shows it: asked for once per result.
export async function fetchRaw() {
  const r = state.result;
  if (!r || r.raw || r.rawError || r.rawAsked) return;
  r.rawAsked = true;
  let res;
  try { res = await api.call("/v1/attention", r.rawText); }
  catch (e) { res = { ok: false, status: 0, body: { error: { code: "unreachable", message: "could not reach the service: " + e.message } } }; }
  if (state.result !== r) return;
  if (res.ok) { r.rawStack = res.body; r.raw = layerView(res.body, r.layer); } else r.rawError = res;
  if (STEPS[state.step].id === "QKT") renderWalkthrough();
}
