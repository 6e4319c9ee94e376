// ---- the story on screen, and its sentences side by side --------------------------------

import { HEAD_NAMES, dimLabels, vocabRow, vocabs } from "./tokens.js";
import { $, el, state } from "./state.js";
import { fmt } from "./heatmap.js";
import { matrix } from "./walkthrough.js";

// The story chosen, while its model is the one on screen.
export const storyOnScreen = () => (state.story && state.model && state.model.name === state.story.model ? state.story : null);

// A bar from the middle: right (blue) for positive, left (orange) for negative; `scale` is the
// magnitude of a full half.
export function bar(x, scale) {
  const w = scale > 0 ? Math.min(50, (Math.abs(x) / scale) * 50) : 0;
  const span = el("span", { class: x < 0 ? "neg" : "pos" });
  span.style.width = `${w.toFixed(2)}%`;
  return el("div", { class: "bar2", "aria-hidden": "true" }, span);
}

export function renderStory() {
  const { story, compare, model } = state.result;
  $("story").hidden = !story;
  if (!story) return;
  $("story-title").textContent = story.title;
  const names = HEAD_NAMES[story.model] || [];
  $("story-lesson").textContent = story.lesson + ` Look at ${story.heads.map((h) => `head ${h + 1}${names[h] ? ` (${names[h]})` : ""}`).join(" and ")}, framed below.`;
  $("story-note").hidden = !story.note;
  $("story-note").textContent = story.note || "";
  $("compare").hidden = !compare;
  if (!compare) return;
  const c = story.compare, d = model.d_model, dims = dimLabels(model, d);
  const v = vocabs.get(model.name);
  const mask = state.result.answer.mask;
  $("compare-title").textContent = `“${c.word}” side by side (mask ${mask})`;
  const errors = [];
  const rowsE = [], rowsE2 = [], labels = [];
  for (const [si, cs] of compare.entries()) {
    const i = cs.tokens.indexOf(c.word);
    labels.push(cs.sentence);
    if (!cs.res.ok) { errors.push(`“${cs.sentence}”: ${cs.res.body.error.message}`); rowsE.push(null); rowsE2.push(null); continue; }
    rowsE.push(v ? vocabRow(v, c.word, i) : null);
    rowsE2.push({ si, i, e2: cs.res.body.embeddings[i], pos: i });
  }
  const tokenRow = v ? vocabRow({ ...v, position_embeddings: null }, c.word, 0) : null;
  const features = tokenRow ? tokenRow.map((x, j) => (x ? `${dims[j]} ${fmt(x)}` : null)).filter(Boolean) : [];
  $("compare-hint").textContent = tokenRow
    ? `The token embedding of “${c.word}” is the same in every sentence (${features.join(", ") || "all 0"}); its E differs only by the position added to it. Where E + ΔE ends on ${c.dims.join(", ")} is what attention made of it.`
    : "";
  const kids = [];
  // Only the dimensions where some sentence's E is not 0: the rest are 0 in all of them.
  if (v && rowsE.every(Boolean)) {
    const cols = dims.map((_, j) => j).filter((j) => rowsE.some((r) => r[j] !== 0));
    kids.push(matrix(`E of “${c.word}” (token embedding + position; every other dimension 0)`,
      rowsE.map((r) => cols.map((j) => r[j])), labels, cols.map((j) => dims[j]), { name: "compare-E" }));
  }
  const dj = c.dims.map((name) => dims.indexOf(name));
  const shown = rowsE2.filter(Boolean);
  const scale = Math.max(1e-9, ...shown.flatMap((r) => dj.map((j) => Math.abs(r.e2[j]))));
  const head = el("tr", {}, el("th", { scope: "col", text: "sentence" }),
    ...c.dims.map((name) => el("th", { scope: "col", colspan: 2, text: name })));
  const body = shown.map((r) => {
    const vals = dj.map((j) => r.e2[j]);
    // Bold only a clear winner: none when all are 0 or the largest is tied.
    const best = Math.max(...vals);
    const top = best > 0 && vals.filter((x) => x === best).length === 1 ? vals.indexOf(best) : -1;
    return el("tr", { "data-sentence": r.si, "data-top": top >= 0 ? c.dims[top] : "" },
      el("th", { scope: "row", text: `${labels[r.si]} (${c.word}, token ${r.pos + 1})` }),
      ...vals.flatMap((x, n) => [
        el("td", { class: "barcell" + (n === top ? " hi" : ""), title: `${c.dims[n]}: ${x}` }, bar(x, scale)),
        el("td", { class: n === top ? "hi" : null, "data-dim": c.dims[n], "data-value": String(x), title: String(x), text: fmt(x) })]));
  });
  kids.push(el("div", { class: "scroll" }, el("table", { class: "bars", "data-matrix": "compare-E2" },
    el("caption", { text: `E + ΔE of “${c.word}” on ${c.dims.join(", ")} (the largest in bold)` }),
    el("thead", {}, head), el("tbody", {}, ...body))));
  kids.push(el("div", { class: "compare-sentences", role: "group", "aria-label": "Open a sentence" },
    ...labels.map((t, si) => el("button", { type: "button", "data-open": si, "aria-pressed": t === $("sentence").value ? "true" : "false",
      text: `Open “${t}”` }))));
  $("compare-body").replaceChildren(...kids);
  $("compare-error").textContent = errors.join(" ");
}
