// ---- saving what is on screen: pictures (SVG, PNG), numbers (CSV), the whole view (HTML) ----

import { $, el, state, views } from "./state.js";
// The pictures are read from the page as drawn (a heatmap's cells, any SVG among the results),
// so the files follow however the patterns are drawn; the numbers are the API's answer. No
// library and no network: each file is a Blob handed to a download link. Also here: the
// controls folded away on a narrow screen, so that the results come first.

const XSVG = (() => { const d = document.createElement("div"); d.innerHTML = "<svg></svg>"; return d.firstChild.namespaceURI; })();
const xsvg = (tag, attrs, text) => {
  const e = document.createElementNS(XSVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
};
const exportSerialize = (node) => new XMLSerializer().serializeToString(node);
// A file name's part: letters, digits, dots and dashes.
const fileSafe = (s) => String(s).replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^-+|-+$/g, "") || "x";

function download(name, blob) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  a.hidden = true;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
  $("export-status").textContent = `Saved ${name} (${blob.size.toLocaleString("en")} bytes).`;
}

// The model's name; an answer computed with weights sent inline names none (the model they
// came from, then).
const modelName = () => {
  const r = state.result;
  if (!r) return "";
  return r.answer.model || (r.model ? `${r.model.name} (weights edited)` : "weights sent inline");
};

// ---- what can be saved: each head's pattern and its head view, as the page shows them -------

const headOf = (e, i) => {
  const h = e.closest("[data-head]");
  return h ? +h.dataset.head : i;
};
const captionOf = (e) => {
  const fig = e.closest("figure");
  const cap = fig && fig.querySelector("figcaption");
  return cap ? cap.textContent.replace(/\s+/g, " ").trim() : "";
};
const area = (e) => { const r = e.getBoundingClientRect(); return r.width * r.height; };

// key → element, in the page's order: "pattern:H" for head H's heatmap (the largest drawn, when
// a head is drawn twice, as a thumbnail and opened), "lines:H" for its head view; other SVGs
// among the results by their place.
function exportTargets() {
  const out = new Map();
  const maps = [...document.querySelectorAll("#results table.heatmap, #results svg.heatmap")];
  maps.forEach((t, i) => {
    const m = t.closest("[data-mask]"), own = t.closest("[data-export]");
    const key = own ? own.dataset.export : "pattern:" + headOf(t, i) + (m ? ":" + m.dataset.mask : "");
    if (!out.has(key) || area(t) > area(out.get(key).el)) out.set(key, { el: t, kind: "pattern", head: headOf(t, i), caption: captionOf(t) });
  });
  const svgs = [...document.querySelectorAll("#results svg")].filter((s) => !s.classList.contains("heatmap") &&
    !s.closest("table.heatmap") && !s.parentElement.closest("svg") && !s.closest("#export"));
  svgs.forEach((s, i) => {
    const inHeadView = !!s.closest("#headview");
    const key = inHeadView ? "lines:" + headOf(s, i) : "svg:" + i;
    if (!out.has(key)) out.set(key, { el: s, kind: inHeadView ? "lines" : "svg", head: headOf(s, i), caption: captionOf(s) });
  });
  return out;
}

function targetLabel(key, t) {
  const what = t.kind === "pattern" ? "pattern (heatmap)" : t.kind === "lines" ? "head view (lines)" : "picture";
  return `${t.caption || (t.kind === "svg" ? "Picture" : `Head ${t.head + 1}`)}: ${what}`;
}

function refreshTargets() {
  const sel = $("export-what");
  const targets = exportTargets();
  const keys = [...targets.keys()];
  const had = [...sel.options].map((o) => o.value + "\u0000" + o.textContent);
  const now = keys.map((k) => k + "\u0000" + targetLabel(k, targets.get(k)));
  if (had.join("\u0001") !== now.join("\u0001")) {
    const was = sel.value;
    sel.replaceChildren(...keys.map((k) => el("option", { value: k, text: targetLabel(k, targets.get(k)) })));
    if (keys.includes(was)) sel.value = was;
  }
  const none = !keys.length;
  for (const id of ["export-what", "export-svg", "export-png"]) $(id).disabled = none;
  const key = sel.value;
  // The numbers of a head's pattern: any target naming a head of the answer.
  const a = state.result && state.result.answer;
  const t = targets.get(key);
  $("export-csv").disabled = !a || !t || t.kind === "svg" || !a.heads.includes(t.head);
  $("export-csv-all").disabled = !a;
  $("export-html").disabled = !a;
}

// ---- a heatmap as SVG: a rect per cell with its colour and number, its labels ---------------

function parseColours(s) {
  return [...String(s).matchAll(/rgba?\([^)]+\)/g)].map((m) => m[0]);
}
const opaque = (c) => { const m = /rgba\([^)]*,\s*([0-9.]+)\)/.exec(c); return !m || +m[1] > 0; };

// The cells as drawn, row by row as on screen (queries as rows, or keys when transposed): each
// with its value, fill, ink and whether hatched (masked, or outside a window), and the rows'
// and columns' labels.
function readHeatmap(table) {
  const label = (th) => (th.querySelector("span") ? th.querySelector("span").textContent : th.textContent).trim();
  const trs = [...table.querySelectorAll("tbody tr")].filter((tr) => tr.querySelector("[data-q][data-k]"));
  const grid = trs.map((tr) => [...tr.querySelectorAll("[data-q][data-k]")].map((c) => {
    const s = getComputedStyle(c);
    const grads = s.backgroundImage && s.backgroundImage !== "none" ? parseColours(s.backgroundImage) : [];
    return { q: +c.dataset.q, k: +c.dataset.k, value: Number(c.dataset.value), title: c.getAttribute("title") || "",
      hatched: c.classList.contains("masked") || grads.length > 0, kind: c.className.replace(/\bactive\b/, "").trim(),
      fill: opaque(s.backgroundColor) ? s.backgroundColor : "rgb(255, 255, 255)", hatch: grads, ink: s.color };
  }));
  const nc = Math.max(0, ...grid.map((r) => r.length));
  let cols = [...table.querySelectorAll("thead tr:last-child th")];
  cols = cols.length === nc + 1 ? cols.slice(1) : cols.length === nc ? cols : [];
  const rowLabels = trs.map((tr, i) => (tr.querySelector("th") ? label(tr.querySelector("th")) : String(i + 1)));
  const colLabels = Array.from({ length: nc }, (_, i) => (cols[i] ? label(cols[i]) : String(i + 1)));
  return { rowLabels, colLabels, grid, font: getComputedStyle(table).fontFamily };
}

// About how wide a text is drawn: CJK characters are square, the rest about 0.6 of the size.
const textWidth = (t, size) => [...t].reduce((w, c) => w + (/[\u1100-\u11ff\u2e80-\ua4cf\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]/.test(c) ? 1 : 0.62) * size, 0);
const patternCellText = (p) => (p === 0 ? "0" : p.toFixed(2).replace(/^0/, "").replace(/^-0/, "−"));
const clip = (t, n) => ([...t].length > n ? [...t].slice(0, n - 1).join("") + "…" : t);

function heatmapSvg(table, title) {
  const { rowLabels, colLabels, grid, font } = readHeatmap(table);
  const nr = grid.length, nc = colLabels.length;
  const C = 36, F = 12;
  const width = (ts) => Math.max(0, ...ts.map((t) => textWidth(clip(t, 14), F))) + 10;
  const upright = nc <= 6 && colLabels.every((t) => [...t].length <= 3);
  const L = Math.ceil(Math.min(120, width(rowLabels))), T = Math.ceil(42 + (upright ? 20 : Math.min(120, width(colLabels))));
  const W = Math.ceil(Math.max(L + nc * C + 8, 12 + textWidth(title, 14))), H = Math.ceil(T + nr * C + 8);
  const svg = xsvg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, "font-family": font, "font-size": F });
  // What the rows are: the corner's words when the table has them.
  const corner = table.querySelector("thead th");
  const axes = (corner && corner.textContent.trim()) ||
    (table.classList.contains("transposed") ? "rows: keys, columns: queries" : "rows: queries, columns: keys");
  svg.append(xsvg("title", {}, title), xsvg("rect", { width: W, height: H, fill: "#ffffff" }),
    xsvg("text", { x: 4, y: 18, "font-weight": 700, "font-size": 14, fill: "#1d2330" }, title),
    xsvg("text", { class: "axes", x: 4, y: 32, "font-size": 11, fill: "#5b6474" }, axes));
  const hatches = new Map();
  const defs = xsvg("defs");
  svg.append(defs);
  const hatchOf = (colours) => {
    const key = colours.join("|");
    if (!hatches.has(key)) {
      const id = `hatch-${hatches.size}`;
      const pat = xsvg("pattern", { id, width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" });
      pat.append(xsvg("rect", { width: 6, height: 6, fill: colours[colours.length - 1] || "#ffffff" }),
        xsvg("rect", { width: 3, height: 6, fill: colours[0] || "#eceff3" }));
      defs.append(pat);
      hatches.set(key, id);
    }
    return `url(#${hatches.get(key)})`;
  };
  colLabels.forEach((t, c) => {
    const x = L + c * C + C / 2;
    svg.append(upright
      ? xsvg("text", { class: "col", "data-col": c, x, y: T - 6, "text-anchor": "middle", fill: "#5b6474" }, clip(t, 14))
      : xsvg("text", { class: "col", "data-col": c, x, y: T - 6, transform: `rotate(-90 ${x} ${T - 6})`, "dominant-baseline": "middle", fill: "#5b6474" }, clip(t, 14)));
  });
  rowLabels.forEach((t, r) => svg.append(xsvg("text", { class: "row", "data-row": r, x: L - 6, y: T + r * C + C / 2,
    "text-anchor": "end", "dominant-baseline": "middle", fill: "#5b6474" }, clip(t, 14))));
  grid.forEach((row, r) => row.forEach((c, j) => {
    const x = L + j * C, y = T + r * C;
    const g = xsvg("g", { class: "cell" });
    const rect = xsvg("rect", { x: x + 0.5, y: y + 0.5, width: C - 1, height: C - 1, rx: 2,
      fill: c.hatched ? hatchOf(c.hatch) : c.fill, "data-q": c.q, "data-k": c.k, "data-value": String(c.value),
      "data-masked": c.hatched ? "true" : null, class: c.kind || null });
    rect.append(xsvg("title", {}, c.title || `${rowLabels[r]} → ${colLabels[j]}: ${c.value}`));
    g.append(rect, xsvg("text", { x: x + C / 2, y: y + C / 2, "text-anchor": "middle", "dominant-baseline": "central",
      fill: c.ink, "font-size": 11, "data-q": c.q, "data-k": c.k }, patternCellText(c.value)));
    svg.append(g);
  }));
  return { svg, width: W, height: H };
}

// ---- an SVG already on the page: a copy that needs no style sheet --------------------------

const SVG_PROPS = ["fill", "fill-opacity", "stroke", "stroke-width", "stroke-opacity", "opacity", "visibility",
  "font-family", "font-size", "font-weight", "font-style", "text-decoration", "text-anchor", "dominant-baseline"];

function copySvg(svg, title) {
  const copy = svg.cloneNode(true);
  const from = [svg, ...svg.querySelectorAll("*")], to = [copy, ...copy.querySelectorAll("*")];
  from.forEach((e, i) => {
    // Each property as the page computed it, where it differs from what the element inherits.
    const s = getComputedStyle(e), up = e === svg ? null : getComputedStyle(e.parentElement);
    const style = SVG_PROPS.map((p) => [p, s.getPropertyValue(p)])
      .filter(([p, v]) => v && (p === "opacity" ? v !== "1" : !up || up.getPropertyValue(p) !== v))
      .map(([p, v]) => `${p}: ${v}`).join("; ");
    if (style) to[i].setAttribute("style", style); else to[i].removeAttribute("style");
    to[i].removeAttribute("tabindex");
  });
  // Every line as drawn with the page at rest: a token's focus hides the others only on screen.
  for (const line of copy.querySelectorAll("[style*='visibility: hidden']"))
    line.setAttribute("style", line.getAttribute("style").replace("visibility: hidden", "visibility: visible"));
  const vb = svg.viewBox && svg.viewBox.baseVal && svg.viewBox.baseVal.width
    ? svg.viewBox.baseVal : { x: 0, y: 0, width: svg.getBoundingClientRect().width, height: svg.getBoundingClientRect().height };
  // At least 360 wide: the text stays readable.
  const k = Math.max(1, 360 / vb.width);
  const w = Math.round(vb.width * k), h = Math.round(vb.height * k), top = 26;
  copy.setAttribute("x", 0);
  copy.setAttribute("y", top);
  copy.setAttribute("width", w);
  copy.setAttribute("height", h);
  if (!copy.getAttribute("viewBox")) copy.setAttribute("viewBox", `${vb.x} ${vb.y} ${vb.width} ${vb.height}`);
  const W = Math.ceil(Math.max(w, 12 + textWidth(title, 14))), H = h + top + 4;
  const out = xsvg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, "font-family": getComputedStyle(svg).fontFamily });
  out.append(xsvg("title", {}, title), xsvg("rect", { width: W, height: H, fill: "#ffffff" }),
    xsvg("text", { x: 4, y: 18, "font-weight": 700, "font-size": 14, fill: "#1d2330" }, title), copy);
  return { svg: out, width: W, height: H };
}

function pictureOf(t) {
  const a = state.result && state.result.answer;
  const what = a ? ` · ${modelName()}, mask ${a.mask}` : "";
  const title = `${t.caption || `Head ${t.head + 1}`}${t.kind === "lines" ? " · head view" : ""}${what}`;
  return t.el.tagName.toLowerCase() === "table" ? heatmapSvg(t.el, title) : copySvg(t.el, title);
}

function fileBase(t) {
  const a = state.result && state.result.answer;
  const model = a ? fileSafe(modelName()) : "attention";
  const m = t && t.el.closest("[data-mask]");
  return t ? `attention-${model}-${t.kind === "svg" ? "picture" : "head-" + (t.head + 1)}${m ? "-" + fileSafe(m.dataset.mask) : ""}-${t.kind}` : `attention-${model}`;
}

function chosenTarget() {
  const t = exportTargets().get($("export-what").value);
  if (!t) $("export-status").textContent = "That picture is no longer on the page; choose another.";
  return t;
}

function saveSvg() {
  const t = chosenTarget();
  if (!t) return;
  const { svg } = pictureOf(t);
  download(fileBase(t) + ".svg", new Blob([`<?xml version="1.0" encoding="UTF-8"?>\n${exportSerialize(svg)}\n`], { type: "image/svg+xml" }));
}

// The SVG drawn onto a canvas at twice its size (a data: image, which the page's policy allows).
async function savePng() {
  const t = chosenTarget();
  if (!t) return;
  const { svg, width, height } = pictureOf(t);
  const scale = Math.max(1, Math.min(2, 8000 / Math.max(width, height)));
  const img = new Image();
  img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(exportSerialize(svg));
  try { await img.decode(); } catch (e) { $("export-status").textContent = "The picture could not be drawn: " + e.message; return; }
  const canvas = document.createElement("canvas");
  canvas.width = Math.round(width * scale);
  canvas.height = Math.round(height * scale);
  const ctx = canvas.getContext("2d");
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.drawImage(img, 0, 0, canvas.width, canvas.height);
  const blob = await new Promise((resolve) => canvas.toBlob(resolve, "image/png"));
  if (!blob) { $("export-status").textContent = "The picture could not be made into a PNG."; return; }
  download(fileBase(t) + ".png", blob);
}

// ---- the numbers as CSV (RFC 4180; UTF-8 with a byte order mark, which spreadsheets want) ---

const csvCell = (x) => {
  const s = String(x);
  return /[",\r\n]/.test(s) || s !== s.trim() ? `"${s.replace(/"/g, '""')}"` : s;
};
// A token is text typed by whoever wrote the link: one that starts as a formula would (=, +,
// -, @, tab, CR) is written with a leading ' so that a spreadsheet shows it and runs nothing
// (OWASP's advice on CSV injection). Numbers are written as they are.
const textCell = (x) => (/^[=+\-@\t\r]/.test(String(x)) ? "'" + x : String(x));
const csv = (rows) => "\uFEFF" + rows.map((r) => r.map(csvCell).join(",")).join("\r\n") + "\r\n";

// The keys' tokens: the context's under cross-attention, else the sentence's.
const keysOf = (a) => (a.n_context ? (a.context_tokens || Array.from({ length: a.n_context }, (_, i) => `c${i + 1}`)) : a.tokens);

// One head: a row per query, a column per key, headed with the tokens.
function saveCsv() {
  const t = chosenTarget();
  const a = state.result && state.result.answer;
  if (!t || !a) return;
  const hi = a.heads.indexOf(t.head);
  if (hi < 0) return;
  const keys = keysOf(a);
  // A pattern drawn under the other mask (both side by side) is its own answer: its cells' values.
  const m = t.el.closest("[data-mask]");
  let P = a.patterns[hi].map((row) => row.map(String));
  if (m && m.dataset.mask !== a.mask) {
    P = a.tokens.map(() => keys.map(() => ""));
    for (const c of t.el.querySelectorAll("[data-q][data-k]")) P[+c.dataset.q][+c.dataset.k] = c.dataset.value;
  }
  const rows = [["query \\ key", ...keys.map(textCell)], ...P.map((row, q) => [textCell(a.tokens[q]), ...row])];
  download(`attention-${fileSafe(modelName())}-head-${t.head + 1}${m ? "-" + fileSafe(m.dataset.mask) : ""}-pattern.csv`, new Blob([csv(rows)], { type: "text/csv;charset=utf-8" }));
}

// Every head: one line per weight, heads and tokens counted from 1.
function saveCsvAll() {
  const a = state.result && state.result.answer;
  if (!a) return;
  const keys = keysOf(a);
  const rows = [["head", "query", "query_token", "key", "key_token", "weight"]];
  a.heads.forEach((head, hi) => a.patterns[hi].forEach((row, q) => row.forEach((p, k) =>
    rows.push([head + 1, q + 1, textCell(a.tokens[q]), k + 1, textCell(keys[k]), String(p)]))));
  download(`attention-${fileSafe(modelName())}-patterns.csv`, new Blob([csv(rows)], { type: "text/csv;charset=utf-8" }));
}

// ---- the whole view as one HTML file: the results with the page's styles, no script -------

function pageCss() {
  const parts = [];
  for (const sheet of document.styleSheets) {
    try { parts.push([...sheet.cssRules].map((r) => r.cssText).join("\n")); }
    catch (_) { if (sheet.ownerNode) parts.push(sheet.ownerNode.textContent || ""); }
  }
  return parts.join("\n");
}

function viewHtml() {
  const a = state.result.answer;
  const when = new Date();
  const doc = document.implementation.createHTMLDocument(`Attention: ${modelName()}, ${a.tokens.join(" ")}`);
  const head = doc.head;
  const meta = (attrs) => { const m = doc.createElement("meta"); for (const [k, v] of Object.entries(attrs)) m.setAttribute(k, v); return m; };
  head.prepend(meta({ charset: "utf-8" }));
  head.append(meta({ name: "viewport", content: "width=device-width, initial-scale=1" }),
    // Nothing runs and nothing loads: the file is its own.
    meta({ "http-equiv": "Content-Security-Policy", content: "default-src 'none'; style-src 'unsafe-inline'; img-src data:" }),
    meta({ name: "generator", content: "the attention service's teaching page" }));
  const style = doc.createElement("style");
  style.textContent = pageCss() + "\nmain.saved { display: block; }\nmain.saved .results { gap: 16px; }\n";
  head.append(style);
  const results = $("results").cloneNode(true);
  // Form values live in properties, which a copy does not take: written out as attributes.
  const live = [...$("results").querySelectorAll("input, select, textarea")];
  [...results.querySelectorAll("input, select, textarea")].forEach((c, i) => {
    const o = live[i];
    if (!o) return;
    if (o.type === "checkbox" || o.type === "radio") c.toggleAttribute("checked", o.checked);
    else if (o.tagName === "SELECT") [...c.options].forEach((opt, j) => opt.toggleAttribute("selected", o.options[j] && o.options[j].selected));
    else if (o.tagName === "TEXTAREA") c.textContent = o.value;
    else c.setAttribute("value", o.value);
  });
  // Canvases keep their pixels as images.
  const canvases = [...$("results").querySelectorAll("canvas")];
  [...results.querySelectorAll("canvas")].forEach((c, i) => {
    const img = doc.createElement("img");
    try { img.src = canvases[i].toDataURL("image/png"); } catch (_) { return; }
    for (const at of ["class", "width", "height", "aria-label", "role"]) if (c.hasAttribute(at)) img.setAttribute(at, c.getAttribute(at));
    c.replaceWith(img);
  });
  // Without a script, what would only answer a key or a click goes: the hidden parts, this
  // panel, the step buttons; and no element takes focus from the keyboard.
  for (const e of results.querySelectorAll("[hidden], script, #export, .steps-nav, [aria-busy]")) e.remove();
  for (const e of results.querySelectorAll("[tabindex]")) e.removeAttribute("tabindex");
  results.removeAttribute("id");
  const header = doc.createElement("header");
  const h1 = doc.createElement("h1");
  h1.textContent = document.querySelector("h1") ? document.querySelector("h1").textContent : "Attention";
  const lede = doc.createElement("p");
  lede.className = "lede";
  lede.textContent = `Saved ${when.toISOString().slice(0, 16).replace("T", " ")} UTC from the attention service's page: model ${modelName()}, ` +
    `${a.n_tokens} tokens (${a.tokens.join(" ")}), mask ${a.mask}, scale ${a.scale}, ${a.heads.length} head${a.heads.length > 1 ? "s" : ""}. ` +
    "Every number is the service's answer; hover a cell for its exact value. This file runs no script and loads nothing.";
  header.append(h1, lede);
  const main = doc.createElement("main");
  main.className = "saved";
  main.append(results);
  doc.body.append(header, main);
  return "<!doctype html>\n" + doc.documentElement.outerHTML + "\n";
}

function saveHtml() {
  if (!state.result) return;
  download(fileBase(null) + "-view.html", new Blob([viewHtml()], { type: "text/html;charset=utf-8" }));
}

// ---- a narrow screen: the controls fold away above the results ------------------------------

function foldControls(folded) {
  $("controls").classList.toggle("folded", folded);
  $("controls-toggle").setAttribute("aria-expanded", String(!folded));
}

function renderControlsNow() {
  const a = state.result && state.result.answer;
  $("controls-now").textContent = a ? `${modelName()} · ${a.tokens.join(" ")} · mask ${a.mask}` : "";
}

views.push({
  wire() {
    $("export-svg").addEventListener("click", saveSvg);
    $("export-png").addEventListener("click", savePng);
    $("export-csv").addEventListener("click", saveCsv);
    $("export-csv-all").addEventListener("click", saveCsvAll);
    $("export-html").addEventListener("click", saveHtml);
    $("export-what").addEventListener("change", refreshTargets);
    // The picture last focused or clicked is the one offered.
    const pick = (e) => {
      const on = e.target.closest && e.target.closest("table.heatmap, svg");
      if (!on || on.closest("#export")) return;
      refreshTargets();
      for (const [key, t] of exportTargets()) if (t.el === on || t.el.contains(on)) { $("export-what").value = key; refreshTargets(); return; }
    };
    $("results").addEventListener("focusin", pick);
    $("results").addEventListener("click", pick);
    refreshTargets();
    // Whatever redraws the results (an answer, a step, a page of heads) may change what can be saved.
    let queued = false;
    new MutationObserver((records) => {
      if (queued || records.every((r) => r.target.closest && r.target.closest("#export"))) return;
      queued = true;
      requestAnimationFrame(() => { queued = false; refreshTargets(); });
    }).observe($("results"), { childList: true, subtree: true });

    // Folded until opened; an error in a field, or a key asked for, opens them.
    foldControls(true);
    $("controls-toggle").addEventListener("click", () => foldControls(!$("controls").classList.contains("folded")));
    const needsEye = () => [...$("controls").querySelectorAll(".error")].some((e) => e.textContent.trim()) || !$("key-fields").hidden;
    new MutationObserver(() => { if ($("controls").classList.contains("folded") && needsEye()) foldControls(false); })
      .observe($("controls"), { childList: true, subtree: true, characterData: true, attributes: true, attributeFilter: ["hidden"] });
  },
  render() {
    refreshTargets();
    renderControlsNow();
  },
});
