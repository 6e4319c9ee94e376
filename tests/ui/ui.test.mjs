// make test-ui: the teaching page (web/index.html, served at GET /) in Debian's Chromium,
// headless, driven by playwright-core, against the real server on a free loopback port.
//
// Every number the page draws is compared with the API's own answer to the same request: the
// test captures the body the page POSTs, sends it to the API itself, and compares cell by cell.
// Screenshots of each state go to tests/ui/artifacts/ (ignored by git).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const HERE = dirname(fileURLToPath(import.meta.url));
const TOP = join(HERE, "..", "..");
const SERVER = process.env.ATTN_SERVER_BIN || join(TOP, "build", "attention-server");
const MODELS = process.env.ATTN_TEST_MODELS_DIR || join(TOP, "build", "models");
const ARTIFACTS = join(HERE, "artifacts");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";

const WOAINI = [[0.1, -0.2, 0.3, 0.1], [-0.1, 0.2, 0.2, -0.3], [0.2, 0.1, -0.1, 0.2]];

let base, browser;
const servers = [];

async function waitUp(url) {
  for (let i = 0; i < 100; i++) {
    try { if ((await fetch(url)).ok) return; } catch (_) { /* not yet */ }
    await sleep(100);
  }
  throw new Error(`the server did not answer ${url}`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The built server on a port of the kernel's choosing (--port 0), which its log names; the
// log (access lines included) goes to artifacts/NAME.log. Returns the server's origin.
async function startServer(name, extra = []) {
  const path = join(ARTIFACTS, name + ".log");
  const log = openSync(path, "w");
  const s = spawn(SERVER, ["--bind", "127.0.0.1", "--port", "0", "--models-dir", MODELS, ...extra],
    { stdio: ["ignore", log, log] });
  servers.push(s);
  for (let i = 0; i < 150; i++) {
    const m = / port=([0-9]+)\D/.exec(readFileSync(path, "utf8"));
    if (m) {
      const origin = `http://127.0.0.1:${m[1]}`;
      await waitUp(`${origin}/healthz`);
      return origin;
    }
    if (s.exitCode !== null) throw new Error(`the server exited with ${s.exitCode}; see ${path}`);
    await sleep(100);
  }
  throw new Error(`the server named no port in ${path}`);
}

before(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  base = await startServer("server");
  // A new, empty profile each run (playwright's own), and Chromium's background traffic off:
  // this machine's network is closed.
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
      "--disable-default-apps", "--disable-extensions"],
  });
});

after(async () => {
  if (browser) await browser.close();
  for (const s of servers) s.kill("SIGTERM");
});

// A page at the given size, recording console errors, page errors, requests and POST bodies.
// Options: the viewport's width and height, the server's origin, a #hash to open, `prepare`
// (run on the page before it loads: routes), and `drawn` (wait for the first heatmap).
async function open({ width = 1280, height = 800, origin = base, hash = "", prepare, drawn = true } = {}) {
  const context = await browser.newContext({ viewport: { width, height } });
  const page = await context.newPage();
  const log = { errors: [], requests: [], posts: [] };
  page.on("console", (m) => { if (m.type() === "error") log.errors.push(m.text()); });
  page.on("pageerror", (e) => log.errors.push(String(e)));
  page.on("request", (r) => {
    log.requests.push(r.url());
    if (r.method() === "POST") log.posts.push(r.postData());
  });
  if (prepare) await prepare(page);
  await page.goto(origin + "/" + hash);
  if (drawn) {
    await page.locator("table.heatmap td").first().waitFor();
    await page.waitForFunction(() => !document.body.hasAttribute("aria-busy"));
  }
  return { page, log, close: () => context.close() };
}

const shot = (page, name) => page.screenshot({ path: join(ARTIFACTS, name + ".png"), fullPage: true });

async function apiPost(body) {
  const res = await fetch(`${base}/v1/attention`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

// Waits for the page's answer to settle: no request in flight, and `ready` true.
async function settle(page, ready = () => true) {
  await page.waitForFunction(() => !document.body.hasAttribute("aria-busy"));
  await page.waitForFunction(ready);
}

// The drawn patterns: one n × n array of numbers per heatmap, from the cells' data-value.
function drawnPatterns(page) {
  return page.$$eval("table.heatmap", (tables) => tables.map((t) => {
    const rows = [...t.querySelectorAll("tbody tr")];
    return rows.map((r) => [...r.querySelectorAll("td")].map((td) => Number(td.dataset.value)));
  }));
}

// The last POST whose request asked for the patterns (not the scale-1 one of the step view).
function lastPatternsPost(log) {
  const bodies = log.posts.filter((b) => JSON.parse(b).return.includes("patterns"));
  assert.ok(bodies.length, "the page posted no request for patterns");
  return bodies[bodies.length - 1];
}

test("the page loads without console errors and opens on 我爱你, computed", async () => {
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
  await page.click("#example-fluffy");
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
  await again.page.click("#example-fluffy");
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
  const worked = await page.$$eval('table[data-matrix=softmax-row] tbody tr[data-row="3"] td', (tds) => tds.map((td) => Number(td.dataset.value)));
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
  assert.equal(await page.textContent("#embeddings-error .message"), api.body.error.message);
  assert.equal(await cell.getAttribute("aria-invalid"), "true");
  // The patterns still drawn are the last good ones, and say so.
  assert.equal(await page.locator(".stale-note").isVisible(), true);
  await shot(page, "07-invalid-edit");
  // Text that is no number goes to the API as a string, and its words come back.
  await cell.fill("abc");
  await cell.press("Enter");
  await page.waitForFunction(() => document.querySelector("#embeddings-error .message")?.textContent.includes("string"));
  const api2 = await apiPost({ model: "demo-4d", embeddings: [[0.1, "abc", 0.3, 0.1], ...WOAINI.slice(1)] });
  assert.equal(await page.textContent("#embeddings-error .message"), api2.body.error.message);
  // Mended, the error goes away and the pattern is drawn again, no longer dimmed.
  await cell.fill("-0.2");
  await cell.press("Enter");
  await settle(page, () => document.querySelector("#status").textContent.startsWith("Computed"));
  assert.equal(await page.locator("#embeddings-error .message").count(), 0);
  assert.equal(await cell.getAttribute("aria-invalid"), null);
  assert.equal(await page.locator(".stale-note").isVisible(), false);
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
  for (const id of ["example-woaini", "example-fluffy", "model", "sentence", "mask-none", "compute", "heatmap",
    "step-next", "step-Q", "step"])
    assert.ok(reached.has(id), `Tab never reaches ${id}`);
  // The model by keyboard alone.
  await page.focus("#model");
  await page.keyboard.press("ArrowDown");
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
  const { page, close } = await open();
  await page.route("**/v1/models/demo-4d?weights=true", (route) =>
    route.fulfill({ status: 503, contentType: "application/json", headers: { "Retry-After": "1" },
      body: '{"error":{"code":"overloaded","message":"busy"}}' }));
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
  await settle(first.page, () => location.hash.includes("e="));
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
  // A link to a model this server lacks opens on the worked example.
  const other = await open({ hash: "#model=no-such-model&sentence=x" });
  assert.equal(await other.page.inputValue("#model"), "demo-4d");
  assert.equal(await other.page.inputValue("#sentence"), "我爱你");
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
  assert.equal(await page.isDisabled("#example-fluffy"), true);
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
