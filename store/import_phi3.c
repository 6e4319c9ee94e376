/*
 * import_phi3.c — Phi-3, Phi-3.5-mini and Phi-4-mini (import_internal.h;
 * store/IMPORT_FAMILIES.md): [model.]layers.L.self_attn.qkv_proj.weight
 * [(h + 2g)·dh, d], q, k and v fused block-wise ([Q | K | V], not per head
 * as GPT-NeoX's), and self_attn.o_proj.weight [d, h·dh]; no biases.
 * Detected from the names (qkv_proj is Phi-3's alone), config.json's
 * model_type "phi3" or --arch.
 *
 * As transformers' modeling_phi3.py computes a layer:
 *
 *   x = input_layernorm(h)                   RMS norm, rms_norm_eps (1e-5)
 *   q, k, v = qkv_proj(x)[:hd], [hd:hd+gd], [hd+gd:]
 *   RoPE (rotate_half) on the first dh·partial_rotary_factor coordinates,
 *     rope_theta (10000); LongRoPE where rope_scaling says longrope (or su):
 *     short_factor, long_factor, s = max_position_embeddings /
 *     original_max_position_embeddings (top level), import_rope.c
 *   scores · d_head^−½; causal, within sliding_window on every layer when
 *     config.json sets one (Phi-3-mini-4k: 2047)
 *
 * written as norm rms. dh is head_dim, else hidden_size / num_attention_heads.
 * Its post_attention_layernorm is the MLP's input norm, not read.
 */
#include "store/import_internal.h"

static const import_norm_keys phi3_norm = {
    .suffix = ".input_layernorm",
    .type = ATTN_NORM_RMS,
    .eps = IMPORT_KEYS("rms_norm_eps"),
    .eps_default = 1e-5,
};

/* Without layer_types: sliding_window, when set, on every layer. */
static int phi3_window_on(const import_layer *L, int *on, attn_error *err) {
    (void)L;
    (void)err;
    *on = 1;
    return 0;
}

static int phi3_read(const import_layer *L, import_out *m, attn_error *err) {
    import_attn p = {0};
    import_layer_config c;
    int rc = -1;
    if (import_attn_find_blocks(L, ".self_attn.", "qkv_proj", "o_proj", &p, err) == 0 &&
        import_attn_check(L, &p, 1, m, err) == 0 &&
        import_layer_config_read(L->cfg, L->layer, &c, L->path, err) == 0 &&
        import_rope_layer(L, &c, p.dh, 10000, ATTN_ROPE_HALF, m, err) == 0 &&
        import_layer_window(L, &c, phi3_window_on, m, err) == 0 &&
        import_softcap_resolve(L, &m->softcap, err) == 0) {
        m->scale = L->opt->scale;
        if (import_attn_read(L, &p, m, err) == 0 && import_attn_layout_blocks(&p, m, err) == 0 &&
            import_norms_read(L, &phi3_norm, NULL, m, err) == 0)
            rc = 0;
    }
    import_attn_free(&p);
    return rc;
}

const import_family import_family_phi3 = {
    .arch = STORE_IMPORT_PHI3,
    .name = "phi3",
    .label = "Phi-3",
    .prefixes = {"", "model."},
    .head = "layers.",
    .anchor = ".self_attn.qkv_proj.weight",
    .anchor_rule = "[(n_heads+2·n_kv_heads)·d_head, d_model] (nn.Linear)",
    .mask = ATTN_MASK_CAUSAL,
    .by_name = 1,
    .model_types = {"phi3"},
    .read = phi3_read,
};
