/*
 * import_gpt2.c — GPT-2 (import_internal.h): [transformer.]h.L.attn.c_attn
 * and c_proj, weights and biases. Conv1D stores W [in, out] for y = x·W + b,
 * which is our layout: every tensor is taken as it is. The biases are
 * required (a missing one is more likely a wrong file than a bias-free
 * model). config.json: model_type "gpt2", n_head. Causal.
 *
 * The input norm: h.L.ln_1.weight and .bias, a LayerNorm of eps
 * layer_norm_epsilon (1e-5), as GPT2Block applies it before the attention.
 */
#include "store/import_internal.h"

#define GPT2_ANCHOR ".attn.c_attn.weight"
#define GPT2_RULE   "[d_model, 3·d_model] (Conv1D)"

enum { GPT2_W_QKV, GPT2_B_QKV, GPT2_W_O, GPT2_B_O };

static const import_part gpt2_parts[] = {
    [GPT2_W_QKV] = {GPT2_ANCHOR, 2, {1, 3}, GPT2_RULE},
    [GPT2_B_QKV] = {".attn.c_attn.bias", 1, {3, 0}, "[3·d_model]"},
    [GPT2_W_O] = {".attn.c_proj.weight", 2, {1, 1}, "[d_model, d_model] (Conv1D)"},
    [GPT2_B_O] = {".attn.c_proj.bias", 1, {1, 0}, "[d_model]"},
};

static const import_norm_keys gpt2_norm = {
    .suffix = ".ln_1",
    .type = ATTN_NORM_LAYER,
    .eps = IMPORT_KEYS("layer_norm_epsilon"),
    .eps_default = 1e-5,
};

static int gpt2_read(const import_layer *L, import_out *m, attn_error *err) {
    float *vals[IMPORT_PARTS_MAX] = {0};
    size_t d = 0;
    int rc = import_parts_read(L, gpt2_parts, 4, vals, &d, err);
    if (rc == 0) {
        m->w_qkv = vals[GPT2_W_QKV];
        m->b_qkv = vals[GPT2_B_QKV];
        m->w_o = vals[GPT2_W_O];
        m->b_o = vals[GPT2_B_O];
    }
    import_out_adopt(m, vals);
    m->d = d;
    m->h = m->g = L->h;
    m->dh = L->h ? d / L->h : 0;
    m->mask = L->family->mask;
    if (rc == 0) rc = import_norms_read(L, &gpt2_norm, NULL, m, err);
    return rc;
}

const import_family import_family_gpt2 = {
    .arch = STORE_IMPORT_GPT2,
    .name = "gpt2",
    .label = "GPT-2",
    .prefixes = {"", "transformer."},
    .head = "h.",
    .anchor = GPT2_ANCHOR,
    .anchor_rule = GPT2_RULE,
    .mask = ATTN_MASK_CAUSAL,
    .by_name = 1,
    .model_types = {"gpt2"},
    .read = gpt2_read,
};
