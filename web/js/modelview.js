// ---- the model view: every layer's heads, a thumbnail each (as BertViz's model view) ------

import { $, el, state, views } from "./state.js";
import { overview } from "./heatmap.js";
import { drawThumb } from "./overview.js";
import { hvChosen } from "./headview.js";
import { isStack, layerIndices, layerView, setLayer } from "./layers.js";

// A grid of layers (rows, from 0) by heads (columns, from 1), shown for a stack only. Each cell
// is a button holding the head's pattern in that layer, one pixel per cell (js/overview.js's
// thumbnail, from the answer seen as that layer). Opening one chooses its layer for every view
// and draws its head alone and large in the head view; the grid is one tab stop, the arrow keys
// move in it (↑ ↓ layers, ← → heads) and Enter opens.

function renderModelView() {
  const r = state.result, grid = $("modelview-grid");
  const on = !!(r && isStack(r.stack) && layerIndices(r.stack).length > 1);
  $("modelview").hidden = !on;
  if (!on) { grid.replaceChildren(); return; }
  const focused = grid.contains(document.activeElement) ? document.activeElement.dataset : null;
  const ls = layerIndices(r.stack), heads = r.answer.heads;
  const pressed = (l, hi) => l === r.layer && hi === (hvChosen.hi ?? overview.open);
  const head = el("tr", {}, el("th", { scope: "col", text: "layer" }), ...heads.map((h) => el("th", { scope: "col", text: `head ${h + 1}` })));
  const rows = ls.map((l) => {
    const a = layerView(r.stack, l);
    return el("tr", { "data-layer": l }, el("th", { scope: "row", text: `layer ${l}` }), ...a.heads.map((h, hi) => {
      const canvas = el("canvas", { "aria-hidden": "true" });
      drawThumb(canvas, a, hi);
      return el("td", {}, el("button", { type: "button", class: "thumb", "data-layer": l, "data-head": h, "data-index": hi,
        "aria-pressed": pressed(l, hi) ? "true" : "false", tabindex: pressed(l, hi) ? "0" : "-1",
        "aria-label": `Layer ${l}, head ${h + 1}: open it large in the head view` }, canvas));
    }));
  });
  grid.replaceChildren(el("table", { class: "modelview", "aria-label": "Every layer's heads" }, el("thead", {}, head), el("tbody", {}, ...rows)));
  if (!grid.querySelector('button.thumb[tabindex="0"]')) grid.querySelector("button.thumb")?.setAttribute("tabindex", "0");
  if (focused) grid.querySelector(`button.thumb[data-layer="${focused.layer}"][data-index="${focused.index}"]`)?.focus();
}

// Layer l's head (an index into its heads) opened: chosen everywhere, drawn alone in the head
// view, which comes on screen with the keyboard on its first token.
function openFromModelView(l, hi) {
  overview.open = hi;
  hvChosen.hi = hi;
  state.stepHead = hi;
  setLayer(l);
  const hv = $("headview");
  hv.scrollIntoView({ block: "start" });
  hv.querySelector('#headview-heads text.tok[tabindex="0"]')?.focus({ preventScroll: true });
}

views.push({
  wire() {
    const grid = $("modelview-grid");
    grid.addEventListener("click", (e) => {
      const b = e.target.closest("button.thumb");
      if (b) openFromModelView(+b.dataset.layer, +b.dataset.index);
    });
    grid.addEventListener("keydown", (e) => {
      const b = e.target.closest("button.thumb");
      if (!b) return;
      const l = +b.dataset.layer, hi = +b.dataset.index;
      const to = { ArrowUp: [l - 1, hi], ArrowDown: [l + 1, hi], ArrowLeft: [l, hi - 1], ArrowRight: [l, hi + 1] }[e.key];
      if (!to) return;
      e.preventDefault();
      const next = grid.querySelector(`button.thumb[data-layer="${to[0]}"][data-index="${to[1]}"]`);
      if (!next) return;
      b.setAttribute("tabindex", "-1");
      next.setAttribute("tabindex", "0");
      next.focus();
    });
  },
  render: renderModelView,
});
