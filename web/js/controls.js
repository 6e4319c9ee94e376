// ---- the controls --------------------------------------------------------------------

import {
  EDIT_MAX_D, MAX_TOKENS, VOCAB_MAX_NUMBERS, defaultRow, dimLabels, hasVocab, sendsTokensOnly,
  tokenize, vocabs
} from "./tokens.js";
import { $, el, state } from "./state.js";
import { fmt } from "./heatmap.js";
import { markExample } from "./main.js";

export function setModel(name) {
  state.model = state.models.find((m) => m.name === name) || state.models[0] || null;
  if (!state.model) return;
  $("model").value = state.model.name;
  const m = state.model;
  $("model-info").textContent = `${m.description || m.name}. Its default mask: ${m.mask}.`;
  setMask(m.mask === "causal" ? "causal" : "none");
  setScale("");
}

// The scale multiplies Q · Kᵀ; the model's own is 1/√d_k. The slider moves it by powers of 2
// (a temperature of 1/2^x); the field takes any value, sent as typed for the API to judge.
export const defaultScale = () => (state.model && state.model.scale) || 1 / Math.sqrt(state.model ? state.model.d_head : 1);
export function setScale(text) {
  state.scale = text.trim();
  $("scale").value = state.scale;
  $("scale").placeholder = `${fmt(defaultScale())} = 1/√d_k, the model's`;
  const x = Number(state.scale);
  const ratio = state.scale && Number.isFinite(x) && x > 0 ? Math.log2(x / defaultScale()) : 0;
  $("scale-range").value = String(Math.round(ratio));
  $("scale-info").textContent = !state.scale
    ? `S = Q · Kᵀ × ${fmt(defaultScale())} (1/√d_k, d_k = ${state.model ? state.model.d_head : "?"}). Larger sharpens every pattern, smaller flattens it.`
    : Number.isFinite(x) && x > 0
      ? `S = Q · Kᵀ × ${fmt(x)}: ${fmt(x / defaultScale())} × 1/√d_k, a temperature of ${fmt(defaultScale() / x)}. Empty the field for the model's own.`
      : "Sent as typed; the service says what is wrong with it.";
}

export function setMask(mask) {
  state.mask = mask;
  $("mask-" + mask).checked = true;
}

// New tokens keep the rows typed for the same text before; others get their default.
export function setSentence(text) {
  $("sentence").value = text;
  const before = new Map();
  state.tokens.forEach((t, i) => { if (!before.has(t)) before.set(t, state.rows[i]); });
  const all = tokenize(text);
  state.tokens = all.slice(0, MAX_TOKENS);
  const d = state.model ? state.model.d_model : 4;
  // With a vocabulary the position is part of the row, so a new sentence starts from the
  // model's own rows; without one, a token keeps what was typed for it.
  const keep = !hasVocab(state.model);
  state.rows = state.tokens.map((t, i) => {
    const row = keep ? before.get(t) : null;
    return row && row.length === d ? row.slice() : defaultRow(state.model, t, i);
  });
  const chips = state.tokens.map((t, i) => el("span", { class: "chip", "data-i": i, text: t }));
  if (all.length > MAX_TOKENS)
    chips.push(el("span", { class: "hint", text: `… and ${all.length - MAX_TOKENS} more: the page takes the first ${MAX_TOKENS} tokens.` }));
  $("token-chips").replaceChildren(...chips);
  renderEditor();
  suggest();
  markExample();
}

export function resetRows() {
  state.rows = state.tokens.map((t, i) => defaultRow(state.model, t, i));
  renderEditor();
}

// Typing a word of a model with a vocabulary: the words it knows that begin so, offered as
// completions of the whole sentence (a datalist: the browser's own keyboard-accessible list).
const SUGGEST_MAX = 40;
export function suggest() {
  const v = state.model && vocabs.get(state.model.name);
  const box = $("vocab-box");
  if (!hasVocab(state.model) || !v) {
    $("vocab-list").replaceChildren();
    $("sentence").removeAttribute("list");   // no list to offer: no dropdown marker either
    box.hidden = true;
    return;
  }
  $("sentence").setAttribute("list", "vocab-list");
  const input = $("sentence"), text = input.value;
  const at = input.selectionStart ?? text.length;
  const options = [];
  if (at === text.length) {
    const start = text.search(/\S*$/);
    const head = text.slice(0, start), part = text.slice(start).toLowerCase();
    for (const w of v.tokens) {
      if (options.length >= SUGGEST_MAX) break;
      if (w.toLowerCase().startsWith(part) && w !== text.slice(start)) options.push(el("option", { value: head + w }));
    }
  }
  $("vocab-list").replaceChildren(...options);
  if (box.dataset.model !== state.model.name) {
    box.dataset.model = state.model.name;
    $("vocab-summary").textContent = `The ${v.tokens.length} words ${state.model.name} knows`;
    $("vocab-words").replaceChildren(...v.tokens.slice(0, 500).map((w) =>
      el("button", { type: "button", "data-word": w, text: w })));
  }
  box.hidden = false;
}

// What the rows are, and what the page sends: said again after each edit.
export function renderEditorHint() {
  const m = state.model, hint = $("embeddings-hint");
  if (!m || m.d_model > EDIT_MAX_D) return;
  if (!hasVocab(m)) {
    hint.textContent = "Edit any number; the service checks it. Tokens other than 我, 爱 and 你 start from pseudo-random values derived from their text.";
    return;
  }
  const v = vocabs.get(m.name);
  hint.textContent = !v
    ? `${m.name} looks its tokens up in its own vocabulary, which ${m.vocabulary_size * m.d_model > VOCAB_MAX_NUMBERS ? "is too large to show here" : "could not be fetched"}: the page sends the tokens alone.`
    : (sendsTokensOnly()
      ? `Each row is the model's own: the embedding of the token plus that of its position${v.position_embeddings ? "" : " (this model has no position table)"}; the page sends the tokens alone and the service looks them up. Edit a number and the page sends these rows instead, the tokens as labels.`
      : "Edited by hand: the page sends these rows, and the tokens as labels.");
  if (v && !sendsTokensOnly()) hint.append(" ", el("button", { type: "button", id: "reset-rows", text: "Back to the model's own rows" }));
}

export function renderEditor() {
  const d = state.model ? state.model.d_model : 0;
  const n = state.tokens.length;
  const hint = $("embeddings-hint");
  $("embeddings-legend").textContent = `Embeddings E (${n} × ${d})`;
  if (d > EDIT_MAX_D) {
    $("embeddings-editor").replaceChildren();
    hint.textContent = `Each token is ${d} numbers wide: too wide to edit here. Each embedding is a pseudo-random vector derived from the token's text.`;
    return;
  }
  const m = state.model;
  renderEditorHint();
  if (hasVocab(m) && !vocabs.get(m.name)) { $("embeddings-editor").replaceChildren(); return; }
  const names = dimLabels(m, d);
  const head = el("tr", {}, el("th", { scope: "col" }, el("span", { class: "skip", text: "token" })),
    ...names.map((name) => el("th", { scope: "col", text: name })));
  const body = state.tokens.map((t, i) => el("tr", {}, el("th", { scope: "row", text: t }),
    ...state.rows[i].map((v, j) => el("td", {}, el("input", {
      type: "text", inputmode: "decimal", value: v, "data-i": i, "data-j": j,
      "aria-label": `E[${t}][${names[j]}]`, autocomplete: "off", spellcheck: "false" })))));
  $("embeddings-editor").replaceChildren(el("table", { class: "edit" }, el("thead", {}, head), el("tbody", {}, ...body)));
}
