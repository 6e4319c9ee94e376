// ---- the head view: each head as lines from queries to keys (SVG) ----------------------

import { HEAD_NAMES } from "./tokens.js";
import { $, el, state } from "./state.js";
import { fmt, keyTokens, overview } from "./heatmap.js";
import { isStack } from "./layers.js";

// SVG's namespace as the HTML parser gives it: the page holds no absolute URL at all.
const SVG = (() => { const d = document.createElement("div"); d.innerHTML = "<svg></svg>"; return d.firstChild.namespaceURI; })();
const svgEl = (tag, attrs, ...kids) => {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) e.setAttribute(k, v);
  for (const kid of kids) if (kid !== null && kid !== undefined) e.append(kid);
  return e;
};
const short = (t) => ([...t].length > 10 ? [...t].slice(0, 9).join("") + "…" : t);
const HV = { row: 20, top: 14, left: 92, right: 168, width: 260 };

// A model of more than 16 heads is drawn a page at a time (12 heads, 4 on a narrow screen):
// the page holding the head opened in the overview (js/overview.js), and the view says which.
export const HV_ALL_MAX = 16;
export const hvPageSize = () => (matchMedia("(max-width: 820px)").matches ? 4 : 12);
// A head opened from the model view (js/modelview.js) is drawn alone and large: its index into
// the answer's heads, or null for every head (a page of them).
export const hvChosen = { hi: null };
const chosenHead = (a) => (hvChosen.hi !== null && hvChosen.hi < a.heads.length && isStack(state.result.stack) ? hvChosen.hi : null);
const headViewPage = (a) => {
  const c = chosenHead(a);
  if (c !== null) return [c, c + 1];
  if (a.heads.length <= HV_ALL_MAX) return [0, a.heads.length];
  const size = hvPageSize(), first = Math.floor(overview.open / size) * size;
  return [first, Math.min(a.heads.length, first + size)];
};

export function renderHeadView() {
  const a = state.result.answer;
  const tokens = a.tokens, n = a.n_tokens;
  // Under cross-attention the keys are the context's tokens: n on the left, m on the right.
  const keys = keyTokens(a), m = keys.length;
  const names = HEAD_NAMES[a.model] || [];
  const box = $("headview-heads");
  box.removeAttribute("data-focus");
  $("headview-readout").textContent = "";
  $("headview-readout").style.minHeight = "";
  const y = (i) => HV.top + i * HV.row;
  const [from, to] = headViewPage(a);
  const limit = $("headview-limit");
  const chosen = chosenHead(a);
  $("headview-all").hidden = chosen === null;
  if (limit) {
    limit.hidden = to - from === a.heads.length || chosen !== null;
    limit.textContent = limit.hidden ? "" : `Showing heads ${from + 1}–${to} of ${a.heads.length} (${hvPageSize()} at a time): open a head in the overview above to show its ${hvPageSize()}.`;
  }
  const figures = a.heads.slice(from, to).map((head, j) => {
    const hi = from + j;
    const P = a.patterns[hi];
    const lines = [];
    for (let q = 0; q < n; q++)
      for (let k = 0; k < m; k++)
        lines.push(svgEl("line", { class: "attn", "data-q": q, "data-k": k, x1: HV.left + 4, y1: y(q) - 4,
          x2: HV.right - 4, y2: y(k) - 4, "stroke-opacity": String(P[q][k]) }));
    const label = (side, i) => svgEl("text", {
      class: "tok", "data-side": side, "data-i": i, x: side === "q" ? HV.left : HV.right, y: y(i),
      "text-anchor": side === "q" ? "end" : "start",
      // One tab stop for the whole view (the first head's first query); arrows move from it.
      tabindex: j === 0 && side === "q" && i === 0 ? "0" : "-1",
      "aria-label": `${side === "q" ? "query" : "key"} ${i + 1}, ${side === "q" ? tokens[i] : keys[i]}: show its ${side === "q" ? "row" : "column"} in every head`,
    }, svgEl("title", {}, side === "q" ? tokens[i] : keys[i]), short(side === "q" ? tokens[i] : keys[i]));
    const svg = svgEl("svg", { viewBox: `0 0 ${HV.width} ${HV.top + Math.max(n, m) * HV.row}`, "data-head": head, role: "group",
      "aria-label": `Head ${head + 1}: lines from each query to each key, as opaque as the weight` },
    ...lines, ...tokens.map((_, i) => label("q", i)), ...keys.map((_, i) => label("k", i)));
    return el("figure", { "data-head": head, "data-index": hi }, el("figcaption", {},
      chosen !== null ? `Layer ${state.result.layer}, head ${head + 1}` : `Head ${head + 1}`,
      names[head] ? el("span", { class: "name", text: ` · ${names[head]}` }) : null), svg);
  });
  box.className = "headview" + (chosen !== null ? " chosen" : figures.length === 1 ? " single" : "");
  box.replaceChildren(...figures);
}

// A token's row (a query, left) or column (a key, right), in every head at once; null: all lines.
function headViewFocus(side, i) {
  const box = $("headview-heads");
  if (side === null) { box.removeAttribute("data-focus"); $("headview-readout").textContent = ""; }
  else box.dataset.focus = `${side}:${i}`;
  for (const line of box.querySelectorAll("line.attn"))
    line.classList.toggle("on", side !== null && line.dataset[side] === String(i));
  for (const t of box.querySelectorAll("text.tok"))
    t.classList.toggle("on", side !== null && t.dataset.side === side && t.dataset.i === String(i));
  if (side === null) return;
  const a = state.result.answer, tokens = a.tokens, keys = keyTokens(a);
  const [from, to] = headViewPage(a);
  // What each head shown does with it: the largest weight of the row (or column).
  const said = a.heads.slice(from, to).map((head, j) => {
    const P = a.patterns[from + j];
    const vals = side === "q" ? P[i] : P.map((row) => row[i]);
    const best = vals.indexOf(Math.max(...vals));
    return `head ${head + 1}: ${(side === "q" ? keys : tokens)[best]} ${fmt(vals[best])}`;
  });
  const readout = $("headview-readout");
  readout.textContent = side === "q"
    ? `${tokens[i]} (query ${i + 1}) listens most to: ${said.join("; ")}.`
    : `${keys[i]} (key ${i + 1}) is heard most by: ${said.join("; ")}.`;
  // The readout above the heads keeps the tallest height it has had until the view is drawn
  // again: shrinking (or emptied) it would move the heads under the pointer, whose next
  // token would then be hovered, and so on.
  readout.style.minHeight = `${Math.max(readout.getBoundingClientRect().height, parseFloat(readout.style.minHeight) || 0)}px`;
}

export function wireHeadView() {
  const box = $("headview-heads");
  $("headview-all").addEventListener("click", () => {
    hvChosen.hi = null;
    renderHeadView();
    box.querySelector('text.tok[tabindex="0"]')?.focus();
  });
  const at = (e) => e.target.closest && e.target.closest("text.tok");
  box.addEventListener("mouseover", (e) => { const t = at(e); if (t) headViewFocus(t.dataset.side, +t.dataset.i); });
  box.addEventListener("mouseleave", () => { if (!box.contains(document.activeElement)) headViewFocus(null); });
  box.addEventListener("focusin", (e) => { const t = at(e); if (t) headViewFocus(t.dataset.side, +t.dataset.i); });
  box.addEventListener("focusout", (e) => { if (!box.contains(e.relatedTarget)) headViewFocus(null); });
  box.addEventListener("keydown", (e) => {
    const t = at(e);
    if (!t) return;
    const svg = t.ownerSVGElement, a = state.result.answer;
    let side = t.dataset.side, i = +t.dataset.i;
    if (e.key === "ArrowUp") i = Math.max(0, i - 1);
    else if (e.key === "ArrowDown") i = Math.min((side === "q" ? a.n_tokens : keyTokens(a).length) - 1, i + 1);
    else if (e.key === "ArrowLeft") side = "q";
    else if (e.key === "ArrowRight") side = "k";
    else return;
    i = Math.min(i, (side === "q" ? a.n_tokens : keyTokens(a).length) - 1);
    e.preventDefault();
    const next = svg.querySelector(`text.tok[data-side="${side}"][data-i="${i}"]`);
    t.setAttribute("tabindex", "-1");
    next.setAttribute("tabindex", "0");
    next.focus();
  });
}
