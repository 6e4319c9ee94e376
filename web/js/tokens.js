// ---- tokens and embeddings -----------------------------------------------------------

import { api } from "./api.js";
import { state } from "./state.js";

export const WORKED = { sentence: "我爱你", model: "demo-4d",
  rows: { "我": ["0.1", "-0.2", "0.3", "0.1"], "爱": ["-0.1", "0.2", "0.2", "-0.3"], "你": ["0.2", "0.1", "-0.1", "0.2"] } };
const GPT2 = { id: "gpt2", sentence: "a fluffy blue creature roamed the verdant forest", model: "gpt2-small-shape",
  title: "What a real-sized model looks like",
  what: "gpt2-small-shape: GPT-2 small's shape, 12 heads, random weights" };
WORKED.id = "woaini";
WORKED.title = "我爱你, the worked example";
WORKED.what = "demo-4d: one head, every number small enough to follow by hand";

// demo-stories: a model whose every weight was designed, so that each head does one thing that
// can be said in a sentence. Its heads, and the stories that show them.
export const STORY_MODEL = "demo-stories";
export const HEAD_NAMES = { [STORY_MODEL]: ["adjective → noun", "context → meaning", "fiction", "royalty", "previous token"] };
export const STORIES = [
  { id: "adjective", title: "Adjectives colour their noun", sentence: "a fluffy blue creature roamed the verdant forest",
    mask: "causal", heads: [0], token: "creature",
    lesson: "Head 1 lets each noun look back at the adjectives before it and copy their colour, texture and size into itself: after attention, “creature” carries blue's colour and fluffy's texture, and “forest” verdant's colour, although their own embeddings had none." },
  { id: "mole", title: "One word, three meanings: mole", sentence: "one mole of carbon dioxide", mask: "none", heads: [1], token: "mole",
    lesson: "Head 2 lets a noun look for the words that tell which meaning it has: next to “shrew” a mole is an animal, next to “carbon dioxide” the chemist's unit of amount of substance, next to “biopsy” a spot on the skin (medicine).",
    note: "In “one mole of carbon dioxide” the deciding words come after “mole”. A causal model cannot see them at mole's position, so it has to settle the meaning at later tokens, which see mole and its context together; a real model does that over several layers, and this one has a single layer. This story uses no mask; switch to causal and watch mole stay undecided there.",
    compare: { word: "mole", dims: ["animal", "chemistry", "medicine"],
      sentences: ["american shrew mole", "one mole of carbon dioxide", "take a biopsy of the mole"] } },
  { id: "tower", title: "Each word refines the next: miniature eiffel tower", sentence: "miniature eiffel tower", mask: "causal",
    heads: [0, 1], token: "tower",
    lesson: "Two heads work on one word at once: head 2 gives “tower” paris from “eiffel”, and head 1 gives it small from “miniature”. Each word added makes the tower more particular.",
    compare: { word: "tower", dims: ["paris", "small"], sentences: ["tower", "eiffel tower", "miniature eiffel tower"] } },
  { id: "harry", title: "Two heads, two readings: harry", sentence: "wizard harry", mask: "causal", heads: [2, 3], token: "harry",
    lesson: "Head 3 asks a person “is there fiction around you?”, head 4 asks “is there royalty?”: next to “wizard”, harry becomes fictional; next to “queen sussex william”, royal. Each head asks one question, which is why a model has many heads.",
    compare: { word: "harry", dims: ["fiction", "royalty"], sentences: ["wizard harry", "queen sussex william harry"] } },
  { id: "previous", title: "Looking one step back: the previous-token head", sentence: "the red dog sat in the green forest",
    mask: "causal", heads: [4], token: "sat",
    lesson: "Head 5 ignores what the words mean and looks only at their positions: each token attends to the one just before it (the first token to itself). Its values are zero, so it moves nothing; the pattern is the lesson: under the causal mask a head can still look back, and this one always looks exactly one step." },
];
for (const st of STORIES) { st.model = STORY_MODEL; st.what = st.sentence; }
// A stack of layers (docs/API.md, "Layers"): the model view, the layer chosen, the rollout.
const LAYERS = { id: "layers", sentence: "a fluffy blue creature roamed the verdant forest", model: "demo-layers",
  title: "A stack of layers", what: "demo-layers: two layers of two heads, each reading the one before" };
export const EXAMPLES = [...STORIES, WORKED, GPT2, LAYERS];
export const MAX_TOKENS = 48;    // what the page draws legibly; the service allows more
export const EDIT_MAX_D = 16;    // wider embeddings are not edited cell by cell
export const STEP_MAX_D = 16;
export const STEP_MAX_N = 16;

const CJK = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u;
export function tokenize(text) {
  const out = [];
  for (const word of text.trim().split(/\s+/)) {
    if (!word) continue;
    let run = "";
    for (const ch of word) {
      if (CJK.test(ch)) { if (run) out.push(run); run = ""; out.push(ch); }
      else run += ch;
    }
    if (run) out.push(run);
  }
  return out;
}

// FNV-1a over the token's UTF-8 bytes seeds mulberry32: the same text, the same vector.
function seedOf(text, d) {
  let h = 0x811c9dc5;
  for (const b of new TextEncoder().encode(d + "/" + text)) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h;
}
function mulberry32(a) {
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
// Small widths: one decimal in [-0.5, 0.5], like the worked example, so it can be followed by hand.
// Large widths: unit-scale normal values (Box-Muller), as the built-in models' weights expect.
export function pseudoRandomRow(token, d) {
  if (d === 4 && Object.hasOwn(WORKED.rows, token)) return WORKED.rows[token].slice();
  const rand = mulberry32(seedOf(token, d)), row = [];
  if (d <= EDIT_MAX_D) {
    for (let j = 0; j < d; j++) row.push(String(Math.round(rand() * 10 - 5) / 10));
  } else {
    for (let j = 0; j < d; j++) {
      const u = 1 - rand(), v = rand();
      row.push((Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v)).toFixed(4));
    }
  }
  return row;
}

// A model with a vocabulary: E[i] is its token's embedding plus position i's, added in float32
// as the service adds them. Fetched once per model (GET /v1/models/{name}?vocabulary=true).
export const VOCAB_MAX_NUMBERS = 1 << 20;   // larger tables are not fetched: tokens still go, unseen here
export const vocabs = new Map();            // model name → { tokens, index, embeddings, position_embeddings } | null
export const hasVocab = (m) => !!(m && m.vocabulary_size);
// The shortest decimal that reads back as the same float32: what the editor shows.
function f32text(x) {
  for (let p = 1; p < 9; p++) {
    const t = String(Number(x.toPrecision(p)));
    if (Math.fround(Number(t)) === x) return t;
  }
  return String(x);
}
export function vocabRow(vocab, token, i) {
  const t = vocab.index.get(token);
  if (t === undefined) return null;
  const e = vocab.embeddings[t], pe = vocab.position_embeddings ? vocab.position_embeddings[i] : null;
  return e.map((x, j) => Math.fround(Math.fround(x) + (pe ? Math.fround(pe[j]) : 0)));
}
// The row a token starts from: the model's own embedding when it has a vocabulary (blank for a
// word it lacks: the service names it), else the pseudo-random one.
export function defaultRow(model, token, i) {
  const d = model ? model.d_model : 4;
  if (hasVocab(model)) {
    const v = vocabs.get(model.name);
    const r = v ? vocabRow(v, token, i) : null;
    return r ? r.map(f32text) : Array(d).fill("");
  }
  return pseudoRandomRow(token, d);
}
export const isEdited = () => state.rows.some((r, i) => r.join() !== defaultRow(state.model, state.tokens[i], i).join());
// A model with a vocabulary is sent its tokens alone, until a cell is edited by hand.
export const sendsTokensOnly = () => hasVocab(state.model) && !isEdited();
export const dimLabels = (model, d) => (model && Array.isArray(model.dimensions) && model.dimensions.length === d
  ? model.dimensions : Array.from({ length: d }, (_, i) => String(i + 1)));

export async function fetchVocabularies(models) {
  await Promise.all(models.filter((m) => hasVocab(m) && m.vocabulary_size * m.d_model <= VOCAB_MAX_NUMBERS).map(async (m) => {
    try {
      const res = await api.call(`/v1/models/${encodeURIComponent(m.name)}?vocabulary=true`);
      const v = res.ok && res.body.vocabulary;
      if (!v || !Array.isArray(v.tokens)) { vocabs.set(m.name, null); return; }
      vocabs.set(m.name, { tokens: v.tokens, index: new Map(v.tokens.map((t, i) => [t, i])),
        embeddings: v.embeddings, position_embeddings: v.position_embeddings || null });
    } catch (_) { vocabs.set(m.name, null); }
  }));
}

// A cell's text goes to the service as typed: a JSON number when it reads as one, else a JSON
// string, so that the service, not this page, says what is wrong with it.
const JSON_NUMBER = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/;
export const cellJSON = (text) => JSON_NUMBER.test(text.trim()) ? text.trim() : JSON.stringify(text);
