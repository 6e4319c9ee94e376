/*
 * import_llama.c — Llama 2/3/3.1, Mistral, Mixtral and Qwen2 (import_internal.h):
 * [model.]layers.L.self_attn.{q,k,v,o}_proj.{weight,bias}, nn.Linear
 * q [h·dh, d], k, v [g·dh, d], o [d, h·dh], biases where present (Qwen2
 * has q's, k's and v's; the others' configs say attention_bias).
 *
 * config.json: model_type llama, mistral, mixtral or qwen2;
 * num_attention_heads, num_key_value_heads, head_dim, hidden_size;
 * rope_theta, partial_rotary_factor, rope_scaling (linear, llama3), RoPE
 * "half" (transformers' rotate_half) on the weights as stored;
 * sliding_window where layer_types, else the model_type's rule
 * (import_window_by_model_type), puts it; attn_logit_softcapping. Causal.
 *
 * The input norm: layers.L.input_layernorm.weight, an RMS norm (LlamaRMSNorm,
 * Qwen2RMSNorm, MistralRMSNorm) of eps rms_norm_eps (1e-6). Their
 * post_attention_layernorm is the MLP's input norm, not read.
 */
#include "store/import_internal.h"

static const import_rope_keys llama_rope = {
    .theta = IMPORT_KEYS("rope_theta"),
    .fraction = IMPORT_KEYS("partial_rotary_factor"),
    .fraction_default = 1,
};

static const import_norm_keys llama_norm = {
    .suffix = ".input_layernorm",
    .type = ATTN_NORM_RMS,
    .eps = IMPORT_KEYS("rms_norm_eps"),
    .eps_default = 1e-6,
};

static int llama_read(const import_layer *L, import_out *m, attn_error *err) {
    import_attn p = {0};
    int rc = -1;
    if (import_attn_find_separate(L, ".self_attn.", "o_proj", &p, err) == 0 &&
        import_attn_check(L, &p, 1, m, err) == 0 &&
        import_rope_resolve(L, &llama_rope, p.dh, &m->rope, err) == 0 &&
        import_window_resolve(L, import_window_by_model_type, &m->window, err) == 0 &&
        import_softcap_resolve(L, &m->softcap, err) == 0) {
        m->scale = L->opt->scale;
        if (import_attn_read(L, &p, m, err) == 0 && import_attn_layout_separate(&p, m, err) == 0 &&
            import_norms_read(L, &llama_norm, NULL, m, err) == 0)
            rc = 0;
    }
    import_attn_free(&p);
    return rc;
}

const import_family import_family_llama = {
    .arch = STORE_IMPORT_LLAMA,
    .name = "llama",
    .label = "Llama",
    .prefixes = {"", "model."},
    .head = "layers.",
    .anchor = ".self_attn.q_proj.weight",
    .anchor_rule = "[n_heads·d_head, d_model] (nn.Linear)",
    .mask = ATTN_MASK_CAUSAL,
    .by_name = 1,
    .model_types = {"llama", "mistral", "mixtral", "qwen2"},
    .read = llama_read,
};
