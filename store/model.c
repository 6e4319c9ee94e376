/*
 * model.c — store_model_load: from a validated safetensors file to an
 * attn_weights the engine can use.
 *
 * Order of the checks, so that each message names the first fault a reader
 * would look for: the file (safetensors.c), then the tensor names, the
 * metadata (n_heads, name, mask), the shapes against each other, the
 * dtypes, and last the values (finite), which is the only step that reads
 * the tensors' bytes.
 *
 * Shapes, with h = n_heads, g = n_kv_heads, hd = h · d_head, gd = g · d_head:
 *   self-attention:  w_qkv [dm, hd + 2gd]: dm ≥ 1 and its columns a positive
 *                    multiple of h + 2g, which gives d_head; b_qkv [hd + 2gd]
 *   cross-attention: w_q [dm, hd], a multiple of h, which gives d_head;
 *                    b_q [hd], w_kv [dc, 2gd], b_kv [2gd]
 *   w_o [hd, dm]    b_o [dm]    alibi [h]    sinks [h]    no w_o: hd == dm
 *   token_embeddings [V, dm], V = the vocabulary's length
 *   position_embeddings [P, dm], P ≥ 1, only with a vocabulary
 *
 * The vocabulary and the dimension names (vocab.c) are checked after the
 * shapes, since their lengths are bounded by them, and before the dtypes.
 *
 * The variants' metadata (n_kv_heads, rope_*, alibi, window, softcap,
 * scale) is checked after the tensor names and before the shapes, but
 * RoPE's dims after them, since they are bounded by d_head, and the norms'
 * keys and tensors (model_norm.c) after RoPE, which the temperature may not
 * go beside.
 *
 * A stack (metadata n_layers = L): every weight tensor is
 * "layers.<l>.<name>" and every per-layer key "layers.<l>.<key>"; each
 * layer goes through the same checks as a one-layer file's weights (a
 * meta_view gives its keys, its tensors' names carry their prefix, so each
 * message names the layer's own tensor or key), then is compared with
 * layer 0: one d_model, d_head and d_context, one kind (self or cross).
 * The whole model's names and keys are checked first, so a stray prefix,
 * a layer past L or a prefix missing is the first fault reported.
 *
 * Memory (see model.h): the store_model_memory owns the open file (its
 * buffer or mapping) when a tensor is used in place, a heap buffer per
 * tensor converted or copied and per layer whose metadata asks for the
 * standard ALiBi slopes (one list, `owned`), and layers 1 … L−1's
 * attn_weights (layer 0's is the model's `weights`).
 */
#include "store/model.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/model_norm.h"
#include "store/model_sinks.h"
#include "store/safetensors.h"
#include "store/tensor.h"
#include "store/vocab.h"

/* The tensor names a model may hold, in the order of the slots below. */
enum {
    T_W_QKV,
    T_B_QKV,
    T_W_O,
    T_B_O,
    T_W_Q,
    T_B_Q,
    T_W_KV,
    T_B_KV,
    T_ALIBI,
    T_ROPE_SHORT,
    T_ROPE_LONG,
    T_SINKS,
    T_NORM, /* the norms' tensors, STORE_NORM_TENSORS of them (model_norm.h) */
    T_TOK = T_NORM + STORE_NORM_TENSORS,
    T_POS,
    T_COUNT
};
static const char *const tensor_names[T_COUNT] = {"w_qkv",
                                                  "b_qkv",
                                                  "w_o",
                                                  "b_o",
                                                  "w_q",
                                                  "b_q",
                                                  "w_kv",
                                                  "b_kv",
                                                  "alibi",
                                                  "rope_short_factor",
                                                  "rope_long_factor",
                                                  "sinks",
                                                  "norm.weight",
                                                  "norm.bias",
                                                  "post_norm.weight",
                                                  "post_norm.bias",
                                                  "q_norm.weight",
                                                  "k_norm.weight",
                                                  "token_embeddings",
                                                  "position_embeddings"};

/* Slots below this are a layer's; the vocabulary's tables are the model's. */
#define T_LAYER_COUNT T_TOK

/* The metadata keys each layer has its own of. */
static const char *const layer_keys[] = {"rope_theta",
                                         "rope_dims",
                                         "rope_style",
                                         "rope_scaling",
                                         "rope_factor",
                                         "rope_low_freq_factor",
                                         "rope_high_freq_factor",
                                         "rope_original_max_position",
                                         "rope_beta_fast",
                                         "rope_beta_slow",
                                         "rope_mscale",
                                         "rope_mscale_all_dim",
                                         "rope_attention_factor",
                                         "rope_truncate",
                                         "alibi",
                                         "window",
                                         "softcap",
                                         "scale",
                                         "chunk"};
enum { N_LAYER_KEYS = sizeof layer_keys / sizeof layer_keys[0] };

struct store_model_memory {
    store_file *file; /* NULL once let go (no tensor in place) */
    float **owned;    /* converted or copied tensors and standard slopes */
    size_t n_owned, cap_owned;
    attn_weights *stack;         /* layers 1 … L−1 */
    const attn_weights **layers; /* L pointers; layers[0] is &model->weights */
    store_strings vocabulary;    /* with its sorted index */
    store_strings dimensions;
    char *name;
    char *description;
    char *path;
};

/* ---- checks ------------------------------------------------------------- */

int store_model_name_valid(const char *name, size_t len) {
    if (len < 1 || len > 64) return 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* n_heads: decimal digits only, 1 … STORE_HEADS_MAX. */
static int heads_parse(const char *s, size_t *out) {
    size_t v = 0;
    if (!*s) return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        v = v * 10 + (size_t)(*s - '0');
        if (v > STORE_HEADS_MAX) return -1;
    }
    if (v == 0) return -1;
    *out = v;
    return 0;
}

/* Checks t's shape against want[0 … rank-1]; the message explains `rule`. */
static int shape_check(const store_tensor *t, size_t rank, const size_t *want, const char *rule,
                       const char *path, attn_error *err) {
    int ok = t->rank == rank;
    for (size_t i = 0; ok && i < rank; i++)
        ok = t->shape[i] == want[i];
    if (ok) return 0;
    char got[160];
    if (rank == 1)
        return store_error_set(err, path, "tensor '%s' has shape %s, expected %s = [%zu]", t->name,
                               store_tensor_shape_text(t, got, sizeof got), rule, want[0]);
    return store_error_set(err, path, "tensor '%s' has shape %s, expected %s = [%zu, %zu]", t->name,
                           store_tensor_shape_text(t, got, sizeof got), rule, want[0], want[1]);
}

/* ---- loading ------------------------------------------------------------ */

/* Makes slot's tensor usable as F32: in place when it can, else into an
 * owned buffer; then checks every value finite. */
/* Keeps p (a heap buffer of `bytes`) for the model to free; the list was
 * sized at the start for every tensor and every layer's slopes. */
static void owned_keep(store_model *m, float *p, size_t bytes) {
    if (m->memory->n_owned == m->memory->cap_owned) abort(); /* sized wrong: a bug */
    m->memory->owned[m->memory->n_owned++] = p;
    m->bytes_owned += bytes;
}

static int tensor_bind(store_model *m, const store_tensor *t, const float **out, int *in_place,
                       const char *path, attn_error *err) {
    const float *p;
    if (t->dtype == STORE_DTYPE_F32 && (uintptr_t)t->data % _Alignof(float) == 0) {
        p = t->data;
        *in_place = 1;
        if (store_tensor_check_finite(p, t, path, err) != 0) return -1;
    } else {
        /* 64-byte aligned, as the engine's workspace: a whole cache line. */
        size_t bytes = (t->count * sizeof(float) + 63) / 64 * 64;
        float *buf = aligned_alloc(64, bytes ? bytes : 64);
        if (!buf) return store_error_set(err, path, "out of memory for tensor '%s'", t->name);
        owned_keep(m, buf, bytes);
        if (store_tensor_read_f32(buf, t, path, err) != 0) return -1;
        p = buf;
    }
    *out = p;
    return 0;
}

const char *store_model_default_name(const char *path, size_t *len) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base), slen = strlen(".safetensors");
    if (n >= slen && strcmp(base + n - slen, ".safetensors") == 0) n -= slen;
    *len = n;
    return base;
}

int store_positive_parse(const char *s, double *out) {
    if (!*s || !((*s >= '0' && *s <= '9') || *s == '.' || *s == '+' || *s == '-')) return -1;
    for (const char *c = s; *c; c++)
        if (*c == 'x' || *c == 'X') return -1;
    char *end;
    double v = strtod(s, &end);
    if (*end || !isfinite(v) || !(v > 0)) return -1;
    *out = v;
    return 0;
}

int store_size_parse(const char *s, size_t max, size_t *out) {
    size_t v = 0;
    if (!*s) return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        v = v * 10 + (size_t)(*s - '0');
        if (v > max) return -1;
    }
    *out = v;
    return 0;
}

/* A metadata count: decimal digits only, 1 … max. */
static int count_parse(const char *s, size_t max, size_t *out) {
    return store_size_parse(s, max, out) == 0 && *out != 0 ? 0 : -1;
}

/* A layer's view of the metadata: its keys are prefix + key, the prefix
 * being "" for the whole model and in a one-layer file, "layers.<l>." for
 * layer l of a stack. */
typedef struct meta_view {
    const store_file *f;
    char prefix[32];
} meta_view;

/* The value of prefix + key (NULL when absent); that full key into
 * full[KEY_MAX], for messages. */
#define KEY_MAX 96
static const char *meta_get(const meta_view *v, const char *key, char full[KEY_MAX]) {
    snprintf(full, KEY_MAX, "%s%s", v->prefix, key);
    return store_file_metadata(v->f, full);
}

/* Metadata `key` as a number > 0 into *out; 0 when absent (*out untouched),
 * 1 when present, -1 with err set when malformed. At most FLT_MAX always,
 * as every number of the API (so that ?weights=true shows a weight set a
 * request may send back); as float when `fl`: the value must then stay
 * > 0 in float32 too. */
static int meta_positive(const meta_view *mv, const char *key, int fl, double *out,
                         const char *path, attn_error *err) {
    char full[KEY_MAX];
    const char *text = meta_get(mv, key, full);
    if (!text) return 0;
    double v;
    if (store_positive_parse(text, &v) != 0 || !(v <= FLT_MAX) || (fl && !((float)v > 0)))
        return store_error_set(err, path, "metadata '%s' is '%s', not a finite number > 0%s", full,
                               text, fl ? " (as float32)" : "");
    *out = v;
    return 1;
}

/* Metadata `key` as a count 1 … max; 0 absent, 1 present, -1 malformed. */
static int meta_count(const meta_view *mv, const char *key, size_t max, size_t *out,
                      const char *path, attn_error *err) {
    char full[KEY_MAX];
    const char *text = meta_get(mv, key, full);
    if (!text) return 0;
    if (count_parse(text, max, out) != 0)
        return store_error_set(err, path, "metadata '%s' is '%s', not a decimal integer in 1 … %zu",
                               full, text, max);
    return 1;
}

/* Metadata `key` as any finite number (|v| ≤ FLT_MAX) into *out; 0 absent,
 * 1 present, -1 malformed. */
static int meta_number(const meta_view *mv, const char *key, double *out, const char *path,
                       attn_error *err) {
    char full[KEY_MAX];
    const char *text = meta_get(mv, key, full);
    if (!text) return 0;
    char *end;
    double v = strtod(text, &end);
    int ok = *text && !strpbrk(text, "xXnNiI") && !*end && fabs(v) <= FLT_MAX;
    if (!ok)
        return store_error_set(err, path, "metadata '%s' is '%s', not a finite number", full, text);
    *out = v;
    return 1;
}

/* The scalings' keys: which each type takes (0 no, 1 optional, 2 required). */
enum {
    RK_FACTOR,
    RK_LOW,
    RK_HIGH,
    RK_ORIGINAL,
    RK_BETA_FAST,
    RK_BETA_SLOW,
    RK_MSCALE,
    RK_MSCALE_ALL_DIM,
    RK_ATTENTION,
    RK_TRUNCATE,
    RK_COUNT
};
static const char *const scaling_keys[RK_COUNT] = {
    "rope_factor",           "rope_low_freq_factor",
    "rope_high_freq_factor", "rope_original_max_position",
    "rope_beta_fast",        "rope_beta_slow",
    "rope_mscale",           "rope_mscale_all_dim",
    "rope_attention_factor", "rope_truncate"};
static const struct {
    const char *name;
    attn_rope_scaling scaling;
    unsigned char takes[RK_COUNT];
} scaling_types[] = {
    {"linear", ATTN_ROPE_SCALING_LINEAR, {2}},
    {"llama3", ATTN_ROPE_SCALING_LLAMA3, {2, 2, 2, 2}},
    {"yarn", ATTN_ROPE_SCALING_YARN, {2, 0, 0, 2, 1, 1, 1, 1, 1, 1}},
    {"longrope", ATTN_ROPE_SCALING_LONGROPE, {1, 0, 0, 2, 0, 0, 0, 0, 1, 0}},
};

/* The RoPE keys (models/README.md) into *rope, d_head known. longrope's
 * factor lists are tensors, checked by rope_lists. */
static int rope_parse(const meta_view *mv, size_t dh, attn_rope *rope, const char *path,
                      attn_error *err) {
    char full[KEY_MAX];
    double theta = 10000;
    size_t dims = dh;
    int has_theta, has_dims;
    if ((has_theta = meta_positive(mv, "rope_theta", 0, &theta, path, err)) < 0) return -1;
    if ((has_dims = meta_count(mv, "rope_dims", (size_t)1 << 30, &dims, path, err)) < 0) return -1;
    *rope = (attn_rope){0};
    if (!has_theta && !has_dims) {
        const char *others[RK_COUNT + 2] = {"rope_style", "rope_scaling"};
        for (size_t i = 0; i < RK_COUNT; i++)
            others[2 + i] = scaling_keys[i];
        for (size_t i = 0; i < RK_COUNT + 2; i++)
            if (meta_get(mv, others[i], full))
                return store_error_set(err, path,
                                       "metadata '%s' without RoPE (RoPE is on when '%srope_theta' "
                                       "or '%srope_dims' is given)",
                                       full, mv->prefix, mv->prefix);
        return 0;
    }
    if (dims % 2 != 0 || dims > dh)
        return store_error_set(
            err, path, "RoPE dims %zu%s%s%s: it must be even and at most d_head (%zu)%s%s%s", dims,
            has_dims ? " (metadata '" : " (d_head, the default)", has_dims ? mv->prefix : "",
            has_dims ? "rope_dims')" : "", dh, has_dims ? "" : "; give '",
            has_dims ? "" : mv->prefix, has_dims ? "" : "rope_dims'");
    rope->dims = dims;
    rope->theta = theta;
    const char *style = meta_get(mv, "rope_style", full);
    if (!style || strcmp(style, "half") == 0)
        rope->style = ATTN_ROPE_HALF;
    else if (strcmp(style, "interleaved") == 0)
        rope->style = ATTN_ROPE_INTERLEAVED;
    else
        return store_error_set(err, path, "metadata '%s' is '%s', expected 'half' or 'interleaved'",
                               full, style);
    char scaling_key[KEY_MAX];
    const char *scaling = meta_get(mv, "rope_scaling", scaling_key);
    static const unsigned char none[RK_COUNT] = {0};
    const unsigned char *takes = none;
    rope->scaling = ATTN_ROPE_SCALING_NONE;
    for (size_t i = 0; scaling && i < sizeof scaling_types / sizeof scaling_types[0]; i++)
        if (strcmp(scaling, scaling_types[i].name) == 0)
            rope->scaling = scaling_types[i].scaling, takes = scaling_types[i].takes;
    if (scaling && takes == none)
        return store_error_set(err, path,
                               "metadata '%s' is '%s', expected 'linear', 'llama3', 'yarn' or "
                               "'longrope'",
                               scaling_key, scaling);
    double *dst[RK_COUNT] = {&rope->factor,           &rope->low_freq_factor,
                             &rope->high_freq_factor, &rope->original_max_position,
                             &rope->beta_fast,        &rope->beta_slow,
                             &rope->mscale,           &rope->mscale_all_dim,
                             &rope->attention_factor, NULL};
    for (int i = 0; i < RK_COUNT; i++) {
        const char *key = scaling_keys[i];
        const char *text = meta_get(mv, key, full);
        int got = text != NULL;
        if (got && !takes[i])
            return store_error_set(err, path,
                                   "metadata '%s' without a 'rope_scaling' that uses it%s", full,
                                   !scaling ? ""
                                   : rope->scaling == ATTN_ROPE_SCALING_LINEAR
                                       ? " ('linear' takes 'rope_factor' alone)"
                                       : " (models/README.md lists each type's keys)");
        if (!got && takes[i] == 2)
            return store_error_set(err, path, "metadata '%s' '%s' needs '%s'", scaling_key, scaling,
                                   full);
        if (!got) continue;
        if (i == RK_TRUNCATE) {
            if (strcmp(text, "true") != 0 && strcmp(text, "false") != 0)
                return store_error_set(
                    err, path, "metadata '%s' is '%s', expected 'true' or 'false'", full, text);
            rope->untruncated = strcmp(text, "false") == 0;
        } else if (i == RK_MSCALE || i == RK_MSCALE_ALL_DIM) {
            if (meta_number(mv, key, dst[i], path, err) < 0) return -1;
        } else if (meta_positive(mv, key, 0, dst[i], path, err) < 0) {
            return -1;
        }
    }
    if (rope->scaling == ATTN_ROPE_SCALING_LLAMA3 && rope->high_freq_factor < rope->low_freq_factor)
        return store_error_set(err, path,
                               "metadata '%srope_high_freq_factor' (%g) must not be below "
                               "'%srope_low_freq_factor' (%g)",
                               mv->prefix, rope->high_freq_factor, mv->prefix,
                               rope->low_freq_factor);
    double a = attn_rope_attention_factor(rope);
    if (!(a > 0 && a <= FLT_MAX))
        return store_error_set(err, path,
                               "metadata '%s' '%s' gives an attention factor of %g; it must be "
                               "finite and > 0 (give '%srope_attention_factor')",
                               scaling_key, scaling, a, mv->prefix);
    return 0;
}

/* longrope's lists, tensors rope_short_factor and rope_long_factor of
 * shape [dims/2]: present with longrope only (their values > 0 are
 * checked when read, rope_lists_bind). */
static int rope_lists(const store_tensor *const *t, const attn_rope *rope, const char *pre,
                      const char *path, attn_error *err) {
    int lr = rope->scaling == ATTN_ROPE_SCALING_LONGROPE;
    for (int s = T_ROPE_SHORT; s <= T_ROPE_LONG; s++) {
        if (!t[s] && lr)
            return store_error_set(err, path,
                                   "metadata '%srope_scaling' 'longrope' needs tensor '%s%s'", pre,
                                   pre, tensor_names[s]);
        if (t[s] && !lr)
            return store_error_set(err, path,
                                   "tensor '%s' without metadata '%srope_scaling' 'longrope'",
                                   t[s]->name, pre);
        size_t want[1] = {rope->dims / 2};
        if (t[s] && shape_check(t[s], 1, want, "[rope dims/2]", path, err) != 0) return -1;
    }
    return 0;
}

/* A 2-D table of d_model columns and at least one row. */
static int table_check(const store_tensor *t, size_t dm, const char *rows, const char *path,
                       attn_error *err) {
    if (t->rank == 2 && t->shape[0] >= 1 && t->shape[1] == dm) return 0;
    char got[160];
    return store_error_set(err, path,
                           "tensor '%s' has shape %s, expected [%s, d_model] = [%s, %zu] with "
                           "%s ≥ 1",
                           t->name, store_tensor_shape_text(t, got, sizeof got), rows, rows, dm,
                           rows);
}

/* The vocabulary (metadata `vocabulary` and tensor token_embeddings, one
 * with the other), the position table and the dimension names into m. */
static int vocab_parse(store_model *m, const store_file *f, const store_tensor *tok,
                       const store_tensor *pos, size_t dm, const char *path, attn_error *err) {
    const char *vocab = store_file_metadata(f, "vocabulary");
    if (tok && !vocab)
        return store_error_set(err, path,
                               "tensor 'token_embeddings' without metadata 'vocabulary' (the "
                               "token strings of its rows)");
    if (vocab && !tok)
        return store_error_set(err, path,
                               "metadata 'vocabulary' without tensor 'token_embeddings' (an "
                               "embedding per token)");
    if (pos && !tok)
        return store_error_set(err, path,
                               "tensor 'position_embeddings' without a vocabulary (metadata "
                               "'vocabulary' and tensor 'token_embeddings'): it is added to "
                               "the embeddings of tokens");
    if (tok) {
        if (table_check(tok, dm, "V", path, err) != 0) return -1;
        if (pos && table_check(pos, dm, "P", path, err) != 0) return -1;
        if (tok->shape[0] > LONG_MAX)
            return store_error_set(err, path, "tensor 'token_embeddings' has too many rows");
        store_strings *v = &m->memory->vocabulary;
        if (store_strings_parse(v, vocab, "vocabulary", 1, path, err) != 0) return -1;
        m->bytes_owned += v->bytes;
        if (v->n != tok->shape[0])
            return store_error_set(err, path,
                                   "metadata 'vocabulary' has %zu tokens and tensor "
                                   "'token_embeddings' %zu rows: one row per token",
                                   v->n, tok->shape[0]);
        m->vocab_size = v->n;
        m->vocabulary = v->strings;
        m->n_positions = pos ? pos->shape[0] : 0;
    }
    const char *dims = store_file_metadata(f, "dimensions");
    if (dims) {
        store_strings *d = &m->memory->dimensions;
        if (store_strings_parse(d, dims, "dimensions", 0, path, err) != 0) return -1;
        m->bytes_owned += d->bytes;
        if (d->n != dm)
            return store_error_set(
                err, path, "metadata 'dimensions' has %zu names, expected d_model = %zu", d->n, dm);
        /* The names go into every summary of the model (GET /v1/models),
         * which no response limit bounds: short names keep it small. */
        for (size_t i = 0; i < d->n; i++)
            if (strlen(d->strings[i]) > STORE_DIMENSION_NAME_MAX)
                return store_error_set(err, path,
                                       "metadata 'dimensions' entry %zu is %zu bytes long, over "
                                       "%d",
                                       i, strlen(d->strings[i]), STORE_DIMENSION_NAME_MAX);
        m->dimensions = d->strings;
    }
    return 0;
}

long store_model_token(const store_model *m, const char *s, size_t len) {
    if (!m->vocab_size) return -1;
    return store_strings_find(m->memory->vocabulary.index, m->vocab_size, s, len);
}

/* ---- a model's layers --------------------------------------------------- */

/* When name is "layers.<l>.<rest>": 1 with *layer and *rest; 0 when it
 * does not start with "layers."; -1 when it does but <l> is not decimal
 * digits without a leading zero followed by '.' (so that a layer's tensor
 * has one name: "layers.01.w_o" is not "layers.1.w_o"'s twin). */
static int layer_prefix(const char *name, size_t *layer, const char **rest) {
    if (strncmp(name, "layers.", 7) != 0) return 0;
    const char *p = name + 7;
    size_t v = 0, digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (digits == 9) return -1; /* far past STORE_LAYERS_MAX */
        v = v * 10 + (size_t)(*p - '0');
    }
    if (digits == 0 || *p != '.' || (digits > 1 && name[7] == '0')) return -1;
    *layer = v;
    *rest = p + 1;
    return 1;
}

static int is_layer_key(const char *key) {
    for (size_t i = 0; i < N_LAYER_KEYS; i++)
        if (strcmp(key, layer_keys[i]) == 0) return 1;
    for (size_t i = 0; i < STORE_NORM_KEYS; i++) /* model_norm.c's */
        if (strcmp(key, store_norm_keys[i]) == 0) return 1;
    return 0;
}

/* What the names and metadata of one layer say, checked before a value is
 * read (the first pass); t[] are the layer's tensors, by slot. */
typedef struct layer_plan {
    meta_view v;
    const store_tensor *t[T_LAYER_COUNT];
    int cross, alibi_standard;
    size_t dm, dh, dc, window;
    double softcap, scale;
    attn_rope rope;
    attn_weights norms; /* its norms and temperature, but their arrays (model_norm.c) */
    size_t chunk;       /* model_sinks.c */
} layer_plan;

/* The file's tensors into plan[l].t and wide[] (the vocabulary's tables);
 * n_layers 0: a one-layer file, whose names have no prefix. */
static int names_sort(layer_plan *plan, size_t n_layers, const store_tensor *wide[T_COUNT],
                      const store_file *f, const char *path, attn_error *err) {
    for (size_t i = 0; i < store_file_count(f); i++) {
        const store_tensor *x = store_file_tensor(f, i);
        size_t l = 0;
        const char *rest = x->name;
        int pre = layer_prefix(x->name, &l, &rest);
        if (pre < 0)
            return store_error_set(err, path,
                                   "tensor '%s': a layer's prefix is 'layers.<l>.', l decimal "
                                   "without a leading zero",
                                   x->name);
        int slot = -1;
        for (int s = 0; s < (pre ? T_LAYER_COUNT : T_COUNT); s++)
            if (strcmp(rest, tensor_names[s]) == 0) slot = s;
        if (slot < 0 && pre)
            return store_error_set(err, path,
                                   "unknown tensor '%s' (a layer holds w_qkv, b_qkv, w_o, b_o; or "
                                   "w_q, b_q, w_kv, b_kv; and alibi, rope_short_factor, "
                                   "rope_long_factor, sinks)",
                                   x->name);
        if (slot < 0)
            return store_error_set(err, path,
                                   "unknown tensor '%s' (a model holds w_qkv, b_qkv, w_o, b_o; "
                                   "or w_q, b_q, w_kv, b_kv; and alibi, rope_short_factor, "
                                   "rope_long_factor, sinks, token_embeddings, "
                                   "position_embeddings)",
                                   x->name);
        if (pre && !n_layers)
            return store_error_set(err, path,
                                   "tensor '%s' has a layer prefix and there is no metadata "
                                   "'n_layers': a stack says how many layers it has, a one-layer "
                                   "file's tensors have no prefix",
                                   x->name);
        if (pre && l >= n_layers)
            return store_error_set(err, path,
                                   "tensor '%s' is of layer %zu, and metadata 'n_layers' is %zu "
                                   "(layers 0 … %zu)",
                                   x->name, l, n_layers, n_layers - 1);
        if (!pre && n_layers && slot < T_LAYER_COUNT)
            return store_error_set(err, path,
                                   "tensor '%s' has no layer prefix in a stack (metadata "
                                   "'n_layers' %zu): a layer's tensors are 'layers.<l>.%s'",
                                   x->name, n_layers, x->name);
        if (slot >= T_LAYER_COUNT)
            wide[slot] = x;
        else
            plan[l].t[slot] = x;
    }
    return 0;
}

/* The metadata keys against the layers: a per-layer key carries a layer's
 * prefix in a stack and none in a one-layer file, names a layer of the
 * stack, and is one of layer_keys. Other keys are the model's (unknown
 * ones ignored, as ever). */
typedef struct keys_check {
    size_t n_layers;
    const char *path;
    attn_error *err;
} keys_check;

static int key_check(void *ctx, const char *key, const char *value) {
    const keys_check *c = ctx;
    size_t l = 0, n = c->n_layers;
    const char *rest;
    (void)value;
    int pre = layer_prefix(key, &l, &rest);
    if (pre < 0)
        return store_error_set(c->err, c->path,
                               "metadata '%s': a layer's prefix is 'layers.<l>.', l decimal "
                               "without a leading zero",
                               key);
    if (!pre && n && is_layer_key(key))
        return store_error_set(c->err, c->path,
                               "metadata '%s' without a layer prefix in a stack (metadata "
                               "'n_layers' %zu): each layer's is 'layers.<l>.%s'",
                               key, n, key);
    if (!pre) return 0;
    if (!n)
        return store_error_set(c->err, c->path,
                               "metadata '%s' has a layer prefix and there is no metadata "
                               "'n_layers'",
                               key);
    if (l >= n)
        return store_error_set(c->err, c->path,
                               "metadata '%s' is of layer %zu, and metadata 'n_layers' is %zu "
                               "(layers 0 … %zu)",
                               key, l, n, n - 1);
    if (!is_layer_key(rest))
        return store_error_set(c->err, c->path,
                               "metadata '%s': '%s' is not a layer's own (a layer has rope_*, "
                               "alibi, window, softcap, scale, chunk, the norms' and "
                               "temperature_*; the rest is the whole model's, without a prefix)",
                               key, rest);
    return 0;
}

/* The layer's kind from its tensors: self-attention (w_qkv) or
 * cross-attention (w_q and w_kv), never both. */
static int layer_kind(layer_plan *lp, const char *path, attn_error *err) {
    const store_tensor *const *t = lp->t;
    const char *pre = lp->v.prefix;
    int cross = t[T_W_Q] || t[T_B_Q] || t[T_W_KV] || t[T_B_KV];
    lp->cross = cross;
    if (cross && (t[T_W_QKV] || t[T_B_QKV]))
        return store_error_set(err, path,
                               "holds both '%s%s' and '%s%s': a model is self-attention (w_qkv, "
                               "b_qkv) or cross-attention (w_q, b_q, w_kv, b_kv), not both",
                               pre, t[T_W_QKV] ? "w_qkv" : "b_qkv", pre,
                               t[T_W_Q]    ? "w_q"
                               : t[T_B_Q]  ? "b_q"
                               : t[T_W_KV] ? "w_kv"
                                           : "b_kv");
    if (cross && !t[T_W_Q])
        return store_error_set(err, path, "no tensor '%sw_q' (a cross-attention model needs it)",
                               pre);
    if (cross && !t[T_W_KV])
        return store_error_set(err, path, "no tensor '%sw_kv' (a cross-attention model needs it)",
                               pre);
    if (!cross && !t[T_W_QKV])
        return store_error_set(err, path, "no tensor '%sw_qkv' (it is required)", pre);
    return 0;
}

/* The layer's variants' metadata, then its shapes against h and g, then
 * RoPE (bounded by d_head). */
static int layer_check(layer_plan *lp, size_t n_heads, size_t g, const char *path,
                       attn_error *err) {
    const store_tensor *const *t = lp->t;
    const meta_view *mv = &lp->v;
    const char *pre = mv->prefix;
    char full[KEY_MAX];
    int cross = lp->cross;
    /* positions are < 2^31: a wider window is no window */
    if (meta_count(mv, "window", (size_t)1 << 31, &lp->window, path, err) < 0) return -1;
    if (meta_positive(mv, "softcap", 1, &lp->softcap, path, err) < 0 ||
        meta_positive(mv, "scale", 1, &lp->scale, path, err) < 0)
        return -1;
    const char *alibi = meta_get(mv, "alibi", full);
    if (alibi && strcmp(alibi, "true") == 0)
        lp->alibi_standard = 1;
    else if (alibi && strcmp(alibi, "false") != 0)
        return store_error_set(err, path, "metadata '%s' is '%s', expected 'true' or 'false'", full,
                               alibi);
    if (lp->alibi_standard && t[T_ALIBI])
        return store_error_set(err, path,
                               "metadata '%s' is 'true' and a tensor '%salibi' gives slopes too: "
                               "one or the other",
                               full, pre);

    /* Shapes. */
    char got[160];
    size_t dm, dh, dc = 0;
    if (!cross) {
        const store_tensor *w = t[T_W_QKV];
        size_t blocks = n_heads + 2 * g; /* heads of width d_head in w_qkv's columns */
        if (w->rank != 2 || w->shape[0] == 0 || w->shape[1] == 0)
            return store_error_set(
                err, path, "tensor '%s' has shape %s, expected [d_model, %s] with both positive",
                w->name, store_tensor_shape_text(w, got, sizeof got),
                g == n_heads ? "3·n_heads·d_head" : "(n_heads + 2·n_kv_heads)·d_head");
        dm = w->shape[0];
        if (w->shape[1] % blocks != 0)
            return store_error_set(
                err, path, "tensor '%s' has %zu columns, not a multiple of %s = %zu", w->name,
                w->shape[1], g == n_heads ? "3·n_heads" : "n_heads + 2·n_kv_heads", blocks);
        dh = w->shape[1] / blocks;
        size_t want_qkv[1] = {blocks * dh};
        if (t[T_B_QKV] &&
            shape_check(t[T_B_QKV], 1, want_qkv,
                        g == n_heads ? "[3·n_heads·d_head]" : "[(n_heads + 2·n_kv_heads)·d_head]",
                        path, err) != 0)
            return -1;
    } else {
        const store_tensor *w = t[T_W_Q], *kv = t[T_W_KV];
        if (w->rank != 2 || w->shape[0] == 0 || w->shape[1] == 0 || w->shape[1] % n_heads != 0)
            return store_error_set(err, path,
                                   "tensor '%s' has shape %s, expected [d_model, n_heads·d_head] "
                                   "with both positive (n_heads %zu)",
                                   w->name, store_tensor_shape_text(w, got, sizeof got), n_heads);
        dm = w->shape[0];
        dh = w->shape[1] / n_heads;
        if (kv->rank != 2 || kv->shape[0] == 0 || kv->shape[1] != 2 * g * dh)
            return store_error_set(err, path,
                                   "tensor '%s' has shape %s, expected [d_context, "
                                   "2·n_kv_heads·d_head] = [d_context, %zu] with d_context "
                                   "positive",
                                   kv->name, store_tensor_shape_text(kv, got, sizeof got),
                                   2 * g * dh);
        dc = kv->shape[0];
        size_t want_q[1] = {n_heads * dh}, want_kv[1] = {2 * g * dh};
        if (t[T_B_Q] && shape_check(t[T_B_Q], 1, want_q, "[n_heads·d_head]", path, err) != 0)
            return -1;
        if (t[T_B_KV] &&
            shape_check(t[T_B_KV], 1, want_kv, "[2·n_kv_heads·d_head]", path, err) != 0)
            return -1;
        const char *self_only = meta_get(mv, "rope_theta", full)   ? "rope_theta"
                                : meta_get(mv, "rope_dims", full)  ? "rope_dims"
                                : lp->alibi_standard || t[T_ALIBI] ? "alibi"
                                : lp->window                       ? "window"
                                                                   : NULL;
        if (self_only)
            return store_error_set(err, path,
                                   "'%s%s' in a cross-attention model (w_q, w_kv): RoPE, ALiBi "
                                   "and windows compare positions of one sequence",
                                   pre, self_only);
    }
    size_t hd = n_heads * dh;
    size_t want_o[2] = {hd, dm}, want_bo[1] = {dm}, want_alibi[1] = {n_heads};
    if (t[T_W_O] && shape_check(t[T_W_O], 2, want_o, "[n_heads·d_head, d_model]", path, err) != 0)
        return -1;
    if (t[T_B_O] && shape_check(t[T_B_O], 1, want_bo, "[d_model]", path, err) != 0) return -1;
    if (t[T_ALIBI] && shape_check(t[T_ALIBI], 1, want_alibi, "[n_heads]", path, err) != 0)
        return -1;
    if (!t[T_W_O] && hd != dm)
        return store_error_set(err, path,
                               "no tensor '%sw_o', and the identity in its place needs "
                               "n_heads·d_head (%zu) == d_model (%zu)",
                               pre, hd, dm);
    lp->dm = dm;
    lp->dh = dh;
    lp->dc = dc;
    if (store_layer_sinks_check(mv->f, pre, t[T_SINKS], n_heads, cross, &lp->chunk, path, err) != 0)
        return -1;
    if (rope_parse(mv, dh, &lp->rope, path, err) != 0) return -1;
    if (rope_lists(t, &lp->rope, pre, path, err) != 0) return -1;
    return store_norms_check(&lp->norms, mv->f, pre, t + T_NORM, dm, n_heads, g, dh, lp->rope.dims,
                             path, err);
}

/* Layer l against layer 0: a stack's layers share d_model, n_heads,
 * d_head and n_kv_heads (h and g are the model's metadata, so one value
 * each), their kind, and d_context (a request's context goes to every
 * layer). */
static int layer_same(const layer_plan *lp, const layer_plan *first, size_t l, const char *path,
                      attn_error *err) {
    const store_tensor *w = lp->t[lp->cross ? T_W_Q : T_W_QKV];
    if (lp->cross != first->cross)
        return store_error_set(err, path,
                               "layer %zu is %s and layer 0 %s: a stack's layers are all "
                               "self-attention (w_qkv) or all cross-attention (w_q, w_kv)",
                               l,
                               lp->cross ? "cross-attention (w_q, w_kv)" : "self-attention (w_qkv)",
                               first->cross ? "cross-attention" : "self-attention");
    if (lp->dm != first->dm || lp->dh != first->dh)
        return store_error_set(err, path,
                               "tensor '%s' gives d_model %zu and d_head %zu, and layer 0's "
                               "d_model %zu and d_head %zu: a stack's layers share d_model, "
                               "n_heads, d_head and n_kv_heads",
                               w->name, lp->dm, lp->dh, first->dm, first->dh);
    if (lp->dc != first->dc)
        return store_error_set(err, path,
                               "tensor '%s' gives d_context %zu, and layer 0's %zu: a stack's "
                               "layers read one context",
                               lp->t[T_W_KV]->name, lp->dc, first->dc);
    return 0;
}

/* Checks a tensor's dtype is one a model takes. */
static int dtype_check(const store_tensor *t, const char *path, attn_error *err) {
    if (!t || t->dtype == STORE_DTYPE_F32 || t->dtype == STORE_DTYPE_F16 ||
        t->dtype == STORE_DTYPE_BF16)
        return 0;
    return store_error_set(err, path, "tensor '%s' has dtype %s; a model takes F32, F16 or BF16",
                           t->name, store_dtype_name(t->dtype));
}

/* The layer's values (second pass) into *w. */
static int layer_bind(store_model *m, const layer_plan *lp, size_t n_heads, size_t g,
                      attn_weights *w, int *in_place, const char *path, attn_error *err) {
    const float *p[T_LAYER_COUNT] = {0};
    for (int s = 0; s < T_LAYER_COUNT; s++)
        if (lp->t[s] && tensor_bind(m, lp->t[s], &p[s], in_place, path, err) != 0) return -1;
    if (lp->alibi_standard) {
        float *slopes = malloc(n_heads * sizeof(float));
        if (!slopes) return store_error_set(err, path, "out of memory for the ALiBi slopes");
        owned_keep(m, slopes, n_heads * sizeof(float));
        attn_alibi_slopes(slopes, n_heads);
        p[T_ALIBI] = slopes;
    }
    for (int s = T_ROPE_SHORT; s <= T_ROPE_LONG; s++)
        for (size_t i = 0; p[s] && i < lp->t[s]->count; i++)
            if (!(p[s][i] > 0))
                return store_error_set(err, path,
                                       "tensor '%s' [%zu] is %g: longrope divides f_t by it, it "
                                       "must be > 0",
                                       lp->t[s]->name, i, (double)p[s][i]);
    int cross = lp->cross;
    *w = (attn_weights){.d_model = lp->dm,
                        .n_heads = n_heads,
                        .d_head = lp->dh,
                        .n_kv_heads = g,
                        .w_qkv = cross ? p[T_W_Q] : p[T_W_QKV],
                        .b_qkv = cross ? p[T_B_Q] : p[T_B_QKV],
                        .w_o = p[T_W_O],
                        .b_o = p[T_B_O],
                        .d_context = cross ? lp->dc : lp->dm,
                        .w_kv = p[T_W_KV],
                        .b_kv = p[T_B_KV],
                        .rope = lp->rope,
                        .alibi = p[T_ALIBI],
                        .window = lp->window,
                        .softcap = (float)lp->softcap,
                        .scale = (float)lp->scale,
                        .sinks = p[T_SINKS],
                        .chunk = lp->chunk};
    w->rope.short_factor = p[T_ROPE_SHORT];
    w->rope.long_factor = p[T_ROPE_LONG];
    store_norms_bind(w, &lp->norms, p + T_NORM);
    return 0;
}

/* ---- the whole model ------------------------------------------------------ */

/* The model's own metadata: heads, name, description, default mask. */
static int model_meta(store_model *m, const meta_view *mv, int cross, size_t *n_heads, size_t *g,
                      const char *path, attn_error *err) {
    const store_file *f = mv->f;
    const char *heads_text = store_file_metadata(f, "n_heads");
    if (!heads_text) return store_error_set(err, path, "metadata 'n_heads' is missing");
    if (heads_parse(heads_text, n_heads) != 0)
        return store_error_set(err, path,
                               "metadata 'n_heads' is '%s', not a decimal integer in 1 … %d",
                               heads_text, STORE_HEADS_MAX);
    *g = *n_heads;
    if (meta_count(mv, "n_kv_heads", STORE_HEADS_MAX, g, path, err) < 0) return -1;
    if (*n_heads % *g != 0)
        return store_error_set(err, path,
                               "metadata 'n_kv_heads' is %zu, which does not divide n_heads (%zu)",
                               *g, *n_heads);
    const char *name = store_file_metadata(f, "name");
    size_t default_len;
    const char *default_name = store_model_default_name(path, &default_len);
    m->memory->name = name ? strdup(name) : strndup(default_name, default_len);
    const char *description = store_file_metadata(f, "description");
    /* Shown by every GET /v1/models, which no response limit bounds. */
    if (description && strlen(description) > STORE_DESCRIPTION_MAX)
        return store_error_set(err, path, "metadata 'description' is %zu bytes long, over %d",
                               strlen(description), STORE_DESCRIPTION_MAX);
    m->memory->description = strdup(description ? description : "");
    if (!m->memory->name || !m->memory->description)
        return store_error_set(err, path, "out of memory");
    if (!store_model_name_valid(m->memory->name, strlen(m->memory->name)))
        return store_error_set(err, path, "model name '%s' %s does not match [A-Za-z0-9._-]{1,64}",
                               m->memory->name,
                               name ? "(metadata 'name')" : "(from the file name)");
    const char *mask = store_file_metadata(f, "mask");
    if (!mask)
        m->mask = cross ? ATTN_MASK_NONE : ATTN_MASK_CAUSAL;
    else if (strcmp(mask, "causal") == 0 && !cross)
        m->mask = ATTN_MASK_CAUSAL;
    else if (strcmp(mask, "none") == 0)
        m->mask = ATTN_MASK_NONE;
    else if (strcmp(mask, "causal") == 0)
        return store_error_set(err, path,
                               "metadata 'mask' is 'causal' in a cross-attention model (w_q, "
                               "w_kv): its queries and keys are not one sequence; use 'none'");
    else
        return store_error_set(err, path, "metadata 'mask' is '%s', expected 'causal' or 'none'",
                               mask);
    return 0;
}

/* The memory of L layers: the list of owned buffers (one per tensor and
 * per layer's slopes at most), layers 1 … L−1 and the L pointers. */
static int layers_alloc(store_model *m, size_t n_layers, size_t n_tensors, const char *path,
                        attn_error *err) {
    store_model_memory *mem = m->memory;
    mem->cap_owned = n_tensors + n_layers;
    mem->owned = calloc(mem->cap_owned, sizeof *mem->owned);
    mem->stack = calloc(n_layers, sizeof *mem->stack);
    mem->layers = calloc(n_layers, sizeof *mem->layers);
    if (!mem->owned || !mem->stack || !mem->layers)
        return store_error_set(err, path, "out of memory");
    mem->layers[0] = &m->weights;
    for (size_t l = 1; l < n_layers; l++)
        mem->layers[l] = &mem->stack[l - 1];
    m->n_layers = n_layers;
    m->layers = mem->layers;
    return 0;
}

/* Fills m from f with plan[L] (zeroed): 0 and *in_place (1 when a tensor
 * is used straight from the file's bytes, which must then be kept), or -1
 * with err set. */
static int layers_fill(store_model *m, store_file *f, layer_plan *plan, size_t stacked,
                       const char *path, int *in_place, attn_error *err) {
    size_t n_layers = stacked ? stacked : 1;
    const store_tensor *wide[T_COUNT] = {0};
    meta_view model_view = {.f = f};

    /* Names first: a typo must not read as "w_o absent". */
    if (names_sort(plan, stacked, wide, f, path, err) != 0) return -1;
    keys_check kc = {stacked, path, err};
    if (store_file_metadata_each(f, key_check, &kc) != 0) return -1;
    for (size_t l = 0; l < n_layers; l++) {
        plan[l].v.f = f;
        if (stacked) snprintf(plan[l].v.prefix, sizeof plan[l].v.prefix, "layers.%zu.", l);
        if (layer_kind(&plan[l], path, err) != 0) return -1;
    }

    size_t n_heads = 0, g = 0;
    if (model_meta(m, &model_view, plan[0].cross, &n_heads, &g, path, err) != 0) return -1;
    for (size_t l = 0; l < n_layers; l++)
        if (layer_check(&plan[l], n_heads, g, path, err) != 0 ||
            (l && layer_same(&plan[l], &plan[0], l, path, err) != 0))
            return -1;
    if (vocab_parse(m, f, wide[T_TOK], wide[T_POS], plan[0].dm, path, err) != 0) return -1;

    /* Dtypes, then values. */
    for (size_t l = 0; l < n_layers; l++)
        for (int s = 0; s < T_LAYER_COUNT; s++)
            if (dtype_check(plan[l].t[s], path, err) != 0) return -1;
    if (dtype_check(wide[T_TOK], path, err) != 0 || dtype_check(wide[T_POS], path, err) != 0)
        return -1;
    if (layers_alloc(m, n_layers, store_file_count(f), path, err) != 0) return -1;
    *in_place = 0;
    for (size_t l = 0; l < n_layers; l++)
        if (layer_bind(m, &plan[l], n_heads, g, (attn_weights *)m->layers[l], in_place, path,
                       err) != 0)
            return -1;
    const float *p[T_COUNT] = {0};
    for (int s = T_LAYER_COUNT; s < T_COUNT; s++)
        if (wide[s] && tensor_bind(m, wide[s], &p[s], in_place, path, err) != 0) return -1;
    m->token_embeddings = p[T_TOK];
    m->position_embeddings = p[T_POS];
    return 0;
}

/* Reads metadata n_layers (absent: a one-layer file, 0 in *stacked), then
 * fills m. */
static int model_fill(store_model *m, store_file *f, const char *path, int *in_place,
                      attn_error *err) {
    meta_view mv = {.f = f};
    size_t stacked = 0;
    if (meta_count(&mv, "n_layers", STORE_LAYERS_MAX, &stacked, path, err) < 0) return -1;
    layer_plan *plan = calloc(stacked ? stacked : 1, sizeof *plan);
    if (!plan) return store_error_set(err, path, "out of memory");
    int rc = layers_fill(m, f, plan, stacked, path, in_place, err);
    free(plan);
    return rc;
}

int store_model_load(store_model **out, const char *path, attn_error *err) {
    return store_model_load_mode(out, path, STORE_READ_COPY, err);
}

int store_model_load_mode(store_model **out, const char *path, store_read_mode mode,
                          attn_error *err) {
    *out = NULL;
    store_model *m = calloc(1, sizeof *m);
    if (!m || !(m->memory = calloc(1, sizeof *m->memory)) || !(m->memory->path = strdup(path))) {
        store_model_destroy(m);
        return store_error_set(err, path, "out of memory");
    }
    if (store_file_open_mode(&m->memory->file, path, mode, err) != 0) {
        store_model_destroy(m);
        return -1;
    }
    int in_place;
    if (model_fill(m, m->memory->file, path, &in_place, err) != 0) {
        store_model_destroy(m);
        return -1;
    }
    if (in_place && mode == STORE_READ_MAP) {
        m->bytes_mapped = store_file_bytes(m->memory->file);
    } else if (in_place) {
        m->bytes_owned += store_file_memory(m->memory->file);
    } else {
        store_file_close(m->memory->file); /* nothing points into it */
        m->memory->file = NULL;
    }
    m->name = m->memory->name;
    m->description = m->memory->description;
    m->path = m->memory->path;
    *out = m;
    return 0;
}

void store_model_destroy(store_model *m) {
    if (!m) return;
    if (m->memory) {
        store_file_close(m->memory->file);
        for (size_t i = 0; i < m->memory->n_owned; i++)
            free(m->memory->owned[i]);
        free(m->memory->owned);
        free(m->memory->stack);
        free(m->memory->layers);
        store_strings_free(&m->memory->vocabulary);
        store_strings_free(&m->memory->dimensions);
        free(m->memory->name);
        free(m->memory->description);
        free(m->memory->path);
        free(m->memory);
    }
    free(m);
}
