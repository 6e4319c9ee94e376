/*
 * import_variants.c — a layer's sizes and variants that the options give,
 * else config.json (import_internal.h): the width of the heads, RoPE, the
 * sliding window of each layer, logit soft-capping. A family passes where
 * its config.json keeps them (import_rope_keys, an import_window_rule);
 * the precedence, the bounds and the messages are the same for all.
 */
#include <stdio.h>
#include <string.h>

#include "store/import_internal.h"

/* For a message: where a value came from, the option when it was given,
 * else config.json's key (the first of keys present), else `otherwise`.
 * In buf when it is a key. */
static const char *value_source(char *buf, size_t len, int by_option, const char *option,
                                const json_t *cfg, const char *const *keys, const char *otherwise) {
    const char *which;
    if (by_option) return option;
    if (!keys || !import_cfg_get(cfg, keys, &which)) return otherwise;
    snprintf(buf, len, "config.json's \"%s\"", which);
    return buf;
}

/*
 * h and dh may come from config.json, whatever their size (head_dim
 * 2^61 + 1 with 8 heads would wrap h·dh to 8 and could then match a
 * tensor's shape). 3·h·dh bounds the rest: g divides h, so the columns of
 * q, k and v, hd + 2·gd or the fused 3·hd, are at most 3·hd; every other
 * product of the import has a tensor of the file as a factor, whose size
 * the reader checked.
 */
int import_heads_width(const import_layer *L, size_t dh, int dh_from_config, size_t *hd,
                       attn_error *err) {
    size_t three, h = L->h;
    int over = __builtin_mul_overflow(h, dh, hd);
    if (!over && !__builtin_mul_overflow(*hd, 3, &three)) return 0;
    char hb[64], db[64];
    const char *hs = value_source(hb, sizeof hb, L->opt->n_heads != 0, "--heads", L->cfg,
                                  IMPORT_HEADS_KEYS, "n_heads");
    const char *ds =
        value_source(db, sizeof db, L->opt->d_head != 0, "--head-dim", L->cfg,
                     dh_from_config ? IMPORT_KEYS("head_dim") : NULL, "d_head (from the tensors)");
    if (over)
        return store_error_set(err, L->path, "%s × %s (%zu × %zu) overflows a size", hs, ds, h, dh);
    return store_error_set(err, L->path,
                           "3 × %s × %s (3 × %zu × %zu, the columns of q, k and v) overflows a "
                           "size",
                           hs, ds, h, dh);
}

/* config.json's rope_scaling into rope (the options gave none). */
static int rope_scaling_resolve(const json_t *cfg, attn_rope *rope, const char *path,
                                attn_error *err) {
    json_t *rs = cfg ? json_object_get(cfg, "rope_scaling") : NULL;
    if (!rs || json_is_null(rs)) return 0;
    if (!json_is_object(rs))
        return store_error_set(err, path, "config.json's \"rope_scaling\" is not an object");
    const char *which;
    json_t *type = import_cfg_get(rs, IMPORT_KEYS("rope_type", "type"), &which);
    const char *ty = type ? json_string_value(type) : NULL;
    if (!ty) return store_error_set(err, path, "config.json's \"rope_scaling\" has no type");
    if (strcmp(ty, "default") == 0) return 0;
    int llama3 = strcmp(ty, "llama3") == 0;
    if (!llama3 && strcmp(ty, "linear") != 0)
        return store_error_set(err, path,
                               "config.json's rope_scaling type '%s' is not one the engine has "
                               "(linear, llama3)",
                               ty);
    rope->scaling = llama3 ? ATTN_ROPE_SCALING_LLAMA3 : ATTN_ROPE_SCALING_LINEAR;
    const char *keys[4] = {"factor", "low_freq_factor", "high_freq_factor",
                           "original_max_position_embeddings"};
    double *dst[4] = {&rope->factor, &rope->low_freq_factor, &rope->high_freq_factor,
                      &rope->original_max_position};
    for (int i = 0; i < (llama3 ? 4 : 1); i++) {
        int got = import_cfg_number(rs, (const char *const[]){keys[i], NULL}, dst[i], path, err);
        if (got < 0) return -1;
        if (!got)
            return store_error_set(err, path, "config.json's rope_scaling '%s' has no \"%s\"", ty,
                                   keys[i]);
    }
    return 0;
}

int import_rope_resolve(const import_layer *L, const import_rope_keys *keys, size_t dh,
                        attn_rope *rope, attn_error *err) {
    const store_import_options *opt = L->opt;
    const json_t *cfg = L->cfg;
    const char *path = L->path;
    *rope = (attn_rope){.theta = 10000, .style = ATTN_ROPE_HALF};
    if (opt->rope_theta > 0)
        rope->theta = opt->rope_theta;
    else if (import_cfg_number(cfg, keys->theta, &rope->theta, path, err) < 0)
        return -1;
    double fraction = keys->fraction_default;
    if (import_cfg_number(cfg, keys->fraction, &fraction, path, err) < 0) return -1;
    /* dh · fraction becomes a count of coordinates: above 1 it is not a
     * part of d_head, and far above it would not even convert to a size. */
    const char *which;
    if (!opt->rope_dims && fraction > 1 && import_cfg_get(cfg, keys->fraction, &which))
        return store_error_set(err, path,
                               "config.json's \"%s\" %g is more than 1 (the part of d_head "
                               "that RoPE rotates)",
                               which, fraction);
    rope->dims = opt->rope_dims ? opt->rope_dims : (size_t)((double)dh * fraction);
    if (rope->dims % 2 || rope->dims > dh || rope->dims == 0)
        return store_error_set(err, path,
                               "RoPE on %zu of the %zu coordinates of a head: it must be even, "
                               "≥ 2 and at most d_head (--rope-dims)",
                               rope->dims, dh);
    if (opt->rope_scaling == ATTN_ROPE_SCALING_NONE)
        return rope_scaling_resolve(cfg, rope, path, err);
    rope->scaling = opt->rope_scaling;
    rope->factor = opt->rope_factor;
    rope->low_freq_factor = opt->rope_low_freq_factor;
    rope->high_freq_factor = opt->rope_high_freq_factor;
    rope->original_max_position = opt->rope_original_max_position;
    return 0;
}

int import_window_by_model_type(const import_layer *L, int *on, attn_error *err) {
    const json_t *cfg = L->cfg;
    const char *mt = json_string_value(json_object_get(cfg, "model_type"));
    if (mt && strncmp(mt, "qwen2", 5) == 0) {
        /* Qwen2: only with use_sliding_window, from layer max_window_layers on */
        json_t *use = json_object_get(cfg, "use_sliding_window");
        json_t *mwl = json_object_get(cfg, "max_window_layers");
        if (mwl && !(json_is_integer(mwl) && json_integer_value(mwl) >= 0))
            return store_error_set(err, L->path,
                                   "config.json's \"max_window_layers\" is not an integer ≥ 0");
        size_t from = mwl ? (size_t)json_integer_value(mwl) : 0;
        *on = json_is_true(use) && L->layer >= from;
    } else if (mt && strcmp(mt, "llama") == 0) {
        /* Llama's attention has no window (transformers' modeling_llama.py
         * reads no sliding_window): a key left in its config is not one */
        *on = 0;
    } else {
        *on = 1; /* Mistral: every layer */
    }
    return 0;
}

int import_window_resolve(const import_layer *L, import_window_rule rule, size_t *window,
                          attn_error *err) {
    const json_t *cfg = L->cfg;
    *window = L->opt->window;
    if (*window || !cfg) return 0;
    size_t w = 0;
    if (import_cfg_count(cfg, IMPORT_KEYS("sliding_window"), &w, L->path, err) < 0) return -1;
    if (!w) return 0;
    json_t *types = json_object_get(cfg, "layer_types");
    int on;
    if (json_is_array(types)) {
        /* transformers ≥ 4.54 names each layer's kind */
        const char *kind = json_string_value(json_array_get(types, L->layer));
        if (!kind)
            return store_error_set(err, L->path, "config.json's \"layer_types\" has no layer %zu",
                                   L->layer);
        on = strcmp(kind, "sliding_attention") == 0;
    } else if (rule(L, &on, err) != 0) {
        return -1;
    }
    *window = on ? w : 0;
    return 0;
}

int import_softcap_resolve(const import_layer *L, double *softcap, attn_error *err) {
    *softcap = L->opt->softcap;
    if (*softcap) return 0;
    return import_cfg_number(L->cfg, IMPORT_KEYS("attn_logit_softcapping"), softcap, L->path, err) <
                   0
               ? -1
               : 0;
}
