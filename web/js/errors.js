// ---- errors next to their fields ------------------------------------------------------

import { dimLabels } from "./tokens.js";
import { $, el, state } from "./state.js";
import { weightCellName, weightsErrorField } from "./weights.js";
import { context } from "./overview.js";

const ERROR_BOXES = ["model-error", "context-error", "tokens-error", "mask-error", "scale-error", "embeddings-error", "weights-error", "weights-paste-error", "key-error", "general-error"];
export function clearErrors() {
  for (const id of ERROR_BOXES) $(id).replaceChildren();
  for (const e of document.querySelectorAll("#token-chips .error")) e.remove();
  for (const e of document.querySelectorAll("#token-chips .invalid")) { e.classList.remove("invalid"); e.removeAttribute("aria-describedby"); }
  for (const e of document.querySelectorAll("[aria-invalid]")) e.removeAttribute("aria-invalid");
}
// The API counts from 0 and names cells by their JSON place (embeddings[1][2]); people count
// from 1 and know rows by their token: "Row 爱, column 3 is not a number".
function rowName(i) {
  const t = state.tokens[i];
  if (t === undefined) return `row ${i + 1}`;
  return state.tokens.indexOf(t) === state.tokens.lastIndexOf(t) ? `row ${t}` : `row ${i + 1} (${t})`;
}
function colName(j) {
  const d = state.model ? state.model.d_model : 0;
  const names = dimLabels(state.model, d);
  return names[j] !== undefined && names[j] !== String(j + 1) ? `column ${j + 1} (${names[j]})` : `column ${j + 1}`;
}
function contextRowName(i) {
  const t = context.tokens[i];
  return t === undefined ? `row ${i + 1}` : `row ${i + 1} (${t})`;
}
function humanMessage(message) {
  const text = message
    .replace(/((?:embeddings|context|weights\.[a-z_]+(?:\[\d+\]\.[a-z_]+)?)(?:\[\d+\]){1,2}) is (?:a string|null|true|false|an array|an object)[^,]*, expected a number/, "$1 is not a number")
    // weights.heads[0].w_q[1][2]: "W_q of head 1, row 2 (adjective), column 3"
    .replace(/weights\.((?:heads|kv_heads)\[\d+\]\.[wb]_[qkv]|w_o|b_o)(?:\[(\d+)\])?(?:\[(\d+)\])?/g, (_, id, i, j) =>
      weightCellName(id.replace(/\[(\d+)\]\./, "/$1/"), i === undefined ? undefined : +i, j === undefined ? undefined : +j))
    .replace(/embeddings\[(\d+)\]\[(\d+)\]/g, (_, i, j) => `${rowName(+i)}, ${colName(+j)}`)
    .replace(/like row (\d+)/g, (_, i) => `like ${rowName(+i)}`)
    .replace(/embeddings\[(\d+)\]/g, (_, i) => rowName(+i))
    // A cross-attention model's context: its rows are known by their tokens too.
    .replace(/context\[(\d+)\]\[(\d+)\]/g, (_, i, j) => `context ${contextRowName(+i)}, column ${+j + 1}`)
    .replace(/context_tokens\[(\d+)\]/g, (_, i) => `context token ${+i + 1}`)
    .replace(/context\[(\d+)\]/g, (_, i) => `context ${contextRowName(+i)}`)
    .replace(/(^|[^_])tokens\[(\d+)\]/g, (_, pre, i) => `${pre}token ${+i + 1}`);
  // Only a sentence that now begins with a row or a token gains a capital: the rest are the service's.
  return text === message ? text : text.charAt(0).toUpperCase() + text.slice(1);
}
// The message in people's words, then the service's own words and code for those who look them up.
export const errorParts = (err, status, path) => [el("span", { class: "message", text: humanMessage(err.message) }), " ",
  el("span", { class: "code", text: `(the service: “${err.message}”, ${status} ${err.code}${path ? " at " + path : ""})` })];

export function showError(err, status) {
  const path = err.path || "";
  const parts = path.split("/").slice(1);
  let box = "general-error", field = null;
  if (status === 401) { box = "key-error"; field = $("api-key"); $("key-fields").hidden = false; }
  else if (parts[0] === "tokens" && parts[1] !== undefined && document.querySelector(`#token-chips .chip[data-i="${parts[1]}"]`)) {
    // A word the vocabulary lacks, or one past the position table: the message next to that word.
    const chip = document.querySelector(`#token-chips .chip[data-i="${parts[1]}"]`);
    chip.classList.add("invalid");
    chip.setAttribute("aria-invalid", "true");
    $("sentence").setAttribute("aria-invalid", "true");
    const note = el("span", { class: "error", id: "token-error", role: "alert" }, ...errorParts(err, status, path));
    chip.after(note);
    chip.setAttribute("aria-describedby", "token-error");
    return;
  }
  else if (parts[0] === "tokens" || (parts[0] === "embeddings" && state.tokens.length === 0)) {
    box = "tokens-error"; field = $("sentence");   // no tokens: the sentence is at fault
  }
  else if (parts[0] === "embeddings") {
    box = "embeddings-error";
    const i = parts[1], j = parts[2];
    if (i !== undefined && j !== undefined) field = document.querySelector(`#embeddings-editor input[data-i="${i}"][data-j="${j}"]`);
    else if (i !== undefined) document.querySelectorAll(`#embeddings-editor input[data-i="${i}"]`).forEach((c) => c.setAttribute("aria-invalid", "true"));
  }
  else if (parts[0] === "weights") {
    // A cell of the weights sent inline: its matrix on screen, the cell marked, the message under it.
    box = "weights-error";
    field = weightsErrorField(parts.slice(1));
  }
  else if (parts[0] === "context" || parts[0] === "context_tokens") { box = "context-error"; field = $("context"); }
  else if (parts[0] === "mask") { box = "mask-error"; }
  else if (parts[0] === "scale") { box = "scale-error"; field = $("scale"); }
  else if (parts[0] === "model") { box = "model-error"; field = $("model"); }
  if (field) field.setAttribute("aria-invalid", "true");
  $(box).replaceChildren(...errorParts(err, status, path));
  if (field && field !== document.activeElement) field.scrollIntoView({ block: "nearest" });
}
