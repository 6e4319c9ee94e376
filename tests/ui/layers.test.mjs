// Stacks of layers: the model view (a thumbnail per layer and head), the layer chosen for the
// head view, the walk-through and the gathered view, and the rollout, each number against the
// API's own answer to the body the page sent. A three-layer model of three heads is written here
// into a directory of its own, for a second server; demo-layers is the built-in one. A one-layer
// model shows none of it.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { base, open, settle, startServer, contrastFailures, drawnMatrix, drawnBars, shot } from "./harness.mjs";

// safetensors (models/README.md, "Stacks"): 8 bytes of header length, the JSON header, the F32 data.
function safetensors(path, meta, tensors) {
  let off = 0;
  const header = { __metadata__: meta }, bufs = [];
  for (const [name, [shape, data]] of Object.entries(tensors)) {
    const b = Buffer.from(new Float32Array(data).buffer);
    header[name] = { dtype: "F32", shape, data_offsets: [off, off + b.length] };
    off += b.length;
    bufs.push(b);
  }
  let h = JSON.stringify(header);
  while ((8 + Buffer.byteLength(h)) % 8) h += " ";
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(h)));
  writeFileSync(path, Buffer.concat([len, Buffer.from(h), ...bufs]));
}
function weights(rows, cols, seed, scale) {
  let s = seed >>> 0;
  return Array.from({ length: rows * cols }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return ((s / 2 ** 32) * 2 - 1) * scale;
  });
}

const L = 3, H = 3, DM = 8, DH = 4;
let other;   // the second server's origin
before(async () => {
  const dir = mkdtempSync(join(tmpdir(), "attn-layers-"));
  const tensors = {};
  for (let l = 0; l < L; l++) {
    tensors[`layers.${l}.w_qkv`] = [[DM, 3 * H * DH], weights(DM, 3 * H * DH, 11 + l, 2.5)];
    tensors[`layers.${l}.w_o`] = [[H * DH, DM], weights(H * DH, DM, 21 + l, 0.8)];
  }
  safetensors(join(dir, "stack-3.safetensors"),
    { n_heads: String(H), n_layers: String(L), mask: "causal", description: "three layers of three heads" }, tensors);
  other = await startServer("layers", ["--models-dir", dir]);
});

const link = (p) => "#" + new URLSearchParams(p);
const SENTENCE = "the cat sat on the warm mat";
async function post(origin, body) {
  const res = await fetch(`${origin}/v1/attention`, { method: "POST", headers: { "Content-Type": "application/json" }, body });
  assert.equal(res.status, 200, body.slice(0, 200));
  return res.json();
}
async function get(origin, path) {
  const res = await fetch(origin + path);
  assert.equal(res.status, 200, path);
  return res.json();
}
// The main request: the last one that asked for patterns and is no single head's.
function mainPost(log) {
  const bodies = log.posts.filter((b) => { const j = JSON.parse(b); return j.return.includes("patterns") && !j.select_heads; });
  assert.ok(bodies.length, "no request for the patterns");
  return bodies[bodies.length - 1];
}
const layerOf = (answer, l) => answer.layers.find((x) => x.layer === l);

// The heatmap's colour of a weight (js/heatmap.js), the grey of a masked cell (js/overview.js).
const heatRGB = (p) => {
  const t = Math.max(0, Math.min(1, p));
  const mix = (a, b) => Math.round(a + (b - a) * t);
  return [mix(255, 36), mix(255, 86), mix(255, 201)];
};
const MASKED = [214, 219, 227];

const thumbPixels = (page) => page.$$eval("#modelview button.thumb", (bs) => bs.map((b) => {
  const c = b.querySelector("canvas");
  return { layer: +b.dataset.layer, index: +b.dataset.index, w: c.width, h: c.height,
    px: [...c.getContext("2d").getImageData(0, 0, c.width, c.height).data] };
}));
const headViewLines = (page) => page.$$eval("#headview-heads figure", (fs) => fs.map((f) => ({
  head: +f.dataset.head, caption: f.querySelector("figcaption").textContent,
  lines: [...f.querySelectorAll("line.attn")].map((l) => [+l.dataset.q, +l.dataset.k, Number(l.getAttribute("stroke-opacity"))]),
})));
const heatmaps = (page, sel = "#heads table.heatmap") => page.$$eval(sel, (ts) => ts.map((t) => ({
  head: t.dataset.head, cells: [...t.querySelectorAll("tbody tr")].map((tr) => [...tr.querySelectorAll("td")].map((td) =>
    ({ v: Number(td.dataset.value), masked: td.classList.contains("masked") }))),
})));
const picks = (page) => page.$$eval("select.layer-pick", (ss) => ss.map((s) => ({ id: s.id, value: s.value,
  hidden: !!s.closest("[hidden]"), options: [...s.options].map((o) => o.value) })));
const onLayer = (l) => [...document.querySelectorAll("select.layer-pick")].every((s) => s.value === String(l)) &&
  !document.body.hasAttribute("aria-busy");

async function openStack(hash = link({ model: "stack-3", sentence: SENTENCE }), opts = {}) {
  const o = await open({ origin: other, hash, ...opts });
  await settle(o.page, () => document.querySelectorAll("#modelview button.thumb").length > 0);
  const body = mainPost(o.log);
  o.body = JSON.parse(body);
  o.answer = await post(other, body);
  return o;
}

test("a stack: the request asks for every layer and the rollout; the model view draws each layer's every head as the API's pattern", async () => {
  const { page, log, close, body, answer } = await openStack();
  assert.ok(body.return.includes("rollout"), "the rollout is asked for");
  assert.equal(body.layers, undefined, "no layers field: every layer");
  assert.equal(answer.n_layers, L);
  assert.equal(await page.isVisible("#modelview"), true);
  assert.match(await page.textContent("#status"), /3 layers of 3 heads/);
  assert.equal(await page.textContent('#model option[value="stack-3"]'), "stack-3: 3 layers of 3 heads of 4");
  // A row per layer, a column per head, labelled from 0 and from 1.
  assert.deepEqual(await page.$$eval("#modelview tbody th", (t) => t.map((x) => x.textContent)), ["layer 0", "layer 1", "layer 2"]);
  assert.deepEqual(await page.$$eval("#modelview thead th", (t) => t.map((x) => x.textContent)), ["layer", "head 1", "head 2", "head 3"]);
  const thumbs = await thumbPixels(page);
  assert.equal(thumbs.length, L * H);
  const n = answer.n_tokens;
  for (const t of thumbs) {
    const P = layerOf(answer, t.layer).patterns[t.index];
    assert.equal(t.w, n);
    assert.equal(t.h, n);
    for (let q = 0; q < n; q++) for (let k = 0; k < n; k++) {
      const want = k > q ? MASKED : heatRGB(P[q][k]);
      assert.deepEqual(t.px.slice(4 * (q * n + k), 4 * (q * n + k) + 3), want, `layer ${t.layer}, head ${t.index + 1}, cell ${q}, ${k}`);
    }
  }
  // The layer lists: shown, every layer, layer 0 first; the heatmaps are layer 0's.
  for (const p of await picks(page)) {
    assert.equal(p.hidden, false, p.id);
    assert.deepEqual(p.options, ["0", "1", "2"], p.id);
    assert.equal(p.value, "0", p.id);
  }
  const maps = await heatmaps(page);
  assert.equal(maps.length, H);
  maps.forEach((m, hi) => m.cells.forEach((row, q) => row.forEach((c, k) => assert.equal(c.v, layerOf(answer, 0).patterns[hi][q][k]))));
  assert.match(await page.textContent("#headview .layer-note"), /Layer 0 of 3 .*reads E_0, the sentence's own embeddings/);
  assert.deepEqual(await contrastFailures(page), []);
  await shot(page, "layers-model-view");
  assert.deepEqual(log.errors, []);
  await close();
});

test("a thumbnail opens its layer's head in the head view, by click and by keyboard; the layer list changes every view", async () => {
  const { page, log, close, answer } = await openStack();
  const posts = log.posts.length;
  await page.click('#modelview button.thumb[data-layer="2"][data-index="2"]');
  await settle(page, onLayer, 2);
  // One head, large, its lines the API's layer 2 head 3 weights; the keyboard on its first token.
  let hv = await headViewLines(page);
  assert.equal(hv.length, 1);
  assert.equal(hv[0].caption, "Layer 2, head 3");
  assert.equal(hv[0].lines.length, answer.n_tokens ** 2);
  for (const [q, k, o] of hv[0].lines) assert.equal(o, layerOf(answer, 2).patterns[2][q][k], `line ${q} → ${k}`);
  assert.equal(await page.evaluate(() => !!document.activeElement.closest("#headview-heads")), true);
  assert.equal(await page.getAttribute('#modelview button.thumb[data-layer="2"][data-index="2"]', "aria-pressed"), "true");
  // Every view follows: the heatmaps are layer 2's; the address names it; nothing was asked again.
  const maps = await heatmaps(page);
  maps.forEach((m, hi) => m.cells.forEach((row, q) => row.forEach((c, k) => assert.equal(c.v, layerOf(answer, 2).patterns[hi][q][k]))));
  assert.match(await page.evaluate(() => location.hash), /&layer=2(&|$)/);
  assert.match(await page.textContent("#headview .layer-note"), /Layer 2 of 3 .*reads E_2, the embeddings after layer 1.*the stack's output/);
  // Every head of the layer again, then the layer list: layer 1's three heads.
  await page.click("#headview-all");
  assert.equal((await headViewLines(page)).length, H);
  await page.selectOption("#layer", "1");
  await settle(page, onLayer, 1);
  hv = await headViewLines(page);
  assert.equal(hv.length, H);
  hv.forEach((f, hi) => f.lines.forEach(([q, k, o]) => assert.equal(o, layerOf(answer, 1).patterns[hi][q][k], `head ${hi + 1}, ${q} → ${k}`)));
  // The keyboard: one tab stop in the grid, arrows, Enter.
  await page.focus('#modelview button.thumb[tabindex="0"]');
  assert.equal(await page.$$eval('#modelview button.thumb[tabindex="0"]', (b) => b.length), 1);
  await page.keyboard.press("ArrowUp");
  await page.keyboard.press("ArrowLeft");
  await page.keyboard.press("ArrowLeft");
  await page.keyboard.press("Enter");
  await settle(page, onLayer, 0);
  hv = await headViewLines(page);
  assert.equal(hv[0].caption, "Layer 0, head 1");
  for (const [q, k, o] of hv[0].lines) assert.equal(o, layerOf(answer, 0).patterns[0][q][k]);
  assert.equal(log.posts.length, posts, "choosing a layer asks the service nothing");
  assert.deepEqual(log.errors, []);
  await close();
});

test("the walk-through and the gathered view read E_l, the embeddings after the layer before, with the API's numbers", async () => {
  const { page, log, close, answer } = await openStack();
  const w = (await get(other, "/v1/models/stack-3?weights=true")).weights;
  assert.equal(w.layers.length, L);
  await page.selectOption("#step-layer", "1");
  await settle(page, onLayer, 1);
  await page.selectOption("#step-head", "1");
  const l1 = layerOf(answer, 1), l0 = layerOf(answer, 0);
  const step = async (id) => {
    await page.click(`#step-list button[data-step="${id}"]`);
    await settle(page, (x) => document.querySelector("#step").dataset.step === x, id);
  };
  await step("E");
  assert.match(await page.textContent("#step-list"), /E_1: the embeddings after layer 0/);
  assert.match(await page.textContent("#step"), /reads E_1, the embeddings after layer 0/);
  assert.deepEqual(await drawnMatrix(page, "E"), l0.embeddings);
  await step("W");
  assert.deepEqual(await drawnMatrix(page, "W_q"), w.layers[1].heads[1].w_q);
  await step("Q");
  assert.match(await page.textContent("#step .formula"), /^Q = E_1 · W_q/);
  assert.deepEqual(await drawnMatrix(page, "Q-E"), l0.embeddings);
  assert.deepEqual(await drawnMatrix(page, "Q"), l1.q[1]);
  await step("P");
  await page.click('#step .rowpick button[data-row="all"]');
  assert.deepEqual(await drawnMatrix(page, "P"), l1.patterns[1]);
  await step("dE");
  assert.match(await page.textContent("#step .formula"), /^ΔE_1 = concat/);
  assert.deepEqual(await drawnMatrix(page, "dE"), l1.delta);
  await step("E2");
  assert.match(await page.textContent("#step .formula"), /^E_2 = E_1 \+ ΔE_1/);
  assert.deepEqual(await drawnMatrix(page, "E2"), l1.embeddings);

  // The gathered view on layer 2: E_2, ΔE_2 and E_3; its parts add up to the API's ΔE_2.
  await page.selectOption("#gathered-layer", "2");
  await settle(page, onLayer, 2);
  await page.click('#gathered-tokens button[data-q="3"]');
  const l2 = layerOf(answer, 2);
  const bars = await drawnBars(page);
  const dims = Object.keys(bars);
  assert.equal(dims.length, DM);
  dims.forEach((d, j) => {
    assert.equal(bars[d].E, l1.embeddings[3][j], `E_2 ${d}`);
    assert.equal(bars[d].dE, l2.delta[3][j], `ΔE_2 ${d}`);
    assert.equal(bars[d].E2, l2.embeddings[3][j], `E_3 ${d}`);
  });
  assert.equal(await page.getAttribute("#gathered-check", "data-ok"), "true");
  assert.match(await page.textContent("#gathered-check"), /ΔE_2/);
  assert.deepEqual(await contrastFailures(page), []);
  assert.deepEqual(log.errors, []);
  await close();
});

test("past the walk-through's limits, one head's numbers are asked for the chosen layer alone", async () => {
  const long = Array.from({ length: 20 }, (_, i) => `w${i}`).join(" ");
  const { page, log, close } = await openStack(link({ model: "stack-3", sentence: long, layer: "2", "step-head": "2" }));
  await settle(page, onLayer, 2);
  await page.locator("#walkthrough").scrollIntoViewIfNeeded();
  await page.click('#step-list button[data-step="Q"]');
  await settle(page, () => !!document.querySelector('#step table[data-matrix="Q"]'));
  const focus = log.posts.map((b) => JSON.parse(b)).filter((b) => b.select_heads && b.return.includes("q"));
  assert.equal(focus.length, 1);
  assert.deepEqual(focus[0].layers, [2]);
  assert.deepEqual(focus[0].select_heads, [1]);
  const got = await post(other, JSON.stringify(focus[0]));
  assert.deepEqual(got.layers.map((x) => x.layer), [2]);
  assert.deepEqual(await drawnMatrix(page, "Q"), [got.layers[0].q[0][19]]);
  assert.match(await page.textContent("#step .formula"), /^q = E_2\[w19\]/);
  assert.deepEqual(log.errors, []);
  await close();
});

test("the rollout is drawn as the API's, its masked triangle hatched, and a link reopens the layer", async () => {
  const { page, log, close, answer } = await openStack(link({ model: "stack-3", sentence: SENTENCE, layer: "1" }));
  await settle(page, onLayer, 1);
  assert.equal(await page.isVisible("#rollout"), true);
  assert.match(await page.textContent("#rollout-hint"), /how much of token q's final state came from each input token, through every\s+layer and the residual paths/);
  const [R] = await heatmaps(page, "#rollout table.heatmap");
  assert.equal(R.cells.length, answer.n_tokens);
  R.cells.forEach((row, q) => row.forEach((c, k) => {
    assert.equal(c.v, answer.rollout[q][k], `R[${q}][${k}]`);
    assert.equal(c.masked, k > q, `R[${q}][${k}] hatched`);
  }));
  // Each row sums to 1: every layer's averaged pattern and the residual half are row-stochastic.
  for (const row of answer.rollout) assert.ok(Math.abs(row.reduce((s, x) => s + x, 0) - 1) < 1e-5);
  // The heatmaps of the layer the link named.
  const maps = await heatmaps(page);
  maps.forEach((m, hi) => m.cells.forEach((row, q) => row.forEach((c, k) => assert.equal(c.v, layerOf(answer, 1).patterns[hi][q][k]))));
  // The rollout can be saved as a picture of its own.
  assert.ok((await page.$$eval("#export-what option", (o) => o.map((x) => x.textContent))).some((t) => /^Rollout/.test(t)));
  assert.deepEqual(log.errors, []);
  await close();
});

test("both masks side by side: the other mask's pattern is asked for the chosen layer alone", async () => {
  const { page, log, close, answer } = await openStack(link({ model: "stack-3", sentence: SENTENCE, layer: "1", head: "2" }));
  await settle(page, onLayer, 1);
  await page.check("#compare-masks");
  await settle(page, () => document.querySelectorAll('#heads table.heatmap[data-mask="none"]').length === 1);
  const asked = log.posts.map((b) => JSON.parse(b)).filter((b) => b.mask === "none" && b.select_heads);
  assert.equal(asked.length, 1);
  assert.deepEqual(asked[0].layers, [1]);
  assert.deepEqual(asked[0].select_heads, [1]);
  const none = await post(other, JSON.stringify(asked[0]));
  const [mine] = await heatmaps(page, '#heads table.heatmap[data-mask="causal"]');
  const [theirs] = await heatmaps(page, '#heads table.heatmap[data-mask="none"]');
  theirs.cells.forEach((row, q) => row.forEach((c, k) => assert.equal(c.v, none.layers[0].patterns[0][q][k])));
  mine.cells.forEach((row, q) => row.forEach((c, k) => assert.equal(c.v, layerOf(answer, 1).patterns[1][q][k])));
  assert.deepEqual(log.errors, []);
  await close();
});

test("demo-layers, one example away: the tokens go alone, layer 1 reads the service's E_1, and the parts add up", async () => {
  const { page, log, close } = await open({ hash: "" });
  await page.click("#example-layers");
  await settle(page, () => document.querySelectorAll("#modelview button.thumb").length > 0 &&
    document.querySelector("#example-layers").getAttribute("aria-pressed") === "true");
  await page.selectOption("#layer", "1");
  await settle(page, onLayer, 1);
  const body = mainPost(log);
  assert.equal(JSON.parse(body).embeddings, undefined, "the tokens go alone");
  const answer = await (await fetch(`${base}/v1/attention`, { method: "POST", headers: { "Content-Type": "application/json" }, body })).json();
  assert.ok(answer.n_layers >= 2);
  await page.click('#step-list button[data-step="E"]');
  assert.deepEqual(await drawnMatrix(page, "E"), layerOf(answer, 0).embeddings);
  await page.click('#gathered-tokens button[data-q="3"]');
  await page.selectOption("#gathered-head", "all");   // the first story opened on its head alone
  assert.equal(await page.getAttribute("#gathered-check", "data-ok"), "true");
  const [R] = await heatmaps(page, "#rollout table.heatmap");
  R.cells.forEach((row, q) => row.forEach((c, k) => assert.equal(c.v, answer.rollout[q][k])));
  assert.match(await page.textContent("#weights-hint"), /stack of \d+ layers/);
  assert.deepEqual(await contrastFailures(page), []);
  assert.deepEqual(log.errors, []);
  await close();
});

test("on a phone and at 1280 px, the model view, the layer lists and the rollout fit, and Tab reaches them", async () => {
  for (const [width, height] of [[390, 844], [1280, 800]]) {
    const { page, log, close } = await openStack(undefined, { width, height });
    assert.equal(await page.evaluate(() => document.scrollingElement.scrollWidth <= innerWidth), true, `${width} px: no sideways scroll`);
    for (const sel of ["#modelview", "#rollout", "#headview .layer-controls"]) {
      const box = await page.locator(sel).boundingBox();
      assert.ok(box.x >= 0 && box.x + box.width <= width + 0.5, `${sel} within ${width} px`);
    }
    // The model view is one tab stop: the next is the head view's layer list.
    await page.focus('#modelview button.thumb[tabindex="0"]');
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement.id), "layer", `${width} px`);
    assert.deepEqual(await contrastFailures(page), []);
    assert.deepEqual(log.errors, []);
    await close();
  }
});

test("a one-layer model shows no layer: no model view, no rollout, no layer list, nothing asked for", async () => {
  for (const hash of [undefined, link({ model: "gpt2-small-shape", sentence: "a fluffy blue creature" })]) {
    const { page, log, close } = await open(hash ? { hash } : {});
    await settle(page);
    assert.equal(await page.isHidden("#modelview"), true);
    assert.equal(await page.isHidden("#rollout"), true);
    assert.equal(await page.$$eval("#modelview button.thumb", (b) => b.length), 0);
    for (const p of await picks(page)) assert.equal(p.hidden, true, p.id);
    assert.equal(await page.$$eval(".layer-note", (ns) => ns.filter((n) => !n.hidden && n.offsetParent).length), 0);
    assert.equal(await page.isHidden("#headview-all"), true);
    for (const b of log.posts.map((x) => JSON.parse(x))) {
      assert.ok(!b.return.includes("rollout"), "no rollout asked for");
      assert.equal(b.layers, undefined);
    }
    assert.doesNotMatch(await page.evaluate(() => location.hash), /layer=/);
    assert.doesNotMatch(await page.textContent("#step-list"), /E_0/);
    assert.deepEqual(log.errors, []);
    await close();
  }
});
