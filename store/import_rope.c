/*
 * import_rope.c — the RoPE and the window of a layer of the newer families
 * (import_internal.h), from what import_layer_config read of config.json:
 * the layer kind's theta (Gemma 3's rope_local_base_freq on its sliding
 * layers, transformers 5's rope_parameters), the part rotated, and the
 * scaling: default, linear, llama3, yarn and longrope, computed as
 * transformers' modeling_rope_utils.py does (_compute_yarn_parameters,
 * _compute_longrope_parameters), which the engine follows (docs/API.md).
 *
 *   yarn      factor; original_max_position_embeddings from the scaling's
 *             object, else config.json's max_position_embeddings (the
 *             explicit factor is kept, as transformers ≥ 4.56 keeps it);
 *             beta_fast, beta_slow, mscale, mscale_all_dim,
 *             attention_factor, truncate where given
 *   longrope  short_factor, long_factor (dims/2 numbers each, written as
 *             the tensors rope_short_factor, rope_long_factor); L is
 *             config.json's original_max_position_embeddings (Phi-3's, at
 *             the top level), else the scaling's; the factor s is then
 *             max_position_embeddings / L, as transformers takes it
 *
 * The options (--rope-theta, --rope-dims, --rope-scaling, --window)
 * override config.json as for the other families.
 */
#include <string.h>

#include "store/import_internal.h"

/* A number of obj's key: 0 absent, 1 read (any finite number), -1 not one. */
static int any_number(const json_t *obj, const char *key, double *out, const char *path,
                      attn_error *err) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v))
        return store_error_set(err, path, "config.json's rope \"%s\" is not a number", key);
    *out = json_number_value(v);
    return 1;
}

/* A list of n numbers > 0 of rp's key into a buffer m owns. */
static int factor_list(const json_t *rp, const char *key, size_t n, import_out *m,
                       const float **out, const char *path, attn_error *err) {
    json_t *a = json_object_get(rp, key);
    if (!json_is_array(a) || json_array_size(a) != n)
        return store_error_set(err, path,
                               "config.json's longrope \"%s\" is not a list of %zu numbers "
                               "(d_head × partial_rotary_factor / 2)",
                               key, n);
    float *v = import_out_alloc(m, n);
    if (!v) return store_error_set(err, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(a, i);
        if (!json_is_number(x) || !(json_number_value(x) > 0))
            return store_error_set(err, path, "config.json's longrope \"%s\"[%zu] is not > 0", key,
                                   i);
        v[i] = (float)json_number_value(x);
    }
    *out = v;
    return 0;
}

/* A required number > 0 of rp. */
static int need(const json_t *rp, const char *type, const char *key, double *out, const char *path,
                attn_error *err) {
    int got = import_cfg_number(rp, (const char *const[]){key, NULL}, out, path, err);
    if (got < 0) return -1;
    if (!got) return store_error_set(err, path, "config.json's rope '%s' has no \"%s\"", type, key);
    return 0;
}

/* The scaling of c (the options gave none) into m->rope. */
static int scaling_read(const import_layer *L, const import_layer_config *c, import_out *m,
                        attn_error *err) {
    const char *ty = c->rope_type, *path = L->path;
    const json_t *rp = c->rope_params, *t = import_cfg_text(L->cfg);
    attn_rope *r = &m->rope;
    if (!ty || strcmp(ty, "default") == 0) return 0;
    if (strcmp(ty, "linear") == 0) {
        r->scaling = ATTN_ROPE_SCALING_LINEAR;
        return need(rp, ty, "factor", &r->factor, path, err);
    }
    if (strcmp(ty, "llama3") == 0) {
        r->scaling = ATTN_ROPE_SCALING_LLAMA3;
        return need(rp, ty, "factor", &r->factor, path, err) ||
                       need(rp, ty, "low_freq_factor", &r->low_freq_factor, path, err) ||
                       need(rp, ty, "high_freq_factor", &r->high_freq_factor, path, err) ||
                       need(rp, ty, "original_max_position_embeddings", &r->original_max_position,
                            path, err)
                   ? -1
                   : 0;
    }
    if (strcmp(ty, "yarn") == 0) {
        r->scaling = ATTN_ROPE_SCALING_YARN;
        if (need(rp, ty, "factor", &r->factor, path, err) != 0) return -1;
        int got = import_cfg_number(rp, IMPORT_KEYS("original_max_position_embeddings"),
                                    &r->original_max_position, path, err);
        if (got == 0)
            got = import_cfg_number(t, IMPORT_KEYS("max_position_embeddings"),
                                    &r->original_max_position, path, err);
        if (got <= 0)
            return got < 0 ? -1
                           : store_error_set(err, path,
                                             "config.json's rope 'yarn' has no "
                                             "\"original_max_position_embeddings\" nor "
                                             "\"max_position_embeddings\"");
        json_t *tr = json_object_get(rp, "truncate");
        if (tr && !json_is_boolean(tr))
            return store_error_set(err, path,
                                   "config.json's rope \"truncate\" is not true or false");
        r->untruncated = json_is_false(tr);
        return import_cfg_number(rp, IMPORT_KEYS("beta_fast"), &r->beta_fast, path, err) < 0 ||
                       import_cfg_number(rp, IMPORT_KEYS("beta_slow"), &r->beta_slow, path, err) <
                           0 ||
                       any_number(rp, "mscale", &r->mscale, path, err) < 0 ||
                       any_number(rp, "mscale_all_dim", &r->mscale_all_dim, path, err) < 0 ||
                       import_cfg_number(rp, IMPORT_KEYS("attention_factor"), &r->attention_factor,
                                         path, err) < 0
                   ? -1
                   : 0;
    }
    if (strcmp(ty, "longrope") == 0 || strcmp(ty, "su") == 0) {
        r->scaling = ATTN_ROPE_SCALING_LONGROPE;
        double max_pos = 0;
        int top = import_cfg_number(t, IMPORT_KEYS("original_max_position_embeddings"),
                                    &r->original_max_position, path, err);
        if (top < 0) return -1;
        if (!top && need(rp, ty, "original_max_position_embeddings", &r->original_max_position,
                         path, err) != 0)
            return -1;
        if (import_cfg_number(t, IMPORT_KEYS("max_position_embeddings"), &max_pos, path, err) < 0 ||
            import_cfg_number(rp, IMPORT_KEYS("attention_factor"), &r->attention_factor, path,
                              err) < 0)
            return -1;
        if (top && max_pos > 0)
            r->factor = max_pos / r->original_max_position;
        else if (import_cfg_number(rp, IMPORT_KEYS("factor"), &r->factor, path, err) < 0)
            return -1;
        return factor_list(rp, "short_factor", r->dims / 2, m, &r->short_factor, path, err) ||
                       factor_list(rp, "long_factor", r->dims / 2, m, &r->long_factor, path, err)
                   ? -1
                   : 0;
    }
    return store_error_set(err, path,
                           "config.json's rope type '%s' is not one the engine has (linear, "
                           "llama3, yarn, longrope)",
                           ty);
}

int import_rope_layer(const import_layer *L, const import_layer_config *c, size_t dh,
                      double theta_default, attn_rope_style style, import_out *m, attn_error *err) {
    const store_import_options *opt = L->opt;
    attn_rope *r = &m->rope;
    *r = (attn_rope){.theta = c->rope_theta > 0 ? c->rope_theta : theta_default, .style = style};
    if (opt->rope_theta > 0) r->theta = opt->rope_theta;
    double fraction = c->partial_rotary_factor > 0 ? c->partial_rotary_factor : 1;
    if (!opt->rope_dims && fraction > 1)
        return store_error_set(err, L->path,
                               "config.json's \"partial_rotary_factor\" %g is more than 1 (the "
                               "part of d_head that RoPE rotates)",
                               fraction);
    r->dims = opt->rope_dims ? opt->rope_dims : (size_t)((double)dh * fraction);
    if (r->dims % 2 || r->dims > dh || r->dims == 0)
        return store_error_set(err, L->path,
                               "RoPE on %zu of the %zu coordinates of a head: it must be even, "
                               "≥ 2 and at most d_head (--rope-dims)",
                               r->dims, dh);
    if (opt->rope_scaling == ATTN_ROPE_SCALING_NONE) return scaling_read(L, c, m, err);
    r->scaling = opt->rope_scaling;
    r->factor = opt->rope_factor;
    r->low_freq_factor = opt->rope_low_freq_factor;
    r->high_freq_factor = opt->rope_high_freq_factor;
    r->original_max_position = opt->rope_original_max_position;
    return 0;
}

int import_layer_window(const import_layer *L, const import_layer_config *c,
                        import_window_rule rule, import_out *m, attn_error *err) {
    int on = 0;
    m->window = m->chunk = 0;
    if (L->opt->window) {
        m->window = L->opt->window;
        return 0;
    }
    switch (c->kind) {
    case IMPORT_LAYER_SLIDING: m->window = c->sliding_window; return 0;
    case IMPORT_LAYER_CHUNKED: m->chunk = c->chunk; return 0;
    case IMPORT_LAYER_FULL: return 0;
    case IMPORT_LAYER_UNSAID: break;
    }
    if (rule && rule(L, &on, err) != 0) return -1;
    m->window = on ? c->sliding_window : 0;
    return 0;
}
