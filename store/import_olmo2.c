/*
 * import_olmo2.c — OLMo 2 (import_internal.h; store/IMPORT_FAMILIES.md):
 * Llama's tensor names (import_llama.c), so never detected from the names
 * alone: config.json's model_type "olmo2" or --arch.
 *
 * As transformers' modeling_olmo2.py computes a layer, with its norms
 * after, not before:
 *
 *   q = q_norm(q_proj(h))     RMS norm over the whole projection, h·d_head
 *   k = k_norm(k_proj(h))     (self_attn.q_norm.weight [h·d_head],
 *                             k_norm.weight [g·d_head]), before the heads split
 *   RoPE (rotate_half); scale d_head^−½; causal
 *   h' = h + post_attention_layernorm(o_proj(Z))     RMS norm
 *
 * written as qk_norm scope all and post_norm rms; no input norm. eps:
 * rms_norm_eps (1e-5, Olmo2Config's). config.json: num_attention_heads,
 * num_key_value_heads, rope_theta (or rope_parameters; 10000),
 * rope_scaling, attention_bias; OLMo 3's layer_types and sliding_window.
 */
#include "store/import_internal.h"

static const import_norm_keys olmo2_post_norm = {
    .suffix = ".post_attention_layernorm",
    .type = ATTN_NORM_RMS,
    .eps = IMPORT_KEYS("rms_norm_eps"),
    .eps_default = 1e-5,
};

static int olmo2_read(const import_layer *L, import_out *m, attn_error *err) {
    import_attn p = {0};
    import_layer_config c;
    int rc = -1;
    if (import_attn_find_separate(L, ".self_attn.", "o_proj", &p, err) == 0 &&
        import_attn_check(L, &p, 1, m, err) == 0 &&
        import_layer_config_read(L->cfg, L->layer, &c, L->path, err) == 0 &&
        import_rope_layer(L, &c, p.dh, 10000, ATTN_ROPE_HALF, m, err) == 0 &&
        import_layer_window(L, &c, NULL, m, err) == 0 &&
        import_softcap_resolve(L, &m->softcap, err) == 0) {
        m->scale = L->opt->scale;
        if (import_attn_read(L, &p, m, err) == 0 && import_attn_layout_separate(&p, m, err) == 0 &&
            import_qk_norm_read(L, ".self_attn.", 1, 0, IMPORT_KEYS("rms_norm_eps"), 1e-5, m,
                                err) == 0 &&
            import_norms_read(L, NULL, &olmo2_post_norm, m, err) == 0)
            rc = 0;
    }
    import_attn_free(&p);
    return rc;
}

const import_family import_family_olmo2 = {
    .arch = STORE_IMPORT_OLMO2,
    .name = "olmo2",
    .label = "OLMo 2",
    .prefixes = {"", "model."},
    .head = "layers.",
    .anchor = ".self_attn.q_proj.weight",
    .anchor_rule = "[n_heads·d_head, d_model] (nn.Linear)",
    .mask = ATTN_MASK_CAUSAL,
    .by_name = 0,
    .model_types = {"olmo2"},
    .read = olmo2_read,
};
