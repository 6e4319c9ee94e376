// ---- state ---------------------------------------------------------------------------

export const state = {
  models: [],             // GET /v1/models
  model: null,            // the chosen model's summary
  tokens: [],
  rows: [],               // rows[i][j]: the text of E[i][j]
  mask: "none",
  scale: "",              // the scale as typed; empty: the model's own (1/√d_k)
  relative: false,        // heatmap colours relative to each row's largest weight
  inflight: null,         // the body of the request under way
  started: false,         // the model list has come once
  starting: false,        // and is being asked for
  result: null,           // the last answer, and the request it answers
  step: 0, stepHead: 0, softmaxRow: 0,
  layer: 0,               // the layer of a stack whose heads are shown (js/layers.js)
  story: null,            // the story chosen (STORIES), shown while its model is on screen
  gather: { q: 0, head: "all" },   // what each word gathered: the token, and the heads
  seq: 0,                 // answers to older requests are dropped
};

export const $ = (id) => document.getElementById(id);
export const el = (tag, attrs, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v; else if (k === "text") e.textContent = v; else e.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids) if (kid !== null && kid !== undefined) e.append(kid);
  return e;
};

// The views that live in modules of their own register here, at their module's top level, in
// the order the modules run (export.js's last: main.js imports it last, and nobody else does):
// each view's wire() runs once when the page starts, its render() after every answer drawn;
// request(extra, more), when it has one, may change the fields a request asks for (extra) and add
// its own after them (more), for every request the page sends (js/compute.js); link(p) adds
// its parameters to the address (a URLSearchParams) whenever it is saved (js/link.js).
export const views = [];
