/*
 * import_bloom.c — BLOOM (import_internal.h):
 * [transformer.]h.L.self_attention.query_key_value, fused per head as
 * GPT-NeoX's ((h, 3, dh): import_attn_layout_fused), and
 * self_attention.dense; biases where present.
 *
 * config.json: model_type "bloom"; n_head (or num_attention_heads),
 * hidden_size (or n_embed). No RoPE: ALiBi with the standard slopes
 * (transformers' build_alibi_tensor, which the engine follows). Causal.
 */
#include "store/import_internal.h"

static int bloom_read(const import_layer *L, import_out *m, attn_error *err) {
    import_attn p = {0};
    int rc = -1;
    if (import_attn_find_fused(L, ".self_attention", &p, err) == 0 &&
        import_attn_check(L, &p, 0, m, err) == 0) {
        m->alibi = 1;
        if (import_window_resolve(L, import_window_by_model_type, &m->window, err) == 0 &&
            import_softcap_resolve(L, &m->softcap, err) == 0) {
            m->scale = L->opt->scale;
            if (import_attn_read(L, &p, m, err) == 0 && import_attn_layout_fused(&p, m, err) == 0)
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
