/*
 * import_gemma3.c — Gemma 3's text layers (import_internal.h;
 * store/IMPORT_FAMILIES.md): Llama's tensor names under
 * [model.]layers.L. (gemma3_text, the 1B), language_model.model.layers.L.
 * (the multimodal checkpoints of the Hub) or model.language_model.layers.L.
 * (as transformers ≥ 4.52 writes them); never detected from the names
 * alone: config.json's model_type "gemma3_text" / "gemma3" or --arch.
 *
 * As transformers' modeling_gemma3.py computes a layer:
 *
 *   x = input_layernorm(h)                   Gemma3RMSNorm, (1 + w)
 *   q = q_norm(q_proj(x) per head)           Gemma3RMSNorm over d_head, (1 + w)
 *   k = k_norm(k_proj(x) per head)
 *   RoPE (rotate_half): sliding layers rope_local_base_freq (10000) without
 *     scaling, full layers rope_theta (1e6) with rope_scaling (linear 8 on
 *     4B+); transformers 5's rope_parameters per layer kind
 *   scores · query_pre_attn_scalar^−½; window sliding_window on sliding layers
 *   h' = h + post_attention_layernorm(o_proj(Z))   (1 + w)
 *
 * written as norm and post_norm rms offset 1, qk_norm head offset 1, eps
 * rms_norm_eps (1e-6). The layer's kind: layer_types, else
 * sliding_window_pattern, else Gemma3TextConfig's pattern 6 (five sliding,
 * one full). config.json's text_config is read when it has one.
 * EmbeddingGemma's use_bidirectional_attention is refused: its symmetric
 * window is not the engine's causal one.
 */
#include <math.h>

#include "store/import_internal.h"

#define GEMMA3_EPS IMPORT_KEYS("rms_norm_eps")

static const import_norm_keys gemma3_norm = {
    .suffix = ".input_layernorm",
    .type = ATTN_NORM_RMS,
    .offset = 1,
    .eps = GEMMA3_EPS,
    .eps_default = 1e-6,
};

static const import_norm_keys gemma3_post_norm = {
    .suffix = ".post_attention_layernorm",
    .type = ATTN_NORM_RMS,
    .offset = 1,
    .eps = GEMMA3_EPS,
    .eps_default = 1e-6,
};

/* The layer's kind when config.json does not say it (pattern 6), with a
 * sliding layer's own base and no scaling. */
static int gemma3_kind(const import_layer *L, import_layer_config *c, attn_error *err) {
    const json_t *t = import_cfg_text(L->cfg);
    if (json_is_true(json_object_get(t, "use_bidirectional_attention")))
        return store_error_set(err, L->path,
                               "config.json's \"use_bidirectional_attention\" is true "
                               "(EmbeddingGemma): its symmetric window is not one the engine has");
    if (c->kind != IMPORT_LAYER_UNSAID || (L->layer + 1) % 6 == 0) return 0;
    c->kind = IMPORT_LAYER_SLIDING;
    c->window = c->sliding_window;
    c->rope_theta = 10000;
    c->rope_type = NULL;
    return import_cfg_number(t, IMPORT_KEYS("rope_local_base_freq"), &c->rope_theta, L->path, err) <
                   0
               ? -1
               : 0;
}

static int gemma3_read(const import_layer *L, import_out *m, attn_error *err) {
    import_attn p = {0};
    import_layer_config c;
    int rc = -1;
    if (import_attn_find_separate(L, ".self_attn.", "o_proj", &p, err) == 0 &&
        import_attn_check(L, &p, 1, m, err) == 0 &&
        import_layer_config_read(L->cfg, L->layer, &c, L->path, err) == 0 &&
        gemma3_kind(L, &c, err) == 0 &&
        import_rope_layer(L, &c, p.dh, c.kind == IMPORT_LAYER_SLIDING ? 10000 : 1e6, ATTN_ROPE_HALF,
                          m, err) == 0 &&
        import_layer_window(L, &c, NULL, m, err) == 0) {
        m->softcap = L->opt->softcap ? L->opt->softcap : c.softcap;
        m->scale = L->opt->scale                 ? L->opt->scale
                   : c.query_pre_attn_scalar > 0 ? 1 / sqrt(c.query_pre_attn_scalar)
                                                 : 0;
        if (import_attn_read(L, &p, m, err) == 0 && import_attn_layout_separate(&p, m, err) == 0 &&
            import_qk_norm_read(L, ".self_attn.", 0, 1, GEMMA3_EPS, 1e-6, m, err) == 0 &&
            import_norms_read(L, &gemma3_norm, &gemma3_post_norm, m, err) == 0)
            rc = 0;
    }
    import_attn_free(&p);
    return rc;
}

const import_family import_family_gemma3 = {
    .arch = STORE_IMPORT_GEMMA3,
    .name = "gemma3",
    .label = "Gemma 3",
    .prefixes = {"", "model.", "language_model.model.", "model.language_model."},
    .head = "layers.",
    .anchor = ".self_attn.q_proj.weight",
    .anchor_rule = "[n_heads·d_head, d_model] (nn.Linear)",
    .mask = ATTN_MASK_CAUSAL,
    .by_name = 0,
    .model_types = {"gemma3_text", "gemma3"},
    .read = gemma3_read,
};
