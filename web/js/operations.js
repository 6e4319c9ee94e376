// ---- operations written out: A · B = C ---------------------------------------------------

import { el } from "./state.js";
import { fmt } from "./heatmap.js";
// A product laid out with its signs, as a textbook prints it. Hovering a cell of C, or focusing
// C (one tab stop) and moving with the arrow keys, highlights the row of A and the column of B
// that make it, and writes its sum out: 0.1×1 + (−0.2)×0 + 0.3×1 + 0.1×0 = 0.4. The total
// written is the API's number; the terms are the API's (or the model's) numbers too.

export const OP_MAX_TERMS = 8;   // longer sums show their first terms, "…", the last, and their count

// A number as a term of a sum: negative ones in parentheses.
const termNum = (x) => (x < 0 ? `(${fmt(x)})` : fmt(x));

// The sum written out. terms: [[a, b], …]; bias: a number or null; total: the API's number.
function writtenSum(terms, bias, total) {
  const t = terms.map(([a, b]) => `${termNum(a)}×${termNum(b)}`);
  let body = t.length > OP_MAX_TERMS ? `${t.slice(0, 3).join(" + ")} + … + ${t[t.length - 1]} (${t.length} terms)` : t.join(" + ");
  if (bias !== null && bias !== undefined) body += ` + ${termNum(bias)}`;
  return `${body} = ${fmt(total)}`;
}

// parts: { A, B, C } (each the element matrix() returns) and spec:
//   name: the product's name (data-op), label(i, j): "Q[我, 1]", terms(i, j), bias(i, j),
//   total(i, j), with i, j the row and column of C as drawn; a row of C is the same row of A, a
//   column of C the same column of B (as drawn).
export function product(parts, spec) {
  const sign = (s) => el("span", { class: "op-sign", text: s });
  const sum = el("p", { class: "op-sum formula", "aria-live": "polite", "data-op": spec.name });
  const box = el("div", { class: "op", "data-op": spec.name }, parts.A, sign("·"), parts.B, sign("="), parts.C);
  const tA = parts.A.querySelector("table"), tB = parts.B.querySelector("table"), tC = parts.C.querySelector("table");
  tC.classList.add("op-result");
  tC.setAttribute("tabindex", "0");
  tC.setAttribute("aria-label", `${spec.what || spec.name}: focus, then move with the arrow keys to see each cell's sum written out`);
  const rows = tC.querySelectorAll("tbody tr").length;
  const cols = tC.querySelector("tbody tr").querySelectorAll("td").length;
  let at = [0, 0];
  const show = (i, j) => {
    at = [i, j];
    for (const e of box.querySelectorAll(".op-row, .op-col, .op-cell")) e.classList.remove("op-row", "op-col", "op-cell");
    for (const e of tA.querySelectorAll(`tbody tr[data-row="${i}"] td, tbody tr[data-row="${i}"] th`)) e.classList.add("op-row");
    for (const e of tB.querySelectorAll(`td[data-j="${j}"]`)) e.classList.add("op-col");
    const ths = tB.querySelectorAll("thead th");
    if (ths[j + 1]) ths[j + 1].classList.add("op-col");
    const cell = tC.querySelector(`td[data-i="${i}"][data-j="${j}"]`);
    if (cell) cell.classList.add("op-cell");
    const terms = spec.terms(i, j), bias = spec.bias ? spec.bias(i, j) : null, total = spec.total(i, j);
    let s = terms.reduce((acc, [a, b]) => acc + a * b, 0);
    if (bias !== null && bias !== undefined) s += bias;
    sum.textContent = `${spec.label(i, j)} = ${writtenSum(terms, bias, total)}`;
    Object.assign(sum.dataset, { i, j, total: String(total), sum: String(s), terms: terms.length });
  };
  tC.addEventListener("mouseover", (e) => {
    const td = e.target.closest("td[data-i]");
    if (td) show(+td.dataset.i, +td.dataset.j);
  });
  tC.addEventListener("focus", () => show(...at));
  tC.addEventListener("keydown", (e) => {
    const d = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] }[e.key];
    if (!d) return;
    e.preventDefault();
    e.stopPropagation();
    show(Math.max(0, Math.min(rows - 1, at[0] + d[0])), Math.max(0, Math.min(cols - 1, at[1] + d[1])));
  });
  show(0, 0);
  return el("div", { class: "op-wrap" }, box, sum);
}
