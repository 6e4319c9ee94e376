/*
 * import_norm.c — a layer's norms from the checkpoint (import_internal.h):
 * the input norm, the norm of the attention's output (post_norm) and the
 * q/k norm, each a tensor of the layer's and an eps from config.json.
 *
 * A family names where its norms are (import_norm_keys); the weights are
 * required when the norm is read, since a checkpoint without them is more
 * likely another architecture than a model without norms. --no-norm
 * (store_import_options.no_norm) leaves the input and post norms out, as
 * the importer wrote every model before it read them; the q/k norm is
 * part of the attention itself and is always read.
 *
 * The numbers follow transformers' modules: LayerNorm (x − mean) /
 * sqrt(var + eps) · w + b; LlamaRMSNorm x / sqrt(mean(x²) + eps) · w;
 * Gemma's RMSNorm the same with (1 + w).
 */
#include "store/import_internal.h"

/* The eps of keys (in config.json's text part), else the default. */
static int eps_read(const import_layer *L, const char *const *keys, double dflt, double *eps,
                    attn_error *err) {
    *eps = dflt;
    if (!keys) return 0;
    return import_cfg_number(import_cfg_text(L->cfg), keys, eps, L->path, err) < 0 ? -1 : 0;
}

/* One norm of width d: "<suffix>.weight" (and ".bias" for a layer norm). */
static int norm_read(const import_layer *L, const import_norm_keys *k, size_t d, import_out *m,
                     attn_norm *out, attn_error *err) {
    char suffix[128];
    *out = (attn_norm){.type = k->type, .offset = k->offset};
    if (eps_read(L, k->eps, k->eps_default, &out->eps, err) != 0) return -1;
    snprintf(suffix, sizeof suffix, "%s.weight", k->suffix);
    if (import_vector_read(L, suffix, d, "[d_model]", 1, m, &out->weight, err) != 0) return -1;
    if (k->type != ATTN_NORM_LAYER) return 0;
    snprintf(suffix, sizeof suffix, "%s.bias", k->suffix);
    return import_vector_read(L, suffix, d, "[d_model]", 1, m, &out->bias, err);
}

int import_norms_read(const import_layer *L, const import_norm_keys *norm,
                      const import_norm_keys *post, import_out *m, attn_error *err) {
    if (L->opt->no_norm) return 0;
    if (norm && norm_read(L, norm, m->d, m, &m->norm, err) != 0) return -1;
    if (post && norm_read(L, post, m->d, m, &m->post_norm, err) != 0) return -1;
    return 0;
}

int import_qk_norm_read(const import_layer *L, const char *att, int all, double offset,
                        const char *const *eps_keys, double eps_default, import_out *m,
                        attn_error *err) {
    char suffix[128];
    attn_norm base = {.type = ATTN_NORM_RMS, .offset = offset};
    if (eps_read(L, eps_keys, eps_default, &base.eps, err) != 0) return -1;
    m->qk_norm = (attn_qk_norm){.q = base, .k = base, .all = all};
    size_t qlen = all ? m->h * m->dh : m->dh, klen = all ? m->g * m->dh : m->dh;
    snprintf(suffix, sizeof suffix, "%sq_norm.weight", att);
    if (import_vector_read(L, suffix, qlen, all ? "[n_heads·d_head]" : "[d_head]", 1, m,
                           &m->qk_norm.q.weight, err) != 0)
        return -1;
    snprintf(suffix, sizeof suffix, "%sk_norm.weight", att);
    return import_vector_read(L, suffix, klen, all ? "[n_kv_heads·d_head]" : "[d_head]", 1, m,
                              &m->qk_norm.k.weight, err);
}
