/*
 * import_bloom.c — BLOOM (import_internal.h):
 * [transformer.]h.L.self_attention.query_key_value, fused per head as
 * GPT-NeoX's ((h, 3, dh): import_attn_layout_fused), and
 * self_attention.dense; biases where present.
 *
 * config.json: model_type "bloom"; n_head (or num_attention_heads),
 * hidden_size (or n_embed). No RoPE: ALiBi with the standard slopes
 * (transformers' build_alibi_tensor, which the engine follows). Causal.
 *
 * The input norm: h.L.input_layernorm.weight and .bias, a LayerNorm of eps
 * layer_norm_epsilon (1e-5). A config with
 * apply_residual_connection_post_layernorm true adds the attention's
 * output to the normed state (BloomBlock), not to E as the engine's
 * E + ΔE does: refused with the norm, which would give it wrong
 * embeddings (--no-norm reads the attention alone, as before).
 */
#include <jansson.h>

#include "store/import_internal.h"

static const import_norm_keys bloom_norm = {
    .suffix = ".input_layernorm",
    .type = ATTN_NORM_LAYER,
    .eps = IMPORT_KEYS("layer_norm_epsilon"),
    .eps_default = 1e-5,
};

/* The norm, unless the residual is the normed state. */
static int bloom_norm_read(const import_layer *L, import_out *m, attn_error *err) {
    if (!L->opt->no_norm &&
        json_is_true(json_object_get(L->cfg, "apply_residual_connection_post_layernorm")))
        return store_error_set(err, L->path,
                               "config.json's \"apply_residual_connection_post_layernorm\" is "
                               "true: the residual is the normed state, which the engine's "
                               "E + ΔE does not represent (--no-norm imports the attention "
                               "without its norm)");
    return import_norms_read(L, &bloom_norm, NULL, m, err);
}

static int bloom_read(const import_layer *L, import_out *m, attn_error *err) {
    import_attn p = {0};
    int rc = -1;
    if (import_attn_find_fused(L, ".self_attention", &p, err) == 0 &&
        import_attn_check(L, &p, 0, m, err) == 0) {
        m->alibi = 1;
        if (import_window_resolve(L, import_window_by_model_type, &m->window, err) == 0 &&
            import_softcap_resolve(L, &m->softcap, err) == 0) {
            m->scale = L->opt->scale;
            if (import_attn_read(L, &p, m, err) == 0 && import_attn_layout_fused(&p, m, err) == 0 &&
                bloom_norm_read(L, m, err) == 0)
                rc = 0;
        }
    }
    import_attn_free(&p);
    return rc;
}

const import_family import_family_bloom = {
    .arch = STORE_IMPORT_BLOOM,
    .name = "bloom",
    .label = "BLOOM",
    .prefixes = {"", "transformer."},
    .head = "h.",
    .anchor = ".self_attention.query_key_value.weight",
    .anchor_rule = "[3·d_model, d_model] (nn.Linear)",
    .mask = ATTN_MASK_CAUSAL,
    .by_name = 1,
    .model_types = {"bloom"},
    .read = bloom_read,
};
