// ---- the weights editor: W_q, W_k, W_v (biases, W_o, b_o) typed or pasted, sent inline ---

import { EDIT_MAX_D, cellJSON, dimLabels, hasVocab, vocabs } from "./tokens.js";
import { $, el, state, views } from "./state.js";
import { compute, modelWeights } from "./compute.js";
import { indices } from "./walkthrough.js";

// A weight set is edited as text, cell by cell, on small models only: the model's own
// (GET /v1/models/{name}?weights=true) with every number as its text. Once a cell differs from
// the model's, the request carries the whole set inline (docs/API.md: "weights" instead of
// "model"), each cell as typed, so that the service judges it, as it judges E's cells.
const WEIGHTS_MAX_NUMBERS = 4096;   // what can be typed, and kept in a link
const WEIGHT_TREES = ["heads", "kv_heads", "w_o", "b_o"];   // the editable parts of a weight set
const wedit = {
  model: null,     // the model whose weights these are
  base: null,      // its weight set, as the API gave it
  text: null,      // the same with every number of WEIGHT_TREES as text (cells as typed)
  at: "heads/0/w_q",   // the matrix on screen
  drawn: "",       // what the editor table shows (model, matrix, generation)
  gen: 0,          // bumped when cells change other than by typing (paste, reset, a link)
  failed: null,    // a model whose weights were refused: asked again on request
};

const totalWeights = (m) => {
  const kv = m.n_kv_heads || m.n_heads, dm = m.d_model, dh = m.d_head;
  return m.n_heads * dh * dm + 2 * kv * dh * dm + m.n_heads * dh * dm;
};
// Why a model's weights are not edited here, or null when they are.
function weightsRefusal(m) {
  if (!m) return "";
  const n = totalWeights(m);
  if (m.d_model > EDIT_MAX_D || m.d_head > EDIT_MAX_D || n > WEIGHTS_MAX_NUMBERS)
    return `${m.name}'s weights are not edited cell by cell: ${m.n_heads} head${m.n_heads > 1 ? "s" : ""} of W_q, W_k, W_v, each ${m.d_model} × ${m.d_head}, and W_o make about ${n.toLocaleString("en")} numbers, too many to type, read or keep in a link (this page edits models up to ${EDIT_MAX_D} wide). The page sends the model's name, and the service uses its own weights.`;
  if ((m.n_layers || 1) > 1)
    return `${m.name} is a stack of ${m.n_layers} layers, each with weights of its own: they are not edited here. The page sends the model's name, and the service uses its own weights.`;
  if (m.d_context && m.d_context !== m.d_model) return `${m.name} attends to a context of its own; its weights are not edited here.`;
  if (hasVocab(m) && !vocabs.get(m.name))
    return `Weights sent inline come without ${m.name}'s vocabulary, so E's rows must go with them, and this page could not fetch them: the weights are not edited here.`;
  return null;
}

// The matrices a weight set has, in the order the editor lists them. Biases a head lacks are
// listed too (0 until edited); W_o only where the model has one.
function weightMatrices() {
  const m = state.model, w = wedit.base, dm = m.d_model, dh = m.d_head;
  const dims = dimLabels(m, dm), cols = indices(dh), out = [];
  const add = (id, name, rows, rowLabels, colLabels, vector) => out.push({ id, name, rows, cols: colLabels.length, rowLabels, colLabels, vector });
  const kv = Array.isArray(w.kv_heads);
  w.heads.forEach((h, i) => {
    const of = w.heads.length > 1 || kv ? ` of head ${i + 1}` : "";
    for (const k of kv ? ["q"] : ["q", "k", "v"]) {
      add(`heads/${i}/w_${k}`, `W_${k}${of}`, dm, dims, cols, false);
      add(`heads/${i}/b_${k}`, `b_${k}${of}`, 1, [""], cols, true);
    }
  });
  if (kv) w.kv_heads.forEach((_, g) => {
    for (const k of ["k", "v"]) {
      add(`kv_heads/${g}/w_${k}`, `W_${k} of K/V head ${g + 1}`, dm, dims, cols, false);
      add(`kv_heads/${g}/b_${k}`, `b_${k} of K/V head ${g + 1}`, 1, [""], cols, true);
    }
  });
  if (Array.isArray(w.w_o)) {
    const rl = Array.from({ length: w.w_o.length }, (_, r) => `head ${Math.floor(r / dh) + 1}, ${r % dh + 1}`);
    add("w_o", "W_o", w.w_o.length, rl, dims, false);
  }
  add("b_o", "b_o", 1, [""], dims, true);
  return out;
}
const weightMatrix = (id) => weightMatrices().find((x) => x.id === id);

// The place of one cell in people's words (1-based, rows by dimension): for labels and errors.
export function weightCellName(id, i, j) {
  const x = wedit.base && state.model ? weightMatrix(id) : null;
  if (!x) return id;
  const label = (labels, k) => (labels[k] && labels[k] !== String(k + 1) ? ` (${labels[k]})` : "");
  if (x.vector) return i === undefined ? x.name : `${x.name}, entry ${i + 1}${label(x.colLabels, i)}`;
  if (i === undefined) return x.name;
  const row = `${x.name}, row ${i + 1}${label(x.rowLabels, i)}`;
  return j === undefined ? row : `${row}, column ${j + 1}${label(x.colLabels, j)}`;
}

function getPath(obj, id) {
  let o = obj;
  for (const k of id.split("/")) { if (o === undefined || o === null) return undefined; o = o[k]; }
  return o;
}
const textOf = (v) => (Array.isArray(v) ? v.map(textOf) : typeof v === "number" ? String(v) : v);
function loadWeights(name, weights) {
  wedit.model = name;
  wedit.base = weights;
  wedit.text = {};
  for (const [k, v] of Object.entries(weights))
    wedit.text[k] = k === "heads" || k === "kv_heads" ? v.map((h) => Object.fromEntries(Object.entries(h).map(([f, x]) => [f, textOf(x)])))
      : WEIGHT_TREES.includes(k) ? textOf(v) : v;
  if (!weightMatrix(wedit.at)) wedit.at = "heads/0/w_q";
  wedit.gen++;
}
// A cell's text; a bias the model lacks reads 0.
function cellText(tree, x, i, j) {
  const v = getPath(tree, x.id);
  if (v === undefined) return "0";
  return x.vector ? textOf(v[j]) : textOf(v[i][j]);
}
function setWeightCell(id, i, j, text) {
  const x = weightMatrix(id);
  const [top, ...rest] = id.split("/");
  let parent = wedit.text, key = top;
  if (rest.length) { parent = wedit.text[top][+rest[0]]; key = rest[1]; }
  if (parent[key] === undefined) parent[key] = x.vector ? Array(x.cols).fill("0") : Array.from({ length: x.rows }, () => Array(x.cols).fill("0"));
  if (x.vector) parent[key][j] = text; else parent[key][i][j] = text;
}

const weightsOn = () => !!(state.model && wedit.model === state.model.name && wedit.base && !weightsRefusal(state.model));
// The cells that differ from the model's: {"heads/0/w_q/1/2": "0.5", "b_o/3": "1"}.
function weightsDiff() {
  const diff = {};
  if (!weightsOn()) return diff;
  for (const x of weightMatrices())
    for (let i = 0; i < x.rows; i++)
      for (let j = 0; j < x.cols; j++) {
        const t = cellText(wedit.text, x, i, j);
        if (t !== cellText(wedit.base, x, i, j)) diff[x.vector ? `${x.id}/${j}` : `${x.id}/${i}/${j}`] = t;
      }
  return diff;
}
export const weightsEdited = () => weightsOn() && Object.keys(weightsDiff()).length > 0;

// The inline weight set as request text: every cell as typed (cellJSON), the rest as it came.
export function weightsJSON() {
  const cells = (v) => (Array.isArray(v) ? "[" + v.map(cells).join(",") + "]" : typeof v === "string" ? cellJSON(v) : JSON.stringify(v));
  const head = (h) => "{" + Object.entries(h).map(([f, v]) => `${JSON.stringify(f)}:${cells(v)}`).join(",") + "}";
  return "{" + Object.entries(wedit.text).map(([k, v]) => `${JSON.stringify(k)}:${
    k === "heads" || k === "kv_heads" ? "[" + v.map(head).join(",") + "]" : WEIGHT_TREES.includes(k) ? cells(v) : JSON.stringify(v)}`).join(",") + "}";
}
// The weights a result shows: the edited ones as numbers (the service took them, so each cell is
// a number), else the model's own.
export function sentWeights(name) {
  if (!weightsEdited()) return modelWeights(name);
  return JSON.parse(weightsJSON());
}

// ---- pasting a matrix as a textbook prints it ----------------------------------------------

// Rows one per line (or "[…], […]" on one line, ";" or LaTeX's \\ between them), numbers apart by
// spaces, tabs or commas; brackets, bars, LaTeX's & and \begin{bmatrix} are ignored; "−" is a minus.
// Returns {rows: text[][]} or {error}.
function parseMatrix(text, x) {
  let t = text.replace(/[\u2212\u2012\u2013\u2010\u2011\ufe63\uff0d]/g, "-")
    .replace(/\\(?:begin|end)\{[a-zA-Z*]*\}|\\left|\\right/g, " ")
    .replace(/\\\\|;/g, "\n")
    .replace(/[\])}]\s*,?\s*[[({]/g, "]\n[")
    .replace(/[[\](){}|&\u23a1-\u23a6\u239b-\u23a0]/g, " ");
  let grid = t.split(/\r?\n/).map((l) => l.split(/[\s,]+/).filter(Boolean)).filter((r) => r.length);
  if (!grid.length) return { error: `Nothing to use: paste ${x.vector ? `${x.cols} numbers` : "rows of numbers, one row per line"}.` };
  // A vector may come as a row or as a column.
  if (x.vector && grid.length === x.cols && grid.every((r) => r.length === 1)) grid = [grid.map((r) => r[0])];
  const NUM = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;
  for (let i = 0; i < grid.length; i++)
    for (let j = 0; j < grid[i].length; j++)
      if (!NUM.test(grid[i][j]))
        return { error: `${x.vector ? `Entry ${j + 1}` : `Row ${i + 1}, column ${j + 1}`}: “${grid[i][j]}” is not a number.`, at: [i, j] };
  const shape = `${x.name} is ${x.rows} × ${x.cols}${x.vector ? "" : ` (a row per dimension of ${x.id === "w_o" ? "the heads' outputs, h · d_head" : "d_model"}, a column per ${x.id === "w_o" || x.id === "b_o" ? "dimension of d_model" : "dimension of d_head"})`}`;
  if (!x.vector && x.rows !== x.cols && grid.length === x.cols && grid.every((r) => r.length === x.rows))
    return { error: `This is ${x.cols} × ${x.rows}, the transpose: ${shape}.` };
  if (grid.length !== x.rows)
    return { error: x.vector ? `${grid.length} rows: ${x.name} is one row of ${x.cols} numbers.` : `${grid.length} row${grid.length > 1 ? "s" : ""}, but ${shape}.` };
  const bad = grid.findIndex((r) => r.length !== x.cols);
  if (bad >= 0)
    return { error: `${x.vector ? "There are" : `Row ${bad + 1} has`} ${grid[bad].length} number${grid[bad].length > 1 ? "s" : ""}, but ${shape}${x.vector ? "" : `: ${x.cols} per row`}.`, at: [bad, Math.min(grid[bad].length, x.cols)] };
  // Each number as JSON writes it: no "+", no bare "." (the service judges its size).
  const json = (s) => s.replace(/^\+/, "").replace(/^(-?)\./, "$10.").replace(/\.(?=[eE]|$)/, "").replace(/^(-?)0+(?=\d)/, "$1");
  return { rows: grid.map((r) => r.map(json)) };
}

// ---- drawing ----------------------------------------------------------------------------

function renderWeights() {
  const m = state.model;
  const refusal = weightsRefusal(m);
  const on = !refusal && weightsOn();
  $("weights-on").hidden = !on;
  // Closed until wanted (the model's own weights are what most look at); open once edited.
  if (on && weightsEdited()) $("weights-on").open = true;
  $("weights-reset").hidden = !on || !weightsEdited();
  const hint = $("weights-hint");
  if (!m) return;
  $("weights-legend").textContent = `Weights W_q, W_k, W_v${m.n_heads > 1 ? ` of ${m.n_heads} heads` : ""}`;
  if (refusal) { hint.textContent = refusal; return; }
  if (!on) {
    if (wedit.failed === m.name) {
      hint.replaceChildren(`${m.name}'s weights could not be fetched, so they cannot be edited here. `,
        el("button", { type: "button", id: "weights-again", text: "Ask again" }));
    } else hint.textContent = "The model's weights are on their way.";
    return;
  }
  const xs = weightMatrices();
  const sel = $("weights-matrix");
  const key = m.name + " " + xs.map((x) => x.id).join();
  if (sel.dataset.key !== key) {
    sel.dataset.key = key;
    sel.replaceChildren(...xs.map((x) => el("option", { value: x.id,
      text: `${x.name} (${x.vector ? x.cols : `${x.rows} × ${x.cols}`})${getPath(wedit.base, x.id) === undefined ? ", none: 0" : ""}` })));
  }
  sel.value = wedit.at;
  drawWeightsTable();
  weightsHint();
}

function weightsHint() {
  const m = state.model, n = Object.keys(weightsDiff()).length;
  const noWo = !Array.isArray(wedit.base.w_o) ? " This model has no W_o: ΔE is the heads' outputs side by side (W_o is the identity)." : "";
  $("weights-hint").textContent = n
    ? `Edited: ${n} number${n > 1 ? "s differ" : " differs"} from ${m.name}'s. The page sends the whole weight set inline, each cell as typed, instead of the model's name${hasVocab(m) ? ", and E's rows with it (weights sent inline come without a vocabulary)" : ""}; the service checks every number.${noWo}`
    : `${m.name}'s own weights (the rows of W_q, W_k and W_v are the dimensions of E, their columns those of d_k). Edit a number, or paste a matrix, and the page sends the weights inline instead of the model's name.${noWo}`;
  $("weights-reset").hidden = !n;
}

function drawWeightsTable() {
  const x = weightMatrix(wedit.at);
  const key = `${wedit.model} ${x.id} ${wedit.gen}`;
  $("weights-paste-use").textContent = `Use for ${x.name}`;
  $("weights-paste-label").textContent = `Rows of numbers for ${x.name} (${x.vector ? `${x.cols} numbers` : `${x.rows} rows of ${x.cols}`})`;
  if ($("weights-editor").dataset.key === key) { markChanged(); return; }
  const a0 = document.activeElement, again = a0 && a0.closest && a0.closest("#weights-editor") ? [a0.dataset.i, a0.dataset.j] : null;
  $("weights-editor").dataset.key = key;
  const head = el("tr", {}, el("th", { scope: "col" }, el("span", { class: "skip", text: x.vector ? "" : "row" })),
    ...x.colLabels.map((c) => el("th", { scope: "col", text: c })));
  const body = Array.from({ length: x.rows }, (_, i) => el("tr", {}, el("th", { scope: "row", text: x.rowLabels[i] }),
    ...x.colLabels.map((_, j) => el("td", {}, el("input", {
      type: "text", inputmode: "decimal", value: cellText(wedit.text, x, i, j), "data-i": i, "data-j": j,
      "aria-label": x.vector ? weightCellName(x.id, j) : weightCellName(x.id, i, j), autocomplete: "off", spellcheck: "false" })))));
  $("weights-editor").replaceChildren(el("table", { class: "edit", "data-weights": x.id }, el("thead", {}, head), el("tbody", {}, ...body)));
  markChanged();
  if (again) $("weights-editor").querySelector(`input[data-i="${again[0]}"][data-j="${again[1]}"]`)?.focus();
}
// The cells that differ from the model's are marked (a border; the number itself says the rest).
function markChanged() {
  const x = weightMatrix(wedit.at);
  for (const c of $("weights-editor").querySelectorAll("input"))
    c.classList.toggle("changed", cellText(wedit.text, x, +c.dataset.i, +c.dataset.j) !== cellText(wedit.base, x, +c.dataset.i, +c.dataset.j));
}

// The cell an API error points at (/weights/heads/0/w_q/1/2, below /weights): its matrix is put
// on screen, and the cell returned (null for a whole matrix, or a path the editor lacks).
export function weightsErrorField(parts) {
  if (!weightsOn()) return null;
  const id = parts[0] === "heads" || parts[0] === "kv_heads" ? parts.slice(0, 3).join("/") : parts[0];
  const x = weightMatrix(id);
  if (!x) return null;
  const idx = parts.slice(id.split("/").length).map(Number);
  if (wedit.at !== id) { wedit.at = id; renderWeights(); }
  $("weights-on").open = true;
  const [i, j] = x.vector ? [0, idx[0]] : idx;
  if (i === undefined || j === undefined) {
    $("weights-editor").querySelectorAll(i === undefined ? "input" : `input[data-i="${i}"]`).forEach((c) => c.setAttribute("aria-invalid", "true"));
    return null;
  }
  const c = $("weights-editor").querySelector(`input[data-i="${i}"][data-j="${j}"]`);
  if (c) c.setAttribute("aria-describedby", "weights-error");
  return c;
}

// The weights a link names: the model's, with the link's cells ({"heads/0/w_q/1/2": "0.5"}).
export async function restoreWeights(name, diff) {
  const w = await modelWeights(name);
  if (!state.model || state.model.name !== name) return;
  $("weights-link-note").hidden = true;
  const cells = Object.keys(diff).length;
  // What the link asked for and could not be done is said, never dropped in silence.
  const lost = (why) => {
    $("weights-link-note").hidden = false;
    $("weights-link-note").textContent = `The link's ${cells} edited weight${cells > 1 ? "s" : ""} ${why}; ${name}'s own weights are computed instead.`;
  };
  if (!w) { lost(`could not be applied: the model's weights could not be fetched`); return; }
  if (weightsRefusal(state.model)) { lost("are not applied: this model's weights are not edited on this page"); return; }
  loadWeights(name, w);
  let applied = 0;
  for (const [path, v] of Object.entries(diff)) {
    const m = /^((?:heads|kv_heads)\/\d+\/[wb]_[qkv]|w_o|b_o)\/(\d+)(?:\/(\d+))?$/.exec(path);
    const x = m && weightMatrix(m[1]);
    if (!x || typeof v !== "string") continue;
    const [i, j] = x.vector ? [0, +m[2]] : [+m[2], +m[3]];
    if ((x.vector ? m[3] === undefined : m[3] !== undefined) && i < x.rows && j < x.cols) { setWeightCell(x.id, i, j, v); applied++; }
  }
  if (applied < cells) {
    $("weights-link-note").hidden = false;
    $("weights-link-note").textContent = `${cells - applied} of the link's ${cells} edited weights name no cell of ${name} (or are not text) and were left out.`;
  }
  renderWeights();
}
export const weightsLink = () => (weightsEdited() ? JSON.stringify(weightsDiff()) : null);

function resetWeights() {
  if (wedit.model && wedit.base) loadWeights(wedit.model, wedit.base);
}

views.push({
  wire() {
    // A new model, or an example (each example is its model's own weights), starts from the
    // model's weights. The weights come with the answer (the walk-through fetches them), so the
    // editor asks for them after it, once per model.
    const linkNoteOff = () => { $("weights-link-note").hidden = true; };
    $("model").addEventListener("change", () => { wedit.model = null; wedit.failed = null; linkNoteOff(); renderWeights(); });
    $("examples").addEventListener("click", (e) => { if (e.target.closest("button[data-example]")) { wedit.model = null; linkNoteOff(); } }, true);
    $("mask-previous").addEventListener("click", () => { wedit.model = null; }, true);
    $("weights-matrix").addEventListener("change", () => { wedit.at = $("weights-matrix").value; renderWeights(); });
    $("weights-editor").addEventListener("change", (e) => {
      const c = e.target;
      if (c.dataset.i === undefined) return;
      setWeightCell(wedit.at, +c.dataset.i, +c.dataset.j, c.value);
      markChanged();
      weightsHint();
      compute();
    });
    $("weights-reset").addEventListener("click", () => {
      $("weights-link-note").hidden = true;
      resetWeights();
      renderWeights();
      $("weights-matrix").focus();
      compute();
    });
    $("weights-hint").addEventListener("click", (e) => {
      if (e.target.id !== "weights-again") return;
      wedit.failed = null;
      this.render();
    });
    $("weights-paste-use").addEventListener("click", () => {
      const x = weightMatrix(wedit.at), box = $("weights-paste-text");
      const got = parseMatrix(box.value, x);
      $("weights-paste-error").textContent = got.error || "";
      if (got.error) { box.setAttribute("aria-invalid", "true"); box.focus(); return; }
      box.removeAttribute("aria-invalid");
      got.rows.forEach((r, i) => r.forEach((t, j) => setWeightCell(x.id, x.vector ? 0 : i, j, t)));
      wedit.gen++;
      renderWeights();
      compute();
    });
  },
  render() {
    const m = state.model;
    if (!m || weightsRefusal(m) || weightsOn() || wedit.failed === m.name) { renderWeights(); return; }
    const name = m.name;
    modelWeights(name).then((w) => {
      if (!state.model || state.model.name !== name || weightsOn()) return;
      if (w) loadWeights(name, w); else wedit.failed = name;
      renderWeights();
    }, () => { wedit.failed = name; renderWeights(); });
  },
});
