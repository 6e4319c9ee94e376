/*
 * import_gpt_oss.c — gpt-oss (import_internal.h; store/IMPORT_FAMILIES.md):
 * Llama's tensor names, [model.]layers.L.self_attn.{q,k,v,o}_proj with
 * their biases, plus self_attn.sinks [h]; never detected from the names
 * alone: config.json's model_type "gpt_oss" or --arch.
 *
 * As transformers' modeling_gpt_oss.py computes a layer:
 *
 *   x = input_layernorm(h)                   RMS norm, rms_norm_eps (1e-5)
 *   q, k, v = projections with biases; RoPE by _apply_rotary_emb, halves
 *     (rotate_half's pairs), YaRN (rope_scaling: factor, beta_fast,
 *     beta_slow, truncate false, original_max_position_embeddings)
 *   scores · d_head^−½; sliding_window (128) on the layers layer_types
 *     marks sliding_attention (the even ones)
 *   softmax over [scores | sinks_i], the sink's column dropped
 *
 * written as norm rms, the tensor sinks, rope_scaling yarn. The MoE MLP and
 * its norm are not read.
 */
#include "store/import_internal.h"

static const import_norm_keys gpt_oss_norm = {
    .suffix = ".input_layernorm",
    .type = ATTN_NORM_RMS,
    .eps = IMPORT_KEYS("rms_norm_eps"),
    .eps_default = 1e-5,
};

static int gpt_oss_read(const import_layer *L, import_out *m, attn_error *err) {
    import_attn p = {0};
    import_layer_config c;
    int rc = -1;
    if (import_attn_find_separate(L, ".self_attn.", "o_proj", &p, err) == 0 &&
        import_attn_check(L, &p, 1, m, err) == 0 &&
        import_layer_config_read(L->cfg, L->layer, &c, L->path, err) == 0 &&
        import_rope_layer(L, &c, p.dh, 150000, ATTN_ROPE_HALF, m, err) == 0 &&
        import_layer_window(L, &c, NULL, m, err) == 0 &&
        import_softcap_resolve(L, &m->softcap, err) == 0) {
        m->scale = L->opt->scale;
        if (import_attn_read(L, &p, m, err) == 0 && import_attn_layout_separate(&p, m, err) == 0 &&
            import_vector_read(L, ".self_attn.sinks", m->h, "[n_heads]", 1, m, &m->sinks, err) ==
                0 &&
            import_norms_read(L, &gpt_oss_norm, NULL, m, err) == 0)
            rc = 0;
    }
    import_attn_free(&p);
    return rc;
}

const import_family import_family_gpt_oss = {
    .arch = STORE_IMPORT_GPT_OSS,
    .name = "gpt_oss",
    .label = "gpt-oss",
    .prefixes = {"", "model."},
    .head = "layers.",
    .anchor = ".self_attn.q_proj.weight",
    .anchor_rule = "[n_heads·d_head, d_model] (nn.Linear)",
    .mask = ATTN_MASK_CAUSAL,
    .by_name = 0,
    .model_types = {"gpt_oss"},
    .read = gpt_oss_read,
};
