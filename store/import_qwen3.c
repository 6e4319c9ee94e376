/*
 * import_qwen3.c — Qwen3 and Qwen3-MoE (import_internal.h;
 * store/IMPORT_FAMILIES.md): Llama's tensor names (import_llama.c),
 * [model.]layers.L.self_attn.{q,k,v,o}_proj, so never detected from the
 * names alone: config.json's model_type "qwen3" / "qwen3_moe" or --arch.
 *
 * As transformers' modeling_qwen3.py computes a layer:
 *
 *   x = input_layernorm(h)                  RMS norm, rms_norm_eps (1e-6)
 *   q = q_norm(q_proj(x) per head)          RMS norm over each head's d_head
 *   k = k_norm(k_proj(x) per head)          (self_attn.q_norm.weight,
 *                                            k_norm.weight [d_head])
 *   RoPE (rotate_half) on q, k; scale d_head^−½; causal
 *
 * written as norm rms, qk_norm scope head. config.json: num_attention_heads,
 * num_key_value_heads, head_dim (h·d_head need not be d), rope_theta (or
 * rope_parameters; 10000), rope_scaling (yarn, linear, …), attention_bias;
 * the window where layer_types puts a sliding_attention layer, else from
 * max_window_layers on with use_sliding_window (Qwen2's rule). Its
 * post_attention_layernorm is the MLP's input norm, not read.
 */
#include <string.h>

#include "store/import_internal.h"

static const import_norm_keys qwen3_norm = {
    .suffix = ".input_layernorm",
    .type = ATTN_NORM_RMS,
    .eps = IMPORT_KEYS("rms_norm_eps"),
    .eps_default = 1e-6,
};

/* Without layer_types: Qwen2's use_sliding_window from max_window_layers. */
static int qwen3_window_on(const import_layer *L, int *on, attn_error *err) {
    const json_t *cfg = L->cfg;
    json_t *mwl = json_object_get(cfg, "max_window_layers");
    if (mwl && !(json_is_integer(mwl) && json_integer_value(mwl) >= 0))
        return store_error_set(err, L->path,
                               "config.json's \"max_window_layers\" is not an integer ≥ 0");
    size_t from = mwl ? (size_t)json_integer_value(mwl) : 0;
    *on = json_is_true(json_object_get(cfg, "use_sliding_window")) && L->layer >= from;
    return 0;
}

static int qwen3_read(const import_layer *L, import_out *m, attn_error *err) {
    import_attn p = {0};
    import_layer_config c;
    int rc = -1;
    if (import_attn_find_separate(L, ".self_attn.", "o_proj", &p, err) == 0 &&
        import_attn_check(L, &p, 1, m, err) == 0 &&
        import_layer_config_read(L->cfg, L->layer, &c, L->path, err) == 0 &&
        import_rope_layer(L, &c, p.dh, 10000, ATTN_ROPE_HALF, m, err) == 0 &&
        import_layer_window(L, &c, qwen3_window_on, m, err) == 0 &&
        import_softcap_resolve(L, &m->softcap, err) == 0) {
        m->scale = L->opt->scale;
        if (import_attn_read(L, &p, m, err) == 0 && import_attn_layout_separate(&p, m, err) == 0 &&
            import_qk_norm_read(L, ".self_attn.", 0, 0, IMPORT_KEYS("rms_norm_eps"), 1e-6, m,
                                err) == 0 &&
            import_norms_read(L, &qwen3_norm, NULL, m, err) == 0)
            rc = 0;
    }
    import_attn_free(&p);
    return rc;
}

const import_family import_family_qwen3 = {
    .arch = STORE_IMPORT_QWEN3,
    .name = "qwen3",
    .label = "Qwen3",
    .prefixes = {"", "model."},
    .head = "layers.",
    .anchor = ".self_attn.q_proj.weight",
    .anchor_rule = "[n_heads·d_head, d_model] (nn.Linear)",
    .mask = ATTN_MASK_CAUSAL,
    .by_name = 0,
    .model_types = {"qwen3", "qwen3_moe"},
    .read = qwen3_read,
};
