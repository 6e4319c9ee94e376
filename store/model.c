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
 * Shapes, with hd = n_heads · d_head:
 *   w_qkv [dm, 3hd]: dm ≥ 1 and 3hd a positive multiple of 3·n_heads,
 *                    which gives d_head
 *   b_qkv [3hd]    w_o [hd, dm]    b_o [dm]
 *   no w_o: hd == dm
 *
 * Memory (see model.h): the store_model_memory owns the open file (its
 * buffer or mapping) when a tensor is used in place, and a heap buffer per
 * tensor converted or copied.
 */
#include "store/model.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/safetensors.h"
#include "store/tensor.h"

/* The tensor names a model may hold, in the order of the slots below. */
enum { T_W_QKV, T_B_QKV, T_W_O, T_B_O, T_COUNT };
static const char *const tensor_names[T_COUNT] = {"w_qkv", "b_qkv", "w_o", "b_o"};

struct store_model_memory {
    store_file *file;      /* NULL once let go (no tensor in place) */
    float *owned[T_COUNT]; /* converted or copied tensors, or NULL */
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
static int tensor_bind(store_model *m, int slot, const store_tensor *t, const float **out,
                       int *in_place, const char *path, attn_error *err) {
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
        m->memory->owned[slot] = buf;
        m->bytes_owned += bytes;
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

/* Fills m from f: 0 and *in_place (1 when a tensor is used straight from
 * the file's bytes, which must then be kept), or -1 with err set. */
static int model_fill(store_model *m, store_file *f, const char *path, int *in_place,
                      attn_error *err) {
    const store_tensor *t[T_COUNT] = {0};

    /* Names first: a typo must not read as "w_o absent". */
    for (size_t i = 0; i < store_file_count(f); i++) {
        const store_tensor *x = store_file_tensor(f, i);
        int slot = -1;
        for (int s = 0; s < T_COUNT; s++)
            if (strcmp(x->name, tensor_names[s]) == 0) slot = s;
        if (slot < 0)
            return store_error_set(
                err, path, "unknown tensor '%s' (a model holds w_qkv, b_qkv, w_o, b_o)", x->name);
        t[slot] = x;
    }
    if (!t[T_W_QKV]) return store_error_set(err, path, "no tensor 'w_qkv' (it is required)");

    /* Metadata. */
    const char *heads_text = store_file_metadata(f, "n_heads");
    size_t n_heads;
    if (!heads_text) return store_error_set(err, path, "metadata 'n_heads' is missing");
    if (heads_parse(heads_text, &n_heads) != 0)
        return store_error_set(err, path,
                               "metadata 'n_heads' is '%s', not a decimal integer in 1 … %d",
                               heads_text, STORE_HEADS_MAX);
    const char *name = store_file_metadata(f, "name");
    size_t default_len;
    const char *default_name = store_model_default_name(path, &default_len);
    m->memory->name = name ? strdup(name) : strndup(default_name, default_len);
    const char *description = store_file_metadata(f, "description");
    m->memory->description = strdup(description ? description : "");
    if (!m->memory->name || !m->memory->description)
        return store_error_set(err, path, "out of memory");
    if (!store_model_name_valid(m->memory->name, strlen(m->memory->name)))
        return store_error_set(err, path, "model name '%s' %s does not match [A-Za-z0-9._-]{1,64}",
                               m->memory->name,
                               name ? "(metadata 'name')" : "(from the file name)");
    const char *mask = store_file_metadata(f, "mask");
    if (!mask || strcmp(mask, "causal") == 0)
        m->mask = ATTN_MASK_CAUSAL;
    else if (strcmp(mask, "none") == 0)
        m->mask = ATTN_MASK_NONE;
    else
        return store_error_set(err, path, "metadata 'mask' is '%s', expected 'causal' or 'none'",
                               mask);

    /* Shapes. */
    const store_tensor *w = t[T_W_QKV];
    char got[160];
    if (w->rank != 2 || w->shape[0] == 0 || w->shape[1] == 0)
        return store_error_set(err, path,
                               "tensor 'w_qkv' has shape %s, expected [d_model, 3·n_heads·d_head] "
                               "with both positive",
                               store_tensor_shape_text(w, got, sizeof got));
    size_t dm = w->shape[0];
    if (w->shape[1] % (3 * n_heads) != 0)
        return store_error_set(err, path,
                               "tensor 'w_qkv' has %zu columns, not a multiple of 3·n_heads = %zu",
                               w->shape[1], 3 * n_heads);
    size_t dh = w->shape[1] / (3 * n_heads), hd = n_heads * dh;
    size_t want_qkv[1] = {3 * hd}, want_o[2] = {hd, dm}, want_bo[1] = {dm};
    if (t[T_B_QKV] && shape_check(t[T_B_QKV], 1, want_qkv, "[3·n_heads·d_head]", path, err) != 0)
        return -1;
    if (t[T_W_O] && shape_check(t[T_W_O], 2, want_o, "[n_heads·d_head, d_model]", path, err) != 0)
        return -1;
    if (t[T_B_O] && shape_check(t[T_B_O], 1, want_bo, "[d_model]", path, err) != 0) return -1;
    if (!t[T_W_O] && hd != dm)
        return store_error_set(err, path,
                               "no tensor 'w_o', and the identity in its place needs "
                               "n_heads·d_head (%zu) == d_model (%zu)",
                               hd, dm);

    /* Dtypes. */
    for (int s = 0; s < T_COUNT; s++)
        if (t[s] && t[s]->dtype != STORE_DTYPE_F32 && t[s]->dtype != STORE_DTYPE_F16 &&
            t[s]->dtype != STORE_DTYPE_BF16)
            return store_error_set(err, path,
                                   "tensor '%s' has dtype %s; a model takes F32, F16 or BF16",
                                   t[s]->name, store_dtype_name(t[s]->dtype));

    /* Values. */
    const float *p[T_COUNT] = {0};
    *in_place = 0;
    for (int s = 0; s < T_COUNT; s++)
        if (t[s] && tensor_bind(m, s, t[s], &p[s], in_place, path, err) != 0) return -1;

    m->weights = (attn_weights){.d_model = dm,
                                .n_heads = n_heads,
                                .d_head = dh,
                                .w_qkv = p[T_W_QKV],
                                .b_qkv = p[T_B_QKV],
                                .w_o = p[T_W_O],
                                .b_o = p[T_B_O]};
    return 0;
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
        for (int s = 0; s < T_COUNT; s++)
            free(m->memory->owned[s]);
        free(m->memory->name);
        free(m->memory->description);
        free(m->memory->path);
        free(m->memory);
    }
    free(m);
}
