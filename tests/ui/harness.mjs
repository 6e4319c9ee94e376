// The UI suites' shared parts: the built server on a free loopback port, Debian's Chromium
// driven by playwright-core, and readers of what the page drew. Each *.test.mjs imports it; its
// before and after start and stop the server and the browser once per file.
import { before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, openSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

export const HERE = dirname(fileURLToPath(import.meta.url));
export const TOP = join(HERE, "..", "..");
export const SERVER = process.env.ATTN_SERVER_BIN || join(TOP, "build", "attention-server");
export const MODELS = process.env.ATTN_TEST_MODELS_DIR || join(TOP, "build", "models");
export const ARTIFACTS = join(HERE, "artifacts");
export const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";

export const WOAINI = [[0.1, -0.2, 0.3, 0.1], [-0.1, 0.2, 0.2, -0.3], [0.2, 0.1, -0.1, 0.2]];
// The page opens on demo-stories' first story; the tests of the worked example open a link to it.
export const WOAINI_LINK = "#" + new URLSearchParams({ model: "demo-4d", sentence: "我爱你" });

export let base, browser;
export const servers = [];

export async function waitUp(url) {
  for (let i = 0; i < 100; i++) {
    try { if ((await fetch(url)).ok) return; } catch (_) { /* not yet */ }
    await sleep(100);
  }
  throw new Error(`the server did not answer ${url}`);
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The built server on a port of the kernel's choosing (--port 0), which its log names; the
// log (access lines included) goes to artifacts/NAME.log. Returns the server's origin.
export async function startServer(name, extra = []) {
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
// (run on the page before it loads: routes), and `drawn` (wait for the first heatmap). Without a
// hash it opens the worked example's link.
export async function open({ width = 1280, height = 800, origin = base, hash = WOAINI_LINK, prepare, drawn = true } = {}) {
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

export const shot = (page, name) => page.screenshot({ path: join(ARTIFACTS, name + ".png"), fullPage: true });

export async function apiPost(body) {
  const res = await fetch(`${base}/v1/attention`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

// Waits for the page's answer to settle: no request in flight, and `ready` true.
export async function settle(page, ready = () => true, arg) {
  await page.waitForFunction(() => !document.body.hasAttribute("aria-busy"));
  await page.waitForFunction(ready, arg);
}

// The drawn patterns: one n × n array of numbers per heatmap, from the cells' data-value.
export function drawnPatterns(page) {
  return page.$$eval("table.heatmap", (tables) => tables.map((t) => {
    const rows = [...t.querySelectorAll("tbody tr")];
    return rows.map((r) => [...r.querySelectorAll("td")].map((td) => Number(td.dataset.value)));
  }));
}

// The last POST whose request asked for the patterns (not the scale-1 one of the step view).
export function lastPatternsPost(log) {
  const bodies = log.posts.filter((b) => JSON.parse(b).return.includes("patterns"));
  assert.ok(bodies.length, "the page posted no request for patterns");
  return bodies[bodies.length - 1];
}

export const STORIES = "demo-stories";
export const ALL = ["q", "k", "v", "scores", "patterns", "head_outputs", "delta", "embeddings"];
export const words = (s) => s.split(" ");
export const near = (x, want, tol, what) => assert.ok(Math.abs(x - want) <= tol, `${what}: ${x}, not ${want} ± ${tol}`);

export async function apiGet(path) {
  const res = await fetch(base + path);
  assert.equal(res.status, 200, path);
  return res.json();
}

// The model, its weights and its vocabulary, as the API gives them.
export let storyModel;
export async function stories() {
  if (!storyModel) {
    storyModel = await apiGet(`/v1/models/${STORIES}?weights=true&vocabulary=true`);
    const v = storyModel.vocabulary;
    storyModel.row = (t, i) => {
      const e = v.embeddings[v.tokens.indexOf(t)];
      assert.ok(e, `${t} is in the vocabulary`);
      return e.map((x, j) => Math.fround(Math.fround(x) + Math.fround(v.position_embeddings[i][j])));
    };
  }
  return storyModel;
}

// A story opened as a student does: the page unlinked, then the story's button (unless it is the one
// the page opens on).
export async function openStory(id, sentence, opts = {}) {
  const o = await open({ hash: "", ...opts });
  if (id !== "adjective") await o.page.click(`#example-${id}`);
  await settle(o.page, (s) => document.querySelector("#sentence").value === s &&
    document.querySelectorAll("table.heatmap").length === 5 && !document.querySelector("#story").hidden, sentence);
  return o;
}

export function drawnMatrix(page, name) {
  return page.$$eval(`table[data-matrix="${name}"] tbody tr`, (trs) =>
    trs.map((tr) => [...tr.querySelectorAll("td[data-value]")].map((td) => Number(td.dataset.value))));
}
export const colHeads = (page, name) => page.$$eval(`table[data-matrix="${name}"] thead th[scope=col]`, (ths) => ths.map((t) => t.textContent));

// The gathered view's bars for the chosen token: {dimension: {E, dE, E2}}.
export function drawnBars(page) {
  return page.$$eval("table[data-matrix=gathered-bars] tbody tr", (trs) => Object.fromEntries(trs.map((tr) =>
    [tr.dataset.dim, Object.fromEntries([...tr.querySelectorAll("td[data-col]")].map((td) => [td.dataset.col, Number(td.dataset.value)]))])));
}

// The gathered parts as drawn, back to all d_model columns: a dimension the page leaves out must be
// 0 in every row, and reads 0 here.
export async function drawnParts(page, dims) {
  const cols = await colHeads(page, "parts");
  const M = await drawnMatrix(page, "parts");
  for (const c of cols) assert.ok(dims.includes(c), `column ${c}`);
  return M.map((r) => dims.map((d) => (cols.includes(d) ? r[cols.indexOf(d)] : 0)));
}

// Σ_h P_h[q][k] · (V_h[k] · W_o,h), in float64 here, from the API's own numbers: one row per key.
export function parts(api, wo, q, heads) {
  const { d_head: dh, d_model: dm } = api;
  return api.patterns[0].map((_, k) => Array.from({ length: dm }, (_, j) => {
    let s = 0;
    for (const h of heads) {
      let vw = 0;
      for (let c = 0; c < dh; c++) vw += api.v[h][k][c] * wo[h * dh + c][j];
      s += api.patterns[h][q][k] * vw;
    }
    return s;
  }));
}


export function contrastFailures(page) {
  return page.evaluate(() => {
    const parse = (c) => {
      const m = /rgba?\(([^)]+)\)/.exec(c);
      if (!m) return null;
      const [r, g, b, a = 1] = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
      return [r, g, b, a];
    };
    const over = (top, bottom, alpha) => top.slice(0, 3).map((x, i) => x * alpha + bottom[i] * (1 - alpha));
    const lum = (rgb) => {
      const [r, g, b] = rgb.map((c) => { c /= 255; return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; });
      return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const ratio = (x, y) => { const [a, b] = [lum(x), lum(y)].sort((p, q) => q - p); return (a + 0.05) / (b + 0.05); };
    // The backgrounds behind an element, innermost first, down to the page's white.
    const backgrounds = (e) => {
      for (let n = e; n; n = n.parentElement) {
        const s = getComputedStyle(n);
        const grads = [...s.backgroundImage.matchAll(/rgba?\([^)]+\)/g)].map((m) => parse(m[0]));
        if (grads.length) return grads.map((c) => over(c, [255, 255, 255], c[3]));
        const bg = parse(s.backgroundColor);
        if (bg && bg[3] > 0) return [over(bg, [255, 255, 255], bg[3])];
      }
      return [[255, 255, 255]];
    };
    const out = [];
    for (const e of document.querySelectorAll("body *")) {
      const text = [...e.childNodes].filter((n) => n.nodeType === 3).map((n) => n.textContent).join("").trim();
      if (!text || e.closest("[hidden], script, style, option, .skip, :disabled")) continue;
      const r = e.getBoundingClientRect();
      if (!r.width || !r.height || getComputedStyle(e).visibility === "hidden") continue;
      let opacity = 1;
      for (let n = e; n; n = n.parentElement) opacity *= Number(getComputedStyle(n).opacity);
      const s = getComputedStyle(e), fg = parse(s.color);
      const large = parseFloat(s.fontSize) >= 24 || (parseFloat(s.fontSize) >= 18.66 && Number(s.fontWeight) >= 700);
      for (const bg of backgrounds(e)) {
        const c = ratio(over(fg, bg, fg[3] * opacity), bg);
        if (c < (large ? 3 : 4.5)) out.push(`${e.tagName}.${e.className} “${text.slice(0, 30)}”: ${c.toFixed(2)}:1 (${s.color} on rgb(${bg.map(Math.round)}))`);
      }
    }
    return out;
  });
}


export function fmtNumber(x) {
  if (x === 0) return "0";
  const s = Math.abs(x) < 1e-3 ? x.toExponential(1) : x.toFixed(4).replace(/\.?0+$/, "");
  return s.replace("-", "−");
}

// On a narrow screen the controls are folded above the results: opens them (a no-op when they
// are shown, as at 1280 px).
export async function showControls(page) {
  const toggle = page.locator("#controls-toggle");
  if (await toggle.isVisible() && (await toggle.getAttribute("aria-expanded")) === "false") await toggle.click();
}
