/*
 * import_llama4.c — Llama 4's text layers (import_internal.h;
 * store/IMPORT_FAMILIES.md): Llama's tensor names under
 * language_model.model.layers.L. (the multimodal checkpoints of the Hub),
 * model.language_model.layers.L. (as transformers ≥ 4.52 writes them) or
 * [model.]layers.L. (llama4_text); never detected from the names alone:
 * config.json's model_type "llama4" / "llama4_text" or --arch.
 *
 * As transformers' modeling_llama4.py computes a layer (Llama4TextAttention):
 *
 *   x = input_layernorm(h)                   RMS norm, rms_norm_eps (1e-5)
 *   q, k, v = q_proj(x), k_proj(x), v_proj(x)   (attention_bias: false)
 *   RoPE layers (no_rope_layers[L] = 1):
 *     RoPE interleaved (view_as_complex: pairs 2t, 2t + 1), rope_theta
 *     (500000), rope_scaling llama3;
 *     use_qk_norm: q, k = Llama4TextL2Norm per head, x · (mean(x²) + eps)^−½
 *     without weights, after RoPE; RoPE turns each head without changing
 *     its length, so this is the engine's qk_norm rms per head, before it;
 *     chunked: keys in the query's block of attention_chunk_size
 *   NoPE layers (0): no RoPE, full causal; attn_temperature_tuning: each
 *     query × log(⌊(p + 1) / floor_scale⌋ + 1) · attn_scale + 1
 *   scores · d_head^−½
 *
 * The layer's kind: layer_types, else no_rope_layers, else
 * Llama4TextConfig's default (every no_rope_layer_interval-th (4) layer
 * without RoPE; an empty list is that default too); RoPE by no_rope_layers
 * (else that default) whatever layer_types says. A RoPE layer is chunked
 * when attention_chunk_size is set. Defaults as Llama4TextConfig's:
 * use_qk_norm and attn_temperature_tuning true, floor_scale 8192,
 * attn_scale 0.1. Its post_attention_layernorm is the MoE's input norm,
 * not read.
 */
#include "store/import_internal.h"

#define LLAMA4_EPS IMPORT_KEYS("rms_norm_eps")

static const import_norm_keys llama4_norm = {
    .suffix = ".input_layernorm",
    .type = ATTN_NORM_RMS,
    .eps = LLAMA4_EPS,
    .eps_default = 1e-5,
};

/* Whether layer L has RoPE, and its kind, where config.json's lists do
 * not say them: Llama4TextConfig's default no_rope_layers. */
static int llama4_kind(const import_layer *L, import_layer_config *c, attn_error *err) {
    const json_t *t = import_cfg_text(L->cfg);
    if (json_array_size(json_object_get(t, "no_rope_layers")) == 0) {
        size_t interval = 4;
        if (import_cfg_count(t, IMPORT_KEYS("no_rope_layer_interval"), &interval, L->path, err) < 0)
            return -1;
        c->rope = (L->layer + 1) % interval != 0;
    }
    if (c->kind == IMPORT_LAYER_UNSAID) {
        c->kind = c->rope && c->chunk ? IMPORT_LAYER_CHUNKED : IMPORT_LAYER_FULL;
        c->window = c->kind == IMPORT_LAYER_CHUNKED ? c->chunk : 0;
    }
    return 0;
}

/* The RoPE layer's RoPE and weightless q/k norm, or the NoPE layer's
 * temperature. */
static int llama4_rope(const import_layer *L, const import_layer_config *c, size_t dh,
                       import_out *m, attn_error *err) {
    if (!c->rope) {
        m->rope = (attn_rope){0};
        if (c->temperature_tuning != 0)
            m->temperature = (attn_temperature){
                .floor_scale = c->floor_scale > 0 ? c->floor_scale : 8192,
                .attn_scale = c->attn_scale > 0 ? c->attn_scale : 0.1,
            };
        return 0;
    }
    if (import_rope_layer(L, c, dh, 500000, ATTN_ROPE_INTERLEAVED, m, err) != 0) return -1;
    if (c->qk_norm == 0) return 0;
    attn_norm l2 = {.type = ATTN_NORM_RMS, .eps = 1e-5};
    if (import_cfg_number(import_cfg_text(L->cfg), LLAMA4_EPS, &l2.eps, L->path, err) < 0)
        return -1;
    m->qk_norm = (attn_qk_norm){.q = l2, .k = l2, .all = 0};
    return 0;
}

static int llama4_read(const import_layer *L, import_out *m, attn_error *err) {
    import_attn p = {0};
    import_layer_config c;
    int rc = -1;
    if (import_attn_find_separate(L, ".self_attn.", "o_proj", &p, err) == 0 &&
        import_attn_check(L, &p, 1, m, err) == 0 &&
        import_layer_config_read(L->cfg, L->layer, &c, L->path, err) == 0 &&
        llama4_kind(L, &c, err) == 0 && llama4_rope(L, &c, p.dh, m, err) == 0 &&
        import_layer_window(L, &c, NULL, m, err) == 0 &&
        import_softcap_resolve(L, &m->softcap, err) == 0) {
        m->scale = L->opt->scale;
        if (import_attn_read(L, &p, m, err) == 0 && import_attn_layout_separate(&p, m, err) == 0 &&
            import_norms_read(L, &llama4_norm, NULL, m, err) == 0)
            rc = 0;
    }
    import_attn_free(&p);
    return rc;
}

const import_family import_family_llama4 = {
    .arch = STORE_IMPORT_LLAMA4,
    .name = "llama4",
    .label = "Llama 4",
    .prefixes = {"", "model.", "language_model.model.", "model.language_model."},
    .head = "layers.",
    .anchor = ".self_attn.q_proj.weight",
    .anchor_rule = "[n_heads·d_head, d_model] (nn.Linear)",
    .mask = ATTN_MASK_CAUSAL,
    .by_name = 0,
    .model_types = {"llama4", "llama4_text"},
    .read = llama4_read,
};
