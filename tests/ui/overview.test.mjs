// The heads overview (thumbnails of every head, one opened large), long sentences, the
// transposed layout, both masks side by side, cross-attention, grouped K/V heads and sliding
// windows. Models of 96 heads, cross-attention and a window are written here, into a directory
// of their own, for a second server.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { base, open, settle, startServer, contrastFailures, lastPatternsPost, shot } from "./harness.mjs";

// safetensors (models/README.md): 8 bytes of header length, the JSON header, the F32 data.
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
// Deterministic weights of unit-scale-ish values.
function weights(rows, cols, seed, scale = 0.35) {
  let s = seed >>> 0;
  return Array.from({ length: rows * cols }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return ((s / 2 ** 32) * 2 - 1) * scale;
  });
}

let other;   // the second server's origin
const WINDOW = 3;
before(async () => {
  const dir = mkdtempSync(join(tmpdir(), "attn-overview-"));
  const dm = 24, dh = 4;
  safetensors(join(dir, "heads-96.safetensors"), { n_heads: "96", n_kv_heads: "12", mask: "causal", description: "96 heads, 12 K/V heads" }, {
    w_qkv: [[dm, 96 * dh + 2 * 12 * dh], weights(dm, 96 * dh + 2 * 12 * dh, 1)],
    w_o: [[96 * dh, dm], weights(96 * dh, dm, 2)],
  });
  safetensors(join(dir, "cross-4.safetensors"), { n_heads: "4", mask: "none", description: "cross-attention, d_context 20" }, {
    w_q: [[dm, 4 * dh], weights(dm, 4 * dh, 3)],
    w_kv: [[20, 2 * 4 * dh], weights(20, 2 * 4 * dh, 4)],
    w_o: [[4 * dh, dm], weights(4 * dh, dm, 5)],
  });
  safetensors(join(dir, "window-2.safetensors"), { n_heads: "2", mask: "causal", window: String(WINDOW), description: "a sliding window of 3" }, {
    w_qkv: [[dm, 3 * 2 * dh], weights(dm, 3 * 2 * dh, 6)],
    w_o: [[2 * dh, dm], weights(2 * dh, dm, 7)],
  });
  other = await startServer("overview", ["--models-dir", dir]);
});

const link = (p) => "#" + new URLSearchParams(p);
async function post(origin, body) {
  const res = await fetch(`${origin}/v1/attention`, { method: "POST", headers: { "Content-Type": "application/json" }, body });
  assert.equal(res.status, 200, body.slice(0, 200));
  return res.json();
}
// The large heatmap as drawn: for each cell its q, k and value, row by row as on screen.
const drawnLarge = (page, sel = "table.heatmap.large") => page.$eval(sel, (t) => ({
  rows: [...t.querySelectorAll("tbody th")].map((th) => th.textContent),
  cols: [...t.querySelectorAll("thead th:not(.corner)")].map((th) => th.textContent),
  cells: [...t.querySelectorAll("tbody tr")].map((tr) => [...tr.querySelectorAll("td")].map((td) => [+td.dataset.q, +td.dataset.k, Number(td.dataset.value)])),
  head: +t.dataset.head,
}));
function samePattern(drawn, P, transposed, what) {
  const n = P.length, m = P[0].length;
  assert.equal(drawn.cells.length, transposed ? m : n, `${what}: rows`);
  drawn.cells.forEach((row, r) => {
    assert.equal(row.length, transposed ? n : m, `${what}: row ${r}`);
    row.forEach(([q, k, v], c) => {
      assert.deepEqual([q, k], transposed ? [c, r] : [r, c], `${what}: cell ${r}, ${c}`);
      assert.equal(v, P[q][k], `${what}: P[${q}][${k}]`);
    });
  });
}
// Every cell of a table: its width and height in CSS pixels.
const cellSizes = (page, sel) => page.$$eval(`${sel} td`, (tds) => tds.map((td) => { const r = td.getBoundingClientRect(); return [r.width, r.height]; }));
// The thumbnails' pixels, back as [r, g, b] per cell.
const thumbPixels = (page, index) => page.$eval(`button.thumb[data-index="${index}"] canvas`, (c) => {
  const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
  return Array.from({ length: c.height }, (_, y) => Array.from({ length: c.width }, (_, x) => [...d.slice(4 * (y * c.width + x), 4 * (y * c.width + x) + 3)]));
});
const heatRGB = (p) => { const t = Math.max(0, Math.min(1, p)); const mix = (a, b) => Math.round(a + (b - a) * t); return [mix(255, 36), mix(255, 86), mix(255, 201)]; };

const TWENTY_ONE = "a fluffy blue creature roamed the verdant forest while the small grey owl watched from an old oak tree above them";

test("12 heads, 21 tokens: a thumbnail per head, one opened large with square cells and whole labels", async () => {
  const { page, log, close } = await open({ hash: link({ model: "gpt2-small-shape", sentence: TWENTY_ONE, mask: "causal" }) });
  await settle(page, () => document.querySelectorAll("button.thumb").length === 12);
  const api = await post(base, lastPatternsPost(log));
  assert.equal(api.n_tokens, 21);
  // Every head has its thumbnail, each of its pixels the colour of the API's weight.
  assert.deepEqual(await page.$$eval("button.thumb", (bs) => bs.map((b) => +b.dataset.head)), [...Array(12).keys()]);
  for (const hi of [0, 7]) {
    const px = await thumbPixels(page, hi);
    px.forEach((row, q) => row.forEach((rgb, k) => {
      const want = k > q ? [214, 219, 227] : heatRGB(api.patterns[hi][q][k]);
      assert.deepEqual(rgb, want, `thumbnail ${hi + 1}, cell ${q}, ${k}`);
    }));
  }
  // One head large: the API's numbers cell by cell, cells square and at least 12 px.
  assert.equal(await page.locator("table.heatmap").count(), 1);
  samePattern(await drawnLarge(page), api.patterns[0], false, "head 1");
  for (const [w, h] of await cellSizes(page, "table.heatmap.large")) {
    assert.ok(w >= 12 && h >= 12, `a cell of ${w} × ${h} px`);
    assert.ok(Math.abs(w - h) < 1, `a cell of ${w} × ${h} px is not square`);
  }
  // Labels whole: the row labels show the whole token, none cut.
  const cut = await page.$$eval("table.heatmap.large tbody th", (ths) => ths.filter((t) => t.scrollWidth > t.clientWidth + 1).map((t) => t.textContent));
  assert.deepEqual(cut, []);
  // A click on a thumbnail opens that head; the keyboard: one tab stop, arrows, Enter.
  await page.click('button.thumb[data-index="4"]');
  await settle(page, () => document.querySelector("table.heatmap.large").dataset.head === "4");
  samePattern(await drawnLarge(page), api.patterns[4], false, "head 5");
  assert.equal(await page.getAttribute('button.thumb[data-index="4"]', "aria-pressed"), "true");
  assert.equal(await page.locator('button.thumb[tabindex="0"]').count(), 1);
  await page.focus('button.thumb[data-index="4"]');
  await page.keyboard.press("ArrowRight");
  await page.keyboard.press("ArrowRight");
  await page.keyboard.press("Enter");
  await settle(page, () => document.querySelector("table.heatmap.large").dataset.head === "6");
  samePattern(await drawnLarge(page), api.patterns[6], false, "head 7");
  assert.equal(await page.evaluate(() => document.activeElement.dataset.index), "6");
  // The large heatmap by arrow keys.
  await page.focus("table.heatmap.large");
  await page.keyboard.press("ArrowDown");
  await page.keyboard.press("ArrowDown");
  assert.match(await page.textContent("figure.head.large .readout"), new RegExp(`^query blue → key a: ${api.patterns[6][2][0]}`));
  assert.deepEqual(await contrastFailures(page), []);
  await shot(page, "overview-12-heads");
  // Every head side by side instead: 12 heatmaps, cells still at least 12 px.
  await page.selectOption("#layout", "all");
  await settle(page, () => document.querySelectorAll("table.heatmap").length === 12);
  for (const [w] of await cellSizes(page, "table.heatmap")) assert.ok(w >= 12, `side by side, a cell of ${w} px`);
  // The head focused there is the one opened with both masks.
  await page.click('table.heatmap[data-head="8"] td[data-q="3"][data-k="1"]');
  await page.check("#compare-masks");
  await settle(page, () => document.querySelectorAll('table.heatmap[data-mask][data-head="8"]').length === 2);
  assert.deepEqual(log.errors, []);
  await close();
});

test("transposed: keys as rows, queries as columns, the same numbers", async () => {
  const { page, log, close } = await open({ hash: link({ model: "gpt2-small-shape", sentence: "a fluffy blue creature roamed", mask: "causal" }) });
  await settle(page, () => document.querySelectorAll("table.heatmap").length === 12);
  const api = await post(base, lastPatternsPost(log));
  await page.selectOption("#layout", "overview");
  await page.check("#transposed");
  await settle(page, () => document.querySelector("table.heatmap.large.transposed"));
  const drawn = await drawnLarge(page);
  samePattern(drawn, api.patterns[0], true, "head 1 transposed");
  assert.deepEqual(drawn.rows, api.tokens, "keys as rows");
  assert.deepEqual(drawn.cols, api.tokens, "queries as columns");
  assert.match(await page.textContent("#patterns-hint"), /^Keys are rows, queries are columns \(transposed\); each column sums to 1\./);
  // The masked cells sit above the diagonal of the pattern, below it on screen.
  const masked = await page.$$eval("table.heatmap.large td.masked", (tds) => tds.map((td) => [+td.dataset.q, +td.dataset.k]));
  assert.equal(masked.length, 10);
  for (const [q, k] of masked) assert.ok(k > q);
  // The thumbnails follow: pixel (row k, column q).
  const px = await thumbPixels(page, 3);
  px.forEach((row, k) => row.forEach((rgb, q) => assert.deepEqual(rgb, k > q ? [214, 219, 227] : heatRGB(api.patterns[3][q][k]))));
  // The arrow keys move on screen: down is the next key.
  await page.focus("table.heatmap.large");
  await page.keyboard.press("ArrowDown");
  assert.match(await page.textContent("figure.head.large .readout"), new RegExp(`^query a → key fluffy: 0 \\(masked\\)`));
  assert.deepEqual(await contrastFailures(page), []);
  assert.deepEqual(log.errors, []);
  await close();
});

test("causal and none side by side: the same head under both masks, each from the API", async () => {
  const { page, log, close } = await open({ hash: link({ model: "gpt2-small-shape", sentence: "a fluffy blue creature roamed the verdant forest", mask: "causal" }) });
  await settle(page, () => document.querySelectorAll("table.heatmap").length === 12);
  const before = log.posts.length;
  await page.check("#compare-masks");
  await settle(page, () => document.querySelectorAll("table.heatmap[data-mask]").length === 2);
  // One request more, for the other mask of the opened head.
  assert.equal(log.posts.length, before + 1);
  const body = JSON.parse(log.posts[log.posts.length - 1]);
  assert.equal(body.mask, "none");
  assert.deepEqual(body.select_heads, [0]);
  const causal = await post(base, lastPatternsPost({ posts: log.posts.slice(0, before) }));
  const none = await post(base, JSON.stringify(body));
  samePattern(await drawnLarge(page, 'table.heatmap[data-mask="causal"]'), causal.patterns[0], false, "causal");
  samePattern(await drawnLarge(page, 'table.heatmap[data-mask="none"]'), none.patterns[0], false, "none");
  assert.equal(await page.locator('table.heatmap[data-mask="none"] td.masked').count(), 0);
  assert.equal(await page.locator('table.heatmap[data-mask="causal"] td.masked').count(), 28);
  // Another head, and transposed: both follow.
  await page.click('button.thumb[data-index="2"]');
  await page.check("#transposed");
  await settle(page, () => document.querySelectorAll('table.heatmap.transposed[data-mask][data-head="2"]').length === 2);
  const none3 = await post(base, JSON.stringify({ ...body, select_heads: [2] }));
  samePattern(await drawnLarge(page, 'table.heatmap[data-mask="none"]'), none3.patterns[0], true, "none, head 3");
  samePattern(await drawnLarge(page, 'table.heatmap[data-mask="causal"]'), causal.patterns[2], true, "causal, head 3");
  assert.deepEqual(await contrastFailures(page), []);
  await shot(page, "overview-masks-side-by-side");
  assert.deepEqual(log.errors, []);
  await close();
});

test("60 tokens: the page says it sends 48 of them, and draws them scrolling with sticky labels", async () => {
  const words = Array.from({ length: 60 }, (_, i) => `w${i + 1}`).join(" ");
  const { page, log, close } = await open({ hash: link({ model: "demo-4d", sentence: words, mask: "causal" }) });
  await settle(page, () => document.querySelectorAll("table.heatmap.large tbody tr").length === 48);
  assert.match(await page.textContent("#patterns-limit"), /Showing 48 of 60 tokens: the page sends at most the first 48/);
  assert.ok(await page.isVisible("#patterns-limit"));
  const api = await post(base, lastPatternsPost(log));
  samePattern(await drawnLarge(page), api.patterns[0], false, "48 tokens");
  for (const [w, h] of await cellSizes(page, "table.heatmap.large")) assert.ok(w >= 12 && h >= 12, `a cell of ${w} × ${h} px`);
  // The heatmap scrolls in its own box; its labels stay in view.
  const box = page.locator(".hm-scroll");
  const before = await page.$eval("table.heatmap.large thead th:nth-child(10)", (th) => th.getBoundingClientRect().top);
  await box.evaluate((b) => { b.scrollTop = 300; b.scrollLeft = 300; });
  const [boxTop, boxLeft] = await box.evaluate((b) => [b.getBoundingClientRect().top, b.getBoundingClientRect().left]);
  const headTop = await page.$eval("table.heatmap.large thead th:nth-child(10)", (th) => th.getBoundingClientRect().top);
  const rowLeft = await page.$eval("table.heatmap.large tbody tr:nth-child(30) th", (th) => th.getBoundingClientRect().left);
  assert.ok(Math.abs(headTop - boxTop) < 2 && Math.abs(before - boxTop) < 2, `the column labels scrolled away (${headTop} vs ${boxTop})`);
  assert.ok(Math.abs(rowLeft - boxLeft) < 2, `the row labels scrolled away (${rowLeft} vs ${boxLeft})`);
  const [scrollW, clientW] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
  assert.ok(scrollW <= clientW, `the page is ${scrollW} px wide`);
  assert.deepEqual(log.errors, []);
  await close();
});

test("96 heads in 12 K/V groups fit within a few screens at 1280 × 800 and 390 × 844", async () => {
  for (const [width, height, screens] of [[1280, 800, 4], [390, 844, 7]]) {
    const { page, log, close } = await open({ width, height, origin: other, hash: link({ model: "heads-96", sentence: "one two three four five six", mask: "causal" }) });
    await settle(page, () => document.querySelectorAll("button.thumb").length === 96);
    assert.deepEqual(await page.$$eval("button.thumb", (bs) => bs.map((b) => +b.dataset.head)), [...Array(96).keys()]);
    // Groups: K/V head u is shared by query heads 8u + 1 … 8u + 8, named so and boxed together.
    const groups = await page.$$eval(".kv-group", (gs) => gs.map((g) => [g.querySelector(".kv-title").textContent,
      [...g.querySelectorAll("button.thumb")].map((b) => +b.dataset.head)]));
    assert.equal(groups.length, 12);
    groups.forEach(([title, heads], u) => {
      assert.equal(title, `K/V head ${u + 1} · heads ${8 * u + 1}–${8 * u + 8}`);
      assert.deepEqual(heads, Array.from({ length: 8 }, (_, i) => 8 * u + i));
    });
    assert.match(await page.textContent("#patterns-model-note"), /96 query heads share 12 K\/V heads, 8 each/);
    const api = await post(other, lastPatternsPost(log));
    const px = await thumbPixels(page, 95);
    px.forEach((row, q) => row.forEach((rgb, k) => assert.deepEqual(rgb, k > q ? [214, 219, 227] : heatRGB(api.patterns[95][q][k]))));
    // Head 42 opened: its numbers, its group in the caption, and the head view shows its twelve.
    await page.click('button.thumb[data-index="41"]');
    await settle(page, () => document.querySelector("table.heatmap.large").dataset.head === "41");
    samePattern(await drawnLarge(page), api.patterns[41], false, "head 42");
    assert.match(await page.textContent("figure.head.large figcaption"), /Head 42 · K\/V head 6 \(heads 41–48\)/);
    // The head view: the page of 12 heads (4 on a phone) that holds it, and it says so.
    const [size, first] = width > 820 ? [12, 36] : [4, 40];
    assert.deepEqual(await page.$$eval("#headview-heads figure", (fs) => fs.map((f) => +f.dataset.head)), Array.from({ length: size }, (_, i) => first + i));
    assert.equal(await page.textContent("#headview-limit"), `Showing heads ${first + 1}–${first + size} of 96 (${size} at a time): open a head in the overview above to show its ${size}.`);
    const docHeight = await page.evaluate(() => document.documentElement.scrollHeight);
    assert.ok(docHeight <= screens * height, `${width} px: the page is ${docHeight} px tall, over ${screens} screens of ${height}`);
    const patterns = await page.$eval("#patterns", (s) => s.getBoundingClientRect().height);
    assert.ok(patterns <= 2.5 * height, `${width} px: the patterns take ${patterns} px`);
    const [scrollW, clientW] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
    assert.ok(scrollW <= clientW, `${width} px: the page is ${scrollW} px wide`);
    assert.deepEqual(await contrastFailures(page), []);
    await shot(page, `overview-96-heads-${width}`);
    assert.deepEqual(log.errors, []);
    await close();
  }
});

test("grouped K/V heads of llama-small-shape are named", async () => {
  const { page, log, close } = await open({ hash: link({ model: "llama-small-shape", sentence: "one two three", mask: "causal" }) });
  await settle(page, () => document.querySelectorAll(".kv-group").length === 8);
  const titles = await page.$$eval(".kv-group .kv-title", (ts) => ts.map((t) => t.textContent));
  assert.deepEqual(titles, Array.from({ length: 8 }, (_, u) => `K/V head ${u + 1} · heads ${4 * u + 1}–${4 * u + 4}`));
  assert.match(await page.getAttribute('button.thumb[data-index="5"]', "aria-label"), /^Head 6, K\/V head 2: open it large$/);
  assert.deepEqual(log.errors, []);
  await close();
});

test("cross-attention: queries against the context's tokens, n × m, both label sets", async () => {
  const { page, log, close } = await open({ origin: other, hash: link({ model: "cross-4", sentence: "where is the cat" }) });
  await settle(page, () => document.querySelectorAll("table.heatmap").length === 4 && !document.querySelector("#context-fields").hidden);
  const body = JSON.parse(lastPatternsPost(log));
  assert.deepEqual(body.context_tokens, ["the", "cat", "sat", "on", "the", "mat"]);
  assert.equal(body.context.length, 6);
  assert.equal(body.context[0].length, 20);
  assert.equal(body.mask, "none");
  const api = await post(other, JSON.stringify(body));
  assert.equal(api.n_context, 6);
  const drawn = await drawnLarge(page, 'table.heatmap[data-head="0"]');
  assert.deepEqual(drawn.rows, ["where", "is", "the", "cat"]);
  assert.deepEqual(drawn.cols, ["the", "cat", "sat", "on", "the", "mat"]);
  samePattern(drawn, api.patterns[0], false, "cross, head 1");
  assert.ok(await page.isDisabled("#mask-causal"));
  assert.ok(await page.isDisabled("#compare-masks"));
  // The head view: queries on the left, the context on the right.
  const keys = await page.$$eval('#headview-heads svg[data-head="0"] text.tok[data-side="k"]', (ts) => ts.map((t) => t.lastChild.textContent));
  assert.deepEqual(keys, ["the", "cat", "sat", "on", "the", "mat"]);
  assert.equal(await page.locator('#headview-heads svg[data-head="0"] line.attn').count(), 24);
  // Another head, transposed; then another context: one request, the new labels.
  await page.selectOption("#layout", "overview");
  await page.click('button.thumb[data-index="2"]');
  await page.check("#transposed");
  await settle(page, () => document.querySelector('table.heatmap.large.transposed[data-head="2"]'));
  const t = await drawnLarge(page);
  assert.deepEqual(t.rows, ["the", "cat", "sat", "on", "the", "mat"]);
  samePattern(t, api.patterns[2], true, "cross, head 3 transposed");
  const posts = log.posts.length;
  await page.fill("#context", "a dog ran");
  await page.press("#context", "Enter");
  await settle(page, () => document.querySelectorAll("table.heatmap.large tbody tr").length === 3);
  assert.equal(log.posts.length, posts + 1);
  const api2 = await post(other, lastPatternsPost(log));
  samePattern(await drawnLarge(page), api2.patterns[2], true, "cross, new context");
  assert.deepEqual(await contrastFailures(page), []);
  await shot(page, "overview-cross");
  assert.deepEqual(log.errors, []);
  await close();
});

test("a sliding window: the cells outside it are striped apart from the causal mask", async () => {
  const sentence = "one two three four five six seven";
  const { page, log, close } = await open({ origin: other, hash: link({ model: "window-2", sentence, mask: "causal" }) });
  await settle(page, () => document.querySelectorAll("table.heatmap td.window").length > 0);
  const api = await post(other, lastPatternsPost(log));
  const kinds = await page.$$eval('table.heatmap[data-head="0"] td', (tds) => tds.map((td) => [+td.dataset.q, +td.dataset.k, td.className]));
  for (const [q, k, cls] of kinds) {
    const want = k > q ? "masked" : q - k >= WINDOW ? "window" : "";
    assert.equal(cls.replace("active", "").trim(), want, `cell ${q}, ${k}`);
    if (want) { assert.equal(api.patterns[0][q][k], 0); assert.equal(api.scores[0][q][k], null); }
  }
  const [win, masked] = await page.$eval('table.heatmap[data-head="0"]', (t) => [
    getComputedStyle(t.querySelector("td.window")).backgroundImage, getComputedStyle(t.querySelector("td.masked")).backgroundImage]);
  assert.notEqual(win, masked);
  assert.match(await page.textContent("#patterns-model-note"), /sliding window of 3 tokens/);
  // Without the mask, the window still holds on both sides; side by side, each from the API.
  await page.check("#compare-masks");
  await settle(page, () => document.querySelectorAll("table.heatmap[data-mask]").length === 2);
  const none = await post(other, log.posts[log.posts.length - 1]);
  samePattern(await drawnLarge(page, 'table.heatmap[data-mask="none"]'), none.patterns[0], false, "window, none");
  const noneKinds = await page.$$eval('table.heatmap[data-mask="none"] td', (tds) => tds.map((td) => [+td.dataset.q, +td.dataset.k, td.className]));
  for (const [q, k, cls] of noneKinds) assert.equal(cls, Math.abs(q - k) >= WINDOW ? "window" : "", `none, cell ${q}, ${k}`);
  assert.deepEqual(await contrastFailures(page), []);
  await shot(page, "overview-window");
  assert.deepEqual(log.errors, []);
  await close();
});

test("the new controls are in keyboard reach", async () => {
  const { page, close } = await open({ hash: link({ model: "gpt2-small-shape", sentence: TWENTY_ONE, mask: "causal" }) });
  await settle(page, () => document.querySelectorAll("button.thumb").length === 12);
  const reached = new Set();
  for (let i = 0; i < 50; i++) {
    await page.keyboard.press("Tab");
    reached.add(await page.evaluate(() => {
      const a = document.activeElement;
      return a.id || (a.classList.contains("thumb") ? "thumb" : a.matches("table.heatmap") ? "heatmap" : a.tagName);
    }));
  }
  for (const id of ["layout", "transposed", "compare-masks", "thumb", "heatmap"]) assert.ok(reached.has(id), `Tab never reaches ${id}`);
  await close();
});

test("a link reopens the layout, the opened head, transposed, both masks and the context", async () => {
  const first = await open({ hash: link({ model: "gpt2-small-shape", sentence: "a fluffy blue creature", mask: "causal" }) });
  await settle(first.page, () => document.querySelectorAll("table.heatmap").length === 12);
  await first.page.selectOption("#layout", "overview");
  await first.page.click('button.thumb[data-index="4"]');
  await first.page.check("#transposed");
  await first.page.check("#compare-masks");
  await settle(first.page, () => document.querySelectorAll('table.heatmap.transposed[data-mask][data-head="4"]').length === 2);
  const hash = await first.page.evaluate(() => location.hash);
  const p = new URLSearchParams(hash.slice(1));
  assert.deepEqual([p.get("layout"), p.get("head"), p.get("transposed"), p.get("masks")], ["overview", "5", "1", "both"]);
  const drawn = await drawnLarge(first.page, 'table.heatmap[data-mask="none"]');
  await first.close();
  const again = await open({ hash });
  await settle(again.page, () => document.querySelectorAll('table.heatmap.transposed[data-mask][data-head="4"]').length === 2);
  assert.deepEqual(await drawnLarge(again.page, 'table.heatmap[data-mask="none"]'), drawn);
  assert.equal(await again.page.inputValue("#layout"), "overview");
  assert.deepEqual(again.log.errors, []);
  await again.close();
  const cross = await open({ origin: other, hash: link({ model: "cross-4", sentence: "where is it", context: "a dog ran" }) });
  await settle(cross.page, () => document.querySelectorAll("table.heatmap").length === 4);
  assert.deepEqual(JSON.parse(lastPatternsPost(cross.log)).context_tokens, ["a", "dog", "ran"]);
  assert.equal(await cross.page.inputValue("#context"), "a dog ran");
  await cross.close();
});

test("96 heads on 48 tokens without a mask: drawn, with no error (221,184 scores in one answer)", async () => {
  const sentence = Array.from({ length: 48 }, (_, i) => `w${i + 1}`).join(" ");
  const { page, log, close } = await open({ origin: other, hash: link({ model: "heads-96", sentence, mask: "none" }) });
  await settle(page, () => document.querySelectorAll("button.thumb").length === 96);
  const api = await post(other, lastPatternsPost(log));
  assert.equal(api.patterns.length * api.patterns[0].length * api.patterns[0][0].length, 96 * 48 * 48);
  samePattern(await drawnLarge(page), api.patterns[0], false, "head 1 of 96, 48 tokens");
  assert.equal(await page.textContent("#general-error"), "");
  assert.deepEqual(log.errors, []);
  await close();
});

test("a cross-attention model's context errors: next to the context, in 1-based words", async () => {
  const { page, log, close } = await open({ origin: other, hash: link({ model: "cross-4", sentence: "where is the cat", context: "a dog ran" }) });
  await settle(page, () => document.querySelectorAll("table.heatmap").length === 4);
  // The service's 0-based paths into the context, as the page words them: answers of the
  // service's form to the next request for the patterns (the page sends no such context; the
  // walk-through's own requests, for one head, go through), each shown where its path points.
  const said = async (message, path, box) => {
    let faked = false;
    const fake = (r) => {
      if (faked || JSON.parse(r.request().postData()).select_heads) return r.continue();
      faked = true;
      return r.fulfill({ status: 422, contentType: "application/json",
        body: JSON.stringify({ error: { code: "invalid_value", message, path } }) });
    };
    await page.route("**/v1/attention", fake);
    await page.press("#context", "Enter");
    await page.waitForFunction((sel) => document.querySelector(sel)?.textContent, `${box} .message`);
    await page.unroute("**/v1/attention", fake);
    return page.textContent(`${box} .message`);
  };
  const words = [await said("context[1][2] is a string, expected a number", "/context/1/2", "#context-error"),
    await said("context_tokens[0] is too long", "/context_tokens/0", "#context-error"),
    await said("tokens[3] is not in the vocabulary", "/tokens/3", "#token-error")];
  assert.deepEqual(words, ["Context row 2 (dog), column 3 is not a number", "Context token 1 is too long", "Token 4 is not in the vocabulary"]);
  await page.fill("#context", "");
  await page.press("#context", "Enter");
  await page.waitForFunction(() => document.querySelector("#context-error").textContent !== "");
  assert.match(await page.textContent("#context-error"), /context has no rows/);
  assert.equal(await page.getAttribute("#context", "aria-invalid"), "true");
  await page.fill("#context", "a cat");
  await page.press("#context", "Enter");
  await page.waitForFunction(() => document.querySelector("#context-error").textContent === "");
  // The browser's own line for the 422 is the only one.
  assert.deepEqual(log.errors.filter((e) => !/status of 422/.test(e)), []);
  await close();
});

test("colours relative to each query's largest weight: the legend names the row, or the column when transposed", async () => {
  for (const [transposed, want] of [["0", "the row's largest"], ["1", "the query's largest (its column's)"]]) {
    const { page, log, close } = await open({ hash: link({ model: "demo-4d", sentence: "我爱你", relative: "1", transposed }) });
    await settle(page, () => document.querySelectorAll("table.heatmap").length === 1);
    assert.equal(await page.textContent("#legend-high"), want);
    assert.deepEqual(log.errors, []);
    await close();
  }
});
