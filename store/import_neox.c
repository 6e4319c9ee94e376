/*
 * import_neox.c — GPT-NeoX (Pythia, import_internal.h):
 * [gpt_neox.]layers.L.attention.query_key_value [3d, d], rows grouped per
 * head as [q_i | k_i | v_i] (transformers views it as (h, 3·dh)), regrouped
 * into ours (import_attn_layout_fused), and attention.dense; biases where
 * present.
 *
 * config.json: model_type "gpt_neox"; num_attention_heads, hidden_size;
 * rotary_emb_base (or rope_theta), rotary_pct (or partial_rotary_factor),
 * 0.25 when absent as in GPTNeoXConfig (Pythia's), RoPE "half";
 * rope_scaling. Causal.
 *
 * The input norm: layers.L.input_layernorm.weight and .bias, a LayerNorm of
 * eps layer_norm_eps (1e-5). With use_parallel_residual the MLP reads E
 * too, through its own norm: the attention is the same.
 */
#include "store/import_internal.h"

static const import_rope_keys neox_rope = {
    .theta = IMPORT_KEYS("rotary_emb_base", "rope_theta"),
    .fraction = IMPORT_KEYS("rotary_pct", "partial_rotary_factor"),
    .fraction_default = 0.25,
};

static const import_norm_keys neox_norm = {
    .suffix = ".input_layernorm",
    .type = ATTN_NORM_LAYER,
    .eps = IMPORT_KEYS("layer_norm_eps"),
    .eps_default = 1e-5,
};

static int neox_read(const import_layer *L, import_out *m, attn_error *err) {
    import_attn p = {0};
    int rc = -1;
    if (import_attn_find_fused(L, ".attention", &p, err) == 0 &&
        import_attn_check(L, &p, 0, m, err) == 0 &&
        import_rope_resolve(L, &neox_rope, p.dh, &m->rope, err) == 0 &&
        import_window_resolve(L, import_window_by_model_type, &m->window, err) == 0 &&
        import_softcap_resolve(L, &m->softcap, err) == 0) {
        m->scale = L->opt->scale;
        if (import_attn_read(L, &p, m, err) == 0 && import_attn_layout_fused(&p, m, err) == 0 &&
            import_norms_read(L, &neox_norm, NULL, m, err) == 0)
            rc = 0;
    }
    import_attn_free(&p);
    return rc;
}

const import_family import_family_gpt_neox = {
    .arch = STORE_IMPORT_GPT_NEOX,
    .name = "gpt_neox",
    .label = "GPT-NeoX",
    .prefixes = {"", "gpt_neox."},
    .head = "layers.",
    .anchor = ".attention.query_key_value.weight",
    .anchor_rule = "[3·d_model, d_model] (nn.Linear)",
    .mask = ATTN_MASK_CAUSAL,
    .by_name = 1,
    .model_types = {"gpt_neox"},
    .read = neox_read,
};
