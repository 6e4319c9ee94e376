/*
 * import_gemma.c — Gemma 2 (import_internal.h): Llama's tensor names
 * (import_llama.c), so never detected from the names alone: config.json's
 * model_type "gemma2" or --arch says it.
 *
 * config.json: Llama's keys, plus attn_logit_softcapping; the scale
 * query_pre_attn_scalar^(−1/2) (transformers' modeling_gemma2.py sets
 * self.scaling so); sliding_window on the even layers where layer_types
 * does not say otherwise (Gemma 2 alternates local and global layers,
 * local first). Causal.
 *
 * The norms: layers.L.input_layernorm.weight before the attention and
 * post_attention_layernorm.weight on its output, before the residual add
 * (Gemma2DecoderLayer), both Gemma2RMSNorm, x / sqrt(mean(x²) + eps) ·
 * (1 + w): offset 1, eps rms_norm_eps (1e-6).
 */
#include <math.h>

#include "store/import_internal.h"

static const import_rope_keys gemma2_rope = {
    .theta = IMPORT_KEYS("rope_theta"),
    .fraction = IMPORT_KEYS("partial_rotary_factor"),
    .fraction_default = 1,
};

static const import_norm_keys gemma2_norm = {
    .suffix = ".input_layernorm",
    .type = ATTN_NORM_RMS,
    .offset = 1,
    .eps = IMPORT_KEYS("rms_norm_eps"),
    .eps_default = 1e-6,
};

static const import_norm_keys gemma2_post_norm = {
    .suffix = ".post_attention_layernorm",
    .type = ATTN_NORM_RMS,
    .offset = 1,
    .eps = IMPORT_KEYS("rms_norm_eps"),
    .eps_default = 1e-6,
};

static int gemma2_window_on(const import_layer *L, int *on, attn_error *err) {
    (void)err;
    *on = L->layer % 2 == 0;
    return 0;
}

/* The option's scale, else query_pre_attn_scalar^(−1/2), else 0 (the
 * engine's 1/sqrt(d_head)). */
static int gemma2_scale(const import_layer *L, double *scale, attn_error *err) {
    *scale = L->opt->scale;
    double qpas = 0;
    if (*scale) return 0;
    if (import_cfg_number(L->cfg, IMPORT_KEYS("query_pre_attn_scalar"), &qpas, L->path, err) < 0)
        return -1;
    if (qpas) *scale = 1 / sqrt(qpas);
    return 0;
}

static int gemma2_read(const import_layer *L, import_out *m, attn_error *err) {
    import_attn p = {0};
    int rc = -1;
    if (import_attn_find_separate(L, ".self_attn.", "o_proj", &p, err) == 0 &&
        import_attn_check(L, &p, 1, m, err) == 0 &&
        import_rope_resolve(L, &gemma2_rope, p.dh, &m->rope, err) == 0 &&
        import_window_resolve(L, gemma2_window_on, &m->window, err) == 0 &&
        import_softcap_resolve(L, &m->softcap, err) == 0 && gemma2_scale(L, &m->scale, err) == 0 &&
        import_attn_read(L, &p, m, err) == 0 && import_attn_layout_separate(&p, m, err) == 0 &&
        import_norms_read(L, &gemma2_norm, &gemma2_post_norm, m, err) == 0)
        rc = 0;
    import_attn_free(&p);
    return rc;
}

const import_family import_family_gemma2 = {
    .arch = STORE_IMPORT_GEMMA2,
    .name = "gemma2",
    .label = "Gemma 2",
    .prefixes = {"", "model."},
    .head = "layers.",
    .anchor = ".self_attn.q_proj.weight",
    .anchor_rule = "[n_heads·d_head, d_model] (nn.Linear)",
    .mask = ATTN_MASK_CAUSAL,
    .by_name = 0,
    .model_types = {"gemma2"},
    .read = gemma2_read,
};
