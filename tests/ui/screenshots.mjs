// make screenshots: the pictures in README.md and web/README.md, taken from the built server in
// Debian's Chromium (as make test-ui drives it): the head view of the first story, the overview
// of a 12-head model, and the softmax step of 我爱你. Writes web/screenshot-*.png.
import { spawn } from "node:child_process";
import { mkdirSync, openSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const HERE = dirname(fileURLToPath(import.meta.url));
const TOP = join(HERE, "..", "..");
const SERVER = process.env.ATTN_SERVER_BIN || join(TOP, "build", "attention-server");
const MODELS = process.env.ATTN_TEST_MODELS_DIR || join(TOP, "build", "models");
const ARTIFACTS = join(HERE, "artifacts");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

mkdirSync(ARTIFACTS, { recursive: true });
const logPath = join(ARTIFACTS, "screenshots.log");
const server = spawn(SERVER, ["--bind", "127.0.0.1", "--port", "0", "--models-dir", MODELS],
  { stdio: ["ignore", openSync(logPath, "w"), openSync(logPath, "a")] });
let origin = null;
for (let i = 0; i < 150 && !origin; i++) {
  const m = / port=([0-9]+)\D/.exec(readFileSync(logPath, "utf8"));
  if (m) origin = `http://127.0.0.1:${m[1]}`;
  else await sleep(100);
}
if (!origin) { server.kill(); throw new Error(`the server named no port in ${logPath}`); }

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"] });
try {
  let page;
  // Each picture in a page of its own: a new address, not a change of its #hash.
  const visit = async (hash) => {
    if (page) await page.context().close();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    await page.goto(origin + "/" + hash);
    await settled();
  };
  const settled = async () => {
    await page.locator("table.heatmap td").first().waitFor();
    await page.waitForFunction(() => !document.body.hasAttribute("aria-busy"));
    await sleep(300);
  };
  const shoot = async (selector, name) => {
    const box = page.locator(selector).first();
    await box.scrollIntoViewIfNeeded();
    await box.screenshot({ path: join(TOP, "web", `screenshot-${name}.png`) });
    console.log(`web/screenshot-${name}.png`);
  };

  // The head view of the first story: demo-stories, "a fluffy blue creature …", creature focused.
  await visit("");
  await shoot("#headview", "headview");

  // The overview of GPT-2 small's 12 heads.
  await visit("#" + new URLSearchParams({ model: "gpt2-small-shape",
    sentence: "a fluffy blue creature roamed the verdant forest", layout: "overview" }));
  await shoot("#patterns", "overview");

  // The softmax step of 我爱你 on demo-4d.
  await visit("#" + new URLSearchParams({ model: "demo-4d", sentence: "我爱你" }));
  await page.locator("#step-list button", { hasText: "softmax" }).first().click();
  await page.waitForFunction(() => document.querySelector("#softmax-sum"));
  await sleep(300);
  await shoot("#walkthrough", "softmax");
} finally {
  await browser.close();
  server.kill("SIGTERM");
}
