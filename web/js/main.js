// ---- wiring --------------------------------------------------------------------------

import { api } from "./api.js";
import { EXAMPLES, STORIES, STORY_MODEL, WORKED, fetchVocabularies } from "./tokens.js";
import { $, el, state, views } from "./state.js";
import { clearErrors, showError } from "./errors.js";
import {
  defaultScale, renderEditorHint, resetRows, setMask, setModel, setScale, setSentence, suggest
} from "./controls.js";
import { compute } from "./compute.js";
import { renderPatterns } from "./heatmap.js";
import { wireHeadView } from "./headview.js";
import { storyOnScreen } from "./story.js";
import { renderGathered } from "./gathered.js";
import { STEPS, goStep, renderWalkthrough } from "./walkthrough.js";
import { openLink, saveLink } from "./link.js";
import "./modelview.js";   // its view (every layer's heads)
import "./rollout.js";     // its view (the rollout of a stack)
import "./export.js";   // its view (the saved files, the folded controls)

// The key typed, if any, becomes the one sent; false (and said) when no header could carry it.
function takeKey() {
  const key = $("api-key").value.trim();
  if (key && !/^[\x21-\x7e]+$/.test(key)) {
    clearErrors();
    $("key-error").textContent = "An API key is printable ASCII without spaces; this one cannot be sent.";
    $("api-key").setAttribute("aria-invalid", "true");
    return false;
  }
  if (!$("key-fields").hidden && key !== api.key) {
    api.key = key;
    sessionStorage.setItem("attention-api-key", key);
  }
  return true;
}
const go = () => (state.started ? compute() : start());

function wire() {
  $("controls").addEventListener("submit", (e) => { e.preventDefault(); if (takeKey()) go(); });
  $("model").addEventListener("change", () => { state.story = null; setModel($("model").value); resetRows(); suggest(); markExample(); compute(); });
  $("sentence").addEventListener("input", suggest);
  $("vocab-words").addEventListener("click", (e) => {
    const b = e.target.closest("button[data-word]");
    if (!b) return;
    const text = $("sentence").value.replace(/\s+$/, "");
    setSentence((text ? text + " " : "") + b.dataset.word);
    compute();
  });
  $("mask-previous").addEventListener("click", () => example(STORIES.find((x) => x.id === "previous")));
  $("examples").addEventListener("click", (e) => {
    const b = e.target.closest("button[data-example]");
    if (b) example(EXAMPLES.find((x) => x.id === b.dataset.example));
  });
  $("compare-body").addEventListener("click", (e) => {
    const b = e.target.closest("button[data-open]");
    const story = storyOnScreen();
    if (!b || !story) return;
    setSentence(story.compare.sentences[+b.dataset.open]);
    state.gather.q = Math.max(0, state.tokens.indexOf(story.compare.word));
    compute();
  });
  $("gathered-tokens").addEventListener("click", (e) => {
    const b = e.target.closest("button[data-q]");
    if (!b) return;
    state.gather.q = +b.dataset.q;
    renderGathered();
    const again = document.querySelector(`#gathered-tokens button[data-q="${b.dataset.q}"]`);
    if (again) again.focus();
  });
  $("gathered-head").addEventListener("change", () => { state.gather.head = $("gathered-head").value; renderGathered(); });
  $("sentence").addEventListener("change", () => { setSentence($("sentence").value); compute(); });
  $("scale").addEventListener("change", () => { setScale($("scale").value); compute(); });
  $("scale-range").addEventListener("change", () => {
    const v = +$("scale-range").value;
    setScale(v === 0 ? "" : String(Number((defaultScale() * 2 ** v).toPrecision(6))));
    compute();
  });
  $("relative").addEventListener("change", () => {
    state.relative = $("relative").checked;
    if (state.result) renderPatterns();
    saveLink();
  });
  for (const r of document.querySelectorAll("input[name=mask]"))
    r.addEventListener("change", () => { setMask(r.value); compute(); });
  $("embeddings-hint").addEventListener("click", (e) => {
    if (e.target.id !== "reset-rows") return;
    resetRows();
    $("embeddings-editor").querySelector("input")?.focus();
    compute();
  });
  $("embeddings-editor").addEventListener("change", (e) => {
    const c = e.target;
    if (c.dataset.i === undefined) return;
    state.rows[+c.dataset.i][+c.dataset.j] = c.value;
    renderEditorHint();
    compute();
  });
  $("api-key").addEventListener("change", () => { if (takeKey()) go(); });
  $("step-prev").addEventListener("click", () => goStep(state.step - 1));
  $("step-next").addEventListener("click", () => goStep(state.step + 1));
  $("step-list").addEventListener("click", (e) => {
    const b = e.target.closest("button");
    if (b) goStep(STEPS.findIndex((s) => s.id === b.dataset.step));
  });
  $("step-head").addEventListener("change", () => { state.stepHead = +$("step-head").value; renderWalkthrough(); saveLink(); });
  $("step").addEventListener("click", (e) => {
    const b = e.target.closest(".rowpick button");
    if (!b) return;
    state.softmaxRow = b.dataset.row === "all" ? "all" : +b.dataset.row;
    renderWalkthrough();
    const again = document.querySelector(`.rowpick button[data-row="${b.dataset.row}"]`);
    if (again) again.focus();
  });
  $("step").addEventListener("keydown", (e) => {
    if (e.target !== $("step")) return;
    if (e.key === "ArrowRight") { e.preventDefault(); goStep(state.step + 1); }
    if (e.key === "ArrowLeft") { e.preventDefault(); goStep(state.step - 1); }
  });
}

export function chooseStory(story) {
  state.story = story;
  state.stepHead = story.heads[0];
  // A story about one head opens its gathered parts on that head, so that
  // what the lesson says is what the bars show; two heads are summed.
  state.gather = { q: 0, head: story.heads.length === 1 ? String(story.heads[0]) : "all" };
}

// The examples: one button each, the one on screen pressed.
function renderExamples() {
  $("examples").replaceChildren(...EXAMPLES.map((ex, i) => el("li", {}, el("button", {
    type: "button", id: "example-" + ex.id, "data-example": ex.id,
    disabled: !state.models.some((m) => m.name === ex.model),
    title: state.models.some((m) => m.name === ex.model) ? null : `This server has no model ${ex.model}.`,
  }, `${i < STORIES.length ? i + 1 + ". " : ""}${ex.title}`, el("span", { class: "what", text: ex.what })))));
  markExample();
}
export function markExample() {
  const story = storyOnScreen();
  for (const b of document.querySelectorAll("#examples button")) {
    const ex = EXAMPLES.find((x) => x.id === b.dataset.example);
    const on = story ? story === ex : !STORIES.includes(ex) && state.model && state.model.name === ex.model && $("sentence").value === ex.sentence;
    b.setAttribute("aria-pressed", on ? "true" : "false");
  }
}

function example(ex) {
  if (!state.models.some((m) => m.name === ex.model)) {
    clearErrors();
    $("model-error").textContent = `This server has no model ${ex.model} loaded.`;
    return;
  }
  setModel(ex.model);
  state.story = null;
  if (STORIES.includes(ex)) chooseStory(ex);
  state.tokens = [];
  setSentence(ex.sentence);
  if (ex.mask) setMask(ex.mask);
  if (ex.token) state.gather.q = Math.max(0, state.tokens.indexOf(ex.token));
  state.step = 0;
  markExample();
  compute();
}

// Loads the model list, then the worked example: once. The example buttons wait for it.
export async function start() {
  if (state.starting) return;
  state.starting = true;
  clearErrors();
  $("key-fields").hidden = !api.key && $("key-fields").hidden;
  let res;
  try { res = await api.call("/v1/models"); }
  catch (e) { state.starting = false; $("general-error").textContent = "Could not reach the service: " + e.message; return; }
  if (!res.ok) { state.starting = false; showError(res.body.error, res.status); return; }
  // Every model, stacks too: a stack's answer is drawn one layer at a time (js/layers.js).
  state.models = res.body.models;
  await fetchVocabularies(state.models);
  state.starting = false;
  state.started = true;
  $("model").replaceChildren(...state.models.map((m) => el("option", { value: m.name, text: `${m.name}: ${(m.n_layers || 1) > 1 ? `${m.n_layers} layers of ` : ""}${m.n_heads} head${m.n_heads > 1 ? "s" : ""} of ${m.d_head}` })));
  renderExamples();
  $("mask-story").hidden = !state.models.some((m) => m.name === STORY_MODEL);
  if (!state.models.length) { $("model-error").textContent = "This server has no models loaded."; return; }
  if (openLink()) return;
  // The first story when the server has its model, else the worked example.
  if (state.models.some((m) => m.name === STORY_MODEL)) example(STORIES[0]);
  else if (state.models.some((m) => m.name === WORKED.model)) example(WORKED);
  else { setModel(state.models[0].name); setSentence(WORKED.sentence); compute(); }
}

wire();
wireHeadView();
for (const v of views) if (v.wire) v.wire();
renderExamples();
$("api-key").value = api.key;
start();
