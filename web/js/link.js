// ---- the address: what is on screen, so that it can be shared or bookmarked ------------

import { EDIT_MAX_D, STORIES, isEdited } from "./tokens.js";
import { $, state, views } from "./state.js";
import { renderEditor, setMask, setModel, setScale, setSentence } from "./controls.js";
import { restoreWeights, weightsLink } from "./weights.js";
import { compute } from "./compute.js";
import { storyOnScreen } from "./story.js";
import { STEPS } from "./walkthrough.js";
import { chooseStory } from "./main.js";

// #model=…&sentence=…&mask=…&step=…, &step-head= and &step-token= (1-based: the head and the
// query token the walk-through follows, when not its first head and last token), and &e=<rows as JSON> when the embeddings were edited,
// &w=<the weights' edited cells as JSON: {"heads/0/w_q/1/2": "0.5"}> when the weights were.
export function saveLink() {
  if (!state.model) return;
  const p = new URLSearchParams({ model: state.model.name, sentence: $("sentence").value, mask: state.mask,
    step: STEPS[state.step].id });
  if (state.stepHead) p.set("step-head", String(state.stepHead + 1));
  if (state.stepToken !== null) p.set("step-token", String(state.stepToken + 1));
  const d = state.model.d_model;
  if (isEdited() && d <= EDIT_MAX_D) p.set("e", JSON.stringify(state.rows));
  const w = weightsLink();
  if (w) p.set("w", w);
  if (state.scale) p.set("scale", state.scale);
  if (state.relative) p.set("relative", "1");
  const story = storyOnScreen();
  if (story) p.set("story", story.id);
  for (const v of views) if (v.link) v.link(p);
  history.replaceState(null, "", "#" + p.toString());
}

// The state a link names, when its model is loaded here; false otherwise.
export function openLink() {
  const p = new URLSearchParams(location.hash.slice(1));
  const m = state.models.find((x) => x.name === p.get("model"));
  if (!m) return false;
  setModel(m.name);
  const story = STORIES.find((x) => x.id === p.get("story") && x.model === m.name);
  if (story) chooseStory(story);
  state.tokens = [];
  setSentence(p.get("sentence") ?? "");
  if (p.get("mask") === "causal" || p.get("mask") === "none") setMask(p.get("mask"));
  if (p.has("scale")) setScale(p.get("scale"));
  state.relative = p.get("relative") === "1";
  $("relative").checked = state.relative;
  const step = STEPS.findIndex((x) => x.id === p.get("step"));
  state.step = step >= 0 ? step : 0;
  // Out of range for this answer, they are brought within it when drawn (walkthrough.js).
  const stepHead = Number(p.get("step-head")), stepToken = Number(p.get("step-token"));
  state.stepHead = Number.isInteger(stepHead) && stepHead >= 1 ? stepHead - 1 : 0;
  state.stepToken = Number.isInteger(stepToken) && stepToken >= 1 ? stepToken - 1 : null;
  try {
    const rows = JSON.parse(p.get("e") ?? "null");
    // Only rows of the right size, each cell a string as typed (the API judges them).
    if (Array.isArray(rows) && rows.length === state.tokens.length &&
        rows.every((r) => Array.isArray(r) && r.length === m.d_model && r.every((c) => typeof c === "string"))) {
      state.rows = rows;
      renderEditor();
    }
  } catch (_) { /* not JSON: the default embeddings */ }
  if (story) state.gather.q = Math.max(0, state.tokens.indexOf(story.token));
  // Edited weights: the model's, fetched first, with the link's cells; then one request.
  let w = null;
  try { w = JSON.parse(p.get("w") ?? "null"); } catch (_) { /* not JSON: the model's weights */ }
  if (w && typeof w === "object" && !Array.isArray(w)) restoreWeights(m.name, w).then(compute, compute);
  else compute();
  return true;
}
