"use strict";
// ---- heatmaps ------------------------------------------------------------------------

const heatRGB = (p) => {
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
const fmt = (x) => {
  if (x === null) return "−∞";
  if (x === 0) return "0";
  // Four decimals at most, trailing zeros dropped: 0.1, not 0.1000 (the exact value is on hover).
  const s = Math.abs(x) < 1e-3 ? x.toExponential(1) : x.toFixed(4).replace(/\.?0+$/, "");
  return s.replace("-", "−");
};

function renderPatterns() {
  const a = state.result.answer;
  const tokens = a.tokens, n = a.n_tokens;
  const masked = maskOf(a.mask, n);
  const names = HEAD_NAMES[a.model] || [];
  const story = state.result.story;
  const focus = new Set(story ? story.heads : []);
  const relative = state.relative;
  $("legend-low").textContent = "0";
  $("legend-high").textContent = relative ? "the row's largest" : "1";
  renderFlatNote(a);
  const figures = a.heads.map((head, hi) => {
    const P = a.patterns[hi];
    // Relative: each row's largest weight is the full colour, so a flat row still shows its order.
    const rowMax = P.map((row) => Math.max(...row));
    const readout = el("div", { class: "readout", "aria-live": "polite" });
    const thead = el("thead", {}, el("tr", {}, el("th", { scope: "col" }, el("span", { text: "" })),
      ...tokens.map((t) => el("th", { scope: "col", title: t }, el("span", { text: t })))));
    // Numbers in the cells when they fit: a lone pattern up to 8 tokens, small multiples up to 5.
    const showNumbers = n <= (a.heads.length === 1 || focus.has(head) ? 8 : 5);
    const rows = P.map((row, q) => el("tr", {}, el("th", { scope: "row", title: tokens[q], text: tokens[q] }),
      ...row.map((p, k) => {
        const td = el("td", { "data-q": q, "data-k": k, "data-value": String(p),
          title: `${tokens[q]} → ${tokens[k]}: ${p}`, class: masked[q][k] ? "masked" : null,
          text: showNumbers ? (p === 0 ? "0" : p.toFixed(2).replace(/^0/, "")) : "" });
        if (!masked[q][k]) {
          const t = relative ? (rowMax[q] > 0 ? p / rowMax[q] : 0) : p;
          td.style.background = heat(t);
          td.style.color = inkOn(heatRGB(t));
        }
        return td;
      })));
    // Column labels stand upright when they fit, and turn on their side when they do not.
    const vertical = n > 6 || tokens.some((t) => [...t].length > 3);
    const table = el("table", { class: "heatmap" + (vertical ? " vertical" : ""), tabindex: 0, "data-head": head,
      "aria-label": `Head ${head + 1}${names[head] ? ` (${names[head]})` : ""}: attention pattern, ${n} by ${n}. Arrow keys move between cells.`,
      "aria-describedby": `readout-${head}` },
    thead, el("tbody", {}, ...rows));
    readout.id = `readout-${head}`;
    wireHeatmap(table, readout, tokens, P, masked);
    const caption = el("figcaption", {}, `Head ${head + 1}`,
      names[head] ? el("span", { class: "name", text: ` · ${names[head]}` }) : null);
    return el("figure", { class: "head" + (focus.has(head) ? " focus" : ""), "data-head": head }, caption, table, readout);
  });
  $("heads").className = "heads" + (figures.length === 1 ? " single" : "");
  $("heads").replaceChildren(...figures);
}

// Tiny scores: e^S is near 1 for all of them, so each row's weights are nearly equal.
function renderFlatNote(a) {
  const note = $("flat-note");
  const live = a.scores ? a.scores.flat(2).filter((x) => x !== null) : [];
  const big = live.length ? Math.max(...live.map(Math.abs)) : null;
  note.hidden = big === null || big >= 1;
  if (note.hidden) return;
  note.dataset.maxScore = String(big);
  note.textContent = `These scores are tiny (|S| ≤ ${fmt(big)}, scale ${fmt(a.scale)}): e^S stays between ${fmt(Math.exp(-big))} and ${fmt(Math.exp(big))} for all of them, so softmax gives nearly equal weights and the pattern looks flat. A larger scale (a lower temperature) spreads the same scores apart: move the scale slider right, or colour each row relative to its largest weight.`;
}
