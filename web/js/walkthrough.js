"use strict";
// ---- the walk-through ----------------------------------------------------------------

const STEPS = [
  { id: "E", title: "E: the embeddings" },
  { id: "W", title: "W_q, W_k, W_v" },
  { id: "Q", title: "Q = E · W_q" },
  { id: "K", title: "K = E · W_k" },
  { id: "V", title: "V = E · W_v" },
  { id: "KT", title: "Kᵀ" },
  { id: "QKT", title: "Q · Kᵀ" },
  { id: "S", title: "÷ √d_k, masked" },
  { id: "P", title: "softmax, row by row" },
  { id: "Z", title: "× V" },
  { id: "dE", title: "ΔE" },
  { id: "E2", title: "E + ΔE" },
];

function matrix(caption, M, rowLabels, colLabels, opts = {}) {
  const head = el("tr", {}, el("th", {}), ...colLabels.map((c) => el("th", { scope: "col", text: c })));
  const rows = M.map((row, i) => el("tr", { class: opts.focusRow === i ? "focus" : opts.rowClass ? opts.rowClass(i) : null, "data-row": i },
    el("th", { scope: "row", text: rowLabels[i] }),
    ...row.map((x, j) => el("td", {
      "data-value": x === null ? "-Infinity" : String(x), "data-i": i, "data-j": j,
      title: x === null ? "masked: −∞" : String(x),
      class: x === null ? "inf" : x < 0 ? "neg" : opts.mutedZero && x === 0 ? "zero" : null, text: fmt(x) }))));
  // Each matrix scrolls sideways in its own box, never the page.
  return el("div", { class: "scroll" }, el("table", { class: "matrix", "data-matrix": opts.name || caption },
    el("caption", { text: caption }), el("thead", {}, head), el("tbody", {}, ...rows)));
}
const indices = (n) => Array.from({ length: n }, (_, i) => String(i + 1));
const transpose = (M) => M[0].map((_, j) => M.map((row) => row[j]));

// Re-rendering replaces the step buttons: keep the keyboard where it was.
function renderWalkthrough() {
  const a0 = document.activeElement;
  const focusStep = a0 && a0.closest && a0.closest("#step-list") ? a0.dataset.step : null;
  const focusNav = a0 && (a0.id === "step-prev" || a0.id === "step-next") ? a0.id : null;
  drawWalkthrough();
  if (focusStep) {
    const b = document.querySelector(`#step-list button[data-step="${focusStep}"]`);
    if (b) b.focus();
  } else if (focusNav && $(focusNav).disabled) {
    $("step").focus();
  }
}

function drawWalkthrough() {
  const on = canWalk() && state.result.answer.q;
  $("walkthrough-on").hidden = !on;
  $("walkthrough-off").hidden = !!on;
  if (!on) {
    $("walkthrough-off").textContent = `The step-by-step view follows small examples (at most ${STEP_MAX_D} dimensions per embedding and per head, and ${STEP_MAX_N} tokens), where every number fits on the screen: start from 我爱你 on demo-4d.`;
    return;
  }
  const a = state.result.answer;
  const sel = $("step-head");
  sel.replaceChildren(...a.heads.map((h, i) => el("option", { value: i, text: `head ${h + 1}` })));
  state.stepHead = Math.min(state.stepHead, a.heads.length - 1);
  sel.value = state.stepHead;
  $("step-head-label").hidden = a.heads.length < 2;
  if (state.softmaxRow !== "all") state.softmaxRow = Math.min(state.softmaxRow, a.n_tokens - 1);
  $("step-list").replaceChildren(...STEPS.map((s, i) => el("li", {}, el("button", {
    type: "button", "data-step": s.id, "aria-current": i === state.step ? "step" : null, text: `${i + 1}. ${s.title}` }))));
  $("step-prev").disabled = state.step === 0;
  $("step-next").disabled = state.step === STEPS.length - 1;
  $("step").replaceChildren(...stepContent(STEPS[state.step].id));
  $("step").dataset.step = STEPS[state.step].id;
}

function stepContent(id) {
  const { answer: a, raw, weights, rows, model } = state.result;
  const h = state.stepHead, head = a.heads[h];
  const tokens = a.tokens, dh = a.d_head, dm = a.d_model;
  const E = rows.map((r) => r.map(Number));
  const dims = dimLabels(model, dm);
  // Blank rows: a vocabulary the page could not fetch, so E is the service's alone.
  const known = !rows.some((r) => r.includes(""));
  const Em = (caption, opts) => (known ? matrix(caption, E, tokens, dims, opts) : null);
  const W = weights ? weights.heads[head] : null;
  const p = (text) => el("p", { text });
  const f = (text) => el("p", { class: "formula", text });
  const box = (...kids) => el("div", { class: "matrices" }, ...kids);
  const sub = `_${head + 1}`;
  switch (id) {
  case "E":
    if (!known) return [p("This model looks its tokens up in a vocabulary this page could not show.")];
    return [f(`E  (${a.n_tokens} tokens × d_model ${dm})${model && model.dimensions ? ", one named dimension per column" : ""}`),
      p("Each token is a row vector. Attention changes these rows by adding to each one what it gathers from the others."),
      hasVocab(model) ? p(state.result.sentTokensOnly
        ? "Here each row is the model's own: the embedding of the token (its row in the vocabulary) plus the embedding of its position. The page sent the tokens alone; the service looked them up."
        : "These rows were edited by hand: the page sent them, with the tokens as labels.") : null,
      box(Em("E", { name: "E" }))];
  case "W":
    if (!W) return [p("The model's weights could not be fetched.")];
    return [f(`W_q${sub}, W_k${sub}, W_v${sub}  (d_model ${dm} × d_k ${dh})`),
      p(`d_k is the width of one head's queries and keys, ${dh} here (the API calls it d_head).`),
      p(a.model ? "The head's three learned matrices, as the model holds them (GET /v1/models/" + a.model + "?weights=true)."
        : "The head's three matrices as edited on this page, sent inline with the request."),
      box(matrix("W_q", W.w_q, dims, indices(dh), { name: "W_q" }),
        matrix("W_k", W.w_k, dims, indices(dh), { name: "W_k" }),
        matrix("W_v", W.w_v, dims, indices(dh), { name: "W_v" }))];
  case "Q":
    return [f(`Q = E · W_q${W && W.b_q ? " + b_q" : ""}`), p(`Each token's query: what it is looking for. Row ${tokens[0]} is ${tokens[0]}'s embedding times W_q.`),
      box(Em("E"), matrix("Q", a.q[h], tokens, indices(dh), { name: "Q" }))];
  case "K":
    return [f(`K = E · W_k${W && W.b_k ? " + b_k" : ""}`), p("Each token's key: what it offers to be found by."),
      box(matrix("K", a.k[h], tokens, indices(dh), { name: "K" }))];
  case "V":
    return [f(`V = E · W_v${W && W.b_v ? " + b_v" : ""}`), p("Each token's value: what it passes on to those that attend to it."),
      box(matrix("V", a.v[h], tokens, indices(dh), { name: "V" }))];
  case "KT":
    return [f("Kᵀ"), p("K turned on its side, so that each key is a column."),
      box(matrix("Kᵀ", transpose(a.k[h]), indices(dh), tokens, { name: "KT" }))];
  case "QKT":
    if (!raw) {
      fetchRaw();
      const e = state.result.rawError;
      return [f("Q · Kᵀ"), e ? el("div", { class: "error", role: "alert" }, ...errorParts(e.body.error, e.status, e.body.error.path || ""))
        : p("Asking the service for Q · Kᵀ before scaling and masking (scale 1, no mask)…")];
    }
    return [f("Q · Kᵀ"), p("Row q, column k: the dot product of q's query with k's key. Large when they point the same way."),
      box(matrix("Q", a.q[h], tokens, indices(dh)), matrix("Kᵀ", transpose(a.k[h]), indices(dh), tokens),
        matrix("Q · Kᵀ", raw.scores[h], tokens, tokens, { name: "QKT" }))];
  case "S":
    return [f(`S = Q · Kᵀ / √d_k = Q · Kᵀ × ${a.scale}${Math.abs(a.scale - 1 / Math.sqrt(dh)) < 1e-6 ? `   (d_k = ${dh}: 1/√${dh})` : `   (a scale chosen here; 1/√d_k would be ${fmt(1 / Math.sqrt(dh))})`},  then −∞ where the mask (${a.mask}) forbids`),
      p(`Dividing by √d_k (d_k = d_head = ${dh}, the width of a query and a key) keeps the scores from growing with the width. Masked cells become −∞, which softmax turns into exactly 0.`),
      box(matrix("S", a.scores[h], tokens, tokens, { name: "S" }))];
  case "P":
    return softmaxStep(a, h, tokens);
  case "Z":
    return [f(`Z${sub} = P · V`), p("Each token's output from this head: the values, weighted by how much it attends to each token."),
      box(matrix("P", a.patterns[h], tokens, tokens), matrix("V", a.v[h], tokens, indices(dh)),
        matrix("Z = P · V", a.head_outputs[h], tokens, indices(dh), { name: "Z" }))];
  case "dE": {
    const last = a.n_heads - 1;
    const how = !weights ? "The heads' outputs side by side, times W_o (the model's weights could not be fetched to show it)."
      : weights.w_o ? "The heads' outputs side by side, projected back to the embedding width by W_o."
        : "This model has no W_o: it is the identity, so ΔE is the heads' outputs side by side.";
    return [f(`ΔE = concat(Z_1${last > 0 ? ` … Z_${last + 1}` : ""}) · W_o${weights && weights.b_o ? " + b_o" : ""}`),
      p(how),
      box(matrix("ΔE", a.delta, tokens, dims, { name: "dE" }))];
  }
  case "E2":
    return [f("E′ = E + ΔE"), p("The updated embeddings: each token, moved by what it gathered from the tokens it attended to."),
      box(Em("E"), matrix("ΔE", a.delta, tokens, dims),
        matrix("E + ΔE", a.embeddings, tokens, dims, { name: "E2" }))];
  }
  return [];
}

// The softmax worked out in the page (float64) as the texts write it, e^S, Σ, ÷ Σ, then in the
// stable form the service uses; both next to the service's P. One row, or all of them.
function softmaxStep(a, h, tokens) {
  const r = state.softmaxRow;
  const S = a.scores[h];
  const expRow = (row) => row.map((x) => (x === null ? 0 : Math.exp(x)));
  const sumOf = (row) => row.reduce((x, y) => x + y, 0);
  const pick = el("div", { class: "rowpick", role: "group", "aria-label": "Row" }, ...tokens.map((t, i) =>
    el("button", { type: "button", "data-row": i, "aria-pressed": i === r ? "true" : "false", text: t })),
  el("button", { type: "button", "data-row": "all", "aria-pressed": r === "all" ? "true" : "false", text: "all rows" }));
  const head = [
    el("p", { class: "formula", text: "P[q][k] = e^S[q][k] ÷ Σ_k e^S[q][k]" }),
    el("p", { text: "Each row of S becomes a row of weights that sum to 1: raise e to each score, add the row up (Σ), divide each by Σ. A masked score is −∞, and e^−∞ = 0. Pick a row to see it worked out, or all rows:" }),
    pick,
  ];
  if (r === "all") {
    const E = S.map(expRow), sums = E.map(sumOf);
    return [...head, el("div", { class: "matrices" },
      matrix("e^S", E, tokens, tokens, { name: "softmax-exp" }),
      matrix("Σ", sums.map((x) => [x]), tokens, ["Σ_k e^S"], { name: "softmax-sums" }),
      matrix("e^S ÷ Σ", E.map((row, q) => row.map((x) => x / sums[q])), tokens, tokens, { name: "softmax-all" }),
      matrix("P (the service's)", a.patterns[h], tokens, tokens, { name: "P" }))];
  }
  const s = S[r];
  const ex = expRow(s), sum = sumOf(ex);
  const live = s.filter((x) => x !== null);
  const max = live.length ? Math.max(...live) : 0;
  const ex2 = s.map((x) => (x === null ? 0 : Math.exp(x - max))), sum2 = sumOf(ex2);
  const terms = s.map((x, k) => (x === null ? null : [fmt(x), ex[k]])).filter(Boolean);
  const written = `Σ = ${terms.map(([x]) => `e^${x.startsWith("−") ? `(${x})` : x}`).join(" + ")} = ${terms.map(([, e]) => fmt(e)).join(" + ")} = ${fmt(sum)}`;
  return [...head,
    el("p", { class: "formula", id: "softmax-sum", "data-sum": String(sum), text: written }),
    el("div", { class: "matrices" },
      matrix(`row ${tokens[r]}, by hand (Σ = ${fmt(sum)})`, [s, ex, ex.map((x) => x / sum)],
        ["S", "e^S", "÷ Σ"], tokens, { name: "softmax-row" }),
      matrix("P (the service's)", a.patterns[h], tokens, tokens, { name: "P", focusRow: r })),
    el("h3", { text: "The same result, the stable way" }),
    el("p", { id: "softmax-why", text: `Computers subtract the row's largest score first (here ${fmt(max)}): e^S overflows for scores past about 88 in float32, while e^(S − max) is at most 1, and since e^(S − max) = e^S ÷ e^max, the e^max cancels in the division and P is the same. The service computes it this way.` }),
    el("div", { class: "matrices" },
      matrix(`row ${tokens[r]}, stable (Σ = ${fmt(sum2)})`, [s.map((x) => (x === null ? null : x - max)), ex2, ex2.map((x) => x / sum2)],
        ["S − max", "e^(S − max)", "÷ Σ"], tokens, { name: "softmax-stable" })),
  ];
}

function goStep(i) {
  state.step = Math.max(0, Math.min(STEPS.length - 1, i));
  renderWalkthrough();
  saveLink();
}
