// ---- heatmaps ------------------------------------------------------------------------

import { HEAD_NAMES } from "./tokens.js";
import { $, el, state } from "./state.js";
import { compareFigures, renderOverview } from "./overview.js";

export const heatRGB = (p) => {
  const t = Math.max(0, Math.min(1, p));
  const mix = (a, b) => Math.round(a + (b - a) * t);
  return [mix(255, 36), mix(255, 86), mix(255, 201)];
};
const heat = (p) => `rgb(${heatRGB(p).join(", ")})`;
// WCAG 2's relative luminance; black or white, whichever is the more legible on the cell
// (one of them always reaches 4.5:1).
const luminance = (rgb) => {
  const [r, g, b] = rgb.map((c) => { c /= 255; return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
};
const inkOn = (rgb) => (1.05 / (luminance(rgb) + 0.05) >= (luminance(rgb) + 0.05) / 0.05 ? "#fff" : "#000");
export const fmt = (x) => {
  if (x === null) return "−∞";
  if (x === 0) return "0";
  // Four decimals at most, trailing zeros dropped: 0.1, not 0.1000 (the exact value is on hover).
  const s = Math.abs(x) < 1e-3 ? x.toExponential(1) : x.toFixed(4).replace(/\.?0+$/, "");
  return s.replace("-", "−");
};

// What the patterns section shows (its controls are js/overview.js's): the layout ("auto",
// "all": every head side by side, "overview": thumbnails and one head large), the head opened
// large (an index into the answer's heads), keys as rows, and both masks side by side.
export const overview = { layout: "auto", open: 0, transposed: false, compare: false };
// Side by side by default while every cell stays at least 12 px wide in a 190 px column.
const ALL_MAX_HEADS = 16;
const ALL_MAX_TOKENS = 10;

// The keys' labels: the context's tokens under cross-attention, else the sentence's.
export const keyTokens = (a) => (a.n_context ? (a.context_tokens || Array.from({ length: a.n_context }, (_, i) => `c${i + 1}`)) : a.tokens);
export const kvGroups = (a) => {
  const h = a.n_heads, g = a.n_kv_heads || h;
  return { g, h, of: (head) => Math.floor((head * g) / h), first: (u) => Math.ceil((u * h) / g) };
};
// Query heads a … b (1-based) that share K/V head u (0-based), as consecutive heads do.
export const kvShare = (a, u) => {
  const { g, h } = kvGroups(a);
  return [u * (h / g) + 1, (u + 1) * (h / g)];
};

function patternsLayout(a) {
  if (a.heads.length === 1) return "single";
  if (overview.compare) return "overview";
  if (overview.layout !== "auto") return overview.layout;
  return a.heads.length <= ALL_MAX_HEADS && Math.max(a.n_tokens, keyTokens(a).length) <= ALL_MAX_TOKENS ? "all" : "overview";
}

// Why a cell is 0: "masked" (the mask), "window" (outside the sliding window), or null. The
// service's scores say which cells it removed (null); the model's window says why.
export function cellKinds(a, hi) {
  const n = a.n_tokens, m = keyTokens(a).length;
  const w = state.result && state.result.model ? state.result.model.window : null;
  const S = a.scores ? a.scores[hi] : null;
  return Array.from({ length: n }, (_, q) => Array.from({ length: m }, (_, k) => {
    const causal = !a.n_context && a.mask === "causal" && k > q;
    if (causal) return "masked";
    if (w && !a.n_context && Math.abs(q - k) >= w) return "window";
    if (S ? S[q][k] === null : false) return "masked";
    return null;
  }));
}

// The cell's size in the large heatmap: numbers inside from 30 px, never below 14 px.
const cellPx = (cells) => (cells <= 8 ? 44 : cells <= 16 ? 32 : cells <= 32 ? 20 : 14);

// One head's heatmap: queries as rows and keys as columns, or transposed (keys as rows).
// opts: large (a fixed cell size, scrolling with sticky labels), numbers, caption, mask label;
// title and id for a matrix that is no head's (the rollout: js/rollout.js), instead of "Head h".
export function heatmapFigure(a, hi, P, kinds, opts) {
  const head = opts.title ? null : a.heads[hi];
  const names = HEAD_NAMES[a.model] || [];
  const qTok = a.tokens, kTok = keyTokens(a);
  const n = qTok.length, m = kTok.length;
  const T = overview.transposed;
  const rowTok = T ? kTok : qTok, colTok = T ? qTok : kTok;
  const relative = state.relative;
  const rowMax = P.map((row) => Math.max(...row));
  const readout = el("div", { class: "readout", "aria-live": "polite" });
  const corner = T ? "key ↓ query →" : "query ↓ key →";
  const thead = el("thead", {}, el("tr", {}, el("th", { scope: "col", class: "corner" }, el("span", { text: opts.large ? corner : "" })),
    ...colTok.map((t, c) => el("th", { scope: "col", title: `${T ? "query" : "key"} ${c + 1}: ${t}` }, el("span", { text: t })))));
  const px = opts.large ? cellPx(Math.max(n, m)) : null;
  const showNumbers = opts.large ? px >= 30 : opts.numbers;
  const cell = (q, k) => {
    const p = P[q][k], kind = kinds[q][k];
    const td = el("td", { "data-q": q, "data-k": k, "data-value": String(p),
      title: `${qTok[q]} → ${kTok[k]}: ${p}${kind === "window" ? " (outside the window)" : kind ? " (masked)" : ""}`,
      class: kind, text: showNumbers ? (p === 0 ? "0" : p.toFixed(2).replace(/^0/, "")) : "" });
    if (!kind) {
      const t = relative ? (rowMax[q] > 0 ? p / rowMax[q] : 0) : p;
      td.style.background = heat(t);
      td.style.color = inkOn(heatRGB(t));
    }
    return td;
  };
  const rows = rowTok.map((t, r) => el("tr", {}, el("th", { scope: "row", title: `${T ? "key" : "query"} ${r + 1}: ${t}`, text: t }),
    ...colTok.map((_, c) => (T ? cell(c, r) : cell(r, c)))));
  // Column labels stand upright when they fit, and turn on their side when they do not.
  const vertical = colTok.length > 6 || colTok.some((t) => [...t].length > 3);
  const shape = a.n_context ? `${n} queries by ${m} context tokens` : `${n} by ${n}`;
  const table = el("table", { class: "heatmap" + (vertical ? " vertical" : "") + (opts.large ? " large" : "") + (T ? " transposed" : ""),
    tabindex: 0, "data-head": head, "data-mask": opts.mask || null,
    "aria-label": `${opts.title || `Head ${head + 1}${names[head] ? ` (${names[head]})` : ""}${opts.mask ? `, mask ${opts.mask}` : ""}: attention pattern`}, ${shape}${T ? ", keys as rows and queries as columns" : ""}. Arrow keys move between cells.`,
    "aria-describedby": `readout-${opts.id || head}${opts.mask ? "-" + opts.mask : ""}` },
  thead, el("tbody", {}, ...rows));
  if (px) table.style.setProperty("--cell", px + "px");
  readout.id = `readout-${opts.id || head}${opts.mask ? "-" + opts.mask : ""}`;
  wireHeatmap(table, readout, qTok, kTok, P, kinds);
  // Side by side, the head last focused is the one the overview and both masks open.
  if (!opts.large) table.addEventListener("focus", () => { overview.open = hi; });
  const { g, of } = kvGroups(a);
  const kv = g < a.n_heads && !opts.title ? el("span", { class: "kv", text: ` · K/V head ${of(head) + 1} (heads ${kvShare(a, of(head)).join("–")})` }) : null;
  const caption = el("figcaption", {}, opts.title || `Head ${head + 1}`,
    names[head] ? el("span", { class: "name", text: ` · ${names[head]}` }) : null,
    opts.mask ? el("span", { class: "name", text: ` · mask ${opts.mask}` }) : null, kv);
  const body = opts.large ? el("div", { class: "hm-scroll" }, table) : table;
  return el("figure", { class: "head" + (opts.focus ? " focus" : "") + (opts.large ? " large" : ""), "data-head": head,
    "data-mask": opts.mask || null }, caption, body, readout);
}

export function renderPatterns() {
  const a = state.result.answer;
  const story = state.result.story;
  const focus = new Set(story ? story.heads : []);
  $("legend-low").textContent = "0";
  // Relative colours are per query (its weights sum to 1): a column when transposed.
  $("legend-high").textContent = state.relative ? (overview.transposed ? "the query's largest (its column's)" : "the row's largest") : "1";
  renderFlatNote(a);
  if (overview.open >= a.heads.length) overview.open = 0;
  const layout = patternsLayout(a);
  const box = $("heads");
  box.style.removeProperty("grid-template-columns");
  let figures;
  if (layout === "all") {
    // Numbers in the cells when they fit: a story's head up to 8 tokens, small multiples up to 5.
    figures = a.heads.map((head, hi) => heatmapFigure(a, hi, a.patterns[hi], cellKinds(a, hi),
      { numbers: a.n_tokens <= (focus.has(head) ? 8 : 5), focus: focus.has(head) }));
    // Each cell at least 12 px: a wider column for longer sentences.
    const cols = keyTokens(a).length;
    if (cols > ALL_MAX_TOKENS) box.style.gridTemplateColumns = `repeat(auto-fill, minmax(${60 + cols * 14}px, 1fr))`;
  } else {
    const hi = overview.open;
    if (overview.compare && !a.n_context) figures = compareFigures(a, hi);
    else figures = [heatmapFigure(a, hi, a.patterns[hi], cellKinds(a, hi), { large: true, focus: focus.has(a.heads[hi]) })];
  }
  box.className = "heads" + (layout === "all" ? "" : layout === "single" ? " single large" : " large") + (figures.length === 2 ? " pair" : "");
  box.replaceChildren(...figures);
  if (typeof renderOverview === "function") renderOverview(a, layout);
}

// Tiny scores: e^S is near 1 for all of them, so each row's weights are nearly equal.
function renderFlatNote(a) {
  const note = $("flat-note");
  // A loop, not Math.max(...): h · n² arguments overflow V8's stack past about 125,000.
  let big = null;
  for (const head of a.scores || []) for (const row of head) for (const x of row)
    if (x !== null && (big === null || Math.abs(x) > big)) big = Math.abs(x);
  note.hidden = big === null || big >= 1;
  if (note.hidden) return;
  note.dataset.maxScore = String(big);
  note.textContent = `These scores are tiny (|S| ≤ ${fmt(big)}, scale ${fmt(a.scale)}): e^S stays between ${fmt(Math.exp(-big))} and ${fmt(Math.exp(big))} for all of them, so softmax gives nearly equal weights and the pattern looks flat. A larger scale (a lower temperature) spreads the same scores apart: move the scale slider right, or colour each row relative to its largest weight.`;
}

// Hover and the arrow keys read a cell; the arrows move on screen (rows and columns as drawn,
// transposed or not, n × m under cross-attention).
function wireHeatmap(table, readout, qTok, kTok, P, kinds) {
  let at = null;
  const say = (q, k) => {
    const kind = kinds[q][k];
    readout.textContent = `query ${qTok[q]} → key ${kTok[k]}: ${P[q][k]}${kind === "window" ? " (outside the window)" : kind ? " (masked)" : ""}`;
  };
  const activate = (q, k) => {
    if (at) at.classList.remove("active");
    at = table.querySelector(`td[data-q="${q}"][data-k="${k}"]`);
    at.classList.add("active");
    if (at.scrollIntoView && table.closest(".hm-scroll")) at.scrollIntoView({ block: "nearest", inline: "nearest" });
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
    const T = table.classList.contains("transposed");
    const rows = T ? kTok.length : qTok.length, cols = T ? qTok.length : kTok.length;
    let q = at ? +at.dataset.q : 0, k = at ? +at.dataset.k : 0;
    let r = T ? k : q, c = T ? q : k;
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1], Home: [0, -cols], End: [0, cols] };
    if (!(e.key in moves)) return;
    e.preventDefault();
    r = Math.max(0, Math.min(rows - 1, r + moves[e.key][0]));
    c = Math.max(0, Math.min(cols - 1, c + moves[e.key][1]));
    [q, k] = T ? [c, r] : [r, c];
    activate(q, k);
  });
}
