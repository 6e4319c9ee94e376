// Saving what is on screen (web/js/export.js): a pattern or a head view as SVG and PNG, the
// numbers as CSV, the whole view as one HTML file; and the page on a phone: results first,
// the controls folded, the step buttons on screen. Each file is taken from the browser's
// download, read back and compared with the API's answer to the page's own request.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ARTIFACTS, browser, open, apiPost, settle, lastPatternsPost, contrastFailures, near } from "./harness.mjs";

// gpt2-small-shape's 12 heads, causal, on tokens a CSV must quote.
const SENTENCE = 'the "cat", sat';
const TOKENS = ["the", '"cat",', "sat"];
const LINK = "#" + new URLSearchParams({ model: "gpt2-small-shape", sentence: SENTENCE, mask: "causal" });
const SIXTEEN = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen";

async function saved(page, selector, how = "click") {
  const [dl] = await Promise.all([page.waitForEvent("download"),
    how === "click" ? page.click(selector) : page.keyboard.press(how)]);
  const path = join(ARTIFACTS, "export-" + dl.suggestedFilename());
  await dl.saveAs(path);
  return { name: dl.suggestedFilename(), buf: readFileSync(path), text: readFileSync(path, "utf8") };
}

// A saved file opened in a fresh browser context, JavaScript off, every other request refused.
async function opened(body, contentType) {
  const context = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 1280, height: 800 } });
  const other = [], errors = [];
  const url = "http://saved.invalid/file";
  await context.route("**/*", (route) => {
    if (route.request().url() === url) return route.fulfill({ status: 200, contentType, body });
    other.push(route.request().url());
    return route.abort();
  });
  const page = await context.newPage();
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  await page.goto(url);
  return { page, other, errors, close: () => context.close() };
}

// The page's request, answered by the API itself.
async function apiAnswer(log) {
  const api = await apiPost(lastPatternsPost(log));
  assert.equal(api.status, 200);
  return api.body;
}

// RFC 4180, as a spreadsheet reads it.
function parseCsv(text) {
  assert.equal(text[0], "\uFEFF", "the CSV starts with a byte order mark");
  const rows = [];
  let row = [], cell = "", i = 1, quoted = false;
  for (; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { cell += '"'; i++; }
      else if (c === '"') quoted = false;
      else cell += c;
    } else if (c === '"' && cell === "") quoted = true;
    else if (c === ",") { row.push(cell); cell = ""; }
    else if (c === "\r" && text[i + 1] === "\n") { row.push(cell); rows.push(row); row = []; cell = ""; i++; }
    else cell += c;
  }
  assert.equal(cell + row.length, "0", "the CSV ends with a line end");
  return rows;
}

// An SVG file as the browser parses it: its cells or lines.
function readSvg(page, text) {
  return page.evaluate((t) => {
    const doc = new DOMParser().parseFromString(t, "image/svg+xml");
    if (doc.querySelector("parsererror") || doc.documentElement.tagName !== "svg") return { error: doc.documentElement.outerHTML.slice(0, 300) };
    const root = doc.documentElement;
    return {
      width: +root.getAttribute("width"), height: +root.getAttribute("height"),
      title: root.querySelector("title").textContent,
      axes: doc.querySelector("text.axes") ? doc.querySelector("text.axes").textContent : null,
      cells: [...doc.querySelectorAll("rect[data-q]")].map((r) => ({ q: +r.dataset.q, k: +r.dataset.k, value: r.dataset.value,
        fill: r.getAttribute("fill"), masked: r.dataset.masked === "true",
        x: +r.getAttribute("x"), y: +r.getAttribute("y"), w: +r.getAttribute("width"), h: +r.getAttribute("height") })),
      numbers: [...doc.querySelectorAll("text[data-q][data-k]")].map((e) => ({ q: +e.dataset.q, k: +e.dataset.k, text: e.textContent })),
      queries: [...doc.querySelectorAll("text.row")].map((e) => e.textContent),
      keys: [...doc.querySelectorAll("text.col")].map((e) => e.textContent),
      lines: [...doc.querySelectorAll("line[data-q]")].map((l) => ({ q: +l.dataset.q, k: +l.dataset.k,
        opacity: l.getAttribute("stroke-opacity"), style: l.getAttribute("style") || "" })),
      scripts: doc.querySelectorAll("script").length,
    };
  }, text);
}

const cellText = (p) => (p === 0 ? "0" : p.toFixed(2).replace(/^0/, ""));

test("a pattern and a head view save as SVG: the cells' numbers and the lines' opacities are the API's", async () => {
  const { page, log, close } = await open({ hash: LINK });
  await settle(page, () => document.querySelectorAll("table.heatmap").length === 12);
  const api = await apiAnswer(log);
  assert.deepEqual(api.tokens, TOKENS);
  const options = await page.$$eval("#export-what option", (os) => os.map((o) => o.value));
  for (let h = 0; h < 12; h++) assert.ok(options.includes(`pattern:${h}`) && options.includes(`lines:${h}`), `head ${h + 1} can be saved`);

  await page.selectOption("#export-what", "pattern:2");
  const file = await saved(page, "#export-svg");
  assert.equal(file.name, "attention-gpt2-small-shape-head-3-pattern.svg");
  const svg = await readSvg(page, file.text);
  assert.equal(svg.error, undefined, svg.error);
  assert.equal(svg.scripts, 0);
  assert.match(svg.title, /^Head 3\b.*gpt2-small-shape, mask causal/);
  assert.equal(svg.axes, "rows: queries, columns: keys");
  assert.deepEqual(svg.queries, TOKENS);
  assert.deepEqual(svg.keys, TOKENS);
  assert.equal(svg.cells.length, 9);
  // The drawn cells' colours, as the page rendered them.
  const drawn = await page.$$eval('table.heatmap[data-head="2"] td', (tds) => tds.map((td) => ({
    q: +td.dataset.q, k: +td.dataset.k, fill: getComputedStyle(td).backgroundColor })));
  for (const c of svg.cells) {
    const p = api.patterns[2][c.q][c.k];
    assert.equal(Number(c.value), p, `cell ${c.q},${c.k}`);
    assert.equal(c.masked, c.k > c.q, `cell ${c.q},${c.k} masked`);
    if (!c.masked) assert.equal(c.fill, drawn.find((d) => d.q === c.q && d.k === c.k).fill, `cell ${c.q},${c.k} colour`);
    else assert.match(c.fill, /^url\(#hatch-/);
    assert.equal(svg.numbers.find((n) => n.q === c.q && n.k === c.k).text, cellText(p));
  }

  await page.selectOption("#export-what", "lines:7");
  const lines = await saved(page, "#export-svg");
  assert.equal(lines.name, "attention-gpt2-small-shape-head-8-lines.svg");
  const hv = await readSvg(page, lines.text);
  assert.equal(hv.error, undefined, hv.error);
  assert.match(hv.title, /^Head 8 · head view/);
  assert.equal(hv.lines.length, 9);
  for (const l of hv.lines) assert.equal(Number(l.opacity), api.patterns[7][l.q][l.k], `line ${l.q} → ${l.k}`);
  // Opened on its own (no style sheet of the page's), each line is drawn visible at that opacity.
  const alone = await opened(lines.buf, "image/svg+xml");
  const drawnLines = await alone.page.$$eval("line[data-q]", (ls) => ls.map((l) => ({ q: +l.dataset.q, k: +l.dataset.k,
    o: Number(getComputedStyle(l).strokeOpacity), vis: getComputedStyle(l).visibility, stroke: getComputedStyle(l).stroke })));
  assert.equal(drawnLines.length, 9);
  for (const l of drawnLines) {
    near(l.o, api.patterns[7][l.q][l.k], 1e-6, `line ${l.q} → ${l.k}`);
    assert.equal(l.vis, "visible");
    assert.notEqual(l.stroke, "none");
  }
  assert.deepEqual(alone.other, [], "the SVG asked for nothing");
  await alone.close();
  assert.deepEqual(log.errors, []);
  await close();
});

test("a pattern saves as PNG: a real PNG at twice the SVG's size, its cells the drawn colours", async () => {
  const { page, log, close } = await open({ hash: LINK });
  await settle(page, () => document.querySelectorAll("table.heatmap").length === 12);
  const api = await apiAnswer(log);
  await page.selectOption("#export-what", "pattern:0");
  const svg = await readSvg(page, (await saved(page, "#export-svg")).text);
  const png = await saved(page, "#export-png");
  assert.equal(png.name, "attention-gpt2-small-shape-head-1-pattern.png");
  assert.deepEqual([...png.buf.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], "the PNG signature");
  assert.equal(png.buf.subarray(12, 16).toString("latin1"), "IHDR");
  const [w, h] = [png.buf.readUInt32BE(16), png.buf.readUInt32BE(20)];
  assert.deepEqual([w, h], [svg.width * 2, svg.height * 2]);
  assert.ok(w >= 200 && w <= 4000 && h >= 200 && h <= 4000, `a plausible size: ${w} × ${h}`);
  // Opened by the browser as an image; a pixel near each cell's corner is the cell's colour.
  const seen = await page.evaluate(async ({ b64, cells }) => {
    const img = new Image();
    img.src = "data:image/png;base64," + b64;
    await img.decode();
    const c = document.createElement("canvas");
    c.width = img.naturalWidth; c.height = img.naturalHeight;
    const ctx = c.getContext("2d");
    ctx.drawImage(img, 0, 0);
    return { w: img.naturalWidth, h: img.naturalHeight,
      px: cells.map((cell) => [...ctx.getImageData(Math.round((cell.x + 4) * 2), Math.round((cell.y + 4) * 2), 1, 1).data]) };
  }, { b64: png.buf.toString("base64"), cells: svg.cells });
  assert.deepEqual([seen.w, seen.h], [w, h]);
  svg.cells.forEach((cell, i) => {
    if (cell.masked) return;
    const want = cell.fill.match(/\d+/g).map(Number);
    for (let j = 0; j < 3; j++) assert.ok(Math.abs(seen.px[i][j] - want[j]) <= 3, `cell ${cell.q},${cell.k}: ${seen.px[i]} for ${cell.fill}`);
    assert.ok(api.patterns[0][cell.q][cell.k] > 0);
  });
  assert.deepEqual(log.errors, []);
  await close();
});

test("the numbers save as CSV: a head's pattern and every head's, equal to the API's with the tokens", async () => {
  const { page, log, close } = await open({ hash: LINK });
  await settle(page, () => document.querySelectorAll("table.heatmap").length === 12);
  const api = await apiAnswer(log);
  await page.selectOption("#export-what", "pattern:4");
  const one = await saved(page, "#export-csv");
  assert.equal(one.name, "attention-gpt2-small-shape-head-5-pattern.csv");
  const rows = parseCsv(one.text);
  assert.deepEqual(rows[0], ["query \\ key", ...TOKENS]);
  assert.equal(rows.length, 4);
  rows.slice(1).forEach((r, q) => {
    assert.equal(r[0], TOKENS[q]);
    assert.deepEqual(r.slice(1).map(Number), api.patterns[4][q], `row ${q + 1}`);
  });
  // Chosen from the head view, the same head's numbers.
  await page.selectOption("#export-what", "lines:4");
  assert.equal((await saved(page, "#export-csv")).text, one.text);

  const all = parseCsv((await saved(page, "#export-csv-all")).text);
  assert.deepEqual(all[0], ["head", "query", "query_token", "key", "key_token", "weight"]);
  assert.equal(all.length, 1 + 12 * 9);
  for (const [head, q, qt, k, kt, w] of all.slice(1)) {
    assert.equal(qt, TOKENS[q - 1]);
    assert.equal(kt, TOKENS[k - 1]);
    assert.equal(Number(w), api.patterns[api.heads.indexOf(head - 1)][q - 1][k - 1], `head ${head}, ${q} → ${k}`);
  }
  // Each head, query and key once.
  assert.equal(new Set(all.slice(1).map((r) => [r[0], r[1], r[3]].join())).size, 12 * 9);
  assert.deepEqual(log.errors, []);
  await close();
});

test("the whole view saves as one HTML file that shows the same numbers with no script and no network", async () => {
  const { page, log, close } = await open({ hash: LINK });
  await settle(page, () => document.querySelectorAll("table.heatmap").length === 12);
  const api = await apiAnswer(log);
  const file = await saved(page, "#export-html");
  assert.equal(file.name, "attention-gpt2-small-shape-view.html");
  assert.ok(!/<script/i.test(file.text), "the file holds no script");
  assert.ok(!/<link\b/i.test(file.text), "and links no style sheet");
  const { page: view, other, errors, close: closeView } = await opened(file.buf, "text/html; charset=utf-8");
  await view.screenshot({ path: join(ARTIFACTS, "export-html-view.png"), fullPage: true });
  assert.deepEqual(other, [], "the saved view asked for nothing");
  assert.deepEqual(errors, []);
  const drawn = await view.$$eval("table.heatmap", (ts) => ts.map((t) => ({ head: +t.dataset.head,
    P: [...t.querySelectorAll("tbody tr")].map((tr) => [...tr.querySelectorAll("td")].map((td) => Number(td.dataset.value))),
    text: [...t.querySelectorAll("td")].map((td) => td.textContent),
    colour: getComputedStyle(t.querySelector("td")).backgroundColor })));
  assert.equal(drawn.length, 12);
  const live = await page.$$eval("table.heatmap", (ts) => ts.map((t) => ({
    text: [...t.querySelectorAll("td")].map((td) => td.textContent), colour: getComputedStyle(t.querySelector("td")).backgroundColor })));
  drawn.forEach((d, i) => {
    assert.deepEqual(d.P, api.patterns[api.heads.indexOf(d.head)], `head ${d.head + 1}`);
    assert.deepEqual(d.text, live[i].text, `head ${d.head + 1}'s numbers as shown`);
    // Styled as on the page: the style sheet came along.
    assert.equal(d.colour, live[i].colour);
  });
  const lines = await view.$$eval("#headview-heads svg", (svgs) => svgs.map((s) =>
    [...s.querySelectorAll("line")].map((l) => ({ q: +l.dataset.q, k: +l.dataset.k, o: Number(getComputedStyle(l).strokeOpacity), vis: getComputedStyle(l).visibility }))));
  assert.equal(lines.length, 12);
  lines.forEach((ls, h) => ls.forEach((l) => {
    near(l.o, api.patterns[h][l.q][l.k], 1e-6, `head ${h + 1}, line ${l.q} → ${l.k}`);
    assert.equal(l.vis, "visible");
  }));
  // It says what it shows; its step is there, its panel of buttons is not.
  assert.match(await view.textContent("header .lede"), /model gpt2-small-shape, 3 tokens \(the "cat", sat\), mask causal/);
  assert.equal(await view.locator("#export").count(), 0);
  assert.equal(await view.locator("script").count(), 0);
  assert.deepEqual(await contrastFailures(view), []);
  await closeView();
  assert.deepEqual(log.errors, []);
  await close();
});

test("the export buttons are reached by the keyboard, and meet AA contrast", async () => {
  const { page, log, close } = await open();
  await page.focus("#export-what");
  const order = ["export-svg", "export-png", "export-csv", "export-csv-all", "export-html"];
  for (const id of order) {
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement.id), id);
  }
  // A pattern focused (or clicked) is the one offered.
  await page.focus('#headview-heads svg[data-head="0"] text.tok');
  assert.equal(await page.inputValue("#export-what"), "lines:0");
  await page.focus('table.heatmap[data-head="0"]');
  assert.equal(await page.inputValue("#export-what"), "pattern:0");
  // Enter on a focused button saves.
  await page.focus("#export-csv");
  const csv = await saved(page, null, "Enter");
  assert.equal(csv.name, "attention-demo-4d-head-1-pattern.csv");
  assert.match(await page.textContent("#export-status"), /Saved attention-demo-4d-head-1-pattern.csv/);
  await page.locator("#export").screenshot({ path: join(ARTIFACTS, "export-panel.png") });
  assert.deepEqual(await contrastFailures(page), []);
  assert.deepEqual(log.errors, []);
  await close();
});

test("on a phone the results come first, the controls fold by keyboard, and the step buttons stay on screen", async () => {
  for (const hash of ["", undefined]) {
    const { page, log, close } = await open({ width: 390, height: 844, ...(hash === "" ? { hash } : {}) });
    if (hash === "") await settle(page, () => !document.querySelector("#story").hidden);
    await page.screenshot({ path: join(ARTIFACTS, `export-phone-${hash === "" ? "story" : "woaini"}.png`) });
    const top = (await page.locator("table.heatmap").first().boundingBox()).y;
    assert.ok(top >= 0 && top < 844, `the first pattern's top is at ${top} px`);
    // Folded: one button says what is computed, and the Tab key reaches it first after the skip link.
    assert.equal(await page.locator("#controls").isVisible(), false);
    assert.equal(await page.getAttribute("#controls-toggle", "aria-expanded"), "false");
    assert.match(await page.textContent("#controls-now"), hash === "" ? /demo-stories · a fluffy blue/ : /demo-4d · 我 爱 你 · mask none/);
    await page.keyboard.press("Tab");
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement.id), "controls-toggle");
    await page.keyboard.press("Enter");
    assert.equal(await page.getAttribute("#controls-toggle", "aria-expanded"), "true");
    assert.equal(await page.locator("#sentence").isVisible(), true);
    assert.deepEqual(await contrastFailures(page), []);
    await page.keyboard.press("Space");
    assert.equal(await page.locator("#sentence").isVisible(), false);
    assert.equal(await page.getAttribute("#controls-toggle", "aria-expanded"), "false");
    assert.deepEqual(await contrastFailures(page), []);
    assert.deepEqual(log.errors, []);
    await close();
  }
  // A field's error opens the controls, so that it is seen next to its field.
  {
    const { page, close } = await open({ width: 390, height: 844 });
    await page.evaluate(() => { document.querySelector("#scale").value = "abc"; document.querySelector("#scale").dispatchEvent(new Event("change")); });
    await page.locator("#scale-error .message").waitFor();
    assert.equal(await page.locator("#scale").isVisible(), true);
    await close();
  }
  // A 16-token step is longer than the screen; scrolled halfway through it, its buttons are in view.
  const { page, log, close } = await open({ width: 390, height: 844,
    hash: "#" + new URLSearchParams({ model: "demo-4d", sentence: SIXTEEN, step: "Q" }) });
  await settle(page, () => document.querySelectorAll("table.heatmap tbody tr").length === 16 && document.querySelector("table[data-matrix]"));
  const step = await page.locator("#step").boundingBox();
  assert.ok(step.height > 844, `the step is ${step.height} px tall`);
  for (const y of [step.y + 50, step.y + step.height - 500]) {
    await page.evaluate((to) => window.scrollTo(0, to), y);
    const now = await page.locator("#step").boundingBox();
    assert.ok(now.y < 0 && now.y + now.height > 400, `scrolled into the step: its top at ${now.y} px`);
    for (const id of ["#step-prev", "#step-next"]) {
      const b = await page.locator(id).boundingBox();
      assert.ok(b.y >= 0 && b.y + b.height <= 844, `${id} at ${b.y} px, scrolled to ${y} px`);
    }
  }
  await page.screenshot({ path: join(ARTIFACTS, "export-phone-step.png") });
  // And they work from there: Next shows the next step, still in view.
  await page.click("#step-next");
  await settle(page, () => document.querySelector("#step-list [aria-current=step]").dataset.step === "K");
  assert.deepEqual(log.errors, []);
  await close();
});

test("a token that a spreadsheet would read as a formula is saved as text in the CSV", async () => {
  const { page, log, close } = await open({ hash: "#" + new URLSearchParams({ model: "demo-4d", sentence: "=1+2 @x -y 你" }) });
  await settle(page, () => document.querySelectorAll("table.heatmap").length === 1);
  const want = ["'=1+2", "'@x", "'-y", "你"];
  const one = parseCsv((await saved(page, "#export-csv")).text);
  assert.deepEqual(one[0], ["query \\ key", ...want]);
  assert.deepEqual(one.slice(1).map((r) => r[0]), want);
  const all = parseCsv((await saved(page, "#export-csv-all")).text);
  assert.deepEqual([...new Set(all.slice(1).map((r) => r[2]))], want);
  assert.deepEqual([...new Set(all.slice(1).map((r) => r[4]))], want);
  // The numbers stay numbers: a weight is never prefixed.
  for (const r of all.slice(1)) assert.ok(Number.isFinite(Number(r[5])), r[5]);
  assert.deepEqual(log.errors, []);
  await close();
});
