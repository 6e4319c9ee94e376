"use strict";
// ---- the head view: each head as lines from queries to keys (SVG) ----------------------

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

function renderHeadView() {
  const a = state.result.answer;
  const tokens = a.tokens, n = a.n_tokens;
  const names = HEAD_NAMES[a.model] || [];
  const box = $("headview-heads");
  box.removeAttribute("data-focus");
  $("headview-readout").textContent = "";
  const y = (i) => HV.top + i * HV.row;
  const figures = a.heads.map((head, hi) => {
    const P = a.patterns[hi];
    const lines = [];
    for (let q = 0; q < n; q++)
      for (let k = 0; k < n; k++)
        lines.push(svgEl("line", { class: "attn", "data-q": q, "data-k": k, x1: HV.left + 4, y1: y(q) - 4,
          x2: HV.right - 4, y2: y(k) - 4, "stroke-opacity": String(P[q][k]) }));
    const label = (side, i) => svgEl("text", {
      class: "tok", "data-side": side, "data-i": i, x: side === "q" ? HV.left : HV.right, y: y(i),
      "text-anchor": side === "q" ? "end" : "start",
      // One tab stop for the whole view (the first head's first query); arrows move from it.
      tabindex: hi === 0 && side === "q" && i === 0 ? "0" : "-1",
      "aria-label": `${side === "q" ? "query" : "key"} ${i + 1}, ${tokens[i]}: show its ${side === "q" ? "row" : "column"} in every head`,
    }, svgEl("title", {}, tokens[i]), short(tokens[i]));
    const svg = svgEl("svg", { viewBox: `0 0 ${HV.width} ${HV.top + n * HV.row}`, "data-head": head, role: "group",
      "aria-label": `Head ${head + 1}: lines from each query to each key, as opaque as the weight` },
    ...lines, ...tokens.map((_, i) => label("q", i)), ...tokens.map((_, i) => label("k", i)));
    return el("figure", { "data-head": head }, el("figcaption", {}, `Head ${head + 1}`,
      names[head] ? el("span", { class: "name", text: ` · ${names[head]}` }) : null), svg);
  });
  box.className = "headview" + (figures.length === 1 ? " single" : "");
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
  const a = state.result.answer, tokens = a.tokens;
  // What each head does with it: the largest weight of the row (or column).
  const said = a.heads.map((head, hi) => {
    const P = a.patterns[hi];
    const vals = side === "q" ? P[i] : P.map((row) => row[i]);
    const best = vals.indexOf(Math.max(...vals));
    return `head ${head + 1}: ${tokens[best]} ${fmt(vals[best])}`;
  });
  $("headview-readout").textContent = side === "q"
    ? `${tokens[i]} (query ${i + 1}) listens most to: ${said.join("; ")}.`
    : `${tokens[i]} (key ${i + 1}) is heard most by: ${said.join("; ")}.`;
}

function wireHeadView() {
  const box = $("headview-heads");
  const at = (e) => e.target.closest && e.target.closest("text.tok");
  box.addEventListener("mouseover", (e) => { const t = at(e); if (t) headViewFocus(t.dataset.side, +t.dataset.i); });
  box.addEventListener("mouseleave", () => { if (!box.contains(document.activeElement)) headViewFocus(null); });
  box.addEventListener("focusin", (e) => { const t = at(e); if (t) headViewFocus(t.dataset.side, +t.dataset.i); });
  box.addEventListener("focusout", (e) => { if (!box.contains(e.relatedTarget)) headViewFocus(null); });
  box.addEventListener("keydown", (e) => {
    const t = at(e);
    if (!t) return;
    const svg = t.ownerSVGElement, n = state.result.answer.n_tokens;
    let side = t.dataset.side, i = +t.dataset.i;
    if (e.key === "ArrowUp") i = Math.max(0, i - 1);
    else if (e.key === "ArrowDown") i = Math.min(n - 1, i + 1);
    else if (e.key === "ArrowLeft") side = "q";
    else if (e.key === "ArrowRight") side = "k";
    else return;
    e.preventDefault();
    const next = svg.querySelector(`text.tok[data-side="${side}"][data-i="${i}"]`);
    t.setAttribute("tabindex", "-1");
    next.setAttribute("tabindex", "0");
    next.focus();
  });
}

function maskOf(mask, n) {
  return Array.from({ length: n }, (_, q) => Array.from({ length: n }, (_, k) => mask === "causal" && k > q));
}

function wireHeatmap(table, readout, tokens, P, masked) {
  let at = null;
  const say = (q, k) => {
    readout.textContent = `query ${tokens[q]} → key ${tokens[k]}: ${P[q][k]}${masked[q][k] ? " (masked)" : ""}`;
  };
  const activate = (q, k) => {
    if (at) at.classList.remove("active");
    at = table.querySelector(`td[data-q="${q}"][data-k="${k}"]`);
    at.classList.add("active");
    say(q, k);
  };
  table.addEventListener("mouseover", (e) => {
    const td = e.target.closest("td");
    if (td) say(+td.dataset.q, +td.dataset.k);
  });
  // A click focuses the table too: the clicked cell wins over the focus default (0, 0).
  let pointer = false;
  table.addEventListener("mousedown", (e) => {
    pointer = true;
    const td = e.target.closest("td");
    if (td) activate(+td.dataset.q, +td.dataset.k);
  });
  table.addEventListener("focus", () => {
    if (!pointer) { if (!at) activate(0, 0); else say(+at.dataset.q, +at.dataset.k); }
    pointer = false;
  });
  table.addEventListener("keydown", (e) => {
    const n = P.length;
    let q = at ? +at.dataset.q : 0, k = at ? +at.dataset.k : 0;
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1], Home: [0, -n], End: [0, n] };
    if (!(e.key in moves)) return;
    e.preventDefault();
    q = Math.max(0, Math.min(n - 1, q + moves[e.key][0]));
    k = Math.max(0, Math.min(n - 1, k + moves[e.key][1]));
    activate(q, k);
  });
}
