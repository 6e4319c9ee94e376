// ---- the heads overview: a thumbnail per head, one opened large; both masks; the context ---

import { api } from "./api.js";
import { MAX_TOKENS, pseudoRandomRow, tokenize } from "./tokens.js";
import { $, el, state, views } from "./state.js";
import { setMask } from "./controls.js";
import { compute } from "./compute.js";
import { cellKinds, heatRGB, heatmapFigure, kvGroups, kvShare, overview, renderPatterns } from "./heatmap.js";
import { HV_ALL_MAX, hvPageSize, renderHeadView } from "./headview.js";
import { saveLink } from "./link.js";
import { layerBody, layerView } from "./layers.js";

// The context of a cross-attention model (its keys and values): tokens typed like the
// sentence, each row the deterministic pseudo-random vector of its text, d_context wide.
export const context = { text: "the cat sat on the mat", tokens: [], all: 0 };
const isCross = (m) => !!(m && m.d_context);
function contextRows(m) {
  return context.tokens.map((t) => pseudoRandomRow(t, m.d_context).map(Number));
}
function syncContext() {
  const m = state.model, cross = isCross(m);
  $("context-fields").hidden = !cross;
  // Causal has no meaning between a sentence and another one: the service refuses it.
  $("mask-causal").disabled = cross;
  $("mask-causal").title = cross ? "A cross-attention model attends to a context: causal has no meaning there." : "";
  if (!cross) return;
  const all = tokenize(context.text);
  context.all = all.length;
  context.tokens = all.slice(0, MAX_TOKENS);
  if ($("context").value !== context.text) $("context").value = context.text;
  $("context-hint").textContent = `${m.name} is a cross-attention model: its queries come from the sentence, its keys and values from these ${context.tokens.length} tokens' rows (${m.d_context} numbers each, pseudo-random from each token's text, as for a sentence without a vocabulary).`;
  if (state.mask === "causal") setMask("none");
}

// Every request of a cross-attention model carries the context and its tokens (views' request).
function contextRequest(extra, more) {
  syncContext();
  const m = state.model;
  if (!isCross(m)) return;
  if (extra.mask === "causal") extra.mask = "none";
  more.context = contextRows(m);
  more.context_tokens = context.tokens;
}

// Both masks side by side: the opened head under the mask chosen (the answer on screen) and
// under the other one, asked for separately (only while this is on), each from the API.
const otherMask = new Map();   // request body → answer, or { error }
export function compareFigures(a, hi) {
  const head = a.heads[hi];
  const other = a.mask === "causal" ? "none" : "causal";
  // The request of the answer on screen, not of the controls as they are now (an edit refused
  // or under way leaves the last answer drawn): only its mask, outputs and head differ.
  // A stack's: the layer on screen alone (js/layers.js).
  const r0 = state.result;
  const body = JSON.stringify(layerBody(r0, Object.assign(JSON.parse(r0.mainText), { mask: other, return: ["scores", "patterns"], select_heads: [head] })));
  const mine = heatmapFigure(a, hi, a.patterns[hi], cellKinds(a, hi), { large: true, mask: a.mask });
  const got = otherMask.get(body);
  let theirs;
  if (got && got.answer) {
    const b = layerView(got.answer, r0.layer);
    theirs = heatmapFigure(b, 0, b.patterns[0], cellKinds(b, 0), { large: true, mask: other });
  } else {
    theirs = el("figure", { class: "head large pending", "data-mask": other }, el("figcaption", {}, `Head ${head + 1} · mask ${other}`),
      el("p", { class: got && got.error ? "error" : "hint", text: got && got.error ? got.error : `Asking the service for head ${head + 1} under mask ${other}…` }));
    if (!got) {
      otherMask.set(body, { pending: true });
      const r = state.result;
      api.call("/v1/attention", body).then((res) => {
        otherMask.set(body, res.ok ? { answer: res.body } : { error: `The service refused mask ${other}: ${res.body.error ? res.body.error.message : res.status}` });
      }, (e) => otherMask.set(body, { error: "Could not reach the service: " + e.message })).then(() => {
        if (state.result === r && overview.compare) renderPatterns();
      });
    }
  }
  return other === "causal" ? [theirs, mine] : [mine, theirs];
}

// One pixel per cell, as the heatmap colours it; masked cells grey, outside the window amber.
// Also the model view's (js/modelview.js), for an answer seen as one layer.
export function drawThumb(canvas, a, hi) {
  const P = a.patterns[hi], kinds = cellKinds(a, hi);
  const T = overview.transposed;
  const n = P.length, m = P[0] ? P[0].length : 0;
  const rows = T ? m : n, cols = T ? n : m;
  canvas.width = cols;
  canvas.height = rows;
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(cols, rows);
  const rowMax = P.map((row) => Math.max(...row));
  for (let q = 0; q < n; q++) for (let k = 0; k < m; k++) {
    const kind = kinds[q][k], p = P[q][k];
    const t = state.relative ? (rowMax[q] > 0 ? p / rowMax[q] : 0) : p;
    const rgb = kind === "window" ? [243, 227, 195] : kind ? [214, 219, 227] : heatRGB(t);
    const at = 4 * ((T ? k : q) * cols + (T ? q : k));
    img.data.set([...rgb, 255], at);
  }
  ctx.putImageData(img, 0, 0);
}

export function renderOverview(a, layout) {
  const box = $("overview");
  const show = layout === "overview" && a.heads.length > 1;
  box.hidden = !show;
  $("overview-hint").hidden = !show;
  const { g, h, of } = kvGroups(a);
  const cross = !!a.n_context;
  // The controls that mean something here.
  $("compare-masks").disabled = cross;
  $("compare-hint").hidden = !cross;
  $("layout").value = overview.layout;
  // Which way round the heatmaps are.
  $("patterns-hint").textContent = (overview.transposed
    ? "Keys are rows, queries are columns (transposed); each column sums to 1."
    : "Queries are rows, keys are columns; each row sums to 1.") +
    " Hover a cell, or focus a pattern and move with the arrow keys, to read its value.";
  // What the model does differently, said once.
  const w = state.result.model ? state.result.model.window : null;
  const notes = [];
  if (w) notes.push(`This model attends within a sliding window of ${w} tokens: a key more than ${w - 1} positions from its query is left out, drawn with amber stripes (the causal mask's cells are grey).`);
  if (g < h) notes.push(g === 1 ? `All ${h} query heads share one K/V head (multi-query attention): they differ only in W_q.`
    : `${h} query heads share ${g} K/V heads, ${h / g} each (grouped-query attention): heads in one box have the same K and V, and differ only in W_q.`);
  if (cross) notes.push(`Cross-attention: the ${a.n_tokens} queries (rows) attend to the ${a.n_context} context tokens (columns).`);
  $("patterns-model-note").textContent = notes.join(" ");
  $("patterns-model-note").hidden = !notes.length;
  // Nothing limited in silence: the tokens the page did not send are said here.
  const limits = [];
  const all = tokenize($("sentence").value).length;
  if (all > state.tokens.length) limits.push(`Showing ${state.tokens.length} of ${all} tokens: the page sends at most the first ${MAX_TOKENS}.`);
  if (cross && context.all > context.tokens.length) limits.push(`Showing ${context.tokens.length} of ${context.all} context tokens: the page sends at most the first ${MAX_TOKENS}.`);
  $("patterns-limit").textContent = limits.join(" ");
  $("patterns-limit").hidden = !limits.length;
  if (!show) { box.replaceChildren(); return; }
  $("overview-hint").textContent = `All ${a.heads.length} heads, one thumbnail each${g < h ? `, boxed by the K/V head they share` : ""}. Click one, or move with the arrow keys and press Enter, to open it large below${a.heads.length > HV_ALL_MAX ? ` (the head view shows its ${hvPageSize()})` : ""}.`;
  const focused = document.activeElement && document.activeElement.classList.contains("thumb");
  const thumb = (hi) => {
    const head = a.heads[hi];
    const canvas = el("canvas", { "aria-hidden": "true" });
    drawThumb(canvas, a, hi);
    return el("button", { type: "button", class: "thumb", "data-head": head, "data-index": hi,
      "aria-pressed": hi === overview.open ? "true" : "false", tabindex: hi === overview.open ? "0" : "-1",
      "aria-label": `Head ${head + 1}${g < h ? `, K/V head ${of(head) + 1}` : ""}: open it large` },
    canvas, el("span", { text: String(head + 1) }));
  };
  const idx = a.heads.map((_, hi) => hi);
  let kids;
  if (g < h) {
    kids = Array.from({ length: g }, (_, u) => {
      const members = idx.filter((hi) => of(a.heads[hi]) === u);
      if (!members.length) return null;
      const [first, last] = kvShare(a, u);
      const title = `K/V head ${u + 1} · heads ${first}–${last}`;
      return el("div", { class: "kv-group", role: "group", "aria-label": `K/V head ${u + 1}, shared by query heads ${first} to ${last}`, "data-kv": u },
        el("p", { class: "kv-title", text: title }), el("div", { class: "thumbs" }, ...members.map(thumb)));
    });
  } else kids = [el("div", { class: "thumbs" }, ...idx.map(thumb))];
  box.className = "overview " + (a.heads.length <= 16 ? "few" : "many");
  box.replaceChildren(...kids);
  if (focused) box.querySelector(`button.thumb[data-index="${overview.open}"]`)?.focus();
}

function openHead(hi) {
  overview.open = hi;
  renderPatterns();
  // The head view follows when it shows a page of the heads.
  if (state.result.answer.heads.length > HV_ALL_MAX) renderHeadView();
  saveLink();
}

// The address keeps these too (views' link): &layout=, &transposed=1, &masks=both, &head=
// (1-based) and, for a cross-attention model, &context=.
function overviewLink(p) {
  if (overview.layout !== "auto") p.set("layout", overview.layout);
  if (overview.transposed) p.set("transposed", "1");
  if (overview.compare) p.set("masks", "both");
  if (overview.open) p.set("head", String(overview.open + 1));
  if (isCross(state.model)) p.set("context", context.text);
}
function readLink() {
  const p = new URLSearchParams(location.hash.slice(1));
  if (["all", "overview"].includes(p.get("layout"))) overview.layout = p.get("layout");
  overview.transposed = p.get("transposed") === "1";
  overview.compare = p.get("masks") === "both";
  const head = Number(p.get("head"));
  if (Number.isInteger(head) && head >= 1) overview.open = head - 1;
  if (p.has("context")) context.text = p.get("context");
  $("layout").value = overview.layout;
  $("transposed").checked = overview.transposed;
  $("compare-masks").checked = overview.compare;
}

views.push({
  request: contextRequest,
  link: overviewLink,
  wire() {
    readLink();
    $("context").value = context.text;
    $("context").addEventListener("change", () => { context.text = $("context").value; compute(); });
    $("layout").addEventListener("change", () => { overview.layout = $("layout").value; if (state.result) { renderPatterns(); saveLink(); } });
    $("transposed").addEventListener("change", () => { overview.transposed = $("transposed").checked; if (state.result) { renderPatterns(); saveLink(); } });
    $("compare-masks").addEventListener("change", () => { overview.compare = $("compare-masks").checked; if (state.result) { renderPatterns(); saveLink(); } });
    const box = $("overview");
    box.addEventListener("click", (e) => {
      const b = e.target.closest("button.thumb");
      if (!b) return;
      openHead(+b.dataset.index);
      box.querySelector(`button.thumb[data-index="${b.dataset.index}"]`)?.focus();
    });
    // One tab stop for all thumbnails; the arrow keys move, Enter opens.
    box.addEventListener("keydown", (e) => {
      const b = e.target.closest("button.thumb");
      if (!b) return;
      const all = [...box.querySelectorAll("button.thumb")];
      const i = all.indexOf(b);
      const perRow = Math.max(1, all.filter((x) => x.parentElement === b.parentElement && x.offsetTop === b.parentElement.firstElementChild.offsetTop).length);
      const to = { ArrowLeft: i - 1, ArrowRight: i + 1, ArrowUp: i - perRow, ArrowDown: i + perRow, Home: 0, End: all.length - 1 }[e.key];
      if (to === undefined) return;
      e.preventDefault();
      const next = all[Math.max(0, Math.min(all.length - 1, to))];
      b.setAttribute("tabindex", "-1");
      next.setAttribute("tabindex", "0");
      next.focus();
    });
  },
});
