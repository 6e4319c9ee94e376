// The weights editor: W_q, W_k, W_v (biases, W_o, b_o) edited cell by cell or pasted as a book
// prints them, sent inline instead of the model's name, kept in the link, and reset. Every drawn
// number is compared with the API's answer to the very body the page sent.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  WOAINI, WOAINI_LINK, open, shot, apiPost, apiGet, settle, drawnPatterns, drawnMatrix, contrastFailures, STORIES,
  showControls,
} from "./harness.mjs";

const computed = () => !document.body.hasAttribute("aria-busy") && document.querySelector("#status").textContent.startsWith("Computed");
// One edit's requests: exactly one POST /v1/attention, whose body is returned.
async function oneRequest(page, log, act, ready = computed) {
  const before = log.requests.length, posts = log.posts.length;
  await act();
  await settle(page, ready);
  await page.waitForTimeout(200);
  const sent = log.requests.slice(before);
  assert.deepEqual(sent.map((u) => new URL(u).pathname), ["/v1/attention"], `sent ${sent.join(" ")}`);
  assert.equal(log.posts.length, posts + 1);
  return log.posts[log.posts.length - 1];
}
const cell = (page, i, j) => page.locator(`#weights-editor input[data-i="${i}"][data-j="${j}"]`);
const weightsShown = (page) => page.$$eval("#weights-editor tbody tr", (trs) => trs.map((tr) => [...tr.querySelectorAll("input")].map((c) => c.value)));
const clone = (x) => JSON.parse(JSON.stringify(x));
// The editor is folded until opened.
async function openEditor(page) {
  // On a phone the controls are folded above the results: opened first.
  await showControls(page);
  await page.locator("#weights-summary").waitFor();
  if (!await page.$eval("#weights-on", (d) => d.open)) await page.click("#weights-summary");
  await page.locator("#weights-editor input").first().waitFor();
}

test("a W_q cell of demo-4d edited: one request, inline, the model's weights but that cell, patterns the API's", async () => {
  const model = await apiGet("/v1/models/demo-4d?weights=true");
  const { page, log, close } = await open();
  await openEditor(page);
  assert.equal(await page.inputValue("#weights-matrix"), "heads/0/w_q");
  // The editor shows the model's W_q, and says the model's name is sent.
  assert.deepEqual(await weightsShown(page), model.weights.heads[0].w_q.map((r) => r.map(String)));
  assert.equal(await page.locator("#weights-reset").isVisible(), false);
  const before = await drawnPatterns(page);

  const body = await oneRequest(page, log, async () => { await cell(page, 0, 1).fill("2.5"); await cell(page, 0, 1).press("Enter"); });
  const sent = JSON.parse(body);
  assert.equal(sent.model, undefined);
  const want = clone(model.weights);
  want.heads[0].w_q[0][1] = 2.5;
  assert.deepEqual(sent.weights, want);
  assert.deepEqual(sent.embeddings, WOAINI);
  const api = await apiPost(body);
  assert.equal(api.status, 200);
  const drawn = await drawnPatterns(page);
  assert.deepEqual(drawn, api.body.patterns);
  assert.notDeepEqual(drawn, before, "the edit changes the pattern");
  // The walk-through shows the weights that were sent, and the Q the service computed with them.
  await page.click("button[data-step=W]");
  assert.deepEqual(await drawnMatrix(page, "W_q"), want.heads[0].w_q);
  assert.match(await page.textContent("#step"), /edited on this page, sent inline/);
  await page.click("button[data-step=Q]");
  assert.deepEqual(await drawnMatrix(page, "Q"), api.body.q[0]);
  // The changed cell is marked, the hint says what goes, and the page has no stray "null".
  assert.equal(await cell(page, 0, 1).getAttribute("class"), "changed");
  assert.match(await page.textContent("#weights-hint"), /1 number differ/);
  assert.doesNotMatch(await page.textContent("main"), /\bnull\b|\bundefined\b|NaN/);
  assert.deepEqual(await contrastFailures(page), []);
  await shot(page, "weights-01-edited");

  // Back to the model's weights: by name again, one request, the model's patterns.
  const reset = JSON.parse(await oneRequest(page, log, () => page.click("#weights-reset")));
  assert.equal(reset.model, "demo-4d");
  assert.equal(reset.weights, undefined);
  assert.deepEqual(await weightsShown(page), model.weights.heads[0].w_q.map((r) => r.map(String)));
  assert.deepEqual(await drawnPatterns(page), (await apiPost(reset)).body.patterns);
  assert.deepEqual(await drawnPatterns(page), before);
  assert.equal(new URLSearchParams(await page.evaluate(() => location.hash.slice(1))).has("w"), false);
  assert.equal(await page.locator("#weights-reset").isVisible(), false);
  assert.equal(await page.evaluate(() => document.activeElement.id), "weights-matrix");
  // Typing the model's own value back is the model again: sent by name.
  await cell(page, 2, 2).fill("7");
  await cell(page, 2, 2).press("Enter");
  await settle(page, computed);
  const back = JSON.parse(await oneRequest(page, log, async () => { await cell(page, 2, 2).fill("0"); await cell(page, 2, 2).press("Enter"); }));
  assert.equal(back.model, "demo-4d");
  assert.deepEqual(log.errors, []);
  await close();
});

test("paste a matrix as a book prints it: − and brackets taken, a wrong shape or number named by row and column", async () => {
  const { page, log, close } = await open();
  await openEditor(page);
  await page.selectOption("#weights-matrix", "heads/0/w_k");
  await page.click("#weights-paste-summary");
  assert.equal(await page.textContent("#weights-paste-use"), "Use for W_k");
  // A wrong shape: nothing sent, and the row at fault named.
  const posts = log.posts.length;
  await page.fill("#weights-paste-text", "1 0 0 0\n0 1 0\n0 0 1 0\n0 0 0 1");
  await page.click("#weights-paste-use");
  assert.equal(await page.textContent("#weights-paste-error"), "Row 2 has 3 numbers, but W_k is 4 × 4 (a row per dimension of d_model, a column per dimension of d_head): 4 per row.");
  assert.equal(await page.getAttribute("#weights-paste-text", "aria-invalid"), "true");
  await page.fill("#weights-paste-text", "1 0 0 0\n0 1 0 0\n0 0 1 0");
  await page.click("#weights-paste-use");
  assert.match(await page.textContent("#weights-paste-error"), /^3 rows, but W_k is 4 × 4/);
  await page.fill("#weights-paste-text", "1 0 0 0\n0 1 0 0\n0 0 1 zero\n0 0 0 1");
  await page.click("#weights-paste-use");
  assert.equal(await page.textContent("#weights-paste-error"), "Row 3, column 4: “zero” is not a number.");
  assert.deepEqual(await contrastFailures(page), []);
  await page.waitForTimeout(200);
  assert.equal(log.posts.length, posts, "a paste the page refuses sends nothing");

  // A book's matrix: unicode minus, brackets of several kinds, commas, tabs, a leading "." and "+".
  const book = "⎡ 1   −0.5   0    2 ⎤\n[ 0,  1,  .25,  0 ]\n(−1\t0\t1\t0)\n| 0  0  +3  −.5 |";
  const want = [[1, -0.5, 0, 2], [0, 1, 0.25, 0], [-1, 0, 1, 0], [0, 0, 3, -0.5]];
  const body = await oneRequest(page, log, async () => {
    await page.fill("#weights-paste-text", book);
    await page.click("#weights-paste-use");
  });
  const sent = JSON.parse(body);
  assert.deepEqual(sent.weights.heads[0].w_k, want);
  assert.equal(await page.textContent("#weights-paste-error"), "");
  assert.equal(await page.getAttribute("#weights-paste-text", "aria-invalid"), null);
  assert.deepEqual(await weightsShown(page), want.map((r) => r.map(String)));
  const api = await apiPost(body);
  assert.deepEqual(await drawnPatterns(page), api.body.patterns);
  // JSON on one line, and LaTeX, are rows too; a bias takes a column as well as a row.
  await page.selectOption("#weights-matrix", "heads/0/b_q");
  const bq = JSON.parse(await oneRequest(page, log, async () => {
    await page.fill("#weights-paste-text", "0.5\n−1\n0\n2");
    await page.click("#weights-paste-use");
  }));
  assert.deepEqual(bq.weights.heads[0].b_q, [0.5, -1, 0, 2]);
  assert.deepEqual(bq.weights.heads[0].w_k, want);
  await page.selectOption("#weights-matrix", "heads/0/w_v");
  const wv = JSON.parse(await oneRequest(page, log, async () => {
    await page.fill("#weights-paste-text", "\\begin{bmatrix} 1 & 2 & 3 & 4 \\\\ 5 & 6 & 7 & 8 \\\\ 0 & 0 & 0 & 0 \\\\ −1 & −2 & −3 & −4 \\end{bmatrix}");
    await page.click("#weights-paste-use");
  }));
  assert.deepEqual(wv.weights.heads[0].w_v, [[1, 2, 3, 4], [5, 6, 7, 8], [0, 0, 0, 0], [-1, -2, -3, -4]]);
  await page.selectOption("#weights-matrix", "heads/0/w_q");
  const wq = JSON.parse(await oneRequest(page, log, async () => {
    await page.fill("#weights-paste-text", "[[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]");
    await page.click("#weights-paste-use");
  }));
  assert.deepEqual(wq.weights.heads[0].w_q, [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]);
  assert.deepEqual(await drawnPatterns(page), (await apiPost(wq)).body.patterns);
  await shot(page, "weights-02-pasted");
  assert.deepEqual(log.errors, []);
  await close();
});

test("the link keeps edited weights: reopened, the same request body and the same numbers", async () => {
  const first = await open();
  await openEditor(first.page);
  await first.page.selectOption("#weights-matrix", "heads/0/w_v");
  await cell(first.page, 3, 0).fill("−0.75".replace("−", "-"));
  await cell(first.page, 3, 0).press("Enter");
  await settle(first.page, () => new URLSearchParams(location.hash.slice(1)).has("w"));
  await first.page.selectOption("#weights-matrix", "heads/0/b_k");
  await cell(first.page, 0, 2).fill("1.5");
  await cell(first.page, 0, 2).press("Enter");
  await settle(first.page, () => JSON.parse(new URLSearchParams(location.hash.slice(1)).get("w") || "{}")["heads/0/b_k/2"] === "1.5");
  const hash = await first.page.evaluate(() => location.hash);
  assert.deepEqual(JSON.parse(new URLSearchParams(hash.slice(1)).get("w")), { "heads/0/w_v/3/0": "-0.75", "heads/0/b_k/2": "1.5" });
  const body = first.log.posts[first.log.posts.length - 1];
  const drawn = await drawnPatterns(first.page);
  await first.close();

  const again = await open({ hash });
  await settle(again.page, computed);
  assert.equal(again.log.posts.length, 1, "one request on opening");
  assert.equal(again.log.posts[0], body);
  assert.deepEqual(await drawnPatterns(again.page), drawn);
  assert.deepEqual(drawn, (await apiPost(body)).body.patterns);
  await again.page.selectOption("#weights-matrix", "heads/0/w_v");
  assert.equal(await cell(again.page, 3, 0).inputValue(), "-0.75");
  assert.equal(await again.page.locator("#weights-reset").isVisible(), true);
  assert.equal(await again.page.$eval("#weights-on", (d) => d.open), true, "edited weights open their editor");
  assert.deepEqual(again.log.errors, []);
  await again.close();
  // A link whose cells are not the model's places are left out; the rest still opens.
  const odd = await open({ hash: WOAINI_LINK + "&w=" + encodeURIComponent('{"heads/9/w_q/0/0":"1","w_o/0/0":"2","heads/0/w_q/0/0":5,"x":"1"}') });
  await settle(odd.page, computed);
  assert.equal(JSON.parse(odd.log.posts[0]).model, "demo-4d");
  assert.equal(await odd.page.textContent("#weights-link-note"), "4 of the link's 4 edited weights name no cell of demo-4d (or are not text) and were left out.");
  assert.deepEqual(odd.log.errors, []);
  await odd.close();
  // The model's weights out of reach: the link's cells are not applied, and the page says so.
  const lost = await open({ hash: WOAINI_LINK + "&w=" + encodeURIComponent('{"heads/0/w_q/0/0":"2"}'),
    prepare: (p) => p.route("**/v1/models/demo-4d?weights=true", (r) => r.fulfill({ status: 503, contentType: "application/json",
      headers: { "Retry-After": "1" }, body: '{"error":{"code":"overloaded","message":"busy"}}' })) });
  await settle(lost.page, computed);
  await lost.page.waitForFunction(() => !document.querySelector("#weights-link-note").hidden);
  assert.equal(await lost.page.textContent("#weights-link-note"),
    "The link's 1 edited weight could not be applied: the model's weights could not be fetched; demo-4d's own weights are computed instead.");
  assert.equal(JSON.parse(lost.log.posts[0]).model, "demo-4d");
  await lost.close();
});

test("the API's error on an inline weight: next to its cell, in 1-based words, its matrix brought on screen", async () => {
  const { page, log, close } = await open();
  await openEditor(page);
  await page.selectOption("#weights-matrix", "heads/0/w_k");
  const body = await oneRequest(page, log, async () => { await cell(page, 1, 2).fill("1e39"); await cell(page, 1, 2).press("Enter"); },
    () => !document.body.hasAttribute("aria-busy") && !!document.querySelector("#weights-error .message"));
  const api = await apiPost(body);
  assert.equal(api.status, 422);
  assert.equal(api.body.error.path, "/weights/heads/0/w_k/1/2");
  assert.equal(api.body.error.message.slice(0, 25), "weights.heads[0].w_k[1][2]".slice(0, 25));
  const rest = api.body.error.message.replace(/^weights\.heads\[0\]\.w_k\[1\]\[2\]/, "");
  assert.equal(await page.textContent("#weights-error .message"), "W_k, row 2, column 3" + rest);
  assert.ok((await page.textContent("#weights-error .code")).includes(`422 ${api.body.error.code} at /weights/heads/0/w_k/1/2`));
  assert.equal(await cell(page, 1, 2).getAttribute("aria-invalid"), "true");
  assert.equal(await cell(page, 1, 2).getAttribute("aria-describedby"), "weights-error");
  // The message is right under the matrix that holds the cell.
  const [cellBox, errBox] = [await cell(page, 1, 2).boundingBox(), await page.locator("#weights-error").boundingBox()];
  assert.ok(errBox.y > cellBox.y && errBox.y - cellBox.y < 200, `the error is ${errBox.y - cellBox.y}px below the cell`);
  assert.equal(await page.locator(".stale-note").isVisible(), true);
  await shot(page, "weights-03-error");
  // The error's colours (the last results are dimmed on purpose, and left out here).
  await page.evaluate(() => document.querySelector("#results").classList.remove("stale"));
  assert.deepEqual(await contrastFailures(page), []);
  await page.evaluate(() => document.querySelector("#results").classList.add("stale"));
  // Another matrix on screen, a good edit there: the service still names the bad cell, and the
  // editor goes back to its matrix.
  await page.selectOption("#weights-matrix", "heads/0/w_q");
  await oneRequest(page, log, async () => { await cell(page, 0, 0).fill("0.5"); await cell(page, 0, 0).press("Enter"); },
    () => !document.body.hasAttribute("aria-busy") && !!document.querySelector("#weights-error .message"));
  assert.equal(await page.inputValue("#weights-matrix"), "heads/0/w_k");
  assert.equal(await cell(page, 1, 2).getAttribute("aria-invalid"), "true");
  // Text that is no number: "is not a number".
  await oneRequest(page, log, async () => { await cell(page, 1, 2).fill("abc"); await cell(page, 1, 2).press("Enter"); },
    () => !document.body.hasAttribute("aria-busy") && document.querySelector("#weights-error .message")?.textContent.includes("not a number"));
  assert.equal(await page.textContent("#weights-error .message"), "W_k, row 2, column 3 is not a number");
  // Mended: one request, the error gone, the results fresh.
  await oneRequest(page, log, async () => { await cell(page, 1, 2).fill("1"); await cell(page, 1, 2).press("Enter"); });
  assert.equal(await page.locator("#weights-error .message").count(), 0);
  assert.equal(await cell(page, 1, 2).getAttribute("aria-invalid"), null);
  assert.equal(await page.locator(".stale-note").isVisible(), false);
  // The browser reports each refused request (422, 400) as a console error; nothing else.
  assert.deepEqual(log.errors.filter((e) => !/^Failed to load resource: the server responded with a status of 4(00|22)/.test(e)), []);
  await close();
});

test("demo-stories: named rows, biases and W_o sent as the model has them, E's rows with them", async () => {
  const model = await apiGet(`/v1/models/${STORIES}?weights=true`);
  const { page, log, close } = await open({ hash: "" });
  await settle(page, () => document.querySelectorAll("table.heatmap").length === 5 && !!document.querySelector("#weights-editor input"));
  assert.equal(await page.textContent("#weights-legend"), "Weights W_q, W_k, W_v of 5 heads");
  await openEditor(page);
  const rows = await page.$$eval("#weights-editor tbody th", (ths) => ths.map((t) => t.textContent));
  assert.deepEqual(rows, model.dimensions);
  await page.selectOption("#weights-matrix", "heads/2/w_q");
  const c = cell(page, 11, 3);
  assert.equal(await c.getAttribute("aria-label"), "W_q of head 3, row 12 (fiction), column 4");
  const body = await oneRequest(page, log, async () => { await c.fill("3"); await c.press("Enter"); });
  const sent = JSON.parse(body);
  const want = clone(model.weights);
  want.heads[2].w_q[11][3] = 3;
  assert.deepEqual(sent.weights, want);
  assert.equal(sent.embeddings.length, sent.tokens.length);
  assert.deepEqual(await drawnPatterns(page), (await apiPost(body)).body.patterns);
  // W_o is there too, its rows the heads' outputs, its columns the dimensions.
  await page.selectOption("#weights-matrix", "w_o");
  assert.equal(await page.locator("#weights-editor tbody tr").count(), 20);
  assert.equal(await page.textContent("#weights-editor tbody tr:nth-child(5) th"), "head 2, 1");
  // A wrong shape pasted names what the matrix is; its transpose is recognised.
  await page.selectOption("#weights-matrix", "heads/0/w_k");
  await page.click("#weights-paste-summary");
  await page.fill("#weights-paste-text", Array.from({ length: 4 }, () => Array(16).fill("0").join(" ")).join("\n"));
  await page.click("#weights-paste-use");
  assert.match(await page.textContent("#weights-paste-error"), /^This is 4 × 16, the transpose: W_k of head 1 is 16 × 4/);
  assert.deepEqual(await contrastFailures(page), []);
  await shot(page, "weights-04-stories");
  assert.deepEqual(log.errors, []);
  await close();
});

test("a wide model: the weights are not edited cell by cell, and the page says why", async () => {
  const { page, log, close } = await open({ hash: "#" + new URLSearchParams({ model: "gpt2-small-shape", sentence: "a b c" }) });
  await settle(page, () => document.querySelectorAll("table.heatmap").length === 12);
  assert.equal(await page.locator("#weights-on").isVisible(), false);
  assert.match(await page.textContent("#weights-hint"), /^gpt2-small-shape's weights are not edited cell by cell: 12 heads of W_q, W_k, W_v, each 768 × 64, and W_o make about 2,359,296 numbers, too many/);
  assert.equal(JSON.parse(log.posts[log.posts.length - 1]).model, "gpt2-small-shape");
  assert.deepEqual(log.errors, []);
  await close();
});

test("the weights by keyboard alone: the editor opened, matrix, cells, the paste box and the reset", async () => {
  const { page, log, close } = await open();
  await page.locator("#weights-summary").waitFor();
  const reach = async (n) => {
    const reached = new Set();
    for (let i = 0; i < n; i++) {
      await page.keyboard.press("Tab");
      reached.add(await page.evaluate(() => {
        const a = document.activeElement;
        return a.closest("#weights-editor") ? "weights-cell" : a.id || a.tagName;
      }));
    }
    return reached;
  };
  await page.focus("#embeddings-editor input");
  assert.ok((await reach(20)).has("weights-summary"), "Tab reaches the editor's summary");
  // Folded, its cells are out of the way; Enter opens it, and Tab then reaches all of it.
  await page.focus("#weights-summary");
  await page.keyboard.press("Enter");
  const inside = await reach(30);
  for (const id of ["weights-matrix", "weights-cell", "weights-paste-summary"]) assert.ok(inside.has(id), `Tab never reaches ${id}`);
  // The matrix by arrow key, a cell typed into, Enter: one request.
  await page.focus("#weights-matrix");
  await page.keyboard.press("ArrowDown");
  assert.equal(await page.inputValue("#weights-matrix"), "heads/0/b_q");
  await page.keyboard.press("Tab");
  await page.keyboard.type("9");
  const sent = JSON.parse(await oneRequest(page, log, () => page.keyboard.press("Enter")));
  assert.equal(sent.weights.heads[0].b_q[0], 9);
  // The paste box: open it with Enter, type, Tab to its button, Enter.
  await page.focus("#weights-paste-summary");
  await page.keyboard.press("Enter");
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement.id), "weights-paste-text");
  await page.keyboard.type("1 2 3 4");
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement.id), "weights-paste-use");
  const pasted = JSON.parse(await oneRequest(page, log, () => page.keyboard.press("Enter")));
  assert.deepEqual(pasted.weights.heads[0].b_q, [1, 2, 3, 4]);
  // The reset is in reach, and takes the keyboard to the matrix choice.
  await page.focus("#weights-reset");
  const reset = JSON.parse(await oneRequest(page, log, () => page.keyboard.press("Enter")));
  assert.equal(reset.model, "demo-4d");
  assert.equal(await page.evaluate(() => document.activeElement.id), "weights-matrix");
  assert.deepEqual(log.errors, []);
  await close();
});

test("the editor open on W_o (20 × 16) fits a phone and a 1280 × 800 screen: wide matrices scroll in their box", async () => {
  for (const [width, height] of [[390, 844], [1280, 800]]) {
    const { page, log, close } = await open({ width, height, hash: "" });
    await settle(page, () => document.querySelectorAll("table.heatmap").length === 5 && !!document.querySelector("#weights-editor input"));
    await openEditor(page);
    await page.selectOption("#weights-matrix", "w_o");
    await page.click("#weights-paste-summary");
    const [scrollW, clientW] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
    assert.ok(scrollW <= clientW, `${width} px: the page is ${scrollW} px wide`);
    // W_q's four columns are whole: no scrolling inside its box.
    await page.selectOption("#weights-matrix", "heads/0/w_q");
    const [editorW, boxW] = await page.$eval("#weights-editor", (b) => [b.scrollWidth, b.clientWidth]);
    assert.ok(editorW <= boxW, `${width} px: W_q is ${editorW} px in a box of ${boxW} px`);
    assert.deepEqual(await contrastFailures(page), []);
    await shot(page, `weights-05-${width}`);
    assert.deepEqual(log.errors, []);
    await close();
  }
});

test("an example starts from its model's own weights", async () => {
  const { page, log, close } = await open();
  await openEditor(page);
  await cell(page, 0, 0).fill("3");
  await cell(page, 0, 0).press("Enter");
  await settle(page, () => new URLSearchParams(location.hash.slice(1)).has("w"));
  const sent = JSON.parse(await oneRequest(page, log, () => page.click("#example-woaini")));
  assert.equal(sent.model, "demo-4d");
  assert.equal(sent.weights, undefined);
  assert.equal(await cell(page, 0, 0).inputValue(), "1");
  assert.deepEqual(log.errors, []);
  await close();
});
