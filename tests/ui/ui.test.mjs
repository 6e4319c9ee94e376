// make test-ui: the teaching page (web/index.html, served at GET /) in Debian's Chromium,
// headless, driven by playwright-core, against the real server on a free loopback port.
//
// Every number the page draws is compared with the API's own answer to the same request: the
// test captures the body the page POSTs, sends it to the API itself, and compares cell by cell.
// Screenshots of each state go to tests/ui/artifacts/ (ignored by git).
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  ARTIFACTS, WOAINI, base, startServer, open, shot, apiPost, settle,
  drawnPatterns, lastPatternsPost,
  STORIES, ALL, words, near, stories, openStory, drawnMatrix, colHeads, drawnBars, drawnParts, parts, contrastFailures, fmtNumber,
  showControls,
} from "./harness.mjs";

test("a link to 我爱你 loads without console errors and opens it, computed", async () => {
  const { page, log, close } = await open();
  await shot(page, "01-open-woaini");
  assert.deepEqual(log.errors, []);
  assert.equal(await page.locator("#model").inputValue(), "demo-4d");
  assert.equal(await page.locator("#sentence").inputValue(), "我爱你");
  assert.deepEqual(await page.$$eval("table.heatmap tbody th", (ths) => ths.map((t) => t.textContent)),
    ["我", "爱", "你"]);
  // Nothing but this server: no CDN, no font, no favicon fetched elsewhere.
  for (const url of log.requests) assert.ok(url.startsWith(base + "/"), `the page fetched ${url}`);
  await close();
});

test("choosing demo-4d draws a 3 × 3 heatmap equal to the API's patterns", async () => {
  const { page, log, close } = await open();
  await page.selectOption("#model", "gpt2-small-shape");
  await settle(page, () => document.querySelectorAll("table.heatmap").length === 12);
  await page.selectOption("#model", "demo-4d");
  await settle(page, () => document.querySelectorAll("table.heatmap").length === 1);
  const drawn = await drawnPatterns(page);
  assert.equal(drawn.length, 1);
  assert.equal(drawn[0].length, 3);
  for (const row of drawn[0]) assert.equal(row.length, 3);
  // The page's own request, and the worked example's, both give these numbers.
  const sent = JSON.parse(lastPatternsPost(log));
  assert.equal(sent.model, "demo-4d");
  assert.deepEqual(sent.embeddings, WOAINI);
  const api = await apiPost({ model: "demo-4d", embeddings: WOAINI, mask: "none" });
  assert.equal(api.status, 200);
  assert.deepEqual(drawn, api.body.patterns);
  await shot(page, "02-demo-4d");
  assert.deepEqual(log.errors, []);
  await close();
});

test("switching the mask to causal zeroes the upper triangle", async () => {
  const { page, log, close } = await open();
  assert.equal(await page.locator("#mask-none").isChecked(), true);
  await page.check("#mask-causal");
  await settle(page, () => document.querySelectorAll("table.heatmap td.masked").length === 3);
  const [P] = await drawnPatterns(page);
  for (let q = 0; q < 3; q++)
    for (let k = q + 1; k < 3; k++) assert.equal(P[q][k], 0, `P[${q}][${k}]`);
  const api = await apiPost({ model: "demo-4d", embeddings: WOAINI, mask: "causal" });
  assert.deepEqual([P], api.body.patterns);
  assert.equal(P[0][0], 1);
  const masked = await page.$$eval("table.heatmap td.masked", (tds) => tds.map((td) => [+td.dataset.q, +td.dataset.k]));
  assert.deepEqual(masked.sort(), [[0, 1], [0, 2], [1, 2]]);
  await shot(page, "03-causal");
  // And back: no cell is masked, and the upper triangle is no longer 0.
  await page.check("#mask-none");
  await settle(page, () => document.querySelectorAll("table.heatmap td.masked").length === 0);
  const [Q] = await drawnPatterns(page);
  assert.ok(Q[0][1] > 0 && Q[0][2] > 0 && Q[1][2] > 0);
  assert.deepEqual(log.errors, []);
  await close();
});

test("gpt2-small-shape draws its 12 heads side by side, equal to the API's patterns", async () => {
  const { page, log, close } = await open();
  await page.click("#example-gpt2");
  await settle(page, () => document.querySelectorAll("table.heatmap").length === 12);
  const drawn = await drawnPatterns(page);
  assert.equal(drawn.length, 12);
  const tokens = "a fluffy blue creature roamed the verdant forest".split(" ");
  for (const P of drawn) {
    assert.equal(P.length, tokens.length);
    for (const row of P) assert.equal(row.length, tokens.length);
  }
  const body = lastPatternsPost(log);
  const sent = JSON.parse(body);
  assert.equal(sent.model, "gpt2-small-shape");
  assert.deepEqual(sent.tokens, tokens);
  assert.equal(sent.mask, "causal");
  assert.equal(sent.embeddings[0].length, 768);
  const api = await apiPost(body);
  assert.equal(api.status, 200);
  assert.deepEqual(drawn, api.body.patterns);
  // Not all alike: the embeddings differ per token, so the heads' patterns are not uniform.
  assert.notDeepEqual(drawn[0][7], drawn[0][7].map(() => 1 / 8));
  // The same text gives the same embeddings on every load.
  const again = await open();
  await again.page.click("#example-gpt2");
  await settle(again.page, () => document.querySelectorAll("table.heatmap").length === 12);
  assert.equal(lastPatternsPost(again.log), body);
  await again.close();
  await shot(page, "04-gpt2-small-shape");
  assert.deepEqual(log.errors, []);
  await close();
});

test("the step-by-step view shows Q for 我 equal to the API's q, and every step", async () => {
  const { page, log, close } = await open();
  const api = await apiPost({ model: "demo-4d", embeddings: WOAINI, mask: "none",
    return: ["q", "k", "v", "scores", "patterns", "head_outputs", "delta", "embeddings"] });
  await page.click("button[data-step=Q]");
  const q = await page.$$eval('table[data-matrix=Q] tbody tr[data-row="0"] td', (tds) => tds.map((td) => Number(td.dataset.value)));
  assert.deepEqual(q, api.body.q[0][0]);
  assert.equal(await page.textContent('table[data-matrix=Q] tbody tr[data-row="0"] th'), "我");
  // The worked example by hand: q_我 = [0.4, −0.1, 0.2, 0.1], as shown.
  const shown = await page.$$eval('table[data-matrix=Q] tbody tr[data-row="0"] td', (tds) => tds.map((td) => td.textContent));
  assert.deepEqual(shown, ["0.4", "−0.1", "0.2", "0.1"]);
  await shot(page, "05-step-q");

  // Each step, walked with the Next button, shows its matrix with the API's numbers.
  const expect = {
    E: WOAINI, Q: api.body.q[0], K: api.body.k[0], V: api.body.v[0],
    KT: api.body.k[0][0].map((_, j) => api.body.k[0].map((r) => r[j])),
    S: api.body.scores[0], P: api.body.patterns[0], Z: api.body.head_outputs[0],
    dE: api.body.delta, E2: api.body.embeddings,
  };
  const raw = await apiPost({ model: "demo-4d", embeddings: WOAINI, mask: "none", scale: 1, return: ["scores"] });
  expect.QKT = raw.body.scores[0];
  await page.click("button[data-step=E]");
  const seen = [];
  for (;;) {
    const step = await page.getAttribute("#step", "data-step");
    seen.push(step);
    if (expect[step]) {
      const M = await page.$$eval(`table[data-matrix="${step}"] tbody tr`, (trs) =>
        trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => Number(td.dataset.value))));
      assert.deepEqual(M, expect[step], `step ${step}`);
    }
    if (await page.isDisabled("#step-next")) break;
    await page.click("#step-next");
  }
  assert.deepEqual(seen, ["E", "W", "Q", "K", "V", "KT", "QKT", "S", "P", "Z", "dE", "E2"]);
  // W_q as the model holds it, and the softmax of a row worked out next to the API's row.
  await page.click("button[data-step=W]");
  const wq = await page.$$eval("table[data-matrix=W_q] tbody tr", (trs) =>
    trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => Number(td.dataset.value))));
  assert.deepEqual(wq, [[1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 0, 1], [0, 1, 1, 0]]);
  await page.click("button[data-step=P]");
  await page.click('.rowpick button[data-row="1"]');
  const worked = await page.$$eval('table[data-matrix=softmax-row] tbody tr[data-row="2"] td', (tds) => tds.map((td) => Number(td.dataset.value)));
  worked.forEach((p, k) => assert.ok(Math.abs(p - api.body.patterns[0][1][k]) < 1e-6, `row 爱, key ${k}`));
  await shot(page, "06-step-softmax");
  assert.deepEqual(log.errors, []);
  await close();
});

test("an invalid edit shows the API's error message next to the cell", async () => {
  const { page, close } = await open();
  const cell = page.locator('#embeddings-editor input[data-i="0"][data-j="1"]');
  await cell.fill("1e39");
  await cell.press("Enter");
  await page.locator("#embeddings-error .message").waitFor();
  const bad = [[0.1, "1e39", 0.3, 0.1], ...WOAINI.slice(1)];
  const api = await apiPost(`{"model":"demo-4d","embeddings":${JSON.stringify(bad).replace('"1e39"', "1e39")}}`);
  assert.equal(api.status, 422);
  // The API's 0-based place (embeddings[0][1]) in people's words: row 我, column 2; the API's
  // own words beside it.
  assert.equal(api.body.error.message.slice(0, 16), "embeddings[0][1]");
  assert.equal(await page.textContent("#embeddings-error .message"), "Row 我, column 2" + api.body.error.message.slice(16));
  assert.ok((await page.textContent("#embeddings-error .code")).includes(`“${api.body.error.message}”, 422 ${api.body.error.code} at /embeddings/0/1`));
  assert.equal(await cell.getAttribute("aria-invalid"), "true");
  // The patterns still drawn are the last good ones, and say so.
  assert.equal(await page.locator(".stale-note").isVisible(), true);
  await shot(page, "07-invalid-edit");
  // Text that is no number goes to the API as a string, and its words come back.
  await cell.fill("abc");
  await cell.press("Enter");
  await page.waitForFunction(() => document.querySelector("#embeddings-error .message")?.textContent.includes("not a number"));
  const api2 = await apiPost({ model: "demo-4d", embeddings: [[0.1, "abc", 0.3, 0.1], ...WOAINI.slice(1)] });
  assert.equal(api2.body.error.message, "embeddings[0][1] is a string, expected a number");
  assert.equal(await page.textContent("#embeddings-error .message"), "Row 我, column 2 is not a number");
  // Mended, the error goes away and the pattern is drawn again, no longer dimmed.
  await cell.fill("-0.2");
  await cell.press("Enter");
  await settle(page, () => document.querySelector("#status").textContent.startsWith("Computed"));
  assert.equal(await page.locator("#embeddings-error .message").count(), 0);
  assert.equal(await cell.getAttribute("aria-invalid"), null);
  assert.equal(await page.locator(".stale-note").isVisible(), false);
  // A row whose token comes twice is named by its number as well.
  await page.fill("#sentence", "我爱你爱");
  await page.press("#sentence", "Enter");
  await settle(page, () => document.querySelectorAll("table.heatmap tbody tr").length === 4);
  const twice = page.locator('#embeddings-editor input[data-i="3"][data-j="2"]');
  await twice.fill("x");
  await twice.press("Enter");
  await page.waitForFunction(() => document.querySelector("#embeddings-error .message")?.textContent.includes("not a number"));
  assert.equal(await page.textContent("#embeddings-error .message"), "Row 4 (爱), column 3 is not a number");
  await twice.fill("0.2");
  await twice.press("Enter");
  await settle(page, () => document.querySelector("#status").textContent.startsWith("Computed"));
  await page.fill("#sentence", "我爱你");
  await page.press("#sentence", "Enter");
  await settle(page, () => document.querySelectorAll("table.heatmap tbody tr").length === 3);
  // No tokens at all: the API's words, next to the sentence.
  await page.fill("#sentence", "  ");
  await page.press("#sentence", "Enter");
  await page.locator("#tokens-error .message").waitFor();
  const none = await apiPost({ model: "demo-4d", tokens: [], embeddings: [] });
  assert.equal(none.status, 422);
  assert.equal(await page.textContent("#tokens-error .message"), none.body.error.message);
  assert.equal(await page.getAttribute("#sentence", "aria-invalid"), "true");
  await close();
});

test("usable with the keyboard: every control in reach, heatmaps and steps by arrow keys", async () => {
  const { page, close } = await open();
  const reached = new Set();
  for (let i = 0; i < 60; i++) {
    await page.keyboard.press("Tab");
    reached.add(await page.evaluate(() => {
      const a = document.activeElement;
      return a.id || (a.dataset.step ? "step-" + a.dataset.step : a.matches("table.heatmap") ? "heatmap" : a.tagName);
    }));
  }
  for (const id of ["example-woaini", "example-adjective", "example-mole", "example-tower", "example-harry",
    "example-previous", "example-gpt2", "model", "sentence", "mask-none", "scale", "scale-range", "relative", "compute", "heatmap", "gathered-head",
    "step-next", "step-Q", "step"])
    assert.ok(reached.has(id), `Tab never reaches ${id}`);
  // The model by keyboard alone, down the list to gpt2-small-shape (a model with a vocabulary on
  // the way may refuse 我爱你's words: the tokens it lacks are marked).
  await page.focus("#model");
  for (let i = 0; i < 10 && await page.inputValue("#model") !== "gpt2-small-shape"; i++) {
    await page.keyboard.press("ArrowDown");
    await settle(page);
  }
  await settle(page, () => document.querySelectorAll("table.heatmap").length === 12);
  await page.click("#example-woaini");
  await settle(page, () => document.querySelectorAll("table.heatmap").length === 1);
  await page.focus("table.heatmap");
  await page.keyboard.press("ArrowRight");
  await page.keyboard.press("ArrowDown");
  const api = await apiPost({ model: "demo-4d", embeddings: WOAINI });
  assert.equal(await page.textContent(".readout"), `query 爱 → key 爱: ${api.body.patterns[0][1][1]}`);
  await page.focus("#step");
  await page.keyboard.press("ArrowRight");
  assert.equal(await page.getAttribute("#step", "data-step"), "W");
  // Choosing a step from the list keeps the keyboard on that list.
  await page.focus("#step-list button[data-step=Q]");
  await page.keyboard.press("Enter");
  assert.equal(await page.getAttribute("#step", "data-step"), "Q");
  assert.equal(await page.evaluate(() => document.activeElement.dataset.step), "Q");
  // Next on the last step: the button turns off, and the keyboard goes to the step itself.
  await page.click("button[data-step=dE]");
  await page.focus("#step-next");
  await page.keyboard.press("Enter");
  assert.equal(await page.evaluate(() => document.activeElement.id), "step");
  // A click on a cell reads that cell, not the first.
  await page.click('table.heatmap td[data-q="2"][data-k="1"]');
  assert.equal(await page.textContent(".readout"), `query 你 → key 爱: ${api.body.patterns[0][2][1]}`);
  await close();
});

test("tokens that name JavaScript's own properties are tokens like any other", async () => {
  const { page, log, close } = await open();
  await page.fill("#sentence", "a toString constructor __proto__ b");
  await page.press("#sentence", "Enter");
  await settle(page, () => document.querySelectorAll("table.heatmap tbody tr").length === 5);
  const body = lastPatternsPost(log);
  const sent = JSON.parse(body);
  assert.deepEqual(sent.tokens, ["a", "toString", "constructor", "__proto__", "b"]);
  assert.equal(sent.embeddings.length, 5);
  for (const row of sent.embeddings) assert.equal(row.length, 4);
  assert.deepEqual(await drawnPatterns(page), (await apiPost(body)).body.patterns);
  assert.deepEqual(log.errors, []);
  await close();
});

test("answers that arrive out of order: the last request is the one drawn", async () => {
  const { page, log, close } = await open();
  // Hold every causal answer back 600 ms, so that it lands after the none that followed it.
  await page.route("**/v1/attention", async (route) => {
    if (JSON.parse(route.request().postData()).mask === "causal") await new Promise((r) => setTimeout(r, 600));
    await route.continue();
  });
  await page.check("#mask-causal");
  await page.check("#mask-none");
  await page.waitForTimeout(900);
  await settle(page);
  const [P] = await drawnPatterns(page);
  const api = await apiPost({ model: "demo-4d", embeddings: WOAINI, mask: "none" });
  assert.deepEqual([P], api.body.patterns);
  assert.equal(await page.locator("table.heatmap td.masked").count(), 0);
  assert.deepEqual(log.errors, []);
  await close();
});

test("without the model's weights the walk-through says so, and claims nothing of W_o", async () => {
  // Refused from the start: the page keeps a model's weights once it has them.
  const { page, close } = await open({ prepare: (pg) => pg.route("**/v1/models/demo-4d?weights=true", (route) =>
    route.fulfill({ status: 503, contentType: "application/json", headers: { "Retry-After": "1" },
      body: '{"error":{"code":"overloaded","message":"busy"}}' })) });
  await page.check("#mask-causal");
  await settle(page, () => document.querySelectorAll("table.heatmap td.masked").length === 3);
  await page.click("button[data-step=W]");
  assert.match(await page.textContent("#step"), /could not be fetched/);
  await page.click("button[data-step=dE]");
  const text = await page.textContent("#step");
  assert.doesNotMatch(text, /identity/);
  assert.match(text, /could not be fetched/);
  await close();
});

test("the address names what is on screen, and opens it again", async () => {
  // A link to the causal pattern of 我爱你 at the scaled-scores step.
  const link = "#" + new URLSearchParams({ model: "demo-4d", sentence: "我爱你", mask: "causal", step: "S" });
  const first = await open({ hash: link });
  await settle(first.page, () => document.querySelectorAll("table.heatmap td.masked").length === 3);
  assert.equal(await first.page.getAttribute("#step", "data-step"), "S");
  assert.equal(await first.page.locator("#mask-causal").isChecked(), true);
  // An edit and a step change show in the address.
  const cell = first.page.locator('#embeddings-editor input[data-i="2"][data-j="3"]');
  await cell.fill("0.75");
  await cell.press("Enter");
  await settle(first.page, () => new URLSearchParams(location.hash.slice(1)).has("e"));
  await first.page.click("button[data-step=Z]");
  const hash = await first.page.evaluate(() => location.hash);
  const p = new URLSearchParams(hash.slice(1));
  assert.equal(p.get("step"), "Z");
  assert.equal(JSON.parse(p.get("e"))[2][3], "0.75");
  const drawn = await drawnPatterns(first.page);
  await first.close();
  // The same address elsewhere: the same state, the same numbers.
  const again = await open({ hash });
  await settle(again.page, () => document.querySelectorAll("table.heatmap td.masked").length === 3);
  assert.equal(await again.page.inputValue('#embeddings-editor input[data-i="2"][data-j="3"]'), "0.75");
  assert.equal(await again.page.getAttribute("#step", "data-step"), "Z");
  assert.deepEqual(await drawnPatterns(again.page), drawn);
  assert.deepEqual(again.log.errors, []);
  await again.close();
  // A link to a model this server lacks opens as the page does unlinked: on the first story.
  const other = await open({ hash: "#model=no-such-model&sentence=x" });
  assert.equal(await other.page.inputValue("#model"), "demo-stories");
  assert.equal(await other.page.inputValue("#sentence"), "a fluffy blue creature roamed the verdant forest");
  await other.close();
});

test("a service out of reach: the model list is asked for again, the last results are marked", async () => {
  // The first GET /v1/models fails, as when the server is still starting or overloaded.
  let refused = 0;
  const { page, log, close } = await open({
    drawn: false,
    prepare: (p) => p.route("**/v1/models", (route) => (refused++ === 0
      ? route.fulfill({ status: 503, contentType: "application/json", headers: { "Retry-After": "1" },
        body: '{"error":{"code":"overloaded","message":"the queue is full; retry later"}}' })
      : route.continue())),
  });
  await page.locator("#general-error .message").waitFor();
  assert.equal(await page.textContent("#general-error .message"), "the queue is full; retry later");
  assert.equal(await page.locator("table.heatmap").count(), 0);
  // Compute asks for the list again, and the worked example comes.
  await page.click("#compute");
  await page.locator("table.heatmap td").first().waitFor();
  await settle(page);
  assert.equal(await page.inputValue("#model"), "demo-4d");
  assert.equal(await page.locator("#general-error .message").count(), 0);
  // The connection fails: said so, and the patterns on screen are marked as the last ones.
  await page.route("**/v1/attention", (route) => route.abort("connectionrefused"));
  await page.check("#mask-causal");
  await page.waitForFunction(() => document.querySelector("#general-error").textContent.includes("Could not reach"));
  assert.equal(await page.locator(".stale-note").isVisible(), true);
  assert.equal(await page.locator("table.heatmap td.masked").count(), 0);
  await close();
  assert.ok(log.requests.filter((u) => u.endsWith("/v1/models")).length >= 2);
});

test("fits a 1280 × 800 screen and a phone-sized one", async () => {
  for (const [w, h, name] of [[1280, 800, "08-desktop-1280x800"], [390, 844, "09-phone-390x844"]]) {
    const { page, log, close } = await open({ width: w, height: h });
    // No sideways scrolling of the page itself; wide matrices scroll in their own boxes.
    const [scrollW, clientW] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
    assert.ok(scrollW <= clientW, `${w}px: the page is ${scrollW}px wide`);
    const box = await page.locator("table.heatmap").boundingBox();
    assert.ok(box.x >= 0 && box.x + box.width <= w, `${w}px: the heatmap is cut off`);
    await page.screenshot({ path: join(ARTIFACTS, name + ".png") });
    // The phone's controls are folded above the results (tests/ui/export.test.mjs): opened, they fit too.
    await showControls(page);
    const [sw0, cw0] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
    assert.ok(sw0 <= cw0, `${w}px, the controls open: the page is ${sw0}px wide`);
    // Every step of a 16-token walk-through too: its matrices scroll in their own boxes.
    await page.fill("#sentence", "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen");
    await page.press("#sentence", "Enter");
    await settle(page, () => document.querySelectorAll("table.heatmap tbody tr").length === 16);
    for (const step of ["E", "W", "Q", "K", "V", "KT", "QKT", "S", "P", "Z", "dE", "E2"]) {
      await page.click(`button[data-step=${step}]`);
      const [sw, cw] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
      assert.ok(sw <= cw, `${w}px, step ${step}: the page is ${sw}px wide`);
    }
    await page.click("button[data-step=QKT]");
    await page.locator("#walkthrough").screenshot({ path: join(ARTIFACTS, name + "-16-tokens-qkt.png") });
    assert.deepEqual(log.errors, []);
    await close();
  }
});

test("on a server with API keys, the page asks for one and shows the API's 401 until given", async () => {
  const keys = join(ARTIFACTS, "keys.txt");
  writeFileSync(keys, "a-key-for-the-page\n");
  const origin = await startServer("server-keys", ["--api-keys-file", keys]);
  const { page, close } = await open({ origin, drawn: false });
  await page.locator("#key-error .message").waitFor();
  // Examples wait for the model list.
  assert.equal(await page.isDisabled("#example-adjective"), true);
  const refused = await fetch(`${origin}/v1/models`);
  assert.equal(refused.status, 401);
  assert.equal(await page.textContent("#key-error .message"), (await refused.json()).error.message);
  assert.equal(await page.locator("#api-key").isVisible(), true);
  // A key no header can carry is refused by the page itself (fetch could not send it).
  await page.fill("#api-key", "clé-键");
  await page.press("#api-key", "Enter");
  assert.match(await page.textContent("#key-error"), /printable ASCII/);
  await page.fill("#api-key", "a-key-for-the-page");
  await page.press("#api-key", "Enter");
  await page.locator("table.heatmap td").first().waitFor();
  await settle(page);
  assert.equal(await page.locator("#key-error .message").count(), 0);
  assert.equal((await drawnPatterns(page))[0].length, 3);
  await close();
});

// ---- demo-stories: a designed model with a vocabulary and named dimensions -------------------

test("the page opens on the adjective story: tokens sent alone, E from the vocabulary, named dimensions", async () => {
  const sentence = "a fluffy blue creature roamed the verdant forest";
  const { page, log, close } = await open({ hash: "" });
  await settle(page, () => !document.querySelector("#story").hidden);
  await shot(page, "10-story-adjective");
  assert.deepEqual(log.errors, []);
  assert.equal(await page.inputValue("#model"), STORIES);
  assert.equal(await page.inputValue("#sentence"), sentence);
  assert.equal(await page.locator("#mask-causal").isChecked(), true);
  assert.equal(await page.getAttribute("#example-adjective", "aria-pressed"), "true");
  assert.match(await page.textContent("#story-lesson"), /noun/);
  assert.deepEqual(await page.$$eval("figure.head.focus", (f) => f.map((x) => +x.dataset.head)), [0]);
  // The vocabulary came from the API, and the tokens went alone.
  assert.ok(log.requests.some((u) => u.endsWith(`/v1/models/${STORIES}?vocabulary=true`)));
  const sent = JSON.parse(lastPatternsPost(log));
  assert.deepEqual(sent.tokens, words(sentence));
  assert.equal(sent.embeddings, undefined);
  const m = await stories();
  const api = await apiPost({ model: STORIES, tokens: words(sentence), mask: "causal", return: ALL });
  assert.equal(api.status, 200);
  assert.deepEqual(await drawnPatterns(page), api.body.patterns);
  // The story's numbers: creature listens to fluffy and blue, forest to verdant.
  const [P0] = await drawnPatterns(page);
  near(P0[3][1], 0.369, 5e-3, "creature → fluffy");
  near(P0[3][2], 0.608, 5e-3, "creature → blue");
  near(P0[7][6], 0.787, 5e-3, "forest → verdant");
  // The editor and E: the token's row plus its position's, under the dimension names.
  const E = words(sentence).map((t, i) => m.row(t, i));
  assert.deepEqual(await page.$$eval("#embeddings-editor thead th[scope=col]", (ths) => ths.slice(1).map((t) => t.textContent)), m.dimensions);
  assert.deepEqual(await page.$$eval("#embeddings-editor tbody tr", (trs) => trs.map((tr) =>
    [...tr.querySelectorAll("input")].map((c) => Number(c.value)))), E);
  for (const [step, want] of [["E", E], ["dE", api.body.delta], ["E2", api.body.embeddings]]) {
    await page.click(`button[data-step=${step}]`);
    assert.deepEqual(await drawnMatrix(page, step), want, `step ${step}`);
    assert.deepEqual((await colHeads(page, step)), m.dimensions, `step ${step}'s columns`);
  }
  // creature's E + ΔE: colour and texture, which its own embedding had not.
  const bars = await drawnBars(page);
  const ci = m.dimensions.indexOf("colour"), ti = m.dimensions.indexOf("texture");
  assert.equal(bars.colour.E, 0);
  assert.equal(bars.texture.E, 0);
  assert.equal(bars.colour.E2, api.body.embeddings[3][ci]);
  assert.equal(bars.texture.E2, api.body.embeddings[3][ti]);
  assert.ok(bars.colour.E2 > 0.5 && bars.texture.E2 > 0.3, `creature: colour ${bars.colour.E2}, texture ${bars.texture.E2}`);
  assert.ok(bars.colour.dE > 0 && bars.texture.dE > 0);
  await close();
});

test("what each word gathered: per key, weight × value, summed over heads, adds up to the API's ΔE", async () => {
  const sentence = "a fluffy blue creature roamed the verdant forest";
  const { page, log, close } = await openStory("adjective", sentence);
  // A story about one head opens the parts on that head; here all are summed.
  assert.equal(await page.inputValue("#gathered-head"), "0");
  await page.selectOption("#gathered-head", "all");
  const m = await stories();
  const api = (await apiPost({ model: STORIES, tokens: words(sentence), mask: "causal", return: ALL })).body;
  const n = api.n_tokens, heads = api.heads, bo = m.weights.b_o || new Array(api.d_model).fill(0);
  for (const q of [3, 7]) {
    await page.click(`#gathered-tokens button[data-q="${q}"]`);
    const drawn = await drawnParts(page, m.dimensions);
    const want = parts(api, m.weights.w_o, q, heads);
    for (let k = 0; k < n; k++)
      for (let j = 0; j < api.d_model; j++) near(drawn[k][j], want[k][j], 1e-9, `q ${q}, key ${k}, dim ${j}`);
    // Σ over keys, (+ b_o,) the page's ΔE, the API's ΔE, their difference.
    const sum = want[0].map((_, j) => want.reduce((s, r) => s + r[j], 0));
    sum.forEach((x, j) => near(drawn[n][j], x, 1e-9, `Σ, dim ${j}`));
    const rest = drawn.slice(n + 1);
    api.delta[q].forEach((x, j) => near(rest[rest.length - 2][j], x, 0, `the API's ΔE, dim ${j}`));
    sum.forEach((x, j) => near(x + bo[j], api.delta[q][j], 1e-5, `Σ + b_o against ΔE, dim ${j}`));
    assert.equal(await page.getAttribute("#gathered-check", "data-ok"), "true");
    assert.ok(Number(await page.getAttribute("#gathered-check", "data-max-diff")) <= 1e-5);
    assert.deepEqual(Object.values(await drawnBars(page)).map((b) => b.dE), api.delta[q]);
  }
  // creature's colour came from blue, its texture from fluffy: the parts say where.
  await page.click('#gathered-tokens button[data-q="3"]');
  const drawn = await drawnParts(page, m.dimensions);
  const ci = m.dimensions.indexOf("colour"), ti = m.dimensions.indexOf("texture");
  near(drawn[2][ci], api.delta[3][ci], 1e-6, "creature's colour, from blue");
  near(drawn[1][ti], api.delta[3][ti], 1e-6, "creature's texture, from fluffy");
  // One head on request: its own parts only.
  await page.selectOption("#gathered-head", "0");
  const h0 = await drawnParts(page, m.dimensions);
  const want0 = parts(api, m.weights.w_o, 3, [0]);
  for (let k = 0; k < n; k++) want0[k].forEach((x, j) => near(h0[k][j], x, 1e-9, `head 0, key ${k}, dim ${j}`));
  await page.locator("#gathered").screenshot({ path: join(ARTIFACTS, "11-gathered.png") });
  assert.deepEqual(log.errors, []);
  await close();
});

test("mole side by side: one token embedding, three meanings (mask none), and the causal lesson", async () => {
  const sentences = ["american shrew mole", "one mole of carbon dioxide", "take a biopsy of the mole"];
  const { page, log, close } = await openStory("mole", "one mole of carbon dioxide");
  await shot(page, "12-story-mole");
  const m = await stories();
  assert.equal(await page.locator("#mask-none").isChecked(), true);
  assert.deepEqual(await page.$$eval("figure.head.focus", (f) => f.map((x) => +x.dataset.head)), [1]);
  assert.match(await page.textContent("#story-note"), /after “mole”.*causal model cannot see/s);
  assert.match(await page.textContent("#story-note"), /later tokens/);
  const sent = JSON.parse(lastPatternsPost(log));
  assert.equal(sent.mask, "none");
  const drawnE2 = await page.$$eval("table[data-matrix=compare-E2] tbody tr", (trs) => trs.map((tr) => ({
    top: tr.dataset.top, values: Object.fromEntries([...tr.querySelectorAll("td[data-dim]")].map((td) => [td.dataset.dim, Number(td.dataset.value)])) })));
  const tops = [];
  const rowsE = [];
  for (const [si, s] of sentences.entries()) {
    const t = words(s), i = t.indexOf("mole");
    const api = await apiPost({ model: STORIES, tokens: t, mask: "none", return: ["embeddings"] });
    assert.equal(api.status, 200);
    for (const d of ["animal", "chemistry", "medicine"])
      assert.equal(drawnE2[si].values[d], api.body.embeddings[i][m.dimensions.indexOf(d)], `${s}: ${d}`);
    const v = drawnE2[si].values;
    tops.push(Object.keys(v).reduce((a, b) => (v[a] >= v[b] ? a : b)));
    assert.equal(drawnE2[si].top, tops[si]);
    // The winner is drawn bold, and its bar points right (positive), with a width.
    const look = await page.$eval(`table[data-matrix=compare-E2] tbody tr[data-sentence="${si}"]`, (tr, d) => {
      const td = tr.querySelector(`td[data-dim="${d}"]`);
      const span = td.previousElementSibling.querySelector("span");
      return { weight: getComputedStyle(td).fontWeight, cls: span.className, width: span.getBoundingClientRect().width };
    }, tops[si]);
    assert.equal(look.weight, "700", `${s}: ${tops[si]} in bold`);
    assert.equal(look.cls, "pos", `${s}: ${tops[si]}'s bar`);
    assert.ok(look.width > 10, `${s}: ${tops[si]}'s bar is ${look.width} px wide`);
    rowsE.push(m.row("mole", i));
  }
  assert.deepEqual(tops, ["animal", "chemistry", "medicine"]);
  near(drawnE2[0].values.animal, 0.965, 5e-3, "shrew mole: animal");
  near(drawnE2[1].values.chemistry, 0.973, 5e-3, "carbon dioxide mole: chemistry");
  near(drawnE2[2].values.medicine, 0.916, 5e-3, "biopsy mole: medicine");
  // E of mole: the same token embedding, so its rows differ only on pos and pos_sq.
  const cols = await colHeads(page, "compare-E");
  const drawnE = await drawnMatrix(page, "compare-E");
  rowsE.forEach((r, si) => r.forEach((x, j) => {
    const c = cols.indexOf(m.dimensions[j]);
    assert.equal(c >= 0 ? drawnE[si][c] : 0, x, `E of mole in ${sentences[si]}, ${m.dimensions[j]}`);
  }));
  for (let j = 0; j < m.d_model; j++)
    if (rowsE.some((r) => r[j] !== rowsE[0][j])) assert.ok(["pos", "pos_sq"].includes(m.dimensions[j]), m.dimensions[j]);
  // Causal: mole cannot see carbon dioxide from its own position.
  await page.check("#mask-causal");
  await settle(page, () => document.querySelector("#compare-title").textContent.includes("causal"));
  const causal = await page.$$eval('table[data-matrix=compare-E2] tbody tr[data-sentence="1"] td[data-dim=chemistry]', (tds) => Number(tds[0].dataset.value));
  assert.ok(causal < 0.5, `causal: mole's chemistry ${causal}`);
  // Undecided: nothing on the three is larger than 0 there, and nothing is bold.
  assert.equal(await page.$eval('table[data-matrix=compare-E2] tbody tr[data-sentence="1"]', (tr) => tr.dataset.top), "");
  assert.deepEqual(log.errors, []);
  await close();
});

test("miniature eiffel tower: tower gains paris from eiffel, then small from miniature (heads 0 and 1)", async () => {
  const { page, log, close } = await openStory("tower", "miniature eiffel tower");
  await shot(page, "13-story-tower");
  const m = await stories();
  assert.deepEqual(await page.$$eval("figure.head.focus", (f) => f.map((x) => +x.dataset.head)), [0, 1]);
  const rows = await page.$$eval("table[data-matrix=compare-E2] tbody tr", (trs) => trs.map((tr) =>
    Object.fromEntries([...tr.querySelectorAll("td[data-dim]")].map((td) => [td.dataset.dim, Number(td.dataset.value)]))));
  for (const [si, s] of ["tower", "eiffel tower", "miniature eiffel tower"].entries()) {
    const t = words(s);
    const api = await apiPost({ model: STORIES, tokens: t, mask: "causal", return: ["embeddings"] });
    for (const d of ["paris", "small"]) assert.equal(rows[si][d], api.body.embeddings[t.length - 1][m.dimensions.indexOf(d)], `${s}: ${d}`);
  }
  near(rows[0].paris, 0, 1e-6, "tower: paris");
  near(rows[0].small, 0, 1e-6, "tower: small");
  near(rows[1].paris, 0.982, 5e-3, "eiffel tower: paris");
  near(rows[1].small, 0, 1e-6, "eiffel tower: small");
  near(rows[2].paris, 0.965, 5e-3, "miniature eiffel tower: paris");
  near(rows[2].small, 0.926, 5e-3, "miniature eiffel tower: small");
  // The parts: paris from eiffel by head 1, small from miniature by head 0.
  const api = (await apiPost({ model: STORIES, tokens: words("miniature eiffel tower"), mask: "causal", return: ALL })).body;
  await page.click('#gathered-tokens button[data-q="2"]');
  for (const [h, key, d] of [[1, 1, "paris"], [0, 0, "small"]]) {
    await page.selectOption("#gathered-head", String(h));
    const drawn = await drawnParts(page, m.dimensions);
    const want = parts(api, m.weights.w_o, 2, [h]);
    near(drawn[key][m.dimensions.indexOf(d)], want[key][m.dimensions.indexOf(d)], 1e-9, `head ${h}: ${d}`);
    assert.ok(drawn[key][m.dimensions.indexOf(d)] > 0.9, `head ${h} gives tower ${d}`);
  }
  assert.deepEqual(log.errors, []);
  await close();
});

test("wizard harry against queen sussex william harry: head 2 reads fiction, head 3 royalty", async () => {
  const { page, log, close } = await openStory("harry", "wizard harry");
  await shot(page, "14-story-harry");
  const m = await stories();
  const fi = m.dimensions.indexOf("fiction"), ri = m.dimensions.indexOf("royalty");
  assert.deepEqual(await page.$$eval("figure.head.focus", (f) => f.map((x) => +x.dataset.head)), [2, 3]);
  assert.match(await page.textContent("#story-lesson"), /many heads/);
  const rows = await page.$$eval("table[data-matrix=compare-E2] tbody tr", (trs) => trs.map((tr) =>
    Object.fromEntries([...tr.querySelectorAll("td[data-dim]")].map((td) => [td.dataset.dim, Number(td.dataset.value)]))));
  assert.ok(rows[0].fiction > rows[0].royalty, "wizard harry: fiction over royalty");
  assert.ok(rows[1].royalty > rows[1].fiction, "queen sussex william harry: royalty over fiction");
  // Head 2's part of harry's ΔE in "wizard harry", then head 3's in the other sentence.
  for (const [sentence, h, dim, other, want] of [["wizard harry", 2, fi, ri, 0.982], ["queen sussex william harry", 3, ri, fi, 0.994]]) {
    if (sentence !== "wizard harry") {
      await page.click('#compare-body button[data-open="1"]');
      await settle(page, (s) => document.querySelector("#sentence").value === s &&
        document.querySelector("table.heatmap").querySelectorAll("tbody tr").length === 4, sentence);
    }
    const t = words(sentence), q = t.length - 1;
    assert.equal(await page.getAttribute(`#gathered-tokens button[data-q="${q}"]`, "aria-pressed"), "true");
    await page.selectOption("#gathered-head", String(h));
    const drawn = await drawnParts(page, m.dimensions);
    const api = (await apiPost({ model: STORIES, tokens: t, mask: "causal", return: ALL })).body;
    const wantParts = parts(api, m.weights.w_o, q, [h]);
    const sum = drawn[t.length];
    near(sum[dim], wantParts.reduce((s, r) => s + r[dim], 0), 1e-9, `${sentence}: head ${h}'s Σ`);
    near(sum[dim], want, 5e-3, `${sentence}: head ${h}'s part`);
    near(sum[other], 0, 1e-6, `${sentence}: head ${h}, the other reading`);
  }
  assert.deepEqual(log.errors, []);
  await close();
});

test("the previous-token head: every row on the token before (the first on itself)", async () => {
  const sentence = "the red dog sat in the green forest";
  const { page, log, close } = await openStory("previous", sentence);
  await shot(page, "15-story-previous");
  assert.deepEqual(await page.$$eval("figure.head.focus", (f) => f.map((x) => +x.dataset.head)), [4]);
  const drawn = await drawnPatterns(page);
  const api = await apiPost({ model: STORIES, tokens: words(sentence), mask: "causal" });
  assert.deepEqual(drawn, api.body.patterns);
  drawn[4].forEach((row, q) => assert.ok(row[Math.max(0, q - 1)] >= 0.9, `row ${q}: ${row[Math.max(0, q - 1)]}`));
  // Its gathered parts open on head 4, which moves nothing.
  assert.equal(await page.inputValue("#gathered-head"), "4");
  // The step view opens on the story's head.
  await page.click("button[data-step=P]");
  assert.equal(await page.inputValue("#step-head"), "4");
  assert.deepEqual(log.errors, []);
  await close();
});

test("typing on a model with a vocabulary: suggestions, an unknown word's error next to it, an edit sends rows", async () => {
  const { page, log, close } = await openStory("adjective", "a fluffy blue creature roamed the verdant forest");
  // The words it knows, offered while typing (the datalist), and each one a button.
  await page.fill("#sentence", "a fluffy bl");
  await page.dispatchEvent("#sentence", "input");
  assert.equal(await page.getAttribute("#sentence", "list"), "vocab-list");
  const offered = await page.$$eval("#vocab-list option", (os) => os.map((o) => o.value));
  assert.ok(offered.includes("a fluffy blue"), offered.join("|"));
  assert.ok(offered.every((o) => o.startsWith("a fluffy bl")));
  const m = await stories();
  assert.equal(await page.locator("#vocab-words button").count(), m.vocabulary.tokens.length);
  // A word it does not know: the API's own message, next to that word.
  await page.fill("#sentence", "a fluffy blu creature");
  await page.press("#sentence", "Enter");
  await page.locator('#token-chips .chip[data-i="2"] + .error .message').waitFor();
  const api = await apiPost({ model: STORIES, tokens: words("a fluffy blu creature") });
  assert.equal(api.status, 422);
  assert.equal(api.body.error.code, "unknown_token");
  assert.equal(api.body.error.path, "/tokens/2");
  assert.equal(api.body.error.message.slice(0, 9), "tokens[2]");
  assert.equal(await page.textContent('#token-chips .chip[data-i="2"] + .error .message'), "Token 3" + api.body.error.message.slice(9));
  assert.equal(await page.getAttribute('#token-chips .chip[data-i="2"]', "aria-invalid"), "true");
  await shot(page, "16-unknown-token");
  // One token past the position table: the API's words, next to that token.
  const long = Array.from({ length: m.n_positions + 1 }, (_, i) => (i % 2 ? "cat" : "the"));
  await page.fill("#sentence", long.join(" "));
  await page.press("#sentence", "Enter");
  const past = `#token-chips .chip[data-i="${m.n_positions}"] + .error .message`;
  await page.locator(past).waitFor();
  const api2 = await apiPost({ model: STORIES, tokens: long });
  assert.equal(api2.status, 422);
  assert.equal(api2.body.error.path, `/tokens/${m.n_positions}`);
  const at = `tokens[${m.n_positions}]`;
  assert.equal(api2.body.error.message.slice(0, at.length), at);
  assert.equal(await page.textContent(past), `Token ${m.n_positions + 1}` + api2.body.error.message.slice(at.length));
  // Mended with the word list from the keyboard: the error goes.
  await page.fill("#sentence", "a fluffy");
  await page.press("#sentence", "Enter");
  await settle(page, () => document.querySelector("table.heatmap").querySelectorAll("tbody tr").length === 2);
  await page.click("#vocab-box summary");
  await page.focus('#vocab-words button[data-word="cat"]');
  await page.keyboard.press("Enter");
  await settle(page, () => document.querySelector("table.heatmap").querySelectorAll("tbody tr").length === 3);
  assert.equal(await page.inputValue("#sentence"), "a fluffy cat");
  assert.equal(await page.locator("#token-chips .error").count(), 0);
  assert.equal(JSON.parse(lastPatternsPost(log)).embeddings, undefined);
  // A cell edited by hand: the rows go, the tokens as labels; the address keeps the edit.
  const cell = page.locator('#embeddings-editor input[data-i="2"][data-j="5"]');
  assert.equal(await cell.getAttribute("aria-label"), "E[cat][texture]");
  await cell.fill("1");
  await cell.press("Enter");
  await settle(page, () => new URLSearchParams(location.hash.slice(1)).has("e"));
  const body = lastPatternsPost(log);
  const sent = JSON.parse(body);
  assert.deepEqual(sent.tokens, ["a", "fluffy", "cat"]);
  const want = ["a", "fluffy", "cat"].map((t, i) => m.row(t, i));
  want[2][5] = 1;
  assert.deepEqual(sent.embeddings, want);
  assert.deepEqual(await drawnPatterns(page), (await apiPost(body)).body.patterns);
  // And back to the model's own rows: the tokens alone again.
  await page.click("#reset-rows");
  await settle(page, () => !new URLSearchParams(location.hash.slice(1)).has("e"));
  assert.equal(JSON.parse(lastPatternsPost(log)).embeddings, undefined);
  assert.equal(await cell.inputValue(), "0");
  // Chromium logs each refused request (the unknown word's 422s); nothing else went wrong.
  assert.deepEqual(log.errors.filter((e) => !/status of 422/.test(e)), []);
  await close();
});

test("each story is one click away, and fits both screen sizes", async () => {
  for (const [w, h] of [[1280, 800], [390, 844]]) {
    const { page, log, close } = await open({ hash: "", width: w, height: h });
    await settle(page, () => !document.querySelector("#story").hidden);
    // On the phone, the stories are among the folded controls.
    await showControls(page);
    for (const [id, sentence] of [["mole", "one mole of carbon dioxide"], ["tower", "miniature eiffel tower"],
      ["harry", "wizard harry"], ["previous", "the red dog sat in the green forest"],
      ["adjective", "a fluffy blue creature roamed the verdant forest"]]) {
      await page.click(`#example-${id}`);
      await settle(page, (s) => document.querySelector("#sentence").value === s && !document.querySelector("#story").hidden &&
        document.querySelector("table.heatmap").querySelectorAll("tbody tr").length === s.split(" ").length, sentence);
      assert.equal(await page.getAttribute(`#example-${id}`, "aria-pressed"), "true");
      assert.equal(new URLSearchParams((await page.evaluate(() => location.hash)).slice(1)).get("story"), id);
      const [sw, cw] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
      assert.ok(sw <= cw, `${w}px, story ${id}: the page is ${sw}px wide`);
    }
    await page.screenshot({ path: join(ARTIFACTS, `17-story-${w}.png`) });
    // The mask's lesson points at the previous-token head.
    await page.click("#mask-previous");
    await settle(page, () => document.querySelector("#example-previous").getAttribute("aria-pressed") === "true" &&
      document.querySelector("table.heatmap").querySelectorAll("tbody tr").length === 8);
    // The worked example and the real-sized model are still there.
    await page.click("#example-woaini");
    await settle(page, () => document.querySelectorAll("table.heatmap").length === 1);
    assert.equal(await page.locator("#story").isHidden(), true);
    await page.click("#example-gpt2");
    await settle(page, () => document.querySelectorAll("table.heatmap").length === 12);
    assert.match(await page.textContent("#example-gpt2"), /random weights/);
    assert.deepEqual(log.errors, []);
    await close();
  }
});

test("a vocabulary that could not be fetched: the tokens still go alone, and the page claims no E", async () => {
  const sentence = "a fluffy blue creature roamed the verdant forest";
  const { page, log, close } = await open({ hash: "", prepare: (p) => p.route(`**/v1/models/${STORIES}?vocabulary=true`, (route) =>
    route.fulfill({ status: 503, contentType: "application/json", headers: { "Retry-After": "1" },
      body: '{"error":{"code":"overloaded","message":"busy"}}' })) });
  await settle(page, () => !document.querySelector("#story").hidden);
  assert.match(await page.textContent("#embeddings-hint"), /could not be fetched/);
  assert.equal(await page.locator("#embeddings-editor input").count(), 0);
  const body = lastPatternsPost(log);
  assert.equal(JSON.parse(body).embeddings, undefined);
  assert.deepEqual(await drawnPatterns(page), (await apiPost(body)).body.patterns);
  await page.click("button[data-step=E]");
  assert.match(await page.textContent("#step"), /could not show/);
  assert.equal(await page.locator("table[data-matrix=gathered-bars] td[data-col=E]").count(), 0);
  const api = await apiPost({ model: STORIES, tokens: words(sentence), mask: "causal", return: ["embeddings"] });
  assert.equal(Number(await page.getAttribute('table[data-matrix=gathered-bars] tr[data-dim=colour] td[data-col=E2]', "data-value")),
    api.body.embeddings[3][(await stories()).dimensions.indexOf("colour")]);
  assert.deepEqual(log.errors.filter((e) => !/status of 503/.test(e)), []);
  await close();
});

// WCAG 2's contrast ratio of every piece of text on screen, from the colours the browser rendered:
// the text's colour (and the opacity it is drawn with) against the first background behind it, and
// against each colour of a gradient behind it (a masked cell's hatching). Returns the failures.
test("words: heads and tokens counted from 1, d_k named, AA contrast from rendered colours, one request per edit", async () => {
  const { page, log, close } = await open({ hash: "#" + new URLSearchParams({ model: "demo-4d", sentence: "我爱你", mask: "causal" }) });
  await settle(page, () => document.querySelectorAll("table.heatmap td.masked").length === 3);
  // Contrast of every text on screen: the worked example under the causal mask (masked 0s), every
  // step of its walk-through, a story, and 12 heads with numbers in their cells.
  assert.deepEqual(await contrastFailures(page), []);
  for (const step of ["E", "W", "Q", "K", "V", "KT", "QKT", "S", "P", "Z", "dE", "E2"]) {
    await page.click(`button[data-step=${step}]`);
    if (step === "QKT") await page.locator("table[data-matrix=QKT]").waitFor();
    assert.deepEqual(await contrastFailures(page), [], `step ${step}`);
  }
  // No stray words: nothing reads "null", "undefined" or a doubled colon.
  assert.doesNotMatch(await page.textContent("main"), /\bnull\b|\bundefined\b|NaN|: :/);
  // The editor's four columns are whole at 1280 px: no scrolling inside its box.
  const [editorW, boxW] = await page.$eval("#embeddings-editor", (b) => [b.scrollWidth, b.clientWidth]);
  assert.ok(editorW <= boxW, `the editor is ${editorW}px in a box of ${boxW}px`);
  // d_k, as the texts write it, and what it is here.
  await page.click("button[data-step=S]");
  assert.match(await page.textContent("#step-list button[data-step=S]"), /√d_k/);
  assert.match(await page.textContent("#step .formula"), /√d_k/);
  assert.match(await page.textContent("#step"), /d_k = d_head = 4/);

  // One request per edit, good or bad: the patterns' POST and nothing else (the weights came once).
  await page.click("button[data-step=E]");
  const cell = page.locator('#embeddings-editor input[data-i="1"][data-j="0"]');
  for (const value of ["0.5", "x", "-0.1"]) {
    const before = log.requests.length;
    await cell.fill(value);
    await cell.press("Enter");
    await settle(page, (v) => document.querySelector("#status").textContent !== "Computing…" &&
      (v === "x") === !!document.querySelector("#embeddings-error .message"), value);
    await page.waitForTimeout(200);
    const sent = log.requests.slice(before);
    assert.deepEqual(sent.map((u) => new URL(u).pathname), ["/v1/attention"], `edit ${value}: ${sent.join(" ")}`);
  }
  await close();

  // Heads are counted from 1 wherever the page speaks: captions, labels, the step's head, the
  // story's lesson, the gathered view's choice of heads.
  const g = await open({ hash: "#" + new URLSearchParams({ model: "gpt2-small-shape", sentence: "a b c" }) });
  await settle(g.page, () => document.querySelectorAll("table.heatmap").length === 12);
  const captions = await g.page.$$eval("figure.head figcaption", (fs) => fs.map((f) => f.textContent));
  assert.deepEqual(captions, Array.from({ length: 12 }, (_, i) => `Head ${i + 1}`));
  assert.match(await g.page.getAttribute('table.heatmap[data-head="0"]', "aria-label"), /^Head 1: /);
  assert.deepEqual(await contrastFailures(g.page), []);
  await g.close();
  const s = await openStory("tower", "miniature eiffel tower");
  assert.match(await s.page.textContent("#story-lesson"), /head 2 \(context → meaning\) and head 1 \(adjective → noun\)|head 1 \(adjective → noun\) and head 2 \(context → meaning\)/);
  assert.doesNotMatch(await s.page.textContent("#story-lesson"), /head 0/i);
  const options = await s.page.$$eval("#gathered-head option", (os) => os.map((o) => o.textContent));
  assert.deepEqual(options.slice(0, 2), ["all heads, summed", "head 1 (adjective → noun) only"]);
  assert.deepEqual(await s.page.$$eval("#step-head option", (os) => os.map((o) => o.textContent)),
    ["head 1", "head 2", "head 3", "head 4", "head 5"]);
  assert.match(await s.page.textContent("table[data-matrix=compare-E2] tbody tr th"), /token 1\)$/);
  assert.deepEqual(await contrastFailures(s.page), []);
  await s.close();
});

test("softmax as the texts do it: e^S, Σ, ÷ Σ, then the stable form, the same; one row or all rows", async () => {
  for (const mask of ["none", "causal"]) {
    const { page, log, close } = await open({ hash: "#" + new URLSearchParams({ model: "demo-4d", sentence: "我爱你", mask, step: "P" }) });
    await page.locator("table[data-matrix=softmax-row]").waitFor();
    const api = await apiPost({ model: "demo-4d", embeddings: WOAINI, mask, return: ["scores", "patterns"] });
    const S = api.body.scores[0], P = api.body.patterns[0];
    const near = (x, y, tol, what) => assert.ok(Math.abs(x - y) <= tol, `${what}: ${x} against ${y}`);
    const rows = (name) => page.$$eval(`table[data-matrix="${name}"] tbody tr`, (trs) =>
      trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => Number(td.dataset.value))));
    for (let q = 0; q < 3; q++) {
      await page.click(`.rowpick button[data-row="${q}"]`);
      // By hand, as a student computes it: e^S of the API's scores (e^−∞ = 0), their sum, each ÷ it.
      const ex = S[q].map((x) => (x === null ? 0 : Math.exp(x)));
      const sum = ex.reduce((x, y) => x + y, 0);
      const [s, e, p] = await rows("softmax-row");
      assert.deepEqual(s, S[q].map((x) => (x === null ? -Infinity : x)));
      e.forEach((x, k) => near(x, ex[k], 1e-12, `e^S[${q}][${k}]`));
      near(Number(await page.getAttribute("#softmax-sum", "data-sum")), sum, 1e-12, `Σ of row ${q}`);
      p.forEach((x, k) => near(x, P[q][k], 1e-6, `P[${q}][${k}] by hand`));
      // The stable form: S − max, e^(S − max), ÷ Σ: the same P.
      const live = S[q].filter((x) => x !== null), max = Math.max(...live);
      const [s2, e2, p2] = await rows("softmax-stable");
      s2.forEach((x, k) => (S[q][k] === null ? assert.equal(x, -Infinity) : near(x, S[q][k] - max, 1e-12, `S − max [${q}][${k}]`)));
      e2.forEach((x, k) => near(x, S[q][k] === null ? 0 : Math.exp(S[q][k] - max), 1e-12, `e^(S − max)[${q}][${k}]`));
      p2.forEach((x, k) => near(x, P[q][k], 1e-6, `P[${q}][${k}] stable`));
    }
    if (mask === "none") {
      // 爱's row by hand: Σ ≈ 2.93 (the subtracted form's Σ is smaller, and P the same).
      await page.click('.rowpick button[data-row="1"]');
      assert.match(await page.textContent("#softmax-sum"), /^Σ = e\^.* = 2\.93/);
      assert.match(await page.textContent("#softmax-why"), /overflow/);
      await shot(page, "20-softmax-by-hand");
    }
    // All rows at once: e^S, each row's Σ, e^S ÷ Σ equal to the API's P.
    await page.click('.rowpick button[data-row="all"]');
    const E = await rows("softmax-exp"), sums = await rows("softmax-sums"), all = await rows("softmax-all");
    for (let q = 0; q < 3; q++) {
      const ex = S[q].map((x) => (x === null ? 0 : Math.exp(x)));
      const sum = ex.reduce((x, y) => x + y, 0);
      E[q].forEach((x, k) => near(x, ex[k], 1e-12, `all rows: e^S[${q}][${k}]`));
      near(sums[q][0], sum, 1e-12, `all rows: Σ ${q}`);
      all[q].forEach((x, k) => near(x, P[q][k], 1e-6, `all rows: P[${q}][${k}]`));
    }
    assert.deepEqual(await rows("P"), P);
    assert.equal(await page.getAttribute('.rowpick button[data-row="all"]', "aria-pressed"), "true");
    assert.deepEqual(log.errors, []);
    await close();
  }
});

test("scale: the API's scale from a slider or typed, the pattern follows, a note on flat softmax, colours per row", async () => {
  const { page, log, close } = await open();
  const near = (x, y, tol, what) => assert.ok(Math.abs(x - y) <= tol, `${what}: ${x} against ${y}`);
  // 我爱你's scores are tiny: the page says why its pattern is flat.
  const api0 = await apiPost({ model: "demo-4d", embeddings: WOAINI, mask: "none", return: ["scores", "patterns"] });
  const big0 = Math.max(...api0.body.scores.flat(2).map(Math.abs));
  assert.ok(big0 < 1);
  assert.equal(await page.locator("#flat-note").isVisible(), true);
  near(Number(await page.getAttribute("#flat-note", "data-max-score")), big0, 0, "the note's largest |S|");
  assert.match(await page.textContent("#flat-note"), /flat/);
  assert.equal(JSON.parse(lastPatternsPost(log)).scale, undefined);
  // The slider, by keyboard: three steps right is 2³ × 1/√d_k = 4.
  await page.focus("#scale-range");
  for (let i = 0; i < 3; i++) { await page.keyboard.press("ArrowRight"); await settle(page); }
  await settle(page, () => JSON.parse(new URLSearchParams(location.hash.slice(1)).get("scale") || "0") === 4);
  const sent = JSON.parse(lastPatternsPost(log));
  assert.equal(sent.scale, 4);
  const api = await apiPost(lastPatternsPost(log));
  assert.equal(api.body.scale, 4);
  assert.deepEqual(await drawnPatterns(page), api.body.patterns);
  assert.notDeepEqual(api.body.patterns, api0.body.patterns);
  assert.equal(await page.locator("#flat-note").isVisible(), false);
  // Typed: sent as typed, the pattern and the ÷ √d_k step follow.
  await page.fill("#scale", "0.25");
  await page.press("#scale", "Enter");
  await settle(page, () => new URLSearchParams(location.hash.slice(1)).get("scale") === "0.25");
  const quarter = await apiPost(lastPatternsPost(log));
  assert.equal(JSON.parse(lastPatternsPost(log)).scale, 0.25);
  assert.deepEqual(await drawnPatterns(page), quarter.body.patterns);
  await page.click("button[data-step=S]");
  const S = await page.$$eval("table[data-matrix=S] tbody tr", (trs) => trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => Number(td.dataset.value))));
  assert.deepEqual(S, quarter.body.scores[0]);
  assert.match(await page.textContent("#step .formula"), /× 0\.25/);
  // Not a number: the API's words, next to the field.
  await page.fill("#scale", "sharp");
  await page.press("#scale", "Enter");
  await page.locator("#scale-error .message").waitFor();
  const bad = await apiPost({ model: "demo-4d", embeddings: WOAINI, scale: "sharp" });
  assert.equal(bad.body.error.path, "/scale");
  assert.equal(await page.textContent("#scale-error .message"), bad.body.error.message);
  assert.equal(await page.getAttribute("#scale", "aria-invalid"), "true");
  // Emptied: the model's own again, the slider back in the middle.
  await page.fill("#scale", "");
  await page.press("#scale", "Enter");
  await settle(page, () => !new URLSearchParams(location.hash.slice(1)).has("scale") && !document.querySelector("#scale-error .message"));
  assert.equal(await page.inputValue("#scale-range"), "0");
  assert.deepEqual(await drawnPatterns(page), api0.body.patterns);
  // Colours relative to each row's largest weight: the largest cell of each row is the full blue.
  await page.check("#relative");
  const colours = await page.$$eval("table.heatmap td", (tds) => tds.map((td) => getComputedStyle(td).backgroundColor));
  const P = api0.body.patterns[0];
  const want = P.flatMap((row) => row.map((p) => {
    const t = p / Math.max(...row);
    const mix = (a, b) => Math.round(a + (b - a) * t);
    return `rgb(${mix(255, 36)}, ${mix(255, 86)}, ${mix(255, 201)})`;
  }));
  assert.deepEqual(colours, want);
  assert.deepEqual(await drawnPatterns(page), api0.body.patterns);
  assert.deepEqual(await contrastFailures(page), []);
  await shot(page, "21-relative-colours");
  // The link keeps the scale and the colouring.
  await page.fill("#scale", "2");
  await page.press("#scale", "Enter");
  await settle(page, () => new URLSearchParams(location.hash.slice(1)).get("scale") === "2");
  const hash = await page.evaluate(() => location.hash);
  await close();
  const again = await open({ hash });
  assert.equal(await again.page.inputValue("#scale"), "2");
  assert.equal(await again.page.isChecked("#relative"), true);
  assert.equal(JSON.parse(lastPatternsPost(again.log)).scale, 2);
  assert.deepEqual(again.log.errors, []);
  await again.close();
});

test("head view: SVG lines from each query to each key, opacity = the API's weight; a token's row or column in every head", async () => {
  const sentence = "a fluffy blue creature";
  const { page, log, close } = await open({ hash: "#" + new URLSearchParams({ model: "gpt2-small-shape", sentence, mask: "causal" }) });
  await settle(page, () => document.querySelectorAll("#headview-heads svg").length === 12);
  const api = await apiPost(lastPatternsPost(log));
  const n = 4;
  // Every line, in every head: its opacity is the API's P[h][q][k] (0 where masked), n² per head.
  const drawn = await page.$$eval("#headview-heads svg", (svgs) => svgs.map((svg) => {
    const M = [];
    for (const l of svg.querySelectorAll("line.attn")) {
      (M[+l.dataset.q] ||= [])[+l.dataset.k] = Number(l.getAttribute("stroke-opacity"));
    }
    return { head: svg.dataset.head, M, lines: svg.querySelectorAll("line.attn").length,
      left: [...svg.querySelectorAll('text.tok[data-side="q"]')].map((t) => t.getAttribute("aria-label")) };
  }));
  assert.deepEqual(drawn.map((d) => d.M), api.body.patterns);
  assert.deepEqual(drawn.map((d) => d.lines), Array(12).fill(n * n));
  assert.deepEqual(drawn.map((d) => d.head), api.body.heads.map(String));
  assert.match(drawn[0].left[1], /^query 2, fluffy/);
  // The opacity rendered is the weight (the browser keeps six digits of it).
  const rendered = await page.$$eval("#headview-heads svg", (svgs) => svgs.map((svg) =>
    [...svg.querySelectorAll("line.attn")].map((l) => [+l.dataset.q, +l.dataset.k, Number(getComputedStyle(l).strokeOpacity)])));
  rendered.forEach((ls, h) => ls.forEach(([q, k, o]) =>
    assert.ok(Math.abs(o - api.body.patterns[h][q][k]) <= 1e-6, `head ${h + 1}, ${q} → ${k}: ${o}`)));
  assert.deepEqual(await page.$$eval("#headview-heads figcaption", (fs) => fs.map((f) => f.textContent)),
    Array.from({ length: 12 }, (_, i) => `Head ${i + 1}`));
  // Visible lines of every head: [q, k] pairs.
  const visible = () => page.$$eval("#headview-heads svg", (svgs) => svgs.map((svg) =>
    [...svg.querySelectorAll("line.attn")].filter((l) => getComputedStyle(l).visibility === "visible")
      .map((l) => [+l.dataset.q, +l.dataset.k])));
  const row = (q) => Array.from({ length: n }, (_, k) => [q, k]);
  const col = (k) => Array.from({ length: n }, (_, q) => [q, k]);
  assert.deepEqual(await visible(), Array(12).fill(Array.from({ length: n * n }, (_, i) => [Math.floor(i / n), i % n])));
  // By keyboard: one tab stop, then the arrows; a query shows its row in all 12 heads, a key its column.
  await page.focus('#headview-heads text.tok[tabindex="0"]');
  await page.keyboard.press("ArrowDown");
  await page.keyboard.press("ArrowDown");
  assert.deepEqual(await visible(), Array(12).fill(row(2)));
  const best = api.body.patterns.map((P) => P[2].indexOf(Math.max(...P[2])));
  assert.equal(await page.textContent("#headview-readout"),
    `blue (query 3) listens most to: ${best.map((k, h) => `head ${h + 1}: ${sentence.split(" ")[k]} ${fmtNumber(api.body.patterns[h][2][k])}`).join("; ")}.`);
  await page.keyboard.press("ArrowRight");
  assert.deepEqual(await visible(), Array(12).fill(col(2)));
  assert.equal(await page.evaluate(() => document.querySelectorAll('#headview-heads text.tok[tabindex="0"]').length), 1);
  // Leaving the heads (Tab) empties the readout but keeps its height: the heads below it do not
  // move, which under a pointer would hover the next token, and so on.
  const headTop = () => page.$eval('#headview-heads svg[data-head="5"]', (s) => s.getBoundingClientRect().top + window.scrollY);
  const top = await headTop();
  await page.keyboard.press("Tab");
  assert.equal(await page.textContent("#headview-readout"), "");
  assert.equal(await headTop(), top);
  // By mouse, in another head: the same in every head.
  await page.hover('#headview-heads svg[data-head="5"] text.tok[data-side="k"][data-i="0"]');
  assert.deepEqual(await visible(), Array(12).fill(col(0)));
  await page.hover('#headview-heads svg[data-head="7"] text.tok[data-side="q"][data-i="3"]');
  assert.deepEqual(await visible(), Array(12).fill(row(3)));
  await page.mouse.move(0, 0);
  await page.locator("#headview").screenshot({ path: join(ARTIFACTS, "22-head-view.png") });
  assert.deepEqual(await contrastFailures(page), []);
  assert.deepEqual(log.errors, []);
  await close();
});

// The page's fmt: four decimals at most, trailing zeros dropped, a true minus sign.
