/*
 * codec_oip_encode.c — what the Open Inference Protocol endpoints answer:
 * the error body, server and model metadata, and an infer call's outputs
 * (oip.h says what the wire format follows).
 *
 * An output is its sequences' compact results laid out as the padded
 * tensor: each real token's rows at its place, a padded token's 0; in
 * scores, a real query's entries for padded keys are −∞ (masked), which
 * JSON writes as −3.4028235e38 (−FLT_MAX) since it has no infinity.
 * run_at walks the padded tensor as runs, each a stretch of a compact
 * result or a repeated 0 or −∞; nothing is scattered into a tensor of its
 * own but for JSON numbers, whose output is laid out in a scratch tensor
 * and written as text.
 *
 * The answer is the JSON header, then the binary outputs' bytes in the
 * order of the outputs. As a body (api_oip_encode) they are read into it
 * behind the header; as an api_answer (call.h) they are read from the
 * outputs' block as libmicrohttpd asks for them, a few hundred KiB at a
 * time, so a binary answer takes no memory but its header besides the
 * outputs. The same header writer counts the answer's bytes for the limit
 * (api_oip_answer_bytes_max): to the byte, but for JSON numbers, counted
 * at their widest.
 *
 * Ownership of an api_answer: its header and its copy of the sequences'
 * output pointers; the call's protocol state (the padding's arrays) and
 * the outputs' block, both taken from the call, which can then be freed.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/buffer.h"
#include "api/float_format.h"
#include "api/json_write.h"
#include "api/oip_internal.h"

/* Binary tensors are little-endian on the wire and copied as they are. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the Open Inference Protocol's binary tensors are copied as little-endian floats"
#endif

char *api_oip_error_json(const attn_error *err, size_t *len) {
    /* A message cut at its buffer's end may end inside a UTF-8 sequence,
     * which jansson would refuse. */
    attn_error clean = *err;
    attn_error_sanitize(&clean);
    json_t *o = json_pack("{s:s}", "error", clean.message);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (text) *len = strlen(text);
    return text;
}

char *api_oip_server_metadata(size_t *len) {
    static const char text[] =
        "{\"name\":\"attention-server\",\"version\":\"1\",\"extensions\":[\"binary_tensor_data\"]}";
    char *s = malloc(sizeof text);
    if (s) {
        memcpy(s, text, sizeof text);
        *len = sizeof text - 1;
    }
    return s;
}

char *api_oip_model_ready(const char *name, size_t *len) {
    json_t *o = json_pack("{s:s,s:b}", "name", name, "ready", 1);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (text) *len = strlen(text);
    return text;
}

/* {"name", "datatype", "shape": [...]}; -1 for a size that varies. */
static json_t *tensor_meta(const char *name, const char *dt, const long long *shape, size_t rank) {
    json_t *s = json_array();
    for (size_t i = 0; i < rank; i++)
        json_array_append_new(s, json_integer(shape[i]));
    return json_pack("{s:s,s:s,s:o}", "name", name, "datatype", dt, "shape", s);
}

char *api_oip_model_metadata(const api_oip_model *m, size_t *len) {
    const attn_weights *w = m->weights;
    long long dm = (long long)w->d_model, dh = (long long)w->d_head;
    json_t *in = json_array(), *out = json_array();
    json_array_append_new(in, tensor_meta("embeddings", "FP32", (long long[]){-1, -1, dm}, 3));
    json_array_append_new(in, tensor_meta("attention_mask", "INT32", (long long[]){-1, -1}, 2));
    json_array_append_new(in, tensor_meta("positions", "INT64", (long long[]){-1, -1}, 2));
    if (w->w_kv) {
        long long dc = (long long)w->d_context;
        json_array_append_new(in, tensor_meta("context", "FP32", (long long[]){-1, -1, dc}, 3));
        json_array_append_new(in, tensor_meta("context_mask", "INT32", (long long[]){-1, -1}, 2));
    }
    /* The head axis varies with select_heads; a stack's per-head outputs
     * have a layer axis before it, which varies with layers. */
    const int stack = m->n_layers > 1;
    const long long per_head_dh[] = {-1, -1, -1, -1, dh}, square[] = {-1, -1, -1, -1, -1},
                    rows[] = {-1, -1, dm};
    for (int k = 0; k < OIP_OUTPUTS; k++) {
        if (k == OIP_ROLLOUT && w->w_kv) continue; /* cross-attention has none */
        const long long *shape = k == OIP_PATTERNS || k == OIP_SCORES    ? square
                                 : k == OIP_EMBEDDINGS || k == OIP_DELTA ? rows
                                 : k == OIP_ROLLOUT                      ? square
                                                                         : per_head_dh;
        size_t rank = shape == rows || k == OIP_ROLLOUT ? 3 : stack ? 5 : 4;
        /* a shape's last `rank` sizes */
        json_array_append_new(out, tensor_meta(api_oip_output_names[k], "FP32",
                                               shape + (shape == rows ? 0 : 5 - rank), rank));
    }
    json_t *o = json_pack("{s:s,s:[s],s:s,s:o,s:o}", "name", m->name, "versions", "1", "platform",
                          "attention", "inputs", in, "outputs", out);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (text) *len = strlen(text);
    return text;
}

/* The compact result of sequence s for output kind (of listed layer j). */
static const float *result_of(const api_oip_request *r, size_t s, int kind, size_t j) {
    if (kind == OIP_ROLLOUT) return r->finals[s].rollout;
    const attn_output *o = r->n_listed && api_oip_per_head(kind)
                               ? &r->layer_outs[r->listed[j] * r->count + s]
                               : &r->outs[s];
    switch (kind) {
    case OIP_PATTERNS: return o->patterns;
    case OIP_EMBEDDINGS: return o->embeddings;
    case OIP_DELTA: return o->delta;
    case OIP_Q: return o->q;
    case OIP_K: return o->k;
    case OIP_V: return o->v;
    case OIP_SCORES: return o->scores;
    default: return o->head_outputs;
    }
}

/* Whether v is in the sorted list[0 … count); *at is its index, or where
 * it would go (the first entry past it). */
static int find(const size_t *list, size_t count, size_t v, size_t *at) {
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (list[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    *at = lo;
    return lo < count && list[lo] == v;
}

/* How many entries from list[at] on count up by one (list[at + k] =
 * list[at] + k), at most `most` (≥ 1). */
static size_t consecutive(const size_t *list, size_t count, size_t at, size_t most) {
    size_t k = 1;
    while (k < most && at + k < count && list[at + k] == list[at] + k)
        k++;
    return k;
}

/*
 * The padded tensor of output `kind` as runs: from its float f on, the next
 * run (returned, ≥ 1 floats) is either the compact result's floats at *src
 * or, with *src NULL, *fill repeated (0, or −∞ for a padded key's score).
 * `want` (≥ 1) is how many floats the caller can take: runs are cut near it.
 *
 * The tensor is B rows of lines of L floats, a line per head and token (a
 * key's, for k and v), a token's line the compact row of its place among
 * the row's real tokens. A row without padding is its sequence's result
 * as it is; a padded token's lines are 0; a real query's line of scores or
 * patterns holds its real keys' values at their places, −∞ (scores) or 0
 * (patterns) at the padded keys'.
 */
static size_t run_at(const api_oip_request *r, int kind, size_t f, size_t want, const float **src,
                     float *fill) {
    size_t per_row = api_oip_compact_count(r, kind, r->n, r->m);
    size_t b = f / per_row, g = f % per_row, s, layer = 0;
    if (r->n_listed && api_oip_per_head(kind)) { /* a row is L' layers' blocks */
        per_row = api_oip_layer_count(r, kind, r->n, r->m);
        layer = g / per_row;
        g %= per_row;
    }
    *src = NULL;
    *fill = 0;
    const float *out = find(r->seq, r->count, b, &s) ? result_of(r, s, kind, layer) : NULL;
    if (!out) return per_row - g; /* a row of padding only */
    size_t rt = r->ntok[b], mr = r->nctx[b];
    if (rt == r->n && mr == r->m) {
        *src = out + g;
        return per_row - g;
    }
    int square = kind == OIP_SCORES || kind == OIP_PATTERNS || kind == OIP_ROLLOUT;
    int keys = kind == OIP_K || kind == OIP_V;
    size_t L = square ? r->m : kind == OIP_EMBEDDINGS || kind == OIP_DELTA ? r->dm : r->dh;
    size_t lines = keys ? r->m : r->n; /* a head's */
    const size_t *idx = keys ? r->ctok + b * r->m : r->tok + b * r->n;
    size_t cnt = keys ? mr : rt;
    size_t line = g / L, off = g % L, hh = line / lines, t = line % lines, i;
    if (!find(idx, cnt, t, &i)) /* a padded token: 0 up to the next real one */
        return ((i < cnt ? idx[i] : lines) - t) * L - off;
    if (!square || mr == r->m) { /* rows of real tokens, as long as they follow each other */
        size_t k = consecutive(idx, cnt, i, (off + want + L - 1) / L);
        *src = out + (hh * cnt + i) * L + off;
        return k * L - off;
    }
    /* a real query's line among padded keys: its real keys' run, or the
     * padded ones' up to the next real key */
    const size_t *key = r->ctok + b * r->m;
    size_t j;
    if (!find(key, mr, off, &j)) {
        *fill = kind == OIP_SCORES ? -INFINITY : 0;
        return (j < mr ? key[j] : r->m) - off;
    }
    *src = out + (hh * rt + i) * mr + j;
    return consecutive(key, mr, j, want);
}

/* The bytes [off, off + max) of the padded tensor of output `kind` (as
 * far as it goes) into dst; returns how many were written. */
static size_t tensor_read(const api_oip_request *r, int kind, size_t off, unsigned char *dst,
                          size_t max) {
    size_t total = api_oip_padded_count(r, kind) * sizeof(float), done = 0;
    while (done < max && off < total) {
        size_t skip = off % sizeof(float), bytes;
        const float *src;
        float fill;
        size_t run = run_at(r, kind, off / sizeof(float),
                            (skip + max - done + sizeof(float) - 1) / sizeof(float), &src, &fill);
        bytes = run * sizeof(float) - skip;
        if (bytes > max - done) bytes = max - done;
        if (src) {
            memcpy(dst + done, (const unsigned char *)src + skip, bytes);
        } else if (fill == 0) {
            memset(dst + done, 0, bytes);
        } else {
            unsigned char f[sizeof fill];
            memcpy(f, &fill, sizeof fill);
            for (size_t k = 0; k < bytes; k++)
                dst[done + k] = f[(skip + k) % sizeof fill];
        }
        done += bytes;
        off += bytes;
    }
    return done;
}

/* The header's text, written into a buffer or only counted. */
typedef struct header_out {
    api_buffer *b; /* NULL: counting */
    size_t len;    /* counted so far */
} header_out;

/* Counts n more bytes, saturating (SIZE_MAX: too many for any limit). */
static void count(header_out *h, size_t n) {
    if (__builtin_add_overflow(h->len, n, &h->len)) h->len = SIZE_MAX;
}

static void put(header_out *h, const char *s) {
    if (h->b)
        api_buffer_append_str(h->b, s);
    else
        count(h, strlen(s));
}

static void put_size(header_out *h, size_t v) {
    char t[32];
    snprintf(t, sizeof t, "%zu", v);
    put(h, t);
}

/* A JSON string value, as jansson writes it; `bytes` its length
 * (api_json_bytes). */
static void put_json(header_out *h, const json_t *v, size_t bytes) {
    if (h->b)
        api_write_json(h->b, v);
    else
        count(h, bytes);
}

/* The shape of output kind. */
static void put_shape(header_out *h, const api_oip_request *r, int kind) {
    size_t dims[5], k = 0;
    if (r->batch_axis) dims[k++] = r->B;
    if (r->n_listed && api_oip_per_head(kind)) dims[k++] = r->n_listed;
    switch (kind) {
    case OIP_ROLLOUT: dims[k++] = r->n, dims[k++] = r->n; break;
    case OIP_Q:
    case OIP_HEAD_OUTPUTS: dims[k++] = r->hs, dims[k++] = r->n, dims[k++] = r->dh; break;
    case OIP_K:
    case OIP_V: dims[k++] = r->hs, dims[k++] = r->m, dims[k++] = r->dh; break;
    case OIP_SCORES:
    case OIP_PATTERNS: dims[k++] = r->hs, dims[k++] = r->n, dims[k++] = r->m; break;
    default: dims[k++] = r->n, dims[k++] = r->dm;
    }
    put(h, "[");
    for (size_t i = 0; i < k; i++) {
        if (i) put(h, ",");
        put_size(h, dims[i]);
    }
    put(h, "]");
}

/* count floats as a JSON array; −∞ (a masked score) as −FLT_MAX. */
static void append_floats(api_buffer *b, const float *v, size_t count) {
    char t[API_FLOAT_TEXT_MAX + 1];
    if (api_buffer_reserve(b, count * (API_FLOAT_TEXT_WIDEST + 1) + 2) < 0) return;
    api_buffer_append_str(b, "[");
    for (size_t i = 0; i < count; i++) {
        float f = v[i] == -INFINITY ? -FLT_MAX : v[i];
        size_t k = api_float_format(t + 1, f);
        t[0] = ',';
        api_buffer_append(b, i ? t : t + 1, i ? k + 1 : k);
    }
    api_buffer_append_str(b, "]");
}

/*
 * The JSON header: the model, the id, and each output's name, datatype and
 * shape, then its binary_data_size (its bytes follow the header) or its
 * data. Written, a JSON output's padded tensor is made in `scratch` (room
 * for the largest) and its numbers written; counted, they count at their
 * widest (API_FLOAT_TEXT_WIDEST), the rest to the byte.
 */
static void put_header(header_out *h, const api_oip_request *r, float *scratch) {
    put(h, "{\"model_name\":");
    put_json(h, r->model, r->model_json_bytes);
    put(h, ",\"model_version\":\"1\"");
    if (r->id) {
        put(h, ",\"id\":");
        put_json(h, r->id, r->id_json_bytes);
    }
    put(h, ",\"outputs\":[");
    for (size_t k = 0; k < r->n_out; k++) {
        int kind = r->out_kind[k];
        size_t c = api_oip_padded_count(r, kind);
        put(h, k ? ",{\"name\":\"" : "{\"name\":\"");
        put(h, api_oip_output_names[kind]);
        put(h, "\",\"datatype\":\"FP32\",\"shape\":");
        put_shape(h, r, kind);
        if (r->out_binary[k]) {
            put(h, ",\"parameters\":{\"binary_data_size\":");
            put_size(h, c * sizeof(float));
            put(h, "}}");
            continue;
        }
        put(h, ",\"data\":");
        size_t widest; /* [, the numbers and a comma after each, ] */
        if (h->b) {
            tensor_read(r, kind, 0, (unsigned char *)scratch, c * sizeof(float));
            append_floats(h->b, scratch, c);
        } else if (__builtin_mul_overflow(c, (size_t)API_FLOAT_TEXT_WIDEST + 1, &widest)) {
            count(h, SIZE_MAX);
        } else {
            count(h, c ? widest + 1 : 2);
        }
        put(h, "}");
    }
    put(h, "]}");
}

/* The floats of the largest output sent as JSON numbers (0: none), and
 * the bytes of the binary ones. */
static void output_sizes(const api_oip_request *r, size_t *json_most, size_t *bin_bytes) {
    *json_most = *bin_bytes = 0;
    for (size_t k = 0; k < r->n_out; k++) {
        size_t c = api_oip_padded_count(r, r->out_kind[k]);
        size_t bytes;
        if (!r->out_binary[k]) {
            if (c > *json_most) *json_most = c;
        } else if (__builtin_mul_overflow(c, sizeof(float), &bytes) ||
                   __builtin_add_overflow(*bin_bytes, bytes, bin_bytes)) {
            *bin_bytes = SIZE_MAX; /* past any limit: only a bound sees it */
        }
    }
}

size_t api_oip_answer_bytes_max(const api_oip_request *r) {
    header_out h = {NULL, 0};
    size_t most, bin;
    put_header(&h, r, NULL);
    output_sizes(r, &most, &bin);
    count(&h, bin);
    return h.len;
}

/* The header, malloc'd (*len its length): NULL when out of memory. */
static char *header_text(const api_oip_request *r, size_t *len) {
    size_t most, bin;
    output_sizes(r, &most, &bin);
    float *scratch = most ? malloc(most * sizeof *scratch) : NULL;
    if (most && !scratch) return NULL;
    api_buffer b;
    api_buffer_init(&b, 256);
    header_out h = {&b, 0};
    put_header(&h, r, scratch);
    free(scratch);
    return api_buffer_finish(&b, len);
}

/* The binary outputs' bytes [off, off + max) into dst, as far as they go;
 * returns how many were written. */
static size_t binary_read(const api_oip_request *r, size_t off, unsigned char *dst, size_t max) {
    size_t done = 0, at = 0;
    for (size_t k = 0; k < r->n_out && done < max; k++) {
        if (!r->out_binary[k]) continue;
        size_t bytes = api_oip_padded_count(r, r->out_kind[k]) * sizeof(float);
        if (off < at + bytes)
            done += tensor_read(r, r->out_kind[k], off - at, dst + done, max - done);
        off = off < at + bytes ? at + bytes : off;
        at += bytes;
    }
    return done;
}

char *api_oip_encode(const api_oip_request *r, size_t *len, size_t *json_len, attn_error *err) {
    size_t header, most, bin;
    output_sizes(r, &most, &bin);
    char *text = header_text(r, &header);
    if (text && bin) {
        char *all = realloc(text, header + bin + 1);
        if (!all) {
            free(text);
            text = NULL;
        } else {
            text = all;
            binary_read(r, 0, (unsigned char *)text + header, bin);
            text[header + bin] = '\0';
        }
    }
    if (!text) {
        attn_error_set(err, 503, "out_of_memory", "", "no memory for the answer");
        return NULL;
    }
    *len = header + bin;
    *json_len = bin ? header : 0;
    return text;
}

/*
 * An answer sent as it is read (call.h): the header, then the binary
 * outputs read from the block the computation wrote them into.
 */
struct api_answer {
    api_oip_request r;         /* the view it is read from, its arrays wire's, r.outs outs */
    api_oip_request *wire;     /* the call's state, taken: the padding's arrays */
    attn_output *outs;         /* r.count, copied from the call: pointers into block */
    attn_output *layer_outs;   /* a stack's: L × r.count, as outs */
    size_t *listed;            /* r.n_listed */
    attn_stack_output *finals; /* r.count */
    attn_workspace *block;     /* the outputs' floats, taken */
    char *json;                /* the header, json_len bytes */
    size_t json_len, length;
};

api_answer *api_oip_answer_create(const api_oip_request *view, api_oip_request *wire,
                                  attn_workspace *block, attn_error *err) {
    api_answer *a = calloc(1, sizeof *a);
    if (!a) goto oom;
    a->r = *view;
    a->wire = wire;
    a->block = block;
    if (view->count) {
        a->outs = malloc(view->count * sizeof *a->outs);
        if (!a->outs) goto oom;
        memcpy(a->outs, view->outs, view->count * sizeof *a->outs);
    }
    a->r.outs = a->outs;
    /* a stack's views, as the outputs': pointers into block */
    if (view->n_listed || view->finals) {
        size_t all = view->n_layers * view->count;
        a->layer_outs = malloc((all ? all : 1) * sizeof *a->layer_outs);
        a->listed = malloc((view->n_listed ? view->n_listed : 1) * sizeof *a->listed);
        a->finals = malloc((view->count ? view->count : 1) * sizeof *a->finals);
        if (!a->layer_outs || !a->listed || !a->finals) goto oom;
        if (all) memcpy(a->layer_outs, view->layer_outs, all * sizeof *a->layer_outs);
        if (view->n_listed) memcpy(a->listed, view->listed, view->n_listed * sizeof *a->listed);
        if (view->finals) memcpy(a->finals, view->finals, view->count * sizeof *a->finals);
        a->r.layer_outs = a->layer_outs;
        a->r.listed = a->listed;
        a->r.finals = view->finals ? a->finals : NULL;
    }
    /* what only the header needs: gone with the call */
    a->r.model = a->r.id = NULL;
    a->json = header_text(view, &a->json_len);
    if (!a->json) goto oom;
    size_t most, bin;
    output_sizes(view, &most, &bin);
    a->length = a->json_len + bin;
    return a;
oom:
    api_answer_destroy(a);
    if (!a) {
        api_oip_request_free(wire);
        attn_workspace_destroy(block);
    }
    attn_error_set(err, 503, "out_of_memory", "", "no memory for the answer");
    return NULL;
}

size_t api_answer_length(const api_answer *a) {
    return a->length;
}

size_t api_answer_json_length(const api_answer *a) {
    return a->json_len;
}

size_t api_answer_read(const api_answer *a, size_t pos, char *buf, size_t max) {
    size_t done = 0;
    if (pos < a->json_len) {
        done = a->json_len - pos < max ? a->json_len - pos : max;
        memcpy(buf, a->json + pos, done);
    }
    if (done < max && pos + done >= a->json_len)
        done +=
            binary_read(&a->r, pos + done - a->json_len, (unsigned char *)buf + done, max - done);
    return done;
}

void api_answer_destroy(api_answer *a) {
    if (!a) return;
    free(a->json);
    free(a->outs);
    free(a->layer_outs);
    free(a->listed);
    free(a->finals);
    api_oip_request_free(a->wire);
    attn_workspace_destroy(a->block);
    free(a);
}
