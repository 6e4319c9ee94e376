/*
 * import_config.c — what config.json says of one layer, in the keys the
 * 2025–26 architectures added (import_internal.h; the reference table of
 * the families and their keys is store/IMPORT_FAMILIES.md).
 *
 * Read, checked for type and gathered in one import_layer_config; nothing
 * here maps a value to the model written. A family file takes from it what
 * the engine has (a window, RoPE's theta, a scale) and refuses, by name,
 * what the engine lacks (a chunked layer, YaRN, a layer without RoPE).
 *
 * Where the keys are, in the order looked at:
 *
 *   the text part     "text_config" when it is an object (Gemma 3's and
 *                     Llama 4's multimodal configs), else the config;
 *   the layer's kind  layer_types[L] (transformers ≥ 4.54: full_attention,
 *                     sliding_attention, chunked_attention); else
 *                     sliding_window_pattern p, sliding unless (L+1) % p == 0
 *                     (Gemma 3's older configs); else no_rope_layers[L]
 *                     (Llama 4: 1 = RoPE and chunked when
 *                     attention_chunk_size is set, 0 = no RoPE and full);
 *                     else unsaid, for the family's own rule (Gemma 2's even
 *                     layers, Qwen's max_window_layers, Mistral's every layer);
 *   RoPE              rope_parameters (transformers ≥ 5), flat or one object
 *                     per layer kind; else rope_theta and rope_scaling, with
 *                     Gemma 3's rope_local_base_freq (and no scaling) on
 *                     sliding layers.
 */
#include <string.h>

#include "store/import_internal.h"

static const char *const kind_names[] = {
    [IMPORT_LAYER_UNSAID] = "unsaid",
    [IMPORT_LAYER_FULL] = "full_attention",
    [IMPORT_LAYER_SLIDING] = "sliding_attention",
    [IMPORT_LAYER_CHUNKED] = "chunked_attention",
};

const char *import_layer_kind_name(import_layer_kind kind) {
    return kind_names[kind];
}

const json_t *import_cfg_text(const json_t *cfg) {
    json_t *text = json_object_get(cfg, "text_config");
    return json_is_object(text) ? text : cfg;
}

/* A boolean field: -1 absent (or null), else 0 or 1 in *out; -1 with err
 * when it is not a boolean. */
static int cfg_flag(const json_t *cfg, const char *key, int *out, const char *path,
                    attn_error *err) {
    json_t *v = json_object_get(cfg, key);
    *out = -1;
    if (!v || json_is_null(v)) return 0;
    /* Llama 4's first configs wrote attn_temperature_tuning 4: a number,
     * read as Python's truth (Llama4TextConfig's default) */
    if (strcmp(key, "attn_temperature_tuning") == 0 && json_is_number(v)) {
        *out = json_number_value(v) != 0;
        return 0;
    }
    if (!json_is_boolean(v))
        return store_error_set(err, path, "config.json's \"%s\" is not true or false", key);
    *out = json_is_true(v);
    return 0;
}

/* Element L of the array key as a string or an integer (one of them NULL). */
static int cfg_layer_item(const json_t *cfg, const char *key, size_t layer, const char **text,
                          json_int_t *num, const char *path, attn_error *err) {
    json_t *item = json_array_get(json_object_get(cfg, key), layer);
    if (!item)
        return store_error_set(err, path, "config.json's \"%s\" has no layer %zu", key, layer);
    if (text && json_is_string(item)) {
        *text = json_string_value(item);
        return 0;
    }
    if (num && json_is_integer(item)) {
        *num = json_integer_value(item);
        return 0;
    }
    return store_error_set(err, path, "config.json's \"%s\" has a %s for layer %zu", key,
                           text ? "non-string" : "non-integer", layer);
}

/* The layer's kind, and whether it has RoPE. */
static int kind_read(const json_t *t, size_t layer, import_layer_config *c, const char *path,
                     attn_error *err) {
    size_t pattern = 0;
    int got;
    if (json_is_array(json_object_get(t, "layer_types"))) {
        const char *kind = NULL;
        if (cfg_layer_item(t, "layer_types", layer, &kind, NULL, path, err) != 0) return -1;
        for (int k = IMPORT_LAYER_FULL; k <= IMPORT_LAYER_CHUNKED; k++)
            if (strcmp(kind, kind_names[k]) == 0) c->kind = (import_layer_kind)k;
        if (c->kind == IMPORT_LAYER_UNSAID)
            return store_error_set(err, path,
                                   "config.json's \"layer_types\" makes layer %zu '%s', not one "
                                   "the importer reads (full_attention, sliding_attention, "
                                   "chunked_attention)",
                                   layer, kind);
        c->kind_from = "layer_types";
    } else if ((got = import_cfg_count(t, IMPORT_KEYS("sliding_window_pattern"), &pattern, path,
                                       err)) != 0) {
        if (got < 0) return -1;
        c->kind = (layer + 1) % pattern ? IMPORT_LAYER_SLIDING : IMPORT_LAYER_FULL;
        c->kind_from = "sliding_window_pattern";
    }
    /* an empty list is none, as Llama4TextConfig takes it (the default) */
    if (json_array_size(json_object_get(t, "no_rope_layers")) > 0) {
        json_int_t rope = 0;
        if (cfg_layer_item(t, "no_rope_layers", layer, NULL, &rope, path, err) != 0) return -1;
        if (rope != 0 && rope != 1)
            return store_error_set(err, path,
                                   "config.json's \"no_rope_layers\" has %lld for layer %zu, not "
                                   "0 (no RoPE) or 1",
                                   (long long)rope, layer);
        c->rope = (int)rope;
        if (c->kind == IMPORT_LAYER_UNSAID) {
            c->kind = rope && c->chunk ? IMPORT_LAYER_CHUNKED : IMPORT_LAYER_FULL;
            c->kind_from = "no_rope_layers";
        }
    }
    if (c->kind == IMPORT_LAYER_SLIDING && !c->sliding_window)
        return store_error_set(err, path,
                               "config.json makes layer %zu sliding_attention and has no "
                               "\"sliding_window\"",
                               layer);
    if (c->kind == IMPORT_LAYER_CHUNKED && !c->chunk)
        return store_error_set(err, path,
                               "config.json makes layer %zu chunked_attention and has no "
                               "\"attention_chunk_size\"",
                               layer);
    return 0;
}

/* The RoPE of the layer's kind: its theta, scaling type and their object. */
static int rope_read(const json_t *t, import_layer_config *c, const char *path, attn_error *err) {
    const char *which;
    const json_t *rp = json_object_get(t, "rope_parameters");
    const char *scaling_key = "rope_parameters";
    if (rp && !json_is_null(rp)) {
        if (!json_is_object(rp))
            return store_error_set(err, path, "config.json's \"rope_parameters\" is not an object");
        int per_kind = 0;
        for (int k = IMPORT_LAYER_FULL; k <= IMPORT_LAYER_CHUNKED; k++)
            per_kind |= json_is_object(json_object_get(rp, kind_names[k]));
        if (per_kind) {
            /* Gemma 3's: one object per layer kind (an unsaid kind is full) */
            const char *kind = kind_names[c->kind ? c->kind : IMPORT_LAYER_FULL];
            rp = json_object_get(rp, kind);
            if (!json_is_object(rp))
                return store_error_set(
                    err, path, "config.json's \"rope_parameters\" has no \"%s\" object", kind);
        }
        if (import_cfg_number(rp, IMPORT_KEYS("rope_theta"), &c->rope_theta, path, err) < 0)
            return -1;
    } else {
        rp = json_object_get(t, "rope_scaling");
        scaling_key = "rope_scaling";
        /* Gemma 3's local layers: their own base, never scaled */
        int local = c->kind == IMPORT_LAYER_SLIDING && json_object_get(t, "rope_local_base_freq");
        if (local) rp = NULL;
        if (import_cfg_number(
                t, local ? IMPORT_KEYS("rope_local_base_freq") : IMPORT_KEYS("rope_theta"),
                &c->rope_theta, path, err) < 0)
            return -1;
        if (rp && !json_is_null(rp) && !json_is_object(rp))
            return store_error_set(err, path, "config.json's \"rope_scaling\" is not an object");
    }
    if (!rp || json_is_null(rp)) return 0;
    json_t *type = import_cfg_get(rp, IMPORT_KEYS("rope_type", "type"), &which);
    if (type && !json_is_string(type))
        return store_error_set(err, path, "config.json's %s \"%s\" is not a string", scaling_key,
                               which);
    c->rope_type = type ? json_string_value(type) : NULL;
    c->rope_params = rp;
    return 0;
}

int import_layer_config_read(const json_t *cfg, size_t layer, import_layer_config *c,
                             const char *path, attn_error *err) {
    memset(c, 0, sizeof *c);
    c->rope = 1;
    const json_t *t = import_cfg_text(cfg);
    if (!t) return 0;
    if (import_cfg_count(t, IMPORT_KEYS("sliding_window"), &c->sliding_window, path, err) < 0 ||
        import_cfg_count(t, IMPORT_KEYS("attention_chunk_size"), &c->chunk, path, err) < 0 ||
        kind_read(t, layer, c, path, err) != 0 || rope_read(t, c, path, err) != 0)
        return -1;
    c->window = c->kind == IMPORT_LAYER_SLIDING   ? c->sliding_window
                : c->kind == IMPORT_LAYER_CHUNKED ? c->chunk
                                                  : 0;
    static const char *const numbers[] = {"partial_rotary_factor", "query_pre_attn_scalar",
                                          "attn_logit_softcapping", "floor_scale", "attn_scale"};
    double *dst[] = {&c->partial_rotary_factor, &c->query_pre_attn_scalar, &c->softcap,
                     &c->floor_scale, &c->attn_scale};
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++)
        if (import_cfg_number(t, (const char *const[]){numbers[i], NULL}, dst[i], path, err) < 0)
            return -1;
    if (cfg_flag(t, "use_qk_norm", &c->qk_norm, path, err) != 0 ||
        cfg_flag(t, "attn_temperature_tuning", &c->temperature_tuning, path, err) != 0 ||
        cfg_flag(t, "attention_bias", &c->attention_bias, path, err) != 0)
        return -1;
    return 0;
}
