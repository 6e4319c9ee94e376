/*
 * import_tensors.c — a layer's tensors (import_internal.h): found by name,
 * their shapes checked against d, h, g and dh, their dtypes (F32, F16 or
 * BF16), read into float buffers (F16 / BF16 converted exactly, every value
 * checked finite: tensor.h, which the loader reads its tensors with too, so
 * a value it would refuse is refused here), and laid out as ours.
 *
 * Two kinds of layer: GPT-2's and BERT's, whose every tensor is a multiple
 * of d_model (import_parts_read), and the rest, whose q, k, v, o (or fused
 * qkv, o) depend on the heads (import_attn_*). A family's file picks the
 * names; the checks, in the same order for every family, are here.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/import_internal.h"
#include "store/tensor.h"

/* t's values as floats, in a new buffer (the caller frees it); NULL with
 * err set when out of memory or a value is not finite. */
static float *tensor_read(const store_tensor *t, const char *path, attn_error *err) {
    size_t bytes;
    if (__builtin_mul_overflow(t->count, sizeof(float), &bytes)) bytes = SIZE_MAX;
    float *buf = bytes == SIZE_MAX ? NULL : malloc(bytes ? bytes : 1);
    if (!buf) {
        store_error_set(err, path, "out of memory for tensor '%s'", t->name);
        return NULL;
    }
    if (store_tensor_read_f32(buf, t, path, err) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* -1 with err set unless t (named name) is F32, F16 or BF16. */
static int dtype_check(const store_tensor *t, const char *name, const char *path, attn_error *err) {
    if (t->dtype == STORE_DTYPE_F32 || t->dtype == STORE_DTYPE_F16 || t->dtype == STORE_DTYPE_BF16)
        return 0;
    return store_error_set(err, path,
                           "tensor '%s' has dtype %s; the importer reads F32, F16 or BF16", name,
                           store_dtype_name(t->dtype));
}

float *import_out_alloc(import_out *m, size_t n) {
    size_t bytes;
    if (m->n_owned == IMPORT_OWNED_MAX || __builtin_mul_overflow(n, sizeof(float), &bytes))
        return NULL;
    float *p = calloc(1, bytes ? bytes : 1);
    if (p) m->owned[m->n_owned++] = p;
    return p;
}

int import_vector_read(const import_layer *L, const char *suffix, size_t len, const char *rule,
                       int required, import_out *m, const float **out, attn_error *err) {
    char name[256];
    snprintf(name, sizeof name, "%s%s%zu%s", L->prefix, L->family->head, L->layer, suffix);
    const store_tensor *t = import_src_find(L->src, name);
    *out = NULL;
    if (!t && !required) return 0;
    if (!t)
        return store_error_set(err, L->path, "no tensor '%s': %s layer %zu is incomplete", name,
                               L->family->label, L->layer);
    if (t->rank != 1 || t->shape[0] != len) {
        char got[160];
        return store_error_set(err, L->path, "tensor '%s' has shape %s, expected [%zu] = %s", name,
                               store_tensor_shape_text(t, got, sizeof got), len, rule);
    }
    if (dtype_check(t, name, L->path, err) != 0) return -1;
    if (m->n_owned == IMPORT_OWNED_MAX)
        return store_error_set(err, NULL, "too many tensors in one layer");
    float *v = tensor_read(t, L->path, err);
    if (!v) return -1;
    m->owned[m->n_owned++] = v;
    *out = v;
    return 0;
}

void import_out_adopt(import_out *m, float *const vals[IMPORT_PARTS_MAX]) {
    for (size_t i = 0; i < IMPORT_PARTS_MAX; i++)
        if (vals[i]) m->owned[m->n_owned++] = vals[i];
}

void import_linear_into(float *dst, size_t dst_cols, size_t col0, const float *w, size_t out,
                        size_t in) {
    for (size_t r = 0; r < in; r++)
        for (size_t c = 0; c < out; c++)
            dst[r * dst_cols + col0 + c] = w[c * in + r];
}

/* ---- GPT-2's and BERT's: shapes in multiples of d ------------------------- */

/* Checks t against part's shape for this d. */
static int part_shape_check(const store_tensor *t, const import_part *part, size_t d,
                            const char *anchor, const char *path, attn_error *err) {
    size_t want[2] = {part->mul[0] * d, part->mul[1] * d};
    int ok = t->rank == part->rank;
    for (size_t i = 0; ok && i < part->rank; i++)
        ok = t->shape[i] == want[i];
    if (ok) return 0;
    char got[160], exp[64];
    if (part->rank == 1)
        snprintf(exp, sizeof exp, "[%zu]", want[0]);
    else
        snprintf(exp, sizeof exp, "[%zu, %zu]", want[0], want[1]);
    return store_error_set(
        err, path, "tensor '%s' has shape %s, expected %s = %s with d_model %zu from '%s'", t->name,
        store_tensor_shape_text(t, got, sizeof got), exp, part->rule, d, anchor);
}

int import_parts_read(const import_layer *L, const import_part *parts, size_t n,
                      float *vals[IMPORT_PARTS_MAX], size_t *d, attn_error *err) {
    const import_family *a = L->family;
    const char *path = L->path;
    const store_tensor *t[IMPORT_PARTS_MAX];
    char names[IMPORT_PARTS_MAX][160];
    for (size_t i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "%s%s%zu%s", L->prefix, a->head, L->layer,
                 parts[i].suffix);
        t[i] = import_src_find(L->src, names[i]);
        if (!t[i])
            return store_error_set(err, path,
                                   "no tensor '%s': %s layer %zu is incomplete (its anchor "
                                   "'%s' is there)",
                                   names[i], a->label, L->layer, names[0]);
    }

    const store_tensor *anchor = t[0];
    if (anchor->rank != 2 || anchor->shape[0] == 0)
        return store_error_set(err, path, "tensor '%s' has rank %zu, expected %s", names[0],
                               anchor->rank, parts[0].rule);
    *d = anchor->shape[0];
    for (size_t i = 0; i < n; i++)
        if (part_shape_check(t[i], &parts[i], *d, names[0], path, err) != 0) return -1;
    if (*d % L->h != 0)
        return store_error_set(err, path, "d_model %zu (from '%s') is not divisible by %zu heads",
                               *d, names[0], L->h);

    for (size_t i = 0; i < n; i++)
        if (dtype_check(t[i], names[i], path, err) != 0) return -1;

    for (size_t i = 0; i < n; i++)
        if (!(vals[i] = tensor_read(t[i], path, err))) return -1;
    return 0;
}

/* ---- the rest: shapes from h, g and dh ------------------------------------- */

void import_attn_free(import_attn *p) {
    for (size_t i = 0; i < 8; i++)
        free(p->v[i]);
}

/* Finds "<prefix><head><L><suffix>" into p->t[slot] (required or not). */
static int part_get(const import_layer *L, import_attn *p, int slot, const char *suffix,
                    int required, attn_error *err) {
    snprintf(p->names[slot], sizeof p->names[slot], "%s%s%zu%s", L->prefix, L->family->head,
             L->layer, suffix);
    p->t[slot] = import_src_find(L->src, p->names[slot]);
    if (!p->t[slot] && required)
        return store_error_set(err, L->path, "no tensor '%s': %s layer %zu is incomplete",
                               p->names[slot], L->family->label, L->layer);
    return 0;
}

int import_attn_find_separate(const import_layer *L, const char *att, const char *o, import_attn *p,
                              attn_error *err) {
    const char *projs[4] = {"q_proj", "k_proj", "v_proj", o};
    char s[64];
    for (int i = 0; i < 4; i++) {
        snprintf(s, sizeof s, "%s%s.weight", att, projs[i]);
        if (part_get(L, p, 2 * i, s, 1, err)) return -1;
        snprintf(s, sizeof s, "%s%s.bias", att, projs[i]);
        if (part_get(L, p, 2 * i + 1, s, 0, err)) return -1;
    }
    return 0;
}

int import_attn_find_fused(const import_layer *L, const char *att, import_attn *p,
                           attn_error *err) {
    static const char *const ends[4] = {".query_key_value.weight", ".query_key_value.bias",
                                        ".dense.weight", ".dense.bias"};
    static const int slots[4] = {IMPORT_WQ, IMPORT_BQ, IMPORT_WO, IMPORT_BO};
    char s[64];
    p->fused = IMPORT_FUSED_HEADS;
    for (int i = 0; i < 4; i++) {
        snprintf(s, sizeof s, "%s%s", att, ends[i]);
        if (part_get(L, p, slots[i], s, i % 2 == 0, err)) return -1;
    }
    return 0;
}

int import_attn_find_blocks(const import_layer *L, const char *att, const char *qkv, const char *o,
                            import_attn *p, attn_error *err) {
    const char *projs[2] = {qkv, o};
    static const int slots[2] = {IMPORT_WQ, IMPORT_WO};
    char s[64];
    p->fused = IMPORT_FUSED_BLOCKS;
    for (int i = 0; i < 2; i++) {
        snprintf(s, sizeof s, "%s%s.weight", att, projs[i]);
        if (part_get(L, p, slots[i], s, 1, err)) return -1;
        snprintf(s, sizeof s, "%s%s.bias", att, projs[i]);
        if (part_get(L, p, slots[i] + 1, s, 0, err)) return -1;
    }
    return 0;
}

/* Checks t's shape is [d0, d1] (d1 = 0: [d0]). */
static int shape_want(const store_tensor *t, size_t d0, size_t d1, const char *rule,
                      const char *path, attn_error *err) {
    size_t rank = d1 ? 2 : 1;
    if (t->rank == rank && t->shape[0] == d0 && (rank == 1 || t->shape[1] == d1)) return 0;
    char got[160], exp[64];
    if (rank == 1)
        snprintf(exp, sizeof exp, "[%zu]", d0);
    else
        snprintf(exp, sizeof exp, "[%zu, %zu]", d0, d1);
    return store_error_set(err, path, "tensor '%s' has shape %s, expected %s = %s", t->name,
                           store_tensor_shape_text(t, got, sizeof got), exp, rule);
}

/* g and dh of a family with grouped K/V heads and its own head_dim: the
 * options', else config.json's, else h and q's rows / h (block-wise fused
 * q, k, v: d / h, as Phi-3's hidden_size // num_attention_heads). */
static int grouped_dims(const import_layer *L, const store_tensor *q, int blocks, size_t *g,
                        size_t *dh, int *dh_from_config, attn_error *err) {
    if (L->opt->n_kv_heads)
        *g = L->opt->n_kv_heads;
    else if (import_cfg_count(L->cfg, IMPORT_KEYS("num_key_value_heads"), g, L->path, err) < 0)
        return -1;
    if (!*dh) {
        int got = import_cfg_count(L->cfg, IMPORT_KEYS("head_dim"), dh, L->path, err);
        if (got < 0) return -1;
        *dh_from_config = got;
    }
    if (!*dh && blocks) {
        if (q->shape[1] % L->h)
            return store_error_set(err, L->path,
                                   "d_model %zu (from '%s') is not divisible by %zu heads",
                                   q->shape[1], q->name, L->h);
        *dh = q->shape[1] / L->h;
    }
    if (!*dh) {
        if (q->shape[0] % L->h)
            return store_error_set(err, L->path,
                                   "'%s' has %zu rows, not a multiple of %zu heads (n_heads)",
                                   q->name, q->shape[0], L->h);
        *dh = q->shape[0] / L->h;
    }
    return 0;
}

int import_attn_check(const import_layer *L, import_attn *p, int grouped, import_out *m,
                      attn_error *err) {
    const char *path = L->path;
    size_t h = L->h;
    const store_tensor *q = p->t[IMPORT_WQ];
    if (q->rank != 2 || q->shape[0] == 0 || q->shape[1] == 0) {
        char got[160];
        return store_error_set(err, path, "tensor '%s' has shape %s, expected %s", q->name,
                               store_tensor_shape_text(q, got, sizeof got), L->family->anchor_rule);
    }
    size_t d = q->shape[1], cfg_d = 0;
    if (import_cfg_count(L->cfg, IMPORT_KEYS("hidden_size", "d_model", "n_embed", "n_embd"), &cfg_d,
                         path, err) < 0)
        return -1;
    if (cfg_d && cfg_d != d)
        return store_error_set(err, path,
                               "config.json's d_model %zu disagrees with '%s' (d_model %zu)", cfg_d,
                               q->name, d);
    size_t g = h, dh = L->opt->d_head;
    int dh_from_config = 0;
    if (grouped) {
        if (grouped_dims(L, q, p->fused == IMPORT_FUSED_BLOCKS, &g, &dh, &dh_from_config, err) != 0)
            return -1;
    } else if (!dh) {
        if (d % h)
            return store_error_set(
                err, path, "d_model %zu (from '%s') is not divisible by %zu heads", d, q->name, h);
        dh = d / h;
    }
    if (h % g) return store_error_set(err, path, "%zu K/V heads do not divide %zu heads", g, h);
    size_t hd, gd;
    if (import_heads_width(L, dh, dh_from_config, &hd, err) != 0) return -1;
    gd = g * dh; /* ≤ hd: g divides h */
    const store_tensor *const *t = p->t;
    if (p->fused == IMPORT_FUSED_BLOCKS) {
        if (shape_want(t[IMPORT_WQ], hd + 2 * gd, d, "[(n_heads+2·n_kv_heads)·d_head, d_model]",
                       path, err) ||
            (t[IMPORT_BQ] && shape_want(t[IMPORT_BQ], hd + 2 * gd, 0,
                                        "[(n_heads+2·n_kv_heads)·d_head]", path, err)))
            return -1;
    } else if (p->fused) {
        if (shape_want(t[IMPORT_WQ], 3 * hd, d, "[3·n_heads·d_head, d_model]", path, err) ||
            (t[IMPORT_BQ] && shape_want(t[IMPORT_BQ], 3 * hd, 0, "[3·n_heads·d_head]", path, err)))
            return -1;
    } else {
        if (shape_want(t[IMPORT_WQ], hd, d, "[n_heads·d_head, d_model]", path, err) ||
            shape_want(t[IMPORT_WK], gd, d, "[n_kv_heads·d_head, d_model]", path, err) ||
            shape_want(t[IMPORT_WV], gd, d, "[n_kv_heads·d_head, d_model]", path, err) ||
            (t[IMPORT_BQ] && shape_want(t[IMPORT_BQ], hd, 0, "[n_heads·d_head]", path, err)) ||
            (t[IMPORT_BK] && shape_want(t[IMPORT_BK], gd, 0, "[n_kv_heads·d_head]", path, err)) ||
            (t[IMPORT_BV] && shape_want(t[IMPORT_BV], gd, 0, "[n_kv_heads·d_head]", path, err)))
            return -1;
    }
    if (shape_want(t[IMPORT_WO], d, hd, "[d_model, n_heads·d_head]", path, err) ||
        (t[IMPORT_BO] && shape_want(t[IMPORT_BO], d, 0, "[d_model]", path, err)))
        return -1;
    for (int i = 0; i < 8; i++)
        if (t[i] && dtype_check(t[i], p->names[i], path, err) != 0) return -1;
    p->d = d, p->g = g, p->dh = dh, p->hd = hd, p->gd = gd;
    m->d = d;
    m->h = h;
    m->g = g;
    m->dh = dh;
    m->mask = L->family->mask;
    return 0;
}

/* w_o[r, c] = o[c, r]; b_o = o's bias. */
int import_attn_read(const import_layer *L, import_attn *p, import_out *m, attn_error *err) {
    size_t d = p->d, hd = p->hd;
    for (int i = 0; i < 8; i++)
        if (p->t[i] && !(p->v[i] = tensor_read(p->t[i], L->path, err))) return -1;
    float *w_o = import_out_alloc(m, hd * d);
    if (!w_o) return store_error_set(err, NULL, "out of memory");
    import_linear_into(w_o, d, 0, p->v[IMPORT_WO], d, hd);
    m->w_o = w_o;
    if (p->v[IMPORT_BO]) {
        float *b = import_out_alloc(m, d);
        if (!b) return store_error_set(err, NULL, "out of memory");
        memcpy(b, p->v[IMPORT_BO], d * sizeof(float));
        m->b_o = b;
    }
    return 0;
}

/*
 * Separate q, k, v (nn.Linear [out, in]):
 *   w_qkv[r, c]        = q[c, r]             c < hd
 *   w_qkv[r, hd + c]   = k[c, r]             c < gd
 *   w_qkv[r, hd+gd+c]  = v[c, r]
 */
int import_attn_layout_separate(import_attn *p, import_out *m, attn_error *err) {
    size_t d = p->d, hd = p->hd, gd = p->gd;
    size_t cols = hd + 2 * gd;
    float *const *v = p->v;
    int biased = v[IMPORT_BQ] || v[IMPORT_BK] || v[IMPORT_BV];
    float *w = import_out_alloc(m, d * cols), *b = biased ? import_out_alloc(m, cols) : NULL;
    if (!w || (biased && !b)) return store_error_set(err, NULL, "out of memory");
    import_linear_into(w, cols, 0, v[IMPORT_WQ], hd, d);
    import_linear_into(w, cols, hd, v[IMPORT_WK], gd, d);
    import_linear_into(w, cols, hd + gd, v[IMPORT_WV], gd, d);
    /* a bias the checkpoint lacks is zero (Qwen2 has q, k, v's alone) */
    if (b && v[IMPORT_BQ]) memcpy(b, v[IMPORT_BQ], hd * sizeof(float));
    if (b && v[IMPORT_BK]) memcpy(b + hd, v[IMPORT_BK], gd * sizeof(float));
    if (b && v[IMPORT_BV]) memcpy(b + hd + gd, v[IMPORT_BV], gd * sizeof(float));
    m->w_qkv = w;
    m->b_qkv = b;
    return 0;
}

/*
 * Fused per head (GPT-NeoX, BLOOM), W [3hd, d], row (3i + p)·dh + j for
 * head i, part p (q, k, v), coordinate j:
 *   w_qkv[r, p·hd + i·dh + j] = W[(3i + p)·dh + j, r]
 */
int import_attn_layout_fused(import_attn *p, import_out *m, attn_error *err) {
    size_t d = p->d, hd = p->hd, dh = p->dh;
    const float *wq = p->v[IMPORT_WQ], *bq = p->v[IMPORT_BQ];
    float *w = import_out_alloc(m, d * 3 * hd), *b = bq ? import_out_alloc(m, 3 * hd) : NULL;
    if (!w || (bq && !b)) return store_error_set(err, NULL, "out of memory");
    for (size_t i = 0; i < m->h; i++)
        for (size_t part = 0; part < 3; part++)
            for (size_t j = 0; j < dh; j++) {
                size_t row = (3 * i + part) * dh + j, col = part * hd + i * dh + j;
                for (size_t r = 0; r < d; r++)
                    w[r * 3 * hd + col] = wq[row * d + r];
                if (b) b[col] = bq[row];
            }
    m->w_qkv = w;
    m->b_qkv = b;
    return 0;
}

/*
 * Fused block-wise (Phi-3's qkv_proj), W [hd + 2gd, d]: rows [0, hd) Q,
 * then gd of K, then gd of V, which are our columns in the same order:
 *   w_qkv[r, c] = W[c, r]
 */
int import_attn_layout_blocks(import_attn *p, import_out *m, attn_error *err) {
    size_t d = p->d, cols = p->hd + 2 * p->gd;
    const float *bq = p->v[IMPORT_BQ];
    float *w = import_out_alloc(m, d * cols), *b = bq ? import_out_alloc(m, cols) : NULL;
    if (!w || (bq && !b)) return store_error_set(err, NULL, "out of memory");
    import_linear_into(w, cols, 0, p->v[IMPORT_WQ], cols, d);
    if (b) memcpy(b, bq, cols * sizeof(float));
    m->w_qkv = w;
    m->b_qkv = b;
    return 0;
}
