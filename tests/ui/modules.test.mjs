// The page's scripts as the ES modules they are: web/index.html and web/js/*.js loaded one file
// at a time, as a browser loads them from a static server, instead of the one document the
// server embeds (tools/inline_page.sh puts every module in one module scope, where a name used
// without its import would still be found). Here each module sees only what it imports, so a
// missing import is a ReferenceError on the paths this walks; and the page drawn is the served one.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { TOP, base, open, settle } from "./harness.mjs";

const WEB = join(TOP, "web");
const TYPES = { html: "text/html; charset=utf-8", css: "text/css", js: "text/javascript" };

// The server's own page replaced by web/'s files, each fetched on its own; the API is the server's.
async function fromFiles(page) {
  await page.route((url) => url.origin === base && (url.pathname === "/" || /^\/(js\/)?[\w.-]+\.(css|js)$/.test(url.pathname)),
    (route) => {
      const path = new URL(route.request().url()).pathname;
      const file = path === "/" ? "index.html" : path.slice(1);
      route.fulfill({ status: 200, contentType: TYPES[file.split(".").pop()], body: readFileSync(join(WEB, file)) });
    });
}

const results = (page) => page.$eval("#results", (r) => r.innerHTML);

test("the modules loaded one by one draw the page the server serves, with no error", async () => {
  const served = await open({ hash: "" });
  const files = await open({ hash: "", prepare: fromFiles });
  for (const { page } of [served, files]) await settle(page, () => !document.querySelector("#story").hidden);
  assert.ok(files.log.requests.some((u) => u === base + "/js/main.js"), "the modules were fetched as files");
  assert.ok(files.log.requests.some((u) => u === base + "/js/api.js"));
  assert.equal(await results(files.page), await results(served.page));
  assert.deepEqual(files.log.errors, []);
  await served.close();

  // Every example, every step of its walk-through, the layouts, an edit, the saved files.
  const { page, log, close } = files;
  for (const id of ["adjective", "mole", "tower", "harry", "previous", "woaini", "gpt2", "layers"]) {
    await page.click(`#example-${id}`);
    await settle(page, (x) => document.querySelector(`#example-${x}`).getAttribute("aria-pressed") === "true", id);
    await page.click("#step-list button");
    while (!(await page.isDisabled("#step-next"))) await page.click("#step-next");
    for (const b of await page.$$("#step .rowpick button")) await b.click();
    if (await page.isVisible("#gathered-tokens button")) await page.click("#gathered-tokens button >> nth=-1");
  }
  // The stack the last example opened: a thumbnail of the model view, then the layer lists.
  await page.click('#modelview button.thumb[data-layer="1"] >> nth=1');
  await settle(page, () => document.querySelector("#step-layer").value === "1");
  await page.click("#headview-all");
  await page.selectOption("#gathered-layer", "0");
  await page.click("#example-gpt2");
  await settle(page, () => document.querySelector("#example-gpt2").getAttribute("aria-pressed") === "true");
  await page.selectOption("#layout", "overview");
  await page.check("#transposed");
  await page.check("#compare-masks");
  await settle(page, () => document.querySelectorAll("#overview button.thumb").length === 12);
  await page.click("#overview button.thumb >> nth=3");
  await page.focus("table.heatmap");
  await page.keyboard.press("ArrowRight");
  await page.hover('#headview-heads svg text.tok[data-side="k"] >> nth=1');
  await page.focus('#headview-heads svg text.tok[tabindex="0"]');
  await page.keyboard.press("ArrowDown");
  for (const b of ["#export-svg", "#export-png", "#export-csv", "#export-csv-all", "#export-html"]) {
    const saved = page.waitForEvent("download");
    await page.click(b);
    await saved;
  }
  await page.selectOption("#layout", "auto");
  await page.uncheck("#transposed");
  await page.uncheck("#compare-masks");
  await page.click("#example-woaini");
  await settle(page, () => document.querySelector("#example-woaini").getAttribute("aria-pressed") === "true" &&
    document.querySelectorAll("table.heatmap").length === 1);
  await page.click("#weights-summary");
  await page.fill("#weights-editor input >> nth=0", "0.5");
  await page.press("#weights-editor input >> nth=0", "Enter");
  await settle(page, () => document.querySelector("#weights-reset") && !document.querySelector("#weights-reset").hidden);
  await page.click("#weights-paste-summary");
  await page.fill("#weights-paste-text", "[[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]");
  await page.click("#weights-paste-use");
  await settle(page);
  await page.fill("#embeddings-editor input >> nth=0", "x");
  await page.press("#embeddings-editor input >> nth=0", "Enter");
  await page.waitForFunction(() => document.querySelector("#embeddings-error").textContent !== "");
  // The browser's own line for that 400 is the only one.
  assert.deepEqual(log.errors.filter((e) => !/status of 400/.test(e)), []);
  await close();
});
