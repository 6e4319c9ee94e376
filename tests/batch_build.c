/* batch_build.c — see batch_build.h. */
#include "tests/batch_build.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/base64.h"

static unsigned next(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return (*s >> 8) & 0xffffff;
}

static size_t pick(unsigned *s, size_t lo, size_t hi) {
    return lo + next(s) % (hi - lo + 1);
}

/* A multiple of 1/16 in [-1, 1): exact in float32. */
static double value(unsigned *s) {
    return ((double)(next(s) % 32) - 16.0) / 16.0;
}

static json_t *matrix(unsigned *s, size_t rows, size_t cols) {
    json_t *m = json_array();
    for (size_t r = 0; r < rows; r++) {
        json_t *row = json_array();
        for (size_t c = 0; c < cols; c++)
            json_array_append_new(row, json_real(value(s)));
        json_array_append_new(m, row);
    }
    return m;
}

/* The same values as a tensor object. */
static json_t *tensor(unsigned *s, size_t rows, size_t cols) {
    size_t n = rows * cols, len;
    float *f = malloc(n * sizeof *f);
    for (size_t i = 0; i < n; i++)
        f[i] = (float)value(s);
    ck_assert_int_eq(api_base64_encoded_length(n * sizeof *f, &len), 0);
    char *text = malloc(len + 1);
    text[api_base64_encode(text, f, n * sizeof *f)] = '\0';
    json_t *t = json_pack("{s:s, s:[I,I], s:s}", "dtype", "float32", "shape", (json_int_t)rows,
                          (json_int_t)cols, "data", text);
    free(text);
    free(f);
    return t;
}

static json_t *vector(unsigned *s, size_t n) {
    json_t *v = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(v, json_real(value(s)));
    return v;
}

static json_t *labels(unsigned *s, size_t n, const char *stem) {
    static const char *const odd[] = {"{", "}\"", "[x]", "我", "\\n", ","};
    json_t *l = json_array();
    for (size_t i = 0; i < n; i++) {
        char text[32];
        snprintf(text, sizeof text, "%s%zu%s", stem, i, odd[next(s) % 6]);
        json_array_append_new(l, json_string(text));
    }
    return l;
}

static json_t *random_mask(unsigned *s, size_t n, size_t m) {
    json_t *mask = json_array();
    for (size_t q = 0; q < n; q++) {
        json_t *row = json_array();
        for (size_t k = 0; k < m; k++)
            json_array_append_new(row, next(s) % 4 ? json_true() : json_false());
        json_array_append_new(mask, row);
    }
    return mask;
}

static json_t *random_weights(unsigned *s, tb_kind kind, size_t dm, size_t dc, size_t *h_out) {
    size_t h = pick(s, 1, 4), dh = pick(s, 1, 4);
    int grouped = kind == TB_INLINE && h % 2 == 0 && next(s) % 2;
    size_t g = grouped ? h / 2 : h;
    json_t *heads = json_array(), *w = json_object();
    for (size_t i = 0; i < h; i++) {
        json_t *head = json_pack("{s:o}", "w_q", matrix(s, dm, dh));
        if (!grouped) {
            json_object_set_new(head, "w_k", matrix(s, dc, dh));
            json_object_set_new(head, "w_v", matrix(s, dc, dh));
        }
        if (next(s) % 2) json_object_set_new(head, "b_q", vector(s, dh));
        json_array_append_new(heads, head);
    }
    json_object_set_new(w, "heads", heads);
    if (grouped) {
        json_t *kv = json_array();
        for (size_t u = 0; u < g; u++)
            json_array_append_new(kv, json_pack("{s:o, s:o, s:o}", "w_k", matrix(s, dc, dh), "w_v",
                                                matrix(s, dc, dh), "b_v", vector(s, dh)));
        json_object_set_new(w, "kv_heads", kv);
    }
    json_object_set_new(w, "w_o", next(s) % 2 ? tensor(s, h * dh, dm) : matrix(s, h * dh, dm));
    if (next(s) % 2) json_object_set_new(w, "b_o", vector(s, dm));
    if (kind == TB_INLINE) {
        if (dh % 2 == 0 && next(s) % 2)
            json_object_set_new(w, "rope", json_pack("{s:f}", "theta", 100.0));
        if (next(s) % 3 == 0) json_object_set_new(w, "alibi", json_true());
        if (next(s) % 3 == 0)
            json_object_set_new(w, "window", json_integer((json_int_t)pick(s, 1, 4)));
        if (next(s) % 4 == 0) json_object_set_new(w, "softcap", json_real(2.0));
    }
    *h_out = h;
    return w;
}

json_t *tb_random_batch(unsigned *s, tb_kind kind, const char *model, size_t dm, size_t max_seqs,
                        size_t max_n) {
    static const char *const outputs[] = {
        "q",     "k",          "v",     "scores", "patterns", "head_outputs",
        "delta", "embeddings", "q_raw", "k_raw"};
    json_t *b = json_object();
    size_t dc = 0, h = 1;
    int cross = kind == TB_CROSS;
    if (kind == TB_MODEL) {
        json_object_set_new(b, "model", json_string(model));
    } else {
        dm = pick(s, 1, 6);
        dc = cross ? pick(s, 1, 5) : dm;
        json_object_set_new(b, "weights", random_weights(s, kind, dm, dc, &h));
    }
    if (next(s) % 2) {
        json_t *ret = json_array();
        for (size_t i = 0; i < 10; i++)
            if (next(s) % 2) json_array_append_new(ret, json_string(outputs[i]));
        json_object_set_new(b, "return", ret);
    }
    if (kind != TB_MODEL && next(s) % 3 == 0) {
        json_t *sel = json_array();
        for (size_t i = h; i-- > 0;)
            if (next(s) % 2) json_array_append_new(sel, json_integer((json_int_t)i));
        json_object_set_new(b, "select_heads", sel);
    }
    if (next(s) % 3 == 0) json_object_set_new(b, "scale", json_real(0.25 * (double)pick(s, 1, 8)));
    if (next(s) % 2) json_object_set_new(b, "encoding", json_string("base64"));
    if (next(s) % 3 == 0)
        json_object_set_new(b, "mask", json_string(cross || next(s) % 2 ? "none" : "causal"));

    json_t *seqs = json_array();
    size_t count = pick(s, 1, max_seqs);
    for (size_t i = 0; i < count; i++) {
        size_t n = pick(s, 1, max_n), m = cross ? pick(s, 1, max_n) : n;
        json_t *q = json_object();
        json_object_set_new(q, "embeddings", next(s) % 3 ? matrix(s, n, dm) : tensor(s, n, dm));
        if (next(s) % 2) json_object_set_new(q, "tokens", labels(s, n, "t"));
        if (!cross && next(s) % 2) {
            json_t *pos = json_array();
            size_t p = pick(s, 0, 1000);
            for (size_t t = 0; t < n; t++)
                json_array_append_new(pos, json_integer((json_int_t)(p + pick(s, 0, 3) * t)));
            json_object_set_new(q, "positions", pos);
        }
        if (cross) {
            json_object_set_new(q, "context", matrix(s, m, dc));
            if (next(s) % 2) json_object_set_new(q, "context_tokens", labels(s, m, "c"));
        }
        switch (next(s) % 4) {
        case 0: json_object_set_new(q, "mask", random_mask(s, n, m)); break;
        case 1: json_object_set_new(q, "mask", json_string(cross ? "none" : "causal")); break;
        default: break;
        }
        json_array_append_new(seqs, q);
    }
    json_object_set_new(b, "sequences", seqs);
    return b;
}

json_t *tb_single(const json_t *batch, size_t i) {
    json_t *single = json_deep_copy(batch);
    json_t *seq = json_array_get(json_object_get(batch, "sequences"), i);
    const char *key;
    json_t *v;
    json_object_del(single, "sequences");
    json_object_foreach(seq, key, v)
        json_object_set_new(single, key, json_deep_copy(v));
    return single;
}

/* The end of the JSON value starting at p (a string, container or scalar). */
static const char *value_end(const char *p, const char *end) {
    int depth = 0;
    if (*p != '{' && *p != '[' && *p != '"') {
        while (p < end && *p != ',' && *p != '}' && *p != ']')
            p++;
        return p;
    }
    do {
        if (*p == '"') {
            for (p++; p < end && *p != '"'; p++)
                if (*p == '\\') p++;
        } else if (*p == '{' || *p == '[') {
            depth++;
        } else if (*p == '}' || *p == ']') {
            depth--;
        }
        p++;
    } while (p < end && depth > 0);
    return p;
}

long tb_parts(const char *text, size_t len, tb_part *parts, size_t max) {
    const char *p = text, *end = text + len;
    long n = 0;
    if (len < 2 || (*p != '{' && *p != '[')) return -1;
    int object = *p == '{';
    p++;
    if (*p == '}' || *p == ']') return 0;
    while (p < end && (size_t)n < max) {
        tb_part part = {0};
        if (object) {
            part.key = p;
            p = value_end(p, end);
            part.key_len = (size_t)(p - part.key);
            if (*p++ != ':') return -1;
        }
        part.value = p;
        p = value_end(p, end);
        part.value_len = (size_t)(p - part.value);
        parts[n++] = part;
        if (*p == ',') {
            p++;
            continue;
        }
        return (*p == '}' || *p == ']') ? n : -1;
    }
    return -1;
}

const tb_part *tb_find(const tb_part *parts, long n, const char *key) {
    size_t k = strlen(key);
    for (long i = 0; i < n; i++)
        if (parts[i].key && parts[i].key_len == k + 2 && !memcmp(parts[i].key + 1, key, k))
            return &parts[i];
    return NULL;
}

char *tb_strip_shared(const char *single, size_t len) {
    static const char *const shared[] = {"model",  "d_model",  "n_heads", "n_kv_heads",
                                         "d_head", "n_layers", "scale",   "heads"};
    tb_part parts[64];
    long n = tb_parts(single, len, parts, 64);
    ck_assert_int_gt(n, 0);
    char *out = malloc(len + 1), *w = out;
    *w++ = '{';
    for (long i = 0; i < n; i++) {
        int skip = 0;
        for (size_t k = 0; k < 8; k++)
            skip |= tb_find(&parts[i], 1, shared[k]) != NULL;
        if (skip) continue;
        if (w > out + 1) *w++ = ',';
        memcpy(w, parts[i].key, parts[i].key_len + 1 + parts[i].value_len);
        w += parts[i].key_len + 1 + parts[i].value_len;
    }
    *w++ = '}';
    *w = '\0';
    return out;
}
