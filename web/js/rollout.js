// ---- attention rollout: how much of each token's final state came from each input token ----

import { $, state, views } from "./state.js";
import { heatmapFigure } from "./heatmap.js";
import { isStack } from "./layers.js";

// The service computes it (docs/API.md, "Layers": `rollout`, n × n, Abnar & Zuidema 2020) for a
// stack; the page asks for it with the patterns of a model of more than one layer (not with a
// context, which the service refuses), and draws it as a heatmap: row q, column k, what token
// k's embedding contributes to token q's output of the last layer. Under the causal mask its
// upper triangle is 0, as the patterns' are, and hatched as theirs.

const stacked = (m) => !!(m && (m.n_layers || 1) > 1 && !m.d_context);

// Every request for the patterns of a stack asks for the rollout too (views' request).
function rolloutRequest(extra) {
  if (stacked(state.model) && Array.isArray(extra.return) && extra.return.includes("patterns"))
    extra.return = [...extra.return, "rollout"];
}

function renderRollout() {
  const r = state.result, a = r && r.stack;
  const R = a && isStack(a) ? a.rollout : null;
  $("rollout").hidden = !R;
  if (!R) { $("rollout-body").replaceChildren(); return; }
  const kinds = R.map((row, q) => row.map((_, k) => (a.mask === "causal" && k > q ? "masked" : null)));
  // heatmapFigure draws a head's pattern: the answer's tokens and mask, with a title of its own.
  const fig = heatmapFigure(r.answer, 0, R, kinds, { large: true, title: "Rollout, through all layers", id: "rollout" });
  fig.dataset.export = "rollout";
  $("rollout-body").replaceChildren(fig);
}

views.push({ request: rolloutRequest, render: renderRollout });
