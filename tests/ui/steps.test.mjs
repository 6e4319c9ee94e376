// The walk-through at every model size (one query token and one head past 16 tokens or 16
// dimensions), its products written out (E · W_q = Q, Q · Kᵀ, P · V), and RoPE, soft-capping and
// ALiBi as steps of their own. Every drawn number is compared with the API's answer to the same
// request, or with a float64 reference computed here from the API's numbers.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { open, settle, apiPost, contrastFailures, drawnMatrix, near, shot, startServer, MODELS, WOAINI_LINK } from "./harness.mjs";

const words = (n) => Array.from({ length: n }, (_, i) => `w${i + 1}`).join(" ");
const link = (o) => "#" + new URLSearchParams(o);
const f32 = (x, want, what) => near(x, want, 1e-5 * Math.max(1, Math.abs(want)), what);
const sumText = (page, op) => page.$eval(`p.op-sum[data-op="${op}"]`, (p) => ({ text: p.textContent, ...p.dataset }));
const noSideways = async (page, what) => {
  const [sw, cw] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
  assert.ok(sw <= cw, `${what}: the page is ${sw}px wide in ${cw}px`);
};

// Every head drawn: a heatmap each side by side, or a thumbnail each in the overview.
const headsDrawn = (n) => document.querySelectorAll("button.thumb").length === n ||
  document.querySelectorAll("table.heatmap").length === n;

// Opens the walk-through on screen (focus mode asks for its numbers then) and waits for a step.
async function toSteps(page, head, token) {
  await page.locator("#walkthrough").scrollIntoViewIfNeeded();
  if (head !== undefined) await page.selectOption("#step-head", String(head));
  if (token !== undefined) await page.selectOption("#step-token", String(token));
  await page.waitForFunction(([h, t]) => {
    const f = document.querySelector("#step-focus");
    return f && (h === undefined || f.dataset.head === String(h)) && (t === undefined || f.dataset.token === String(t)) &&
      document.querySelector("#step table");
  }, [head, token]);
}
const step = async (page, id) => {
  await page.click(`#step-list button[data-step=${id}]`);
  await page.waitForFunction((s) => document.querySelector("#step").dataset.step === s && !/Asking the service/.test(document.querySelector("#step").textContent), id);
};
// The POSTs of the focus mode: the head's own numbers, and Q · Kᵀ at scale 1.
const focusPosts = (log) => log.posts.map((b) => JSON.parse(b)).filter((b) => b.select_heads);

test("gpt2-small-shape at 21 tokens: one token and one head, vectors shortened and expandable, every number the API's", async () => {
  const { page, log, close } = await open({ hash: link({ model: "gpt2-small-shape", sentence: words(21) }) });
  await settle(page, headsDrawn, 12);
  await toSteps(page, 2, 4);
  const intro = await page.textContent("#step-focus");
  assert.match(intro, /21 tokens, more than 16/);
  assert.match(intro, /d_model 768, wider than 16/);
  assert.match(intro, /d_head 64, wider than 16/);
  assert.match(intro, /token 5 “w5”/);
  assert.match(intro, /head 3 of 12/);
  // The head's own numbers, that head alone; Q · Kᵀ at scale 1 likewise.
  await page.waitForFunction(() => !document.querySelector("#step").textContent.includes("Asking"));
  const posts = focusPosts(log).filter((b) => b.select_heads[0] === 2);
  const main = posts.find((b) => b.return.includes("q")), rawReq = posts.find((b) => b.scale === 1);
  assert.deepEqual(main.select_heads, [2]);
  assert.ok(main.return.includes("delta"), "21 × 768 numbers of ΔE are asked for");
  const api = (await apiPost(main)).body, raw = (await apiPost(rawReq)).body;
  assert.equal(api.heads.length, 1);
  const full = (await apiPost({ ...main, select_heads: undefined, return: ["q", "delta", "embeddings"] })).body;
  assert.deepEqual(api.q[0], full.q[2], "the head asked for is head 3");
  const E = main.embeddings, t = 4;

  // E: every token's row, the first 8 of 768 columns, token 5's row marked.
  await step(page, "E");
  assert.match(await page.textContent("table[data-matrix=E] caption"), /the first 8 of 768 columns/);
  assert.deepEqual(await drawnMatrix(page, "E"), E.map((r) => r.slice(0, 8)));
  assert.equal(await page.getAttribute("table[data-matrix=E] tbody tr.focus", "data-row"), "4");
  // Q: token 5's query, the first 8 of 64; shown whole on request, equal to the API's.
  await step(page, "Q");
  assert.match(await page.textContent("table[data-matrix=Q] caption"), /the first 8 of 64\)/);
  assert.deepEqual(await drawnMatrix(page, "Q"), [api.q[0][t].slice(0, 8)]);
  await page.click("button[data-expand=Q]");
  assert.deepEqual(await drawnMatrix(page, "Q"), [api.q[0][t]]);
  assert.equal(await page.getAttribute("button[data-expand=Q]", "aria-expanded"), "true");
  await page.click("button[data-expand=Q]");
  assert.equal((await drawnMatrix(page, "Q"))[0].length, 8);
  // K and V of every token, shortened to their first 8 columns.
  await step(page, "K");
  assert.deepEqual(await drawnMatrix(page, "K"), api.k[0].map((r) => r.slice(0, 8)));
  await step(page, "V");
  assert.deepEqual(await drawnMatrix(page, "V"), api.v[0].map((r) => r.slice(0, 8)));
  await step(page, "KT");
  assert.match(await page.textContent("table[data-matrix=KT] caption"), /the first 8 of 64 rows/);
  assert.deepEqual(await drawnMatrix(page, "KT"), api.k[0][0].slice(0, 8).map((_, c) => api.k[0].map((r) => r[c])));
  // q · Kᵀ: the service's own at scale 1; each cell's sum written out, shortened to 64 terms.
  await step(page, "QKT");
  assert.deepEqual(await drawnMatrix(page, "QKT"), [raw.scores[0][t]]);
  await page.hover('table[data-matrix=QKT] td[data-j="7"]');
  let s = await sumText(page, "Q·Kᵀ");
  assert.equal(s.j, "7");
  assert.match(s.text, /^q_w5 · k_w8 = .+ \+ … \+ .+ \(64 terms\) = /);
  const terms = api.q[0][t].map((x, c) => x * api.k[0][7][c]);
  const sum = terms.reduce((x, y) => x + y, 0);
  f32(Number(s.sum), sum, "the terms' sum");
  f32(sum, raw.scores[0][t][7], "the terms' sum against the API's Q · Kᵀ");
  assert.equal(Number(s.total), raw.scores[0][t][7]);
  assert.ok(s.text.endsWith(`= ${fmtNum(raw.scores[0][t][7])}`), s.text);
  // The first terms are the API's numbers as products.
  assert.ok(s.text.includes(`${term(api.q[0][t][0])}×${term(api.k[0][7][0])} + ${term(api.q[0][t][1])}×${term(api.k[0][7][1])}`), s.text);
  // S, P: token 5's row, the API's; the softmax of that row worked out.
  await step(page, "S");
  assert.deepEqual(await drawnMatrix(page, "S"), [api.scores[0][t].map((x) => (x === null ? -Infinity : x))]);
  await step(page, "P");
  assert.deepEqual(await drawnMatrix(page, "P"), [api.patterns[0][t]]);
  const worked = await drawnMatrix(page, "softmax-row");
  worked[2].forEach((x, k) => near(x, api.patterns[0][t][k], 1e-6, `P[w5][${k}]`));
  // z = P · V: its sum over the 21 tokens written out, equal to the API's.
  await step(page, "Z");
  assert.deepEqual(await drawnMatrix(page, "Z"), [api.head_outputs[0][t].slice(0, 8)]);
  await page.focus("table[data-matrix=Z]");
  for (let i = 0; i < 3; i++) await page.keyboard.press("ArrowRight");
  s = await sumText(page, "P·V");
  assert.equal(s.j, "3");
  assert.match(s.text, /^z_w5\[4\] = .+ \(21 terms\) = /);
  const zsum = api.patterns[0][t].reduce((acc, p, k) => acc + p * api.v[0][k][3], 0);
  f32(Number(s.sum), zsum, "P · V's sum");
  f32(zsum, api.head_outputs[0][t][3], "P · V's sum against the API's Z");
  assert.equal(Number(s.total), api.head_outputs[0][t][3]);
  assert.equal(await page.getAttribute('table[data-matrix=Z-P] tbody tr[data-row="0"] td[data-j="0"]', "class"), "op-row");
  // ΔE and E + ΔE of token 5: the API's.
  await step(page, "dE");
  assert.deepEqual(await drawnMatrix(page, "dE"), [full.delta[t].slice(0, 8)]);
  await step(page, "E2");
  assert.deepEqual(await drawnMatrix(page, "E2"), [full.embeddings[t].slice(0, 8)]);
  assert.deepEqual(await drawnMatrix(page, "E2-E"), [E[t].slice(0, 8)]);
  // Another head: asked for once, its own numbers.
  await page.selectOption("#step-head", "10");
  await page.waitForFunction(() => document.querySelector("#step-focus").dataset.head === "10" && document.querySelector("table[data-matrix=E2]"));
  await shot(page, "steps-gpt2-21-tokens");
  assert.deepEqual(await contrastFailures(page), []);
  await noSideways(page, "gpt2, 1280");
  assert.deepEqual(log.errors, []);
  await close();
});

test("llama-small-shape at 20 tokens: RoPE as the rotation of q and k, with its angles, from q_raw and k_raw", async () => {
  const { page, log, close } = await open({ hash: link({ model: "llama-small-shape", sentence: words(20) }) });
  await settle(page, headsDrawn, 32);
  await toSteps(page, 5, 11);
  assert.match(await page.textContent("#step-focus"), /head 6 of 32 \(which shares K\/V head 2 of 8\)/);
  const ids = await page.$$eval("#step-list button", (bs) => bs.map((b) => b.dataset.step));
  assert.deepEqual(ids, ["E", "W", "Q", "K", "V", "rope", "KT", "QKT", "S", "P", "Z", "dE", "E2"]);
  await page.waitForFunction(() => !document.querySelector("#step").textContent.includes("Asking"));
  const req = focusPosts(log).find((b) => b.return.includes("q_raw") && b.select_heads[0] === 5);
  assert.ok(req, "the page asks for q_raw and k_raw");
  const api = (await apiPost(req)).body;
  await step(page, "Q");
  assert.deepEqual(await drawnMatrix(page, "Q"), [api.q_raw[0][11].slice(0, 8)], "Q before the rotation is q_raw");
  await step(page, "rope");
  assert.match(await page.textContent("#step"), /θ = 500000, dims = 64, half/);
  assert.match(await page.textContent("table[data-matrix=rope-angles] caption"), /the first 8 of 32 rows/);
  for (const name of ["rope-angles", "rope-q", "rope-k"]) await page.click(`button[data-expand=${name}]`);
  const p = 11;
  const angles = await drawnMatrix(page, "rope-angles");
  assert.equal(angles.length, 32);
  angles.forEach(([f, a, c, s], t) => {
    const want = 500000 ** (-2 * t / 64);
    near(f, want, 1e-12 * want + 1e-15, `f_${t}`);
    near(a, p * want, 1e-12, `angle ${t}`);
    near(c, Math.cos(p * want), 1e-12, `cos ${t}`);
    near(s, Math.sin(p * want), 1e-12, `sin ${t}`);
  });
  for (const [name, rawV, out] of [["rope-q", api.q_raw[0][p], api.q[0][p]], ["rope-k", api.k_raw[0][p], api.k[0][p]]]) {
    const M = await drawnMatrix(page, name);
    M.forEach(([a, b, a2, b2, sa, sb], t) => {
      const x = rawV[t], y = rawV[t + 32], ang = p * 500000 ** (-2 * t / 64);
      assert.equal(a, x); assert.equal(b, y);
      near(a2, x * Math.cos(ang) - y * Math.sin(ang), 1e-9, `${name} a′ ${t}`);
      near(b2, x * Math.sin(ang) + y * Math.cos(ang), 1e-9, `${name} b′ ${t}`);
      assert.equal(sa, out[t]); assert.equal(sb, out[t + 32]);
      // The service's rotation, in float32, agrees with the float64 one.
      f32(sa, a2, `${name} service a′ ${t}`); f32(sb, b2, `${name} service b′ ${t}`);
    });
  }
  await shot(page, "steps-llama-rope");
  assert.deepEqual(await contrastFailures(page), []);
  assert.deepEqual(log.errors, []);
  await close();
});

test("llama-small-shape at 48 tokens: the requests stay bounded, ΔE is E′ − E from the API's E′", async () => {
  const { page, log, close } = await open({ hash: link({ model: "llama-small-shape", sentence: words(48) }) });
  await settle(page, headsDrawn, 32);
  const before = log.posts.length;
  await toSteps(page);
  await page.waitForFunction(() => !document.querySelector("#step").textContent.includes("Asking"));
  const posts = log.posts.slice(before).map((b) => JSON.parse(b));
  assert.equal(posts.length, 2, "one request for the head's steps, one for Q · Kᵀ at scale 1");
  const req = posts.find((b) => b.return.includes("q"));
  assert.deepEqual(req.select_heads, [0]);
  assert.ok(!req.return.includes("delta") && !req.return.includes("embeddings"), "48 × 2048 numbers of ΔE are not asked for");
  const res = await apiPost(req);
  assert.ok(JSON.stringify(res.body).length < 600000, "the head's steps are well under a megabyte");
  await step(page, "dE");
  assert.match(await page.textContent("#step"), /E′ − E, from the service's E′/);
  const full = (await apiPost({ ...req, select_heads: undefined, return: ["delta"] })).body;
  (await drawnMatrix(page, "dE"))[0].forEach((x, j) => near(x, full.delta[47][j], 1e-5, `ΔE[48][${j}]`));
  assert.deepEqual(log.errors, []);
  await close();
});

test("E · W_q = Q written out for 我: the row of E, the column of W_q, 0.1×1 + (−0.2)×0 + 0.3×1 + 0.1×0 = 0.4", async () => {
  const { page, log, close } = await open({ hash: WOAINI_LINK });
  await page.click("#step-list button[data-step=Q]");
  // The signs between the matrices.
  assert.deepEqual(await page.$$eval('.op[data-op="E·W_q"] > .op-sign', (ss) => ss.map((s) => s.textContent)), ["·", "="]);
  let s = await sumText(page, "E·W_q");
  assert.equal(s.text, "Q[我, 1] = 0.1×1 + (−0.2)×0 + 0.3×1 + 0.1×0 = 0.4");
  const api = (await apiPost({ model: "demo-4d", embeddings: [[0.1, -0.2, 0.3, 0.1], [-0.1, 0.2, 0.2, -0.3], [0.2, 0.1, -0.1, 0.2]], mask: "none", return: ["q", "k", "v", "patterns", "head_outputs"] })).body;
  // Hovering Q[爱][3]: E's row 爱 and W_q's column 3 light up.
  await page.hover('table[data-matrix=Q] td[data-i="1"][data-j="2"]');
  s = await sumText(page, "E·W_q");
  assert.equal(s.text, `Q[爱, 3] = (−0.1)×1 + 0.2×0 + 0.2×0 + (−0.3)×1 = ${fmtNum(api.q[0][1][2])}`);
  assert.equal(fmtNum(api.q[0][1][2]), "−0.4");
  assert.deepEqual(await page.$$eval("table[data-matrix=Q-E] td.op-row", (t) => t.map((c) => c.dataset.i)), ["1", "1", "1", "1"]);
  assert.deepEqual(await page.$$eval("table[data-matrix=Q-W] td.op-col", (t) => t.map((c) => c.dataset.j)), ["2", "2", "2", "2"]);
  // By keyboard: Q is one tab stop; the arrow keys move along its cells.
  await page.focus("table[data-matrix=Q]");
  await page.keyboard.press("ArrowRight");
  s = await sumText(page, "E·W_q");
  assert.equal(s.text, "Q[爱, 4] = (−0.1)×0 + 0.2×1 + 0.2×1 + (−0.3)×0 = 0.4");
  await page.keyboard.press("ArrowUp");
  await page.keyboard.press("ArrowLeft");
  s = await sumText(page, "E·W_q");
  assert.equal(s.text, "Q[我, 3] = 0.1×1 + (−0.2)×0 + 0.3×0 + 0.1×1 = 0.2");
  assert.equal(await page.getAttribute("#step", "data-step"), "Q", "the arrow keys on Q do not change the step");
  // Q · Kᵀ and P · V the same way, each total the API's.
  await page.click("#step-list button[data-step=QKT]");
  await page.locator("table[data-matrix=QKT]").waitFor();
  assert.deepEqual(await page.$$eval('.op[data-op="Q·Kᵀ"] > .op-sign', (ss) => ss.map((x) => x.textContent)), ["·", "="]);
  await page.hover('table[data-matrix=QKT] td[data-i="1"][data-j="2"]');
  s = await sumText(page, "Q·Kᵀ");
  const qk = api.q[0][1].reduce((acc, x, c) => acc + x * api.k[0][2][c], 0);
  f32(Number(s.sum), qk, "q_爱 · k_你");
  f32(Number(s.total), qk, "the API's Q · Kᵀ");
  assert.equal(s.text, `q_爱 · k_你 = ${api.q[0][1].map((x, c) => `${term(x)}×${term(api.k[0][2][c])}`).join(" + ")} = ${fmtNum(Number(s.total))}`);
  await page.click("#step-list button[data-step=Z]");
  await page.hover('table[data-matrix=Z] td[data-i="2"][data-j="0"]');
  s = await sumText(page, "P·V");
  assert.equal(s.text, `Z[你, 1] = ${api.patterns[0][2].map((x, k) => `${term(x)}×${term(api.v[0][k][0])}`).join(" + ")} = ${fmtNum(api.head_outputs[0][2][0])}`);
  f32(Number(s.sum), api.head_outputs[0][2][0], "P · V");
  for (const id of ["Q", "QKT", "Z"]) {
    await page.click(`#step-list button[data-step=${id}]`);
    await page.hover(`table[data-matrix=${id}] td[data-i="1"][data-j="1"]`);
    assert.deepEqual(await contrastFailures(page), [], `step ${id}, a cell hovered`);
  }
  await shot(page, "steps-operations-q");
  assert.deepEqual(log.errors, []);
  await close();
});

// A small model of its own with RoPE, soft-capping and ALiBi: d_model 4, 2 heads of 4 (W_o 8 × 4),
// causal.
function safetensors(meta, tensors) {
  let off = 0;
  const header = { __metadata__: meta };
  const data = [];
  for (const [name, shape, values] of tensors) {
    const b = Buffer.alloc(values.length * 4);
    values.forEach((x, i) => b.writeFloatLE(x, i * 4));
    header[name] = { dtype: "F32", shape, data_offsets: [off, off + b.length] };
    off += b.length;
    data.push(b);
  }
  const h = Buffer.from(JSON.stringify(header));
  const n = Buffer.alloc(8);
  n.writeBigUInt64LE(BigInt(h.length));
  return Buffer.concat([n, h, ...data]);
}
const wqkv = Array.from({ length: 4 * 24 }, (_, i) => ((i * 7919) % 17) / 4 - 2);
let modelsDir;
function tinyModels() {
  if (modelsDir) return modelsDir;
  modelsDir = mkdtempSync(join(tmpdir(), "attn-steps-"));
  symlinkSync(join(MODELS, "demo-4d.safetensors"), join(modelsDir, "demo-4d.safetensors"));
  writeFileSync(join(modelsDir, "tiny-capped.safetensors"), safetensors(
    { name: "tiny-capped", n_heads: "2", mask: "causal", softcap: "0.5", alibi: "true", rope_theta: "100" }, [["w_qkv", [4, 24], wqkv], ["w_o", [8, 4], Array.from({ length: 32 }, (_, i) => ((i * 13) % 7) / 4 - 0.75)]]));
  // A sliding window of 2: each query sees itself and the token before.
  writeFileSync(join(modelsDir, "tiny-window.safetensors"), safetensors(
    { name: "tiny-window", n_heads: "2", mask: "causal", window: "2" }, [["w_qkv", [4, 24], wqkv], ["w_o", [8, 4], Array.from({ length: 32 }, (_, i) => ((i * 5) % 7) / 4 - 0.75)]]));
  // Cross-attention: queries from E (d_model 4), keys and values from a context of d_context 6.
  writeFileSync(join(modelsDir, "tiny-cross.safetensors"), safetensors(
    { name: "tiny-cross", n_heads: "2", mask: "none" }, [["w_q", [4, 8], Array.from({ length: 32 }, (_, i) => ((i * 5) % 9) / 4 - 1)],
      ["w_kv", [6, 16], Array.from({ length: 96 }, (_, i) => ((i * 11) % 13) / 6 - 1)], ["w_o", [8, 4], Array.from({ length: 32 }, (_, i) => ((i * 3) % 7) / 4 - 0.75)]]));
  return modelsDir;
}

test("RoPE, soft-capping and ALiBi as steps of their own, each with the right numbers (small and 20 tokens)", async () => {
  const origin = await startServer("steps-tiny", ["--models-dir", tinyModels()]);
  const post = async (body) => (await (await fetch(origin + "/v1/attention", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) })).json());
  for (const n of [5, 20]) {
    const { page, log, close } = await open({ origin, hash: link({ model: "tiny-capped", sentence: words(n) }) });
    await settle(page, headsDrawn, 2);
    await page.locator("#walkthrough").scrollIntoViewIfNeeded();
    const ids = await page.$$eval("#step-list button", (bs) => bs.map((b) => b.dataset.step));
    assert.deepEqual(ids, ["E", "W", "Q", "K", "V", "rope", "KT", "QKT", "S", "softcap", "alibi", "P", "Z", "dE", "E2"]);
    await page.selectOption("#step-head", "1");
    const t = n - 1;
    if (n > 16) await toSteps(page, 1, t);
    await step(page, "S");
    const mainReq = JSON.parse(log.posts.filter((b) => JSON.parse(b).return.includes("patterns"))[0]);
    const api = await post({ ...mainReq, select_heads: [1], return: ["q", "k", "q_raw", "k_raw", "scores", "patterns"] });
    const rows = n > 16 ? [t] : api.q[0].map((_, i) => i);
    const scale = api.scale, c = 0.5, m = 2 ** (-8 * 2 / 2);   // head 2 of 2: 2^(−8·2/2)
    const dotS = rows.map((i) => api.k[0].map((k, j) => (api.scores[0][i][j] === null ? null : scale * api.q[0][i].reduce((s, x, d) => s + x * k[d], 0))));
    const capped = dotS.map((r) => r.map((x) => (x === null ? null : c * Math.tanh(x / c))));
    const bias = rows.map((i) => api.k[0].map((_, j) => (api.scores[0][i][j] === null ? null : -m * Math.abs(i - j))));
    const close6 = (M, W, what) => M.forEach((r, i) => r.forEach((x, j) => (W[i][j] === null ? assert.equal(x, -Infinity, what) : near(x, W[i][j], 1e-9, `${what}[${i}][${j}]`))));
    close6(await drawnMatrix(page, "S"), dotS, "scale · Q · Kᵀ");
    if (n <= 16) assert.ok(dotS.flat().some((x) => x !== null && Math.abs(x) > 0.5), "some scores are past the cap");
    await step(page, "softcap");
    assert.match(await page.textContent("#step .formula"), /c · tanh\(S \/ c\),  c = 0\.5/);
    close6(await drawnMatrix(page, "softcap"), capped, "c · tanh(S / c)");
    await step(page, "alibi");
    assert.match(await page.textContent("#step .formula"), /m = 0\.0039 for head 2/);
    close6(await drawnMatrix(page, "alibi-bias"), bias, "−m · |p_q − p_k|");
    const final = await drawnMatrix(page, "alibi");
    final.forEach((r, i) => r.forEach((x, j) => {
      const want = api.scores[0][rows[i]][j];
      if (want === null) { assert.equal(x, -Infinity); return; }
      f32(x, want, `S + bias against the API's S [${i}][${j}]`);
      near(x, capped[i][j] + bias[i][j], 1e-9, "the page's sum");
    }));
    assert.deepEqual(await drawnMatrix(page, "S-api"), rows.map((i) => api.scores[0][i].map((x) => (x === null ? -Infinity : x))));
    // Past 16 tokens a model this small still shows its weights: E · W_q's sum for the token.
    if (n > 16) {
      await step(page, "Q");
      const s = await sumText(page, "E·W_q");
      assert.match(s.text, new RegExp(`^Q\\[w${n}, 1\\] = .+ = `));
      assert.equal(Number(s.total), api.q_raw[0][t][0], "the total is the API's q before RoPE");
      f32(Number(s.sum), Number(s.total), "E · W_q's sum");
    }
    // RoPE in a model small enough for every number: the chosen token's pairs.
    await step(page, "rope");
    await page.selectOption("#step-token", "3");
    await page.waitForFunction(() => document.querySelector("#step table[data-matrix=rope-q]") && (document.querySelector("#step-focus") || { dataset: { token: "3" } }).dataset.token === "3");
    const rq = await drawnMatrix(page, "rope-q");
    const api3 = await post({ ...mainReq, select_heads: [1], return: ["q", "q_raw"] });
    rq.forEach(([a, b, a2, b2, sa, sb], u) => {
      const ang = 3 * 100 ** (-2 * u / 4), x = api3.q_raw[0][3][u], y = api3.q_raw[0][3][u + 2];
      assert.equal(a, x); assert.equal(b, y);
      near(a2, x * Math.cos(ang) - y * Math.sin(ang), 1e-9, "a′"); near(b2, x * Math.sin(ang) + y * Math.cos(ang), 1e-9, "b′");
      f32(sa, a2, "the service's a′"); f32(sb, b2, "the service's b′");
    });
    assert.deepEqual(await contrastFailures(page), []);
    await noSideways(page, `tiny-capped, ${n} tokens`);
    await shot(page, `steps-tiny-capped-${n}`);
    assert.deepEqual(log.errors, []);
    await close();
  }
});

test("keyboard reach, phone width and contrast in focus mode", async () => {
  const { page, log, close } = await open({ width: 390, height: 844, hash: link({ model: "gpt2-small-shape", sentence: words(17) }) });
  await settle(page, headsDrawn, 12);
  await toSteps(page);
  await page.waitForFunction(() => !document.querySelector("#step").textContent.includes("Asking"));
  await step(page, "QKT");
  // From the step list on, Tab reaches the token chooser, the expand buttons and the product.
  await page.focus("#step-prev");
  const reached = new Set();
  for (let i = 0; i < 40; i++) {
    await page.keyboard.press("Tab");
    reached.add(await page.evaluate(() => {
      const a = document.activeElement;
      return a.id || (a.dataset.expand ? "expand-" + a.dataset.expand : a.matches("table.op-result") ? "op-" + a.dataset.matrix : a.tagName);
    }));
  }
  for (const id of ["step-head", "step-token", "step", "expand-QKT-Q", "expand-QKT-KT", "op-QKT"]) assert.ok(reached.has(id), `Tab never reaches ${id}`);
  await page.focus("button[data-expand=QKT-KT]");
  await page.keyboard.press("Enter");
  assert.equal(await page.evaluate(() => document.activeElement.dataset.expand), "QKT-KT", "the button keeps the focus");
  assert.equal((await drawnMatrix(page, "QKT-KT")).length, 64);
  await page.focus("#step-token");
  await page.keyboard.press("ArrowUp");
  await page.waitForFunction(() => document.querySelector("#step-focus").dataset.token === "15");
  for (const id of ["E", "W", "Q", "K", "V", "KT", "QKT", "S", "P", "Z", "dE", "E2"]) {
    await step(page, id);
    await noSideways(page, `390 px, step ${id}`);
    assert.deepEqual(await contrastFailures(page), [], `step ${id}`);
  }
  await shot(page, "steps-phone-17-tokens");
  assert.deepEqual(log.errors, []);
  await close();
});

function fmtNum(x) {
  if (x === 0) return "0";
  const s = Math.abs(x) < 1e-3 ? x.toExponential(1) : x.toFixed(4).replace(/\.?0+$/, "");
  return s.replace("-", "−");
}
const term = (x) => (x < 0 ? `(${fmtNum(x)})` : fmtNum(x));

test("the link names the head and the token the walk-through follows, and opens them again", async () => {
  const { page, log, close } = await open({ hash: link({ model: "gpt2-small-shape", sentence: words(21), step: "P", "step-head": "3", "step-token": "5" }) });
  await settle(page, headsDrawn, 12);
  await toSteps(page, 2, 4);
  assert.equal(await page.$eval("#step", (s) => s.dataset.step), "P");
  await page.selectOption("#step-token", "7");
  await toSteps(page, 2, 7);
  const p = new URLSearchParams(await page.evaluate(() => location.hash.slice(1)));
  assert.equal(p.get("step-head"), "3");
  assert.equal(p.get("step-token"), "8");
  assert.deepEqual(log.errors, []);
  await close();
});

test("no step writes null, undefined or NaN, on the worked example and on a story", async () => {
  for (const hash of [WOAINI_LINK, ""]) {
    const { page, close } = await open({ hash });
    await page.locator("#walkthrough").scrollIntoViewIfNeeded();
    const ids = await page.$$eval("#step-list button[data-step]", (bs) => bs.map((b) => b.dataset.step));
    assert.ok(ids.length >= 10, `${ids.length} steps`);
    for (const id of ids) {
      await step(page, id);
      const text = await page.textContent("#step");
      assert.doesNotMatch(text, /\bnull\b|\bundefined\b|\bNaN\b/, `step ${id} of ${hash || "the first story"}`);
    }
    await close();
  }
});

test("cross-attention: K and V from the context C, the keys named by its tokens, whole and past the limits", async () => {
  const origin = await startServer("steps-cross", ["--models-dir", tinyModels()]);
  const get = async (path) => (await fetch(origin + path)).json();
  const post = async (body) => (await (await fetch(origin + "/v1/attention", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) })).json());
  const W = (await get("/v1/models/tiny-cross?weights=true")).weights;
  const ctx = ["the", "cat", "sat"];
  for (const n of [3, 20]) {
    const { page, log, close } = await open({ origin, hash: link({ model: "tiny-cross", sentence: words(n), context: ctx.join(" ") }) });
    await settle(page, headsDrawn, 2);
    await page.locator("#walkthrough").scrollIntoViewIfNeeded();
    const t = n - 1;
    if (n > 16) await toSteps(page, 1, t); else await page.selectOption("#step-head", "1");
    const mainReq = JSON.parse(log.posts.filter((b) => JSON.parse(b).return.includes("patterns"))[0]);
    assert.deepEqual(mainReq.context_tokens, ctx);
    const api = await post({ ...mainReq, select_heads: [1], return: ["k", "v", "patterns"] });
    await step(page, "K");
    assert.match(await page.textContent("#step"), /K = C · W_k/, `n = ${n}`);
    const kLabels = await page.$$eval("table[data-matrix=K] tbody th", (ths) => ths.map((x) => x.textContent));
    assert.deepEqual(kLabels, ctx, `K's rows are the context's tokens (n = ${n})`);
    const K = await drawnMatrix(page, "K");
    K.forEach((row, i) => row.forEach((x, j) => f32(x, api.k[0][i][j], `K[${ctx[i]}, ${j + 1}]`)));
    // The sum written out: C's row times W_k's column, in float64, is the API's K.
    if (n <= 16) {
      await page.hover('table[data-matrix=K] td[data-i="2"][data-j="1"]');
      const sumK = await sumText(page, "C·W_k");
      const want = mainReq.context[2].reduce((acc, c, d) => acc + c * W.heads[1].w_k[d][1], 0);
      f32(Number(sumK.sum), want, "C[sat] · W_k[:, 2]");
      f32(Number(sumK.total), api.k[0][2][1], "the API's K[sat, 2]");
      assert.match(sumK.text, /^K\[sat, 2\] = /);
    }
    await step(page, "P");
    const P = await drawnMatrix(page, "P");
    const rows = n > 16 ? [t] : api.patterns[0].map((_, i) => i);
    assert.equal(P.length, rows.length);
    P.forEach((row, r) => { assert.equal(row.length, 3); row.forEach((x, j) => f32(x, api.patterns[0][rows[r]][j], `P[${rows[r] + 1}][${ctx[j]}]`)); });
    const pCols = await page.$$eval("table[data-matrix=P] thead th[scope=col]", (ths) => ths.map((x) => x.textContent));
    assert.deepEqual(pCols, ctx, "P's columns are the context's tokens");
    assert.deepEqual(log.errors, []);
    await close();
  }
});

test("a windowed model's Q · Kᵀ is every dot product, also outside the window, whole and past the limits", async () => {
  const origin = await startServer("steps-window", ["--models-dir", tinyModels()]);
  const post = async (body) => (await (await fetch(origin + "/v1/attention", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) })).json());
  for (const n of [5, 20]) {
    const { page, log, close } = await open({ origin, hash: link({ model: "tiny-window", sentence: words(n) }) });
    await settle(page, headsDrawn, 2);
    await page.locator("#walkthrough").scrollIntoViewIfNeeded();
    const t = n - 1;
    if (n > 16) await toSteps(page, 0, t);
    await step(page, "QKT");
    const mainReq = JSON.parse(log.posts.filter((b) => JSON.parse(b).return.includes("patterns"))[0]);
    const api = await post({ ...mainReq, select_heads: [0], return: ["q", "k", "scores"] });
    const rows = n > 16 ? [t] : api.q[0].map((_, i) => i);
    const drawn = await drawnMatrix(page, "QKT");
    assert.equal(drawn.length, rows.length);
    drawn.forEach((row, r) => row.forEach((x, k) => {
      const i = rows[r];
      assert.ok(Number.isFinite(x), `Q · Kᵀ[${i + 1}][${k + 1}] is a number (n = ${n})`);
      f32(x, api.q[0][i].reduce((acc, v, c) => acc + v * api.k[0][k][c], 0), `q_${i + 1} · k_${k + 1}`);
    }));
    // The window shows in S: the service's null where a key is out of reach (q − k ≥ 2).
    assert.equal(api.scores[0][rows[0]][Math.max(0, rows[0] - 3)] === null, rows[0] >= 2);
    assert.deepEqual(log.errors, []);
    await close();
  }
});
