/*
 * test_combos.c — every feature beside every other, over real HTTP.
 *
 * The features of a request are a table (features[] below): each row is one
 * field or choice — RoPE and its scalings, ALiBi, the window, soft-capping,
 * sinks, chunks,
 * grouped K/V heads, cross-attention context, the mask, positions, several
 * sequences, select_heads, the layers of a stack and those listed, return
 * (rollout among them), the encodings, inline weights or a model file,
 * /v2's padding and the route — with its values, and a function that puts
 * a value into the problem. A value is valid, refused alone (its status),
 * or not served yet (pending: 200, or refused as it is today).
 * Pairs of valid values that the contract refuses together are the rows of
 * conflicts[]. A new field is one row of features[] (with its F_ name and,
 * when it clashes with others, rows of conflicts[]).
 *
 * The combinations are generated here, deterministically (a seeded
 * greedy all-pairs, as AETG): first until every pair of valid values of two
 * features is in some combination without a fault, then, for each refused
 * value and each conflict, until it has been beside every valid value of
 * every other feature in combinations holding that one fault and no other.
 * A pair no combination can hold (a custom mask through /v2, which has
 * none; a conflict beside a second one) is counted as impossible. Four
 * rounds of this, each with its own seed, put each pair among other
 * values; the counts are printed.
 *
 * The route and the weights' source of a combination name the run that
 * must be able to carry it (so that every value meets every route that can
 * say it); the combination is then sent on every run that can: POST
 * /v1/attention (one request a sequence) and /v1/attention/batch, each
 * with inline weights and, where a model file can hold them, by the
 * model's name, and /v2/models/c<i>/infer (padded when asked, or when
 * sequences differ in length). The models are written into a fresh
 * directory before the servers start. The runs alternate between a server
 * that answers tiny requests on its polling threads (the default) and one
 * that sends every request to its two workers (--inline-max-flops 0).
 *
 * Whatever the combination, every answer must be whole (hs_exchange: a
 * socket receive timeout, so that a hang fails instead of blocking), JSON,
 * and 200 or the contract's 4xx with its error body: never a 5xx, a dropped
 * connection or a timeout. A combination with a fault must be refused with
 * the fault's status on every route; one without, answered. Each 200
 * answer's outputs are checked: the shapes, every number finite, a masked
 * score null (-inf), a masked weight 0, each pattern row summing to 1 (0
 * for a row with no key allowed), /v2's padded rows 0; a stack's per-head
 * outputs read from its "layers" (each entry's layer, scale and heads
 * checked) or /v2's layer axis, its stream checked layer by layer, and the
 * rollout against the patterns when every head of every layer is at hand;
 * and every route's answer for a sequence must agree with the first one's
 * within float tolerance.
 *
 * Failures are collected, each with its combination, route and request,
 * and reported together at the end.
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/base64.h"
#include "store/safetensors.h"
#include "tests/fixtures.h"
#include "tests/http_harness.h"
#include "tests/oip_client.h"

#define DM         8  /* d_model */
#define MAX_H      4  /* heads */
#define MAX_DH     4  /* d_head */
#define MAX_N      6  /* tokens of a sequence, /v2's padding included */
#define MAX_M      6  /* context rows, padding included */
#define MAX_DC     8  /* context width */
#define MAX_SEQS   3  /* sequences of a combination */
#define MAX_VALUES 10 /* values of a feature */
#define MAX_LAYERS 2  /* layers of a stack */

/* Seconds an answer may take before it counts as a hang: generous, for a
 * loaded machine and the sanitizer build. */
#define ANSWER_TIMEOUT 30.0

/* ---- pseudo-random numbers ------------------------------------------------ */

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t below(uint64_t *s, size_t n) {
    return (size_t)(splitmix(s) % n);
}

/* A multiple of 1/16 in [-1, 1): exact in float32 and in JSON. */
static float value_at(uint64_t seed, size_t i) {
    uint64_t s = seed ^ (i * 0xd1b54a32d192ed03ull);
    return (float)((int)(splitmix(&s) >> 59) - 16) / 16.0f;
}

/* ---- the problem a combination makes --------------------------------------- */

enum { R_V1 = 1, R_BATCH = 2, R_V2 = 4, R_FILE = 8 };
#define R_ALL  (R_V1 | R_BATCH | R_V2 | R_FILE)
#define R_INL  (R_V1 | R_BATCH) /* inline weights only: no model file can hold it */
#define R_NOV2 (R_V1 | R_BATCH | R_FILE)

enum { MASK_DEFAULT, MASK_CAUSAL, MASK_NONE, MASK_CUSTOM, MASK_CUSTOM_BOOL };
enum { POS_DEFAULT, POS_GAPPED, POS_FAR, POS_NEGATIVE };
enum { ENC_JSON, ENC_PACKED, ENC_MIXED }; /* packed: base64 on /v1, binary on /v2; mixed: in only */
enum { SRC_INLINE, SRC_MODEL };
enum { PAD_NONE, PAD_LEFT, PAD_RIGHT };
enum { ROUTE_V1, ROUTE_BATCH, ROUTE_V2, ROUTE_COUNT };

/* The outputs, as /v1 names them (/v2 has all but the raw ones): the
 * per-head ones (up to O_Z; each layer's, in a stack), the stream's and
 * the rollout; then what the layers of a stack's /v1 answer carry of the
 * stream, each layer's delta and embeddings, which no request names. */
enum { O_Q, O_K, O_V, O_QR, O_KR, O_S, O_P, O_Z, O_D, O_E, O_R, O_LD, O_LE, O_COUNT };
static const char *const out_names[O_COUNT] = {"q",
                                               "k",
                                               "v",
                                               "q_raw",
                                               "k_raw",
                                               "scores",
                                               "patterns",
                                               "head_outputs",
                                               "delta",
                                               "embeddings",
                                               "rollout",
                                               "layers' delta",
                                               "layers' embeddings"};
#define OUT(o)      (1u << (o))
#define PER_HEAD(o) ((o) <= O_Z)

typedef struct meta_kv {
    char key[40], value[160];
} meta_kv;

typedef struct problem {
    unsigned idx;  /* the combination's number: the model's name, c<idx> */
    uint64_t seed; /* of its weights and inputs */
    /* the weight set */
    size_t h, g, dh; /* g: K/V heads (h without kv_heads) */
    int kv_heads;    /* inline weights carry kv_heads (g of them) */
    int biases, w_o;
    size_t dc;        /* context width; 0: self-attention */
    int cross_file;   /* its model file keeps Q apart (w_q, w_kv) */
    json_t *wfields;  /* inline weight-set fields besides the projections */
    meta_kv meta[24]; /* the same in a model file's metadata */
    size_t n_meta;
    float alibi[MAX_H + 1]; /* explicit slopes (a model file's tensor) */
    int alibi_tensor;
    float rope_lists[2]; /* longrope's short and long factors (dims 2): layer 0's tensors */
    int rope_tensors;
    size_t window; /* for the keys a query may see */
    size_t chunk;  /* the same */
    int sinks;     /* the weights carry sinks (a model file's tensor): rows sum below 1 */
    float sink[MAX_H + 1];
    /* the stack: layer 1, when there is one, has its own weights (other
     * numbers), no rope nor softcap, and its own scale (layer_scale) */
    size_t n_layers;
    json_t *wfields1;  /* layer 1's weight-set fields */
    meta_kv meta1[24]; /* and its keys */
    size_t n_meta1;
    double lscale[MAX_LAYERS];           /* each layer's weight-set scale; 0: none */
    int stack_names;                     /* one layer written as a stack ("layers", layers.0.) */
    int layers_sent;                     /* the request lists the layers (`listed`) */
    int layers_string;                   /* /v2's parameter as "1,0" */
    size_t n_listed, listed[MAX_LAYERS]; /* the layers answered, in order */
    int stack;                           /* the answer takes the stack's form */
    /* the request */
    int mask, positions;
    json_t *select;    /* select_heads, or NULL */
    int select_string; /* /v2's parameter as "1,0" */
    size_t hs, heads[MAX_H + 1];
    unsigned outs; /* OUT() bits asked */
    json_t *ret;   /* return, or NULL */
    const char *bad_output;
    double scale; /* 0: none */
    int enc, src, pad, route;
    /* the sequences */
    size_t n_seqs, n[MAX_SEQS], m[MAX_SEQS];
    float emb[MAX_SEQS][MAX_N * DM], ctx[MAX_SEQS][MAX_M * MAX_DC];
    unsigned char custom[MAX_SEQS][MAX_N * MAX_M];
    long long pos[MAX_SEQS][MAX_N];
} problem;

static void meta_put(problem *p, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void meta_put(problem *p, const char *key, const char *fmt, ...) {
    ck_assert_uint_lt(p->n_meta, sizeof p->meta / sizeof p->meta[0]);
    meta_kv *kv = &p->meta[p->n_meta++];
    snprintf(kv->key, sizeof kv->key, "%s", key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(kv->value, sizeof kv->value, fmt, ap);
    va_end(ap);
}

/* A weight-set field for inline weights (takes v). */
static void wfield(problem *p, const char *key, json_t *v) {
    json_object_set_new(p->wfields, key, v);
}

/* ---- the features ---------------------------------------------------------- */

typedef struct fvalue {
    const char *name;
    int refused;    /* 0, or the status this value alone is refused with */
    int pending;    /* not served yet: refused with `refused` today, 200 once served */
    unsigned carry; /* R_ bits: the routes that can say it; R_FILE: a model file can */
} fvalue;

typedef struct feature {
    const char *name;
    void (*apply)(problem *p, int v); /* runs in table order: a row may read earlier rows */
    fvalue v[MAX_VALUES];             /* up to the first without a name */
} feature;

static void apply_heads(problem *p, int v) {
    static const size_t h[] = {2, 4, 3}, dh[] = {4, 2, 3};
    p->h = h[v], p->dh = dh[v];
}

static void apply_kv(problem *p, int v) {
    /* none, mqa, gqa (2), full (h), empty */
    p->kv_heads = v != 0;
    p->g = v == 0 ? p->h : v == 1 ? 1 : v == 2 ? 2 : v == 3 ? p->h : 0;
    if (p->kv_heads) meta_put(p, "n_kv_heads", "%zu", p->g);
}

static void apply_proj(problem *p, int v) {
    p->biases = v == 1 || v == 3;
    p->w_o = v >= 2;
}

static void apply_rope(problem *p, int v) {
    static const char *const rope[] = {
        NULL,
        "{}",
        "{\"theta\": 500, \"dims\": 2, \"style\": \"interleaved\"}",
        "{\"dims\": 2, \"scaling\": {\"type\": \"linear\", \"factor\": 2}}",
        "{\"theta\": 10000, \"scaling\": {\"type\": \"llama3\", \"factor\": 8, "
        "\"low_freq_factor\": "
        "1, \"high_freq_factor\": 4, \"original_max_position_embeddings\": 8}}",
        "{\"dims\": 2, \"scaling\": {\"type\": \"yarn\", \"factor\": 4, "
        "\"original_max_position_embeddings\": 4}}",
        "{\"dims\": 2, \"scaling\": {\"type\": \"longrope\", \"short_factor\": [1.5], "
        "\"long_factor\": [3], \"original_max_position_embeddings\": 4}}",
        "{\"dims\": 2, \"scaling\": {\"type\": \"dynamic\", \"factor\": 2}}",
        "{\"dims\": 2, \"scaling\": {\"type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 4, "
        "\"high_freq_factor\": 2, \"original_max_position_embeddings\": 8}}",
    };
    if (!rope[v]) return;
    json_error_t jerr;
    json_t *r = json_loads(rope[v], 0, &jerr);
    ck_assert_msg(r != NULL, "rope %d: %s", v, jerr.text);
    wfield(p, "rope", r);
    /* the model file's keys (models/README.md), for the values a file holds */
    switch (v) {
    case 1: meta_put(p, "rope_theta", "10000"); break;
    case 2:
        meta_put(p, "rope_theta", "500");
        meta_put(p, "rope_dims", "2");
        meta_put(p, "rope_style", "interleaved");
        break;
    case 3:
        meta_put(p, "rope_dims", "2");
        meta_put(p, "rope_scaling", "linear");
        meta_put(p, "rope_factor", "2");
        break;
    case 4:
        meta_put(p, "rope_theta", "10000");
        meta_put(p, "rope_scaling", "llama3");
        meta_put(p, "rope_factor", "8");
        meta_put(p, "rope_low_freq_factor", "1");
        meta_put(p, "rope_high_freq_factor", "4");
        meta_put(p, "rope_original_max_position", "8");
        break;
    case 5:
        meta_put(p, "rope_dims", "2");
        meta_put(p, "rope_scaling", "yarn");
        meta_put(p, "rope_factor", "4");
        meta_put(p, "rope_original_max_position", "4");
        break;
    case 6: /* the lists are tensors */
        meta_put(p, "rope_dims", "2");
        meta_put(p, "rope_scaling", "longrope");
        meta_put(p, "rope_original_max_position", "4");
        p->rope_lists[0] = 1.5f, p->rope_lists[1] = 3.0f;
        p->rope_tensors = 1;
        break;
    default: break; /* refused or pending: inline only */
    }
}

static void apply_alibi(problem *p, int v) {
    if (v == 0) return;
    if (v == 1) {
        wfield(p, "alibi", json_true());
        meta_put(p, "alibi", "true");
        return;
    }
    /* explicit slopes, h of them (one more: refused) */
    size_t n = p->h + (v == 3);
    json_t *s = json_array();
    for (size_t i = 0; i < n; i++) {
        p->alibi[i] = 1.0f / (float)(1u << (i + 1));
        json_array_append_new(s, json_real(p->alibi[i]));
    }
    wfield(p, "alibi", s);
    p->alibi_tensor = 1;
}

static void apply_window(problem *p, int v) {
    static const size_t w[] = {0, 1, 3, 0};
    if (v == 0) return;
    p->window = w[v];
    wfield(p, "window", json_integer((json_int_t)w[v]));
    if (w[v]) meta_put(p, "window", "%zu", w[v]);
}

/* Sink logits: h tame ones, h far above the scores (weights near 0), or
 * one too many (refused). */
static void apply_sinks(problem *p, int v) {
    if (v == 0) return;
    size_t n = p->h + (v == 3);
    json_t *s = json_array();
    for (size_t i = 0; i < n; i++) {
        p->sink[i] = v == 2 ? 30.0f : 0.5f * (float)i - 0.75f;
        json_array_append_new(s, json_real(p->sink[i]));
    }
    wfield(p, "sinks", s);
    p->sinks = 1;
}

static void apply_chunk(problem *p, int v) {
    static const size_t c[] = {0, 1, 2, 0};
    if (v == 0) return;
    p->chunk = c[v];
    wfield(p, "chunk", json_integer((json_int_t)c[v]));
    if (c[v]) meta_put(p, "chunk", "%zu", c[v]);
}

static void apply_softcap(problem *p, int v) {
    static const double c[] = {0, 1, 50, -2};
    if (v == 0) return;
    wfield(p, "softcap", json_real(c[v]));
    if (c[v] > 0) meta_put(p, "softcap", "%g", c[v]);
}

static void apply_wscale(problem *p, int v) {
    if (v == 0) return;
    wfield(p, "scale", json_real(v == 1 ? 0.25 : 0.0));
    if (v == 1) meta_put(p, "scale", "0.25");
    p->lscale[0] = v == 1 ? 0.25 : 0;
}

/* The norms and the temperature, weightless (so that any heads fit): off,
 * Qwen3's, Gemma 3's, OLMo 2's, a layer norm, a Llama 4 NoPE layer's, and
 * eps 0 (refused). */
static void apply_norms(problem *p, int v) {
    static const char *const inl[] = {
        NULL,
        "{\"norm\": {\"type\": \"rms\"}, \"qk_norm\": {\"type\": \"rms\", \"scope\": \"head\"}}",
        "{\"norm\": {\"type\": \"rms\", \"offset\": 1}, \"post_norm\": {\"type\": \"rms\", "
        "\"offset\": 1}, \"qk_norm\": {\"type\": \"rms\", \"scope\": \"head\", \"offset\": 1}}",
        "{\"post_norm\": {\"type\": \"rms\"}, \"qk_norm\": {\"type\": \"rms\", \"scope\": "
        "\"all\"}}",
        "{\"norm\": {\"type\": \"layer\", \"eps\": 0.001}}",
        "{\"qk_norm\": {\"type\": \"rms\", \"scope\": \"head\"}, \"temperature\": "
        "{\"floor_scale\": 2, \"attn_scale\": 0.1}}",
        "{\"norm\": {\"type\": \"rms\", \"eps\": 0}}",
    };
    /* the model file's keys (models/README.md), key, value, … */
    static const char *const meta[][8] = {
        {NULL},
        {"norm_type", "rms", "qk_norm_scope", "head", NULL},
        {"norm_type", "rms", "norm_offset", "1", "post_norm_type", "rms", "post_norm_offset", "1"},
        {"post_norm_type", "rms", "qk_norm_scope", "all", NULL},
        {"norm_type", "layer", "norm_eps", "0.001", NULL},
        {"qk_norm_scope", "head", "temperature_floor_scale", "2", "temperature_attn_scale", "0.1",
         NULL},
        {NULL},
    };
    if (!inl[v]) return;
    json_error_t jerr;
    json_t *o = json_loads(inl[v], 0, &jerr);
    ck_assert_msg(o != NULL, "norms %d: %s", v, jerr.text);
    const char *key;
    json_t *val;
    json_object_foreach(o, key, val)
        wfield(p, key, json_incref(val));
    json_decref(o);
    for (size_t i = 0; i < 8 && meta[v][i]; i += 2)
        meta_put(p, meta[v][i], "%s", meta[v][i + 1]);
    if (v == 2) meta_put(p, "qk_norm_scope", "head"), meta_put(p, "qk_norm_offset", "1");
}

static void apply_context(problem *p, int v) {
    /* dc6: a cross-attention model file; dc8: a self-attention one, whose
     * K/V weights project the context as they would the embeddings */
    p->dc = v == 0 ? 0 : v == 1 ? 6 : 8;
    p->cross_file = v == 1;
}

static void apply_mask(problem *p, int v) {
    p->mask = v;
}

static void apply_positions(problem *p, int v) {
    p->positions = v;
}

static void apply_seqs(problem *p, int v) {
    uint64_t s = p->seed ^ 0x5e9;
    p->n_seqs = v ? MAX_SEQS : 1;
    /* different lengths, one of them a single token */
    static const size_t lens[][MAX_SEQS] = {{3, 1, 5}, {1, 4, 2}, {5, 2, 1}, {2, 5, 4}};
    const size_t *l = lens[below(&s, 4)];
    for (size_t i = 0; i < p->n_seqs; i++) {
        p->n[i] = v ? l[i] : 2 + below(&s, 4);
        p->m[i] = 1 + below(&s, 4);
    }
}

static void apply_select(problem *p, int v) {
    /* all, a reordered subset, an index out of range, an index twice */
    p->hs = p->h;
    for (size_t i = 0; i < p->h; i++)
        p->heads[i] = i;
    if (v == 0) return;
    p->select_string = (p->idx & 1) != 0;
    size_t a = p->h - 1, b = v == 1 ? 0 : v == 2 ? p->h : p->h - 1;
    p->select = json_pack("[I,I]", (json_int_t)a, (json_int_t)b);
    p->hs = 2;
    p->heads[0] = a, p->heads[1] = b;
}

static void apply_return(problem *p, int v) {
    static const unsigned outs[] = {
        OUT(O_P) | OUT(O_E),
        OUT(O_Q) | OUT(O_K) | OUT(O_V) | OUT(O_S) | OUT(O_P) | OUT(O_Z) | OUT(O_D) | OUT(O_E),
        OUT(O_S) | OUT(O_P),
        OUT(O_QR) | OUT(O_KR) | OUT(O_Q) | OUT(O_K),
        OUT(O_P),
        OUT(O_P) | OUT(O_R),
    };
    p->outs = outs[v];
    if (v == 0) return;
    p->ret = json_array();
    for (int o = 0; o < O_COUNT; o++)
        if (p->outs & OUT(o)) json_array_append_new(p->ret, json_string(out_names[o]));
    if (v == 4) {
        p->bad_output = "weights";
        json_array_append_new(p->ret, json_string(p->bad_output));
    }
}

static void apply_layers(problem *p, int v) {
    /* one, one listed ([0]), two, two listed ([1, 0]), a layer out of range */
    static const size_t listed[][MAX_LAYERS] = {{0}, {0}, {0, 1}, {1, 0}, {2}};
    p->n_layers = v < 2 ? 1 : 2;
    p->layers_sent = v == 1 || v >= 3;
    p->n_listed = v == 2 || v == 3 ? 2 : 1;
    memcpy(p->listed, listed[v], sizeof p->listed);
    p->stack = p->n_layers > 1 || p->layers_sent;
    p->stack_names = p->layers_sent && p->n_layers == 1 && (p->idx & 8);
    p->layers_string = (p->idx & 4) != 0;
}

static void apply_scale(problem *p, int v) {
    static const double s[] = {0, 0.5, -1};
    p->scale = s[v];
}

static void apply_enc(problem *p, int v) {
    p->enc = v;
}

static void apply_src(problem *p, int v) {
    p->src = v;
}

static void apply_pad(problem *p, int v) {
    p->pad = v;
}

static void apply_route(problem *p, int v) {
    p->route = v;
}

/* Add a row here for each new field (qk_norm, temperature,
 * norms, yarn and longrope served, …): its values, whether each is
 * valid, refused alone (with its status) or pending, where it can be said,
 * and its apply function; then rows in conflicts[] for the fields it may
 * not be combined with. The request builders below read the problem, not
 * the table: a weight-set field goes into p->wfields (inline) and p->meta
 * (a model file). */
enum {
    F_HEADS,
    F_KV,
    F_PROJ,
    F_ROPE,
    F_ALIBI,
    F_WINDOW,
    F_SINKS,
    F_CHUNK,
    F_SOFTCAP,
    F_WSCALE,
    F_NORMS,
    F_CONTEXT,
    F_MASK,
    F_POSITIONS,
    F_SEQS,
    F_SELECT,
    F_LAYERS,
    F_RETURN,
    F_SCALE,
    F_ENC,
    F_SRC,
    F_PAD,
    F_ROUTE, /* the last (search_one) */
    F_COUNT
};

static const feature features[F_COUNT] = {
    [F_HEADS] = {"heads",
                 apply_heads,
                 {{"h2d4", 0, 0, R_ALL}, {"h4d2", 0, 0, R_ALL}, {"h3d3", 0, 0, R_ALL}}},
    [F_KV] = {"kv_heads",
              apply_kv,
              {{"none", 0, 0, R_ALL},
               {"mqa", 0, 0, R_ALL},
               {"two", 0, 0, R_ALL},
               {"h", 0, 0, R_ALL},
               {"empty", 422, 0, R_INL}}},
    [F_PROJ] = {"proj",
                apply_proj,
                {{"plain", 0, 0, R_ALL},
                 {"biases", 0, 0, R_ALL},
                 {"w_o", 0, 0, R_ALL},
                 {"all", 0, 0, R_ALL}}},
    [F_ROPE] = {"rope",
                apply_rope,
                {{"off", 0, 0, R_ALL},
                 {"half", 0, 0, R_ALL},
                 {"interleaved", 0, 0, R_ALL},
                 {"linear", 0, 0, R_ALL},
                 {"llama3", 0, 0, R_ALL},
                 {"yarn", 0, 0, R_ALL},
                 {"longrope", 0, 0, R_ALL},
                 {"dynamic", 400, 0, R_INL},
                 {"llama3_inverted", 422, 0, R_INL}}},
    [F_ALIBI] = {"alibi",
                 apply_alibi,
                 {{"off", 0, 0, R_ALL},
                  {"true", 0, 0, R_ALL},
                  {"slopes", 0, 0, R_ALL},
                  {"slopes_long", 422, 0, R_INL}}},
    [F_WINDOW] =
        {"window",
         apply_window,
         {{"off", 0, 0, R_ALL}, {"1", 0, 0, R_ALL}, {"3", 0, 0, R_ALL}, {"0", 422, 0, R_INL}}},
    [F_SINKS] = {"sinks",
                 apply_sinks,
                 {{"off", 0, 0, R_ALL},
                  {"tame", 0, 0, R_ALL},
                  {"high", 0, 0, R_ALL},
                  {"long", 422, 0, R_INL}}},
    [F_CHUNK] =
        {"chunk",
         apply_chunk,
         {{"off", 0, 0, R_ALL}, {"1", 0, 0, R_ALL}, {"2", 0, 0, R_ALL}, {"0", 422, 0, R_INL}}},
    [F_SOFTCAP] =
        {"softcap",
         apply_softcap,
         {{"off", 0, 0, R_ALL}, {"1", 0, 0, R_ALL}, {"50", 0, 0, R_ALL}, {"-2", 422, 0, R_INL}}},
    [F_WSCALE] = {"weights.scale",
                  apply_wscale,
                  {{"off", 0, 0, R_ALL}, {"0.25", 0, 0, R_ALL}, {"0", 422, 0, R_INL}}},
    [F_NORMS] = {"norms",
                 apply_norms,
                 {{"off", 0, 0, R_ALL},
                  {"qwen3", 0, 0, R_ALL},
                  {"gemma3", 0, 0, R_ALL},
                  {"olmo2", 0, 0, R_ALL},
                  {"layer", 0, 0, R_ALL},
                  {"nope", 0, 0, R_ALL},
                  {"eps0", 422, 0, R_INL}}},
    [F_CONTEXT] = {"context",
                   apply_context,
                   {{"off", 0, 0, R_ALL}, {"dc6", 0, 0, R_ALL}, {"dc8", 0, 0, R_NOV2}}},
    [F_MASK] = {"mask",
                apply_mask,
                {{"default", 0, 0, R_ALL},
                 {"causal", 0, 0, R_ALL},
                 {"none", 0, 0, R_ALL},
                 {"custom", 0, 0, R_NOV2},
                 {"custom_bool", 0, 0, R_NOV2}}},
    [F_POSITIONS] = {"positions",
                     apply_positions,
                     {{"default", 0, 0, R_ALL},
                      {"gapped", 0, 0, R_ALL},
                      {"far", 0, 0, R_ALL},
                      {"negative", 422, 0, R_ALL}}},
    [F_SEQS] = {"sequences", apply_seqs, {{"one", 0, 0, R_ALL}, {"several", 0, 0, R_ALL}}},
    [F_SELECT] = {"select_heads",
                  apply_select,
                  {{"all", 0, 0, R_ALL},
                   {"subset", 0, 0, R_ALL},
                   {"out_of_range", 422, 0, R_ALL},
                   {"repeated", 422, 0, R_ALL}}},
    [F_LAYERS] = {"layers",
                  apply_layers,
                  {{"one", 0, 0, R_ALL},
                   {"one_listed", 0, 0, R_ALL},
                   {"two", 0, 0, R_ALL},
                   {"two_listed", 0, 0, R_ALL},
                   {"out_of_range", 422, 0, R_ALL}}},
    [F_RETURN] = {"return",
                  apply_return,
                  {{"default", 0, 0, R_ALL},
                   {"all", 0, 0, R_ALL},
                   {"scores", 0, 0, R_ALL},
                   {"raw", 0, 0, R_ALL},
                   {"unknown", 400, 0, R_ALL},
                   {"rollout", 0, 0, R_ALL}}},
    [F_SCALE] = {"scale",
                 apply_scale,
                 {{"off", 0, 0, R_ALL}, {"0.5", 0, 0, R_ALL}, {"-1", 422, 0, R_ALL}}},
    [F_ENC] = {"encoding",
               apply_enc,
               {{"json", 0, 0, R_ALL}, {"packed", 0, 0, R_ALL}, {"mixed", 0, 0, R_ALL}}},
    [F_SRC] = {"weights", apply_src, {{"inline", 0, 0, R_ALL}, {"model", 0, 0, R_ALL}}},
    [F_PAD] = {"v2_padding",
               apply_pad,
               {{"none", 0, 0, R_ALL}, {"left", 0, 0, R_ALL}, {"right", 0, 0, R_ALL}}},
    [F_ROUTE] = {"route",
                 apply_route,
                 {{"v1", 0, 0, R_ALL}, {"batch", 0, 0, R_ALL}, {"v2", 0, 0, R_ALL}}},
};

#define BIT(v) (1u << (v))

static int n_values(int f) {
    int n = 0;
    while (n < MAX_VALUES && features[f].v[n].name)
        n++;
    return n;
}

/* Valid values that the contract refuses together. */
typedef struct conflict {
    int fa;
    unsigned va; /* BIT()s of fa's values */
    int fb;
    unsigned vb;
    int status;
    int nofile; /* a model file cannot hold both (the loader refuses it) */
} conflict;

#define ROPE_ON   (BIT(1) | BIT(2) | BIT(3) | BIT(4) | BIT(5) | BIT(6))
#define ROPE_FULL (BIT(1) | BIT(4)) /* rotating all of d_head: no dims */

static const conflict conflicts[] = {
    /* context rows have no positions, nor an order */
    {F_CONTEXT, BIT(1), F_ROPE, ROPE_ON, 422, 1},
    {F_CONTEXT, BIT(2), F_ROPE, ROPE_ON, 422, 0},
    {F_CONTEXT, BIT(1), F_ALIBI, BIT(1) | BIT(2), 422, 1},
    {F_CONTEXT, BIT(2), F_ALIBI, BIT(1) | BIT(2), 422, 0},
    {F_CONTEXT, BIT(1), F_WINDOW, BIT(1) | BIT(2), 422, 1},
    {F_CONTEXT, BIT(2), F_WINDOW, BIT(1) | BIT(2), 422, 0},
    {F_CONTEXT, BIT(1), F_CHUNK, BIT(1) | BIT(2), 422, 1},
    {F_CONTEXT, BIT(2), F_CHUNK, BIT(1) | BIT(2), 422, 0},
    {F_CONTEXT, BIT(1) | BIT(2), F_MASK, BIT(MASK_CAUSAL), 422, 0},
    {F_CONTEXT, BIT(1) | BIT(2), F_RETURN, BIT(5), 422, 0}, /* rollout */
    /* Llama 4's temperature is for its layers without RoPE */
    {F_NORMS, BIT(5), F_ROPE, ROPE_ON, 422, 1},
    /* 3 heads of 3: h·d_head = 9 is not d_model (w_o needed), 2 K/V heads
     * do not divide 3, and an odd d_head needs rope's dims */
    {F_HEADS, BIT(2), F_PROJ, BIT(0) | BIT(1), 422, 1},
    {F_HEADS, BIT(2), F_KV, BIT(2), 422, 1},
    {F_HEADS, BIT(2), F_ROPE, ROPE_FULL, 422, 1},
};
#define N_CONFLICTS (sizeof conflicts / sizeof conflicts[0])

/* ---- judging a combination ---------------------------------------------------- */

#define UNSET 0xff

typedef struct combo {
    unsigned char v[F_COUNT];
} combo;

/* The runs: a route and where its weights come from. */
enum { RUN_V1_INLINE, RUN_V1_MODEL, RUN_BATCH_INLINE, RUN_BATCH_MODEL, RUN_V2, RUN_COUNT };
static const char *const run_names[RUN_COUNT] = {"/v1 inline", "/v1 model", "/batch inline",
                                                 "/batch model", "/v2"};

/* A fault: a value refused alone (feature · MAX_VALUES + value) or a
 * conflict (FAULT_CONFLICT + its index). */
#define FAULT_CONFLICT 1000

typedef struct verdict {
    int faults;    /* how many */
    int fault;     /* the first */
    int status;    /* its status */
    int pending;   /* it is a value not served yet */
    unsigned runs; /* BIT(RUN_) of the runs that can carry it */
    int primary;   /* the run its route and weights name, or -1 while unset */
} verdict;

/* Judges c, whose UNSET features are left out (a partial combination). */
static verdict judge(const combo *c) {
    verdict j = {0, -1, 0, 0, 0, -1};
    unsigned carry = R_ALL;
    int nofile = 0;
    for (int f = 0; f < F_COUNT; f++) {
        if (c->v[f] == UNSET) continue;
        const fvalue *fv = &features[f].v[c->v[f]];
        carry &= fv->carry;
        if (fv->refused) {
            if (!j.faults++) j.fault = f * MAX_VALUES + c->v[f], j.status = fv->refused;
            j.pending |= fv->pending;
        }
    }
    for (size_t k = 0; k < N_CONFLICTS; k++) {
        const conflict *r = &conflicts[k];
        if (c->v[r->fa] == UNSET || c->v[r->fb] == UNSET) continue;
        if (!(r->va & BIT(c->v[r->fa])) || !(r->vb & BIT(c->v[r->fb]))) continue;
        if (!j.faults++) j.fault = FAULT_CONFLICT + (int)k, j.status = r->status;
        nofile |= r->nofile;
    }
    int file = (carry & R_FILE) && !nofile;
    if (carry & R_V1) j.runs |= BIT(RUN_V1_INLINE) | (file ? BIT(RUN_V1_MODEL) : 0);
    if (carry & R_BATCH) j.runs |= BIT(RUN_BATCH_INLINE) | (file ? BIT(RUN_BATCH_MODEL) : 0);
    if ((carry & R_V2) && file) j.runs |= BIT(RUN_V2);
    int route = c->v[F_ROUTE], src = c->v[F_SRC];
    if (route == ROUTE_V2)
        j.primary = RUN_V2;
    else if (route != UNSET && src != UNSET)
        j.primary = (route == ROUTE_V1 ? RUN_V1_INLINE : RUN_BATCH_INLINE) + src;
    return j;
}

static int value_valid(int f, int v) {
    return features[f].v[v].refused == 0;
}

/* c may still be completed into a combination whose only fault is `want`
 * (-1: none) and whose primary run can carry it. */
static int viable(const combo *c, int want) {
    verdict j = judge(c);
    if (want < 0 ? j.faults != 0 : j.faults > 1 || (j.faults == 1 && j.fault != want)) return 0;
    if (j.primary >= 0 ? !(j.runs & BIT(j.primary)) : j.runs == 0) return 0;
    return 1;
}

static int complete_ok(const combo *c, int want) {
    verdict j = judge(c);
    if (!viable(c, want)) return 0;
    return want < 0 ? j.faults == 0 : j.faults == 1;
}

/* ---- all pairs -------------------------------------------------------------- */

#define PAIR(fa, va, fb, vb)                                                                       \
    ((((size_t)(fa)*MAX_VALUES + (va)) * F_COUNT + (fb)) * MAX_VALUES + (vb))
#define N_PAIRS ((size_t)F_COUNT * MAX_VALUES * F_COUNT * MAX_VALUES)

typedef struct combos {
    combo *c;
    size_t count, cap;
    size_t pairs, pairs_impossible;       /* valid pairs to cover, and those none can */
    size_t fault_pairs, fault_impossible; /* (fault, value) pairs likewise */
} combos;

static void combos_add(combos *cs, const combo *c) {
    if (cs->count == cs->cap) {
        cs->cap = cs->cap ? cs->cap * 2 : 64;
        cs->c = realloc(cs->c, cs->cap * sizeof *cs->c);
        ck_assert_ptr_nonnull(cs->c);
    }
    cs->c[cs->count++] = *c;
}

/* Positive pairs c covers that are still uncovered. */
static size_t gain_pairs(const combo *c, const unsigned char *covered) {
    size_t g = 0;
    for (int a = 0; a < F_COUNT; a++)
        for (int b = a + 1; b < F_COUNT; b++)
            if (c->v[a] != UNSET && c->v[b] != UNSET && !covered[PAIR(a, c->v[a], b, c->v[b])]) g++;
    return g;
}

/* The features of a fault: one value's, or a conflict's two. */
static int fault_has(int fault, int f) {
    if (fault < FAULT_CONFLICT) return fault / MAX_VALUES == f;
    const conflict *r = &conflicts[fault - FAULT_CONFLICT];
    return r->fa == f || r->fb == f;
}

/* Whether f = v may be in a combination whose one fault is `fault` (< 0:
 * none): the fault's own value, or a valid one (within a conflict's sets,
 * for its two features). */
static int allowed_value(int fault, int f, int v) {
    if (fault >= 0 && fault < FAULT_CONFLICT && fault / MAX_VALUES == f)
        return v == fault % MAX_VALUES;
    if (!value_valid(f, v)) return 0;
    if (fault >= FAULT_CONFLICT) {
        const conflict *r = &conflicts[fault - FAULT_CONFLICT];
        if (r->fa == f) return (r->va & BIT(v)) != 0;
        if (r->fb == f) return (r->vb & BIT(v)) != 0;
    }
    return 1;
}

/* (fault, f = v) pairs c covers that are still uncovered (covered is
 * indexed by f · MAX_VALUES + v). */
static size_t gain_fault(const combo *c, const unsigned char *covered) {
    size_t g = 0;
    for (int f = 0; f < F_COUNT; f++)
        if (c->v[f] != UNSET && !covered[f * MAX_VALUES + c->v[f]]) g++;
    return g;
}

/* The most partial combinations one search visits: past it the pair
 * counts as impossible, and the summary says how many searches were cut.
 * Exhaustive, the searches of the impossible pairs took 89 s of the test's
 * 92 (24 features); cut at this, 1 s, with the very same combinations and
 * the same impossible counts. */
#define SEARCH_NODES_MAX 20000

/* Completes c from the i-th feature of the search's order on, depth first:
 * 1 once a combination whose only fault is `fault` (none when < 0) is
 * found, 0 when there is none. The route and the weights' source come
 * first: they decide what can be carried, so that a dead end shows early. */
static long search_nodes, search_given_up;
static int search_one(combo *c, int i, int fault) {
    if (++search_nodes > SEARCH_NODES_MAX) return 0;
    if (i == F_COUNT) return complete_ok(c, fault);
    int f = i == 0 ? F_ROUTE : i == 1 ? F_SRC : i - 2;
    if (i >= 2 && f >= F_SRC) f++; /* past F_SRC; F_ROUTE is the last */
    if (c->v[f] != UNSET) return search_one(c, i + 1, fault);
    for (int v = 0; v < n_values(f); v++) {
        if (!allowed_value(fault, f, v)) continue;
        c->v[f] = (unsigned char)v;
        if (viable(c, fault) && search_one(c, i + 1, fault)) return 1;
    }
    c->v[f] = UNSET;
    return 0;
}

/*
 * One combination holding f0 = v0 and f1 = v1 (f1 < 0: only f0) and, when
 * fault ≥ 0, that fault and no other; fault < 0: none. Features are
 * filled one at a time in a random order, each with the allowed value that
 * covers most pairs still uncovered and keeps the combination viable; of
 * TRIES such, the best is kept. When none could be completed, a depth-first
 * search says whether any combination holds them. 0 when none does.
 */
static int build_one(combo *out, uint64_t *rng, int f0, int v0, int f1, int v1, int fault,
                     const unsigned char *covered) {
    enum { TRIES = 24 };
    size_t best = 0;
    int found = 0;
    for (int t = 0; t < TRIES; t++) {
        combo c;
        memset(c.v, UNSET, sizeof c.v);
        c.v[f0] = (unsigned char)v0;
        if (f1 >= 0) c.v[f1] = (unsigned char)v1;
        if (fault >= 0 && fault < FAULT_CONFLICT)
            c.v[fault / MAX_VALUES] = (unsigned char)(fault % MAX_VALUES);
        if (!viable(&c, fault)) return 0;
        int order[F_COUNT];
        for (int f = 0; f < F_COUNT; f++)
            order[f] = f;
        for (int f = F_COUNT - 1; f > 0; f--) {
            int k = (int)below(rng, (size_t)f + 1), x = order[f];
            order[f] = order[k], order[k] = x;
        }
        int ok = 1;
        for (int i = 0; i < F_COUNT && ok; i++) {
            int f = order[i];
            if (c.v[f] != UNSET) continue;
            int pick = -1;
            size_t pick_gain = 0, ties = 0;
            for (int v = 0; v < n_values(f); v++) {
                if (!allowed_value(fault, f, v)) continue;
                c.v[f] = (unsigned char)v;
                if (viable(&c, fault)) {
                    size_t g = fault < 0 ? gain_pairs(&c, covered) : gain_fault(&c, covered);
                    if (pick < 0 || g > pick_gain) {
                        pick = v, pick_gain = g, ties = 1;
                    } else if (g == pick_gain && below(rng, ++ties) == 0) {
                        pick = v;
                    }
                }
                c.v[f] = UNSET;
            }
            if (pick < 0)
                ok = 0;
            else
                c.v[f] = (unsigned char)pick;
        }
        if (!ok || !complete_ok(&c, fault)) continue;
        size_t g = fault < 0 ? gain_pairs(&c, covered) : gain_fault(&c, covered);
        if (!found || g > best) {
            *out = c;
            best = g;
            found = 1;
        }
    }
    if (found) return 1;
    /* The greedy way may miss a narrow one: whether there is any at all. */
    memset(out->v, UNSET, sizeof out->v);
    out->v[f0] = (unsigned char)v0;
    if (f1 >= 0) out->v[f1] = (unsigned char)v1;
    if (fault >= 0 && fault < FAULT_CONFLICT)
        out->v[fault / MAX_VALUES] = (unsigned char)(fault % MAX_VALUES);
    search_nodes = 0;
    int any = viable(out, fault) && search_one(out, 0, fault);
    if (search_nodes > SEARCH_NODES_MAX) search_given_up++;
    return any;
}

/* Appends combinations: every pair of valid values in one without a fault;
 * then each fault beside every value it may be beside. Each call with
 * another seed covers them all again, in other combinations. */
static void generate(combos *cs, uint64_t seed) {
    uint64_t rng = seed;
    unsigned char *covered = calloc(N_PAIRS, 1);
    ck_assert_ptr_nonnull(covered);
    for (int a = 0; a < F_COUNT; a++)
        for (int va = 0; va < n_values(a); va++)
            for (int b = a + 1; b < F_COUNT; b++)
                for (int vb = 0; vb < n_values(b); vb++) {
                    if (!value_valid(a, va) || !value_valid(b, vb)) continue;
                    cs->pairs++;
                    if (covered[PAIR(a, va, b, vb)]) continue;
                    combo c;
                    if (!build_one(&c, &rng, a, va, b, vb, -1, covered)) {
                        covered[PAIR(a, va, b, vb)] = 1;
                        cs->pairs_impossible++;
                        continue;
                    }
                    for (int x = 0; x < F_COUNT; x++)
                        for (int y = x + 1; y < F_COUNT; y++)
                            covered[PAIR(x, c.v[x], y, c.v[y])] = 1;
                    combos_add(cs, &c);
                }

    /* the faults: each refused value, each conflict */
    int faults[F_COUNT * MAX_VALUES + N_CONFLICTS];
    size_t n_faults = 0;
    for (int f = 0; f < F_COUNT; f++)
        for (int v = 0; v < n_values(f); v++)
            if (!value_valid(f, v)) faults[n_faults++] = f * MAX_VALUES + v;
    for (size_t k = 0; k < N_CONFLICTS; k++)
        faults[n_faults++] = FAULT_CONFLICT + (int)k;
    for (size_t i = 0; i < n_faults; i++) {
        int fault = faults[i];
        unsigned char fcov[F_COUNT * MAX_VALUES] = {0};
        for (int f = 0; f < F_COUNT; f++)
            for (int v = 0; v < n_values(f); v++) {
                if (!allowed_value(fault, f, v)) continue;
                if (fault < FAULT_CONFLICT && fault_has(fault, f)) continue;
                cs->fault_pairs++;
                if (fcov[f * MAX_VALUES + v]) continue;
                combo c;
                if (!build_one(&c, &rng, f, v, -1, 0, fault, fcov)) {
                    fcov[f * MAX_VALUES + v] = 1;
                    cs->fault_impossible++;
                    continue;
                }
                for (int x = 0; x < F_COUNT; x++)
                    fcov[x * MAX_VALUES + c.v[x]] = 1;
                combos_add(cs, &c);
            }
    }
    free(covered);
}

/* "heads=h2d4 kv_heads=none …": every feature's value. */
static void describe(const combo *c, char *buf, size_t cap) {
    size_t k = 0;
    buf[0] = 0;
    for (int f = 0; f < F_COUNT && k < cap; f++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%s=%s", k ? " " : "", features[f].name,
                              features[f].v[c->v[f]].name);
}

/* ---- the problem's numbers ---------------------------------------------------- */

enum { T_Q = 1, T_K, T_V, T_BQ, T_BK, T_BV, T_O, T_BO };

/* Element i of weight `tag` of head (or K/V head) `unit` of layer l. */
static float wv(const problem *p, size_t l, int tag, size_t unit, size_t i) {
    return value_at(p->seed * 31 + (uint64_t)l * 0x10000 + (uint64_t)tag * 1000 + unit, i);
}

/* A key that describes one layer: written layers.<l>.<key> in a stack. */
static int layer_key(const char *key) {
    return strncmp(key, "rope_", 5) == 0 || strcmp(key, "alibi") == 0 ||
           strcmp(key, "window") == 0 || strcmp(key, "softcap") == 0 || strcmp(key, "scale") == 0 ||
           strncmp(key, "norm_", 5) == 0 || strncmp(key, "post_norm_", 10) == 0 ||
           strncmp(key, "qk_norm_", 8) == 0 || strncmp(key, "temperature_", 12) == 0 ||
           strcmp(key, "chunk") == 0;
}

/* Layer 1 of a stack: layer 0's fields without rope and softcap, so that a
 * layer without a key has that variant off, and another scale (none for
 * 0.25, 0.5 for none; a refused 0 stays). */
static void layer1_make(problem *p) {
    p->wfields1 = json_copy(p->wfields);
    json_object_del(p->wfields1, "rope");
    json_object_del(p->wfields1, "softcap");
    const json_t *s0 = json_object_get(p->wfields, "scale");
    p->lscale[1] = s0 ? 0 : 0.5;
    if (s0 && json_real_value(s0) != 0) json_object_del(p->wfields1, "scale");
    if (!s0) json_object_set_new(p->wfields1, "scale", json_real(0.5));
    for (size_t i = 0; i < p->n_meta; i++) {
        const char *key = p->meta[i].key;
        if (strncmp(key, "rope_", 5) == 0 || strcmp(key, "softcap") == 0 ||
            strcmp(key, "scale") == 0)
            continue;
        p->meta1[p->n_meta1++] = p->meta[i];
    }
    if (!s0) {
        meta_kv *kv = &p->meta1[p->n_meta1++];
        snprintf(kv->key, sizeof kv->key, "scale");
        snprintf(kv->value, sizeof kv->value, "0.5");
    }
}

/* The scale layer l's answer must carry: the request's, else the layer's. */
static double layer_scale(const problem *p, size_t l) {
    if (p->scale > 0) return p->scale;
    return p->lscale[l] > 0 ? p->lscale[l] : 1.0 / sqrt((double)p->dh);
}

static void problem_make(problem *p, const combo *c, unsigned idx) {
    memset(p, 0, sizeof *p);
    p->idx = idx;
    p->seed = 0xc0b1u + (uint64_t)idx * 0x9e3779b97f4a7c15ull;
    p->wfields = json_object();
    for (int f = 0; f < F_COUNT; f++)
        features[f].apply(p, c->v[f]);
    layer1_make(p);
    uint64_t s = p->seed ^ 0xda7a;
    for (size_t q = 0; q < p->n_seqs; q++) {
        size_t n = p->n[q], m = p->dc ? p->m[q] : n;
        for (size_t i = 0; i < n * DM; i++)
            p->emb[q][i] = value_at(p->seed + 100 + q, i);
        for (size_t i = 0; p->dc && i < m * p->dc; i++)
            p->ctx[q][i] = value_at(p->seed + 200 + q, i);
        for (size_t t = 0; t < n; t++)
            p->pos[q][t] = p->positions == POS_DEFAULT ? (long long)t
                           : p->positions == POS_FAR /* the last ones a position may take */
                               ? 2147483647LL - 2 * (long long)(n - 1 - t)
                               : 3 * (long long)t + (long long)(t % 2);
        if (p->positions == POS_NEGATIVE) p->pos[q][0] = -1;
        for (size_t i = 0; i < n * m; i++)
            p->custom[q][i] = below(&s, 10) < 6;
        if (q == 0 && n >= 3) /* a row with no key: all zeros, not NaN */
            memset(p->custom[q] + m, 0, m);
    }
}

static void problem_free(problem *p) {
    json_decref(p->wfields);
    json_decref(p->wfields1);
    json_decref(p->select);
    json_decref(p->ret);
}

/* Rows of K and V: the context's, or the embeddings'. */
static size_t keys_of(const problem *p, size_t s) {
    return p->dc ? p->m[s] : p->n[s];
}

/* Query q of sequence s may see key k (the mask, the window and the chunk). */
static int allowed(const problem *p, size_t s, size_t q, size_t k) {
    int kind = p->mask == MASK_DEFAULT ? (p->dc ? MASK_NONE : MASK_CAUSAL) : p->mask;
    int a = kind == MASK_CAUSAL ? k <= q
            : kind == MASK_NONE ? 1
                                : p->custom[s][q * keys_of(p, s) + k]; /* custom, 0/1 or booleans */
    if (p->window && !p->dc) {
        long long d = p->pos[s][q] - p->pos[s][k];
        if ((d < 0 ? -d : d) >= (long long)p->window) a = 0;
    }
    if (p->chunk && !p->dc &&
        p->pos[s][q] / (long long)p->chunk != p->pos[s][k] / (long long)p->chunk)
        a = 0;
    return a;
}

/* A matrix (rows × cols) or, with rows 0, a vector: nested arrays, or a
 * base64 tensor object (new reference). */
static json_t *jtensor(const float *x, size_t rows, size_t cols, int packed) {
    size_t count = (rows ? rows : 1) * cols;
    if (packed) {
        size_t len;
        ck_assert_int_eq(api_base64_encoded_length(count * sizeof(float), &len), 0);
        char *text = malloc(len + 1);
        text[api_base64_encode(text, x, count * sizeof(float))] = 0;
        json_t *shape = rows ? json_pack("[I,I]", (json_int_t)rows, (json_int_t)cols)
                             : json_pack("[I]", (json_int_t)cols);
        json_t *t = json_pack("{s:s,s:o,s:s}", "dtype", "float32", "shape", shape, "data", text);
        free(text);
        return t;
    }
    json_t *m = rows ? json_array() : NULL;
    for (size_t r = 0; r < (rows ? rows : 1); r++) {
        json_t *row = json_array();
        for (size_t c = 0; c < cols; c++)
            json_array_append_new(row, json_real(x[r * cols + c]));
        if (!rows) return row;
        json_array_append_new(m, row);
    }
    return m;
}

/* Weight `tag` of `unit` of layer l, rows × cols (rows 0: a vector of cols). */
static json_t *jweight(const problem *p, size_t l, int tag, size_t unit, size_t rows, size_t cols) {
    float x[MAX_H * MAX_DH * DM];
    size_t count = (rows ? rows : 1) * cols;
    ck_assert_uint_le(count, sizeof x / sizeof x[0]);
    for (size_t i = 0; i < count; i++)
        x[i] = wv(p, l, tag, unit, i);
    return jtensor(x, rows, cols, p->enc != ENC_JSON);
}

/* Layer l's weight set, as a request carries it. */
static json_t *weight_set(const problem *p, size_t l) {
    size_t kvr = p->dc ? p->dc : DM;
    json_t *w = json_object(), *heads = json_array();
    for (size_t i = 0; i < p->h; i++) {
        json_t *head = json_pack("{s:o}", "w_q", jweight(p, l, T_Q, i, DM, p->dh));
        if (p->biases) json_object_set_new(head, "b_q", jweight(p, l, T_BQ, i, 0, p->dh));
        if (!p->kv_heads) {
            json_object_set_new(head, "w_k", jweight(p, l, T_K, i, kvr, p->dh));
            json_object_set_new(head, "w_v", jweight(p, l, T_V, i, kvr, p->dh));
            if (p->biases) {
                json_object_set_new(head, "b_k", jweight(p, l, T_BK, i, 0, p->dh));
                json_object_set_new(head, "b_v", jweight(p, l, T_BV, i, 0, p->dh));
            }
        }
        json_array_append_new(heads, head);
    }
    json_object_set_new(w, "heads", heads);
    if (p->kv_heads) {
        json_t *kv = json_array();
        for (size_t u = 0; u < p->g; u++) {
            json_t *head = json_pack("{s:o,s:o}", "w_k", jweight(p, l, T_K, u, kvr, p->dh), "w_v",
                                     jweight(p, l, T_V, u, kvr, p->dh));
            if (p->biases) {
                json_object_set_new(head, "b_k", jweight(p, l, T_BK, u, 0, p->dh));
                json_object_set_new(head, "b_v", jweight(p, l, T_BV, u, 0, p->dh));
            }
            json_array_append_new(kv, head);
        }
        json_object_set_new(w, "kv_heads", kv);
    }
    if (p->w_o) {
        json_object_set_new(w, "w_o", jweight(p, l, T_O, 0, p->h * p->dh, DM));
        json_object_set_new(w, "b_o", jweight(p, l, T_BO, 0, 0, DM));
    }
    json_object_update(w, l ? p->wfields1 : p->wfields);
    return w;
}

/* The request's `weights`: one weight set, or {"layers": [set, …]}. */
static json_t *inline_weights(const problem *p) {
    if (p->n_layers == 1 && !p->stack_names) return weight_set(p, 0);
    json_t *layers = json_array();
    for (size_t l = 0; l < p->n_layers; l++)
        json_array_append_new(layers, weight_set(p, l));
    return json_pack("{s:o}", "layers", layers);
}

/* One layer's tensors, named <prefix><name>, and what they point to. */
typedef struct layer_file {
    float qkv[DM * (3 * MAX_H * MAX_DH)], kv[MAX_DC * 2 * MAX_H * MAX_DH];
    float b_qkv[3 * MAX_H * MAX_DH], b_kv[2 * MAX_H * MAX_DH];
    float w_o[MAX_H * MAX_DH * DM], b_o[DM];
    size_t s_qkv[2], s_bqkv[1], s_kv[2], s_bkv[1], s_wo[2], s_bo[1], s_alibi[1], s_rope[1];
    char names[11][48];
} layer_file;

/* Appends layer l's tensors to t (nt of them so far), named with prefix
 * ("" or "layers.<l>."). */
static void layer_tensors(const problem *p, size_t l, const char *prefix, layer_file *b,
                          store_write_tensor *t, size_t *nt) {
    size_t h = p->h, g = p->g, dh = p->dh, hd = h * dh, gd = g * dh;
    size_t kvr = p->dc ? p->dc : DM;
    size_t qcols = p->cross_file ? hd : hd + 2 * gd;
    for (size_t r = 0; r < DM; r++)
        for (size_t i = 0; i < h; i++)
            for (size_t c = 0; c < dh; c++)
                b->qkv[r * qcols + i * dh + c] = wv(p, l, T_Q, i, r * dh + c);
    for (size_t i = 0; i < h; i++)
        for (size_t c = 0; c < dh; c++)
            b->b_qkv[i * dh + c] = wv(p, l, T_BQ, i, c);
    /* K and V: beside Q in w_qkv, or apart in w_kv */
    float *kvm = p->cross_file ? b->kv : b->qkv, *kvb = p->cross_file ? b->b_kv : b->b_qkv;
    size_t cols = p->cross_file ? 2 * gd : qcols, at = p->cross_file ? 0 : hd;
    for (size_t r = 0; r < kvr; r++)
        for (size_t u = 0; u < g; u++)
            for (size_t c = 0; c < dh; c++) {
                kvm[r * cols + at + u * dh + c] = wv(p, l, T_K, u, r * dh + c);
                kvm[r * cols + at + gd + u * dh + c] = wv(p, l, T_V, u, r * dh + c);
            }
    for (size_t u = 0; u < g; u++)
        for (size_t c = 0; c < dh; c++) {
            kvb[at + u * dh + c] = wv(p, l, T_BK, u, c);
            kvb[at + gd + u * dh + c] = wv(p, l, T_BV, u, c);
        }
    for (size_t i = 0; i < hd * DM; i++)
        b->w_o[i] = wv(p, l, T_O, 0, i);
    for (size_t i = 0; i < DM; i++)
        b->b_o[i] = wv(p, l, T_BO, 0, i);

    b->s_qkv[0] = DM, b->s_qkv[1] = qcols, b->s_bqkv[0] = qcols;
    b->s_kv[0] = kvr, b->s_kv[1] = 2 * gd, b->s_bkv[0] = 2 * gd;
    b->s_wo[0] = hd, b->s_wo[1] = DM, b->s_bo[0] = DM, b->s_alibi[0] = h, b->s_rope[0] = 1;
    size_t k = 0;
#define TENSOR(name, rank, shape, data)                                                            \
    do {                                                                                           \
        snprintf(b->names[k], sizeof b->names[k], "%s%s", prefix, name);                           \
        t[(*nt)++] =                                                                               \
            (store_write_tensor){b->names[k++], STORE_DTYPE_F32, rank, shape, data, NULL, NULL};   \
    } while (0)
    TENSOR(p->cross_file ? "w_q" : "w_qkv", 2, b->s_qkv, b->qkv);
    if (p->biases) TENSOR(p->cross_file ? "b_q" : "b_qkv", 1, b->s_bqkv, b->b_qkv);
    if (p->cross_file) {
        TENSOR("w_kv", 2, b->s_kv, b->kv);
        if (p->biases) TENSOR("b_kv", 1, b->s_bkv, b->b_kv);
    }
    if (p->w_o) {
        TENSOR("w_o", 2, b->s_wo, b->w_o);
        TENSOR("b_o", 1, b->s_bo, b->b_o);
    }
    if (p->alibi_tensor) TENSOR("alibi", 1, b->s_alibi, p->alibi);
    if (p->rope_tensors && l == 0) { /* layer 1 has no rope */
        TENSOR("rope_short_factor", 1, b->s_rope, &p->rope_lists[0]);
        TENSOR("rope_long_factor", 1, b->s_rope, &p->rope_lists[1]);
    }
    if (p->sinks) TENSOR("sinks", 1, b->s_alibi, p->sink); /* [h], as the slopes */
#undef TENSOR
}

/* The combination's weights as <dir>/c<idx>.safetensors (models/README.md):
 * the same numbers as inline_weights; a stack (or one layer in the stack's
 * form) with n_layers and its layers.<l>. names. */
static void write_model(const problem *p, const char *dir) {
    static layer_file bufs[MAX_LAYERS];
    store_write_tensor t[10 * MAX_LAYERS];
    size_t nt = 0;
    int stacked = p->n_layers > 1 || p->stack_names;
    char prefix[MAX_LAYERS][16], keys[2 * 16][64], heads[16], n_layers[16], path[512];
    snprintf(heads, sizeof heads, "%zu", p->h);
    snprintf(n_layers, sizeof n_layers, "%zu", p->n_layers);
    /* A self-attention file is causal even when the combination sends a
     * context: its default mask is then "none", as the contract says. */
    store_metadata meta[4 + 2 * 16] = {{"n_heads", heads},
                                       {"mask", p->cross_file ? "none" : "causal"},
                                       {"source", "tests/test_combos.c"}};
    size_t nm = 3, nk = 0;
    if (stacked) meta[nm++] = (store_metadata){"n_layers", n_layers};
    for (size_t l = 0; l < p->n_layers; l++) {
        if (stacked)
            snprintf(prefix[l], sizeof prefix[l], "layers.%zu.", l);
        else
            prefix[l][0] = '\0';
        layer_tensors(p, l, prefix[l], &bufs[l], t, &nt);
        const meta_kv *kv = l ? p->meta1 : p->meta;
        size_t n = l ? p->n_meta1 : p->n_meta;
        for (size_t i = 0; i < n; i++) {
            if (stacked && layer_key(kv[i].key)) {
                snprintf(keys[nk], sizeof keys[nk], "%.15s%.39s", prefix[l], kv[i].key);
                meta[nm++] = (store_metadata){keys[nk++], kv[i].value};
            } else if (l == 0) { /* the whole model's, once */
                meta[nm++] = (store_metadata){kv[i].key, kv[i].value};
            }
        }
    }
    snprintf(path, sizeof path, "%s/c%u.safetensors", dir, p->idx);
    attn_error err;
    ck_assert_msg(store_file_write(path, meta, nm, t, nt, NULL, &err) == 0, "%s: %s", path,
                  err.message);
}

/* ---- the requests --------------------------------------------------------------- */

static json_t *positions_json(const problem *p, size_t s) {
    json_t *a = json_array();
    for (size_t t = 0; t < p->n[s]; t++)
        json_array_append_new(a, json_integer(p->pos[s][t]));
    return a;
}

static json_t *custom_json(const problem *p, size_t s) {
    size_t n = p->n[s], m = keys_of(p, s);
    json_t *a = json_array();
    for (size_t q = 0; q < n; q++) {
        json_t *row = json_array();
        for (size_t k = 0; k < m; k++)
            json_array_append_new(row, p->mask == MASK_CUSTOM_BOOL
                                           ? json_boolean(p->custom[s][q * m + k])
                                           : json_integer(p->custom[s][q * m + k]));
        json_array_append_new(a, row);
    }
    return a;
}

/* A sequence's own fields: embeddings, context, positions, a custom mask
 * (with `mask`: any mask, for /v1). */
static void sequence_fields(json_t *o, const problem *p, size_t s, int mask) {
    int packed = p->enc != ENC_JSON;
    json_object_set_new(o, "embeddings", jtensor(p->emb[s], p->n[s], DM, packed));
    if (p->dc) json_object_set_new(o, "context", jtensor(p->ctx[s], p->m[s], p->dc, packed));
    if (p->positions != POS_DEFAULT) json_object_set_new(o, "positions", positions_json(p, s));
    if (p->mask == MASK_CUSTOM || p->mask == MASK_CUSTOM_BOOL)
        json_object_set_new(o, "mask", custom_json(p, s));
    else if (mask && p->mask != MASK_DEFAULT)
        json_object_set_new(o, "mask", json_string(p->mask == MASK_CAUSAL ? "causal" : "none"));
}

/* The request's `layers`. */
static json_t *listed_json(const problem *p) {
    json_t *a = json_array();
    for (size_t i = 0; i < p->n_listed; i++)
        json_array_append_new(a, json_integer((json_int_t)p->listed[i]));
    return a;
}

/* What a /v1 request and a batch share: the weights and the options. */
static void shared_fields(json_t *o, const problem *p, int model) {
    if (model) {
        char name[32];
        snprintf(name, sizeof name, "c%u", p->idx);
        json_object_set_new(o, "model", json_string(name));
    } else {
        json_object_set_new(o, "weights", inline_weights(p));
    }
    if (p->scale != 0) json_object_set_new(o, "scale", json_real(p->scale));
    if (p->select) json_object_set(o, "select_heads", p->select);
    if (p->layers_sent) json_object_set_new(o, "layers", listed_json(p));
    if (p->ret) json_object_set(o, "return", p->ret);
    if (p->enc == ENC_PACKED) json_object_set_new(o, "encoding", json_string("base64"));
}

static char *v1_body(const problem *p, size_t s, int model) {
    json_t *o = json_object();
    shared_fields(o, p, model);
    sequence_fields(o, p, s, 1);
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

static char *batch_body(const problem *p, int model) {
    json_t *o = json_object(), *seqs = json_array();
    shared_fields(o, p, model);
    if (p->mask == MASK_CAUSAL || p->mask == MASK_NONE)
        json_object_set_new(o, "mask", json_string(p->mask == MASK_CAUSAL ? "causal" : "none"));
    for (size_t s = 0; s < p->n_seqs; s++) {
        json_t *seq = json_object();
        sequence_fields(seq, p, s, 0);
        json_array_append_new(seqs, seq);
    }
    json_object_set_new(o, "sequences", seqs);
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

/* /v2's padded layout: B rows of n_pad tokens (and m_pad context rows),
 * sequence s's first real one at tok_off[s] (ctx_off[s]). */
typedef struct v2_layout {
    size_t B, n_pad, m_pad, tok_off[MAX_SEQS], ctx_off[MAX_SEQS];
    int rank2; /* [n, d_model] without the batch axis */
    int token_padding, context_padding;
} v2_layout;

static v2_layout v2_layout_of(const problem *p) {
    v2_layout l = {.B = p->n_seqs};
    for (size_t s = 0; s < p->n_seqs; s++) {
        if (p->n[s] > l.n_pad) l.n_pad = p->n[s];
        if (p->m[s] > l.m_pad) l.m_pad = p->m[s];
    }
    /* padding asked: one more row at least, on its side; else only what
     * sequences of different lengths need, on the right */
    if (p->pad != PAD_NONE) l.n_pad++, l.m_pad++;
    for (size_t s = 0; s < p->n_seqs; s++) {
        l.tok_off[s] = p->pad == PAD_LEFT ? l.n_pad - p->n[s] : 0;
        l.ctx_off[s] = p->pad == PAD_LEFT ? l.m_pad - p->m[s] : 0;
        l.token_padding |= p->n[s] < l.n_pad;
        l.context_padding |= p->dc && p->m[s] < l.m_pad;
    }
    l.rank2 = l.B == 1 && (p->idx & 1);
    return l;
}

static void v2_body(const problem *p, const v2_layout *l, oc_body *b) {
    static float emb[MAX_SEQS * MAX_N * DM], ctx[MAX_SEQS * MAX_M * MAX_DC];
    static int32_t mask32[MAX_SEQS * MAX_N], cmask32[MAX_SEQS * MAX_M];
    static uint8_t mask8[MAX_SEQS * MAX_N], cmask8[MAX_SEQS * MAX_M];
    static int64_t pos[MAX_SEQS * MAX_N];
    size_t B = l->B, n = l->n_pad, m = l->m_pad, dc = p->dc;
    memset(emb, 0, sizeof emb), memset(ctx, 0, sizeof ctx), memset(pos, 0, sizeof pos);
    memset(mask32, 0, sizeof mask32), memset(cmask32, 0, sizeof cmask32);
    memset(mask8, 0, sizeof mask8), memset(cmask8, 0, sizeof cmask8);
    for (size_t s = 0; s < B; s++) {
        for (size_t t = 0; t < p->n[s]; t++) {
            size_t at = s * n + l->tok_off[s] + t;
            memcpy(emb + at * DM, p->emb[s] + t * DM, DM * sizeof(float));
            mask32[at] = 1, mask8[at] = 1;
            pos[at] = p->pos[s][t];
        }
        for (size_t j = 0; dc && j < p->m[s]; j++) {
            size_t at = s * m + l->ctx_off[s] + j;
            memcpy(ctx + at * dc, p->ctx[s] + j * dc, dc * sizeof(float));
            cmask32[at] = 1, cmask8[at] = 1;
        }
    }
    int bin = p->enc != ENC_JSON, boolean = (p->idx & 2) != 0;
    oc_input in[5];
    size_t ni = 0;
#define SHAPE2(a, b) {(long long)(a), (long long)(b), 0}
#define SHAPE3(a, b, c)                                                                            \
    { (long long)(a), (long long)(b), (long long)(c) }
    in[ni++] = l->rank2 ? (oc_input){"embeddings", "FP32", 2, SHAPE2(n, DM), emb, bin}
                        : (oc_input){"embeddings", "FP32", 3, SHAPE3(B, n, DM), emb, bin};
    if (l->token_padding)
        in[ni++] = l->rank2 ? (oc_input){"attention_mask", boolean ? "BOOL" : "INT32",       1,
                                         SHAPE2(n, 0),     boolean ? (void *)mask8 : mask32, bin}
                            : (oc_input){"attention_mask", boolean ? "BOOL" : "INT32",       2,
                                         SHAPE2(B, n),     boolean ? (void *)mask8 : mask32, bin};
    if (p->positions != POS_DEFAULT)
        in[ni++] = l->rank2 ? (oc_input){"positions", "INT64", 1, SHAPE2(n, 0), pos, bin}
                            : (oc_input){"positions", "INT64", 2, SHAPE2(B, n), pos, bin};
    if (dc) {
        in[ni++] = l->rank2 ? (oc_input){"context", "FP32", 2, SHAPE2(m, dc), ctx, bin}
                            : (oc_input){"context", "FP32", 3, SHAPE3(B, m, dc), ctx, bin};
        const char *dt = boolean ? "BOOL" : "INT32";
        void *cm = boolean ? (void *)cmask8 : cmask32;
        if (l->context_padding)
            in[ni++] = l->rank2 ? (oc_input){"context_mask", dt, 1, SHAPE2(m, 0), cm, bin}
                                : (oc_input){"context_mask", dt, 2, SHAPE2(B, m), cm, bin};
    }
#undef SHAPE2
#undef SHAPE3
    oc_output outs[O_COUNT + 1];
    size_t no = 0;
    int out_bin = p->enc == ENC_PACKED ? 1 : p->enc == ENC_MIXED ? 0 : -1;
    if (p->ret) {
        for (int o = 0; o < O_COUNT; o++)
            if ((p->outs & OUT(o)) && o != O_QR && o != O_KR)
                outs[no++] = (oc_output){out_names[o], out_bin};
        if (p->bad_output) outs[no++] = (oc_output){p->bad_output, out_bin};
    }
    json_t *params = json_object();
    if (p->mask == MASK_CAUSAL || p->mask == MASK_NONE)
        json_object_set_new(params, "mask",
                            json_string(p->mask == MASK_CAUSAL ? "causal" : "none"));
    if (p->scale != 0) json_object_set_new(params, "scale", json_real(p->scale));
    if (p->select && p->select_string) {
        char text[64];
        snprintf(text, sizeof text, "%lld,%lld", json_integer_value(json_array_get(p->select, 0)),
                 json_integer_value(json_array_get(p->select, 1)));
        json_object_set_new(params, "select_heads", json_string(text));
    } else if (p->select) {
        json_object_set(params, "select_heads", p->select);
    }
    if (p->layers_sent && p->layers_string) {
        char text[64];
        size_t k = 0;
        for (size_t i = 0; i < p->n_listed; i++)
            k += (size_t)snprintf(text + k, sizeof text - k, "%s%zu", i ? "," : "", p->listed[i]);
        json_object_set_new(params, "layers", json_string(text));
    } else if (p->layers_sent) {
        json_object_set_new(params, "layers", listed_json(p));
    }
    char *ptext = json_dumps(params, JSON_COMPACT);
    json_decref(params);
    oc_build(b, NULL, in, ni, p->ret ? outs : NULL, no, ptext, p->enc == ENC_PACKED);
    free(ptext);
}

/* ---- failures, collected -------------------------------------------------------- */

typedef struct report {
    char *text;
    size_t len;
    FILE *f;
    int failures;
    /* counts */
    size_t requests, answered, refused;
} report;

/* The run at hand, for the messages. */
typedef struct ctx {
    report *rep;
    const combo *c;
    const problem *p;
    int run;
    const char *body; /* the request, as text (its JSON part for /v2) */
    size_t body_len;
    int failed; /* this run failed once already */
} ctx;

static void complain(ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void complain(ctx *x, const char *fmt, ...) {
    report *r = x->rep;
    r->failures++;
    if (x->failed++ || r->failures > 25) return; /* the first of each run, 25 at most */
    char what[1024];
    describe(x->c, what, sizeof what);
    fprintf(r->f, "\ncombination %u, %s: ", x->p->idx, run_names[x->run]);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(r->f, fmt, ap);
    va_end(ap);
    fprintf(r->f, "\n  %s\n  request: %.*s%s\n", what,
            (int)(x->body_len < 1500 ? x->body_len : 1500), x->body, x->body_len > 1500 ? "…" : "");
}

/* ---- the answers ---------------------------------------------------------------- */

/* v is the string s. */
static int str_is(const json_t *v, const char *s) {
    return json_is_string(v) && strcmp(json_string_value(v), s) == 0;
}

/* One sequence's outputs, in /v1's shapes, masked scores -inf; a per-head
 * output (and O_LD, O_LE) holds the listed layers' one after the other. */
typedef struct seq_out {
    float *v[O_COUNT];
    size_t count[O_COUNT];
} seq_out;

static void seq_out_free(seq_out *o) {
    for (int k = 0; k < O_COUNT; k++)
        free(o->v[k]);
    memset(o, 0, sizeof *o);
}

/* Output o's shape for sequence s: heads × rows × cols (heads 0: rows × cols). */
static void out_shape(const problem *p, size_t s, int o, size_t dims[3]) {
    size_t n = p->n[s], m = keys_of(p, s);
    switch (o) {
    case O_Q:
    case O_QR:
    case O_Z: dims[0] = p->hs, dims[1] = n, dims[2] = p->dh; break;
    case O_K:
    case O_V:
    case O_KR: dims[0] = p->hs, dims[1] = m, dims[2] = p->dh; break;
    case O_S:
    case O_P: dims[0] = p->hs, dims[1] = n, dims[2] = m; break;
    case O_R: dims[0] = 0, dims[1] = n, dims[2] = n; break;
    default: dims[0] = 0, dims[1] = n, dims[2] = DM; break;
    }
}

static size_t shape_count(const size_t dims[3]) {
    return (dims[0] ? dims[0] : 1) * dims[1] * dims[2];
}

/* Nested arrays of `depth` levels of the expected sizes into dst; null only
 * where `nulls` (masked scores). 0, or -1. */
static int flatten(const json_t *v, const size_t *dims, int depth, int nulls, float *dst,
                   size_t *k) {
    if (depth == 0) {
        if (json_is_null(v) && nulls) {
            dst[(*k)++] = -INFINITY;
            return 0;
        }
        if (!json_is_number(v)) return -1;
        dst[(*k)++] = (float)json_number_value(v);
        return 0;
    }
    if (!json_is_array(v) || json_array_size(v) != dims[0]) return -1;
    for (size_t i = 0; i < dims[0]; i++)
        if (flatten(json_array_get(v, i), dims + 1, depth - 1, nulls, dst, k) < 0) return -1;
    return 0;
}

/* /v1's value of output o (nested arrays or a base64 tensor), appended to
 * out's (a layer's after the layers before it). */
static int v1_output(ctx *x, const json_t *val, size_t s, int o, seq_out *out) {
    size_t dims[3];
    out_shape(x->p, s, o, dims);
    size_t want = shape_count(dims);
    float *v = malloc((want ? want : 1) * sizeof *v);
    const size_t *d = dims[0] ? dims : dims + 1;
    int depth = dims[0] ? 3 : 2;
    if (json_is_object(val)) {
        const json_t *shape = json_object_get(val, "shape");
        const char *data = json_string_value(json_object_get(val, "data"));
        size_t bytes = 0, bad;
        int ok = data && str_is(json_object_get(val, "dtype"), "float32") &&
                 json_array_size(shape) == (size_t)depth &&
                 api_base64_decoded_length(data, strlen(data), &bytes) == 0 &&
                 bytes == want * sizeof(float);
        for (int i = 0; ok && i < depth; i++)
            ok = json_integer_value(json_array_get(shape, (size_t)i)) == (json_int_t)d[i];
        if (!ok || api_base64_decode(v, data, strlen(data), &bad) != 0) {
            free(v);
            complain(x, "sequence %zu: %s is not a float32 tensor of %zu values", s, out_names[o],
                     want);
            return -1;
        }
    } else {
        size_t k = 0;
        if (flatten(val, d, depth, o == O_S, v, &k) < 0 || k != want) {
            free(v);
            complain(x, "sequence %zu: %s is not %zu × %zu × %zu numbers", s, out_names[o], dims[0],
                     dims[1], dims[2]);
            return -1;
        }
    }
    float *all = realloc(out->v[o], (out->count[o] + want + 1) * sizeof *all);
    ck_assert_ptr_nonnull(all);
    memcpy(all + out->count[o], v, want * sizeof *v);
    free(v);
    out->v[o] = all;
    out->count[o] += want;
    return 0;
}

/* Output `name` (o's) of a /v1 object: asked, answered; not asked, absent. */
static int v1_field(ctx *x, const json_t *j, const char *name, int asked, size_t s, int o,
                    seq_out *out) {
    const json_t *val = json_object_get(j, name);
    if (!asked) {
        if (!val) return 0;
        complain(x, "sequence %zu: %s answered, not asked%s", s, name,
                 x->p->stack && PER_HEAD(o) ? " (a stack's are in its layers)" : "");
        return -1;
    }
    if (!val) {
        complain(x, "sequence %zu: %s asked, not answered", s, name);
        return -1;
    }
    return v1_output(x, val, s, o, out);
}

/* The heads /v1, the batch and a stack's layers answer, against
 * select_heads. */
static int check_heads(ctx *x, const json_t *j) {
    const json_t *heads = json_object_get(j, "heads");
    int ok = json_array_size(heads) == x->p->hs;
    for (size_t i = 0; ok && i < x->p->hs; i++)
        ok = json_integer_value(json_array_get(heads, i)) == (json_int_t)x->p->heads[i];
    if (!ok) complain(x, "heads is not the %zu heads selected", x->p->hs);
    return ok ? 0 : -1;
}

/* What /v1 and the batch answer beside the sequences: the heads and the
 * number of layers. */
static int check_shared(ctx *x, const json_t *j) {
    if (check_heads(x, j) < 0) return -1;
    if (json_integer_value(json_object_get(j, "n_layers")) != (json_int_t)x->p->n_layers) {
        complain(x, "n_layers is not %zu", x->p->n_layers);
        return -1;
    }
    return 0;
}

/* Layer entry i of a stack's "layers": the listed layer, its scale and
 * heads, and its outputs appended to out's. */
static int v1_layer(ctx *x, const json_t *e, size_t s, size_t i, seq_out *out) {
    const problem *p = x->p;
    size_t l = p->listed[i];
    if (json_integer_value(json_object_get(e, "layer")) != (json_int_t)l) {
        complain(x, "sequence %zu: layers[%zu] is not layer %zu", s, i, l);
        return -1;
    }
    double want = layer_scale(p, l), got = json_number_value(json_object_get(e, "scale"));
    if (!json_is_number(json_object_get(e, "scale")) || fabs(got - want) > 1e-6 * want) {
        complain(x, "sequence %zu: layer %zu's scale is %.9g, not %.9g", s, l, got, want);
        return -1;
    }
    if (check_heads(x, e) < 0) return -1;
    for (int o = 0; o <= O_E; o++) {
        int asked = (p->outs & OUT(o)) != 0;
        int into = o == O_D ? O_LD : o == O_E ? O_LE : o;
        if (v1_field(x, e, out_names[o], asked, s, into, out) < 0) return -1;
    }
    return 0;
}

/* A /v1 answer for one sequence (a single answer, or one of a batch's):
 * the per-head outputs at its top, or in its layers for a stack. */
static int v1_sequence(ctx *x, const json_t *j, size_t s, seq_out *out) {
    const problem *p = x->p;
    if (json_integer_value(json_object_get(j, "n_tokens")) != (json_int_t)p->n[s]) {
        complain(x, "sequence %zu: n_tokens is not %zu", s, p->n[s]);
        return -1;
    }
    const json_t *layers = json_object_get(j, "layers");
    if (!p->stack && layers) {
        complain(x, "sequence %zu: layers answered for one layer not listed", s);
        return -1;
    }
    if (p->stack && json_array_size(layers) != p->n_listed) {
        complain(x, "sequence %zu: layers holds %zu entries, not %zu", s, json_array_size(layers),
                 p->n_listed);
        return -1;
    }
    for (size_t i = 0; p->stack && i < p->n_listed; i++)
        if (v1_layer(x, json_array_get(layers, i), s, i, out) < 0) return -1;
    for (int o = 0; o <= O_R; o++) {
        int asked = (p->outs & OUT(o)) && !(p->stack && PER_HEAD(o));
        if (v1_field(x, j, out_names[o], asked, s, o, out) < 0) return -1;
    }
    return 0;
}

/* Output `name` of a /v2 answer: its values (masked scores -inf) and shape
 * (rank ≤ 5). */
static float *v2_values(ctx *x, const oc_result *r, const char *name, size_t *count,
                        long long *shape, size_t *rank) {
    size_t at = 0, i;
    const json_t *o;
    json_array_foreach(json_object_get(r->json, "outputs"), i, o) {
        const json_t *size = json_object_get(json_object_get(o, "parameters"), "binary_data_size");
        if (!str_is(json_object_get(o, "name"), name)) {
            if (size) at += (size_t)json_integer_value(size);
            continue;
        }
        const json_t *sh = json_object_get(o, "shape");
        size_t n = 1;
        *rank = json_array_size(sh);
        for (size_t d = 0; d < *rank && d < 5; d++) {
            shape[d] = json_integer_value(json_array_get(sh, d));
            n *= (size_t)shape[d];
        }
        if (!str_is(json_object_get(o, "datatype"), "FP32") || *rank > 5) {
            complain(x, "/v2 output %s: not FP32 of rank ≤ 5", name);
            return NULL;
        }
        float *v = malloc((n ? n : 1) * sizeof *v);
        size_t k = 0;
        if (size) {
            if ((size_t)json_integer_value(size) != n * sizeof(float) ||
                at + n * sizeof(float) > r->bin_len) {
                free(v);
                complain(x, "/v2 output %s: binary_data_size does not fit", name);
                return NULL;
            }
            memcpy(v, r->bin + at, n * sizeof(float));
        } else {
            /* flat or nested, as the protocol allows */
            const json_t *data = json_object_get(o, "data");
            json_t *stack[8];
            size_t idx[8], depth = 0;
            if (!json_is_array(data)) {
                free(v);
                complain(x, "/v2 output %s: no data", name);
                return NULL;
            }
            stack[0] = (json_t *)data, idx[0] = 0;
            while (1) {
                if (idx[depth] == json_array_size(stack[depth])) {
                    if (depth == 0) break;
                    depth--;
                    continue;
                }
                const json_t *e = json_array_get(stack[depth], idx[depth]++);
                if (json_is_array(e) && depth < 7) {
                    stack[++depth] = (json_t *)e, idx[depth] = 0;
                } else if (json_is_number(e) && k < n) {
                    v[k++] = (float)json_number_value(e);
                } else {
                    k = n + 1;
                    break;
                }
            }
            if (k != n) {
                free(v);
                complain(x, "/v2 output %s: data does not hold its shape's %zu numbers", name, n);
                return NULL;
            }
        }
        if (strcmp(name, "scores") == 0) /* JSON has no -inf: the lowest float stands for it */
            for (size_t e = 0; e < n; e++)
                if (v[e] <= -3.4028234e38f) v[e] = -INFINITY;
        *count = n;
        return v;
    }
    complain(x, "/v2 output %s asked, not answered", name);
    return NULL;
}

/* Output o of sequence s out of /v2's padded tensor (a stack's per-head
 * ones with a layer axis after the batch's); its padded rows (and, in
 * patterns, rollout and self-attention's k and v, padded keys) checked. */
static int v2_sequence_output(ctx *x, const v2_layout *l, const float *all, const long long *shape,
                              size_t rank, size_t s, int o, seq_out *out) {
    const problem *p = x->p;
    size_t dims[3];
    out_shape(p, s, o, dims);
    int per_head = dims[0] != 0, key_rows = o == O_K || o == O_V;
    int key_cols = o == O_S || o == O_P || o == O_R, ctx_cols = key_cols && p->dc && o != O_R;
    size_t rows_pad = key_rows && p->dc ? l->m_pad : l->n_pad;
    size_t cols_pad = key_cols ? (ctx_cols ? l->m_pad : l->n_pad) : dims[2];
    size_t row_off = key_rows && p->dc ? l->ctx_off[s] : l->tok_off[s];
    size_t col_off = key_cols ? (ctx_cols ? l->ctx_off[s] : l->tok_off[s]) : 0;
    size_t real_rows = dims[1], real_cols = dims[2];
    size_t layers = per_head && p->stack ? p->n_listed : 1;
    long long want[5];
    size_t wr = 0;
    if (!l->rank2) want[wr++] = (long long)l->B;
    if (per_head && p->stack) want[wr++] = (long long)layers;
    if (per_head) want[wr++] = (long long)p->hs;
    want[wr++] = (long long)rows_pad, want[wr++] = (long long)cols_pad;
    int ok = rank == wr;
    for (size_t d = 0; ok && d < wr; d++)
        ok = shape[d] == want[d];
    if (!ok) {
        complain(x, "/v2 output %s: shape of rank %zu, not the expected [%lld, %lld, …]",
                 out_names[o], rank, want[0], want[1]);
        return -1;
    }
    size_t heads = layers * (per_head ? p->hs : 1), block = rows_pad * cols_pad;
    size_t base = l->rank2 ? 0 : s * heads * block;
    float *v = malloc(layers * shape_count(dims) * sizeof *v);
    size_t k = 0;
    for (size_t hh = 0; hh < heads; hh++) /* a layer's heads, then the next layer's */
        for (size_t r = 0; r < rows_pad; r++)
            for (size_t c = 0; c < cols_pad; c++) {
                float e = all[base + hh * block + r * cols_pad + c];
                int real_r = r >= row_off && r < row_off + real_rows;
                int real_c = c >= col_off && c < col_off + real_cols;
                int pad_row = !real_r && (!key_rows || !p->dc);
                if (real_r && real_c) {
                    v[k++] = e;
                } else if (pad_row && e != 0) {
                    complain(x, "/v2 %s: sequence %zu's padded row %zu holds %g, not 0",
                             out_names[o], s, r, e);
                } else if (real_r && (o == O_P || o == O_R) && e != 0) {
                    complain(x, "/v2 %s: sequence %zu's padded key %zu weighs %g", out_names[o], s,
                             c, e);
                } else if (real_r && o == O_S && e != -INFINITY) {
                    complain(x, "/v2 scores: sequence %zu's padded key %zu is %g, not masked", s, c,
                             e);
                }
            }
    out->v[o] = v;
    out->count[o] = k;
    return 0;
}

/* ---- checks on an answer ----------------------------------------------------------- */

/* The listed entry of layer l, or -1 when l is not listed. */
static int listed_at(const problem *p, size_t l) {
    for (size_t i = 0; i < p->n_listed; i++)
        if (p->listed[i] == l) return (int)i;
    return -1;
}

/* Every listed layer's entry, in any order: what is asked of every layer
 * is at hand. */
static int all_listed(const problem *p) {
    for (size_t l = 0; l < p->n_layers; l++)
        if (listed_at(p, l) < 0) return 0;
    return 1;
}

/* The rollout: rows of weights ≥ 0 summing to 1 and, when the patterns of
 * every head of every layer are at hand, the product of the layers'
 * row-normalised ½·(mean of the heads' patterns) + ½·I, last layer first
 * (docs/API.md, "Layers"). */
static void check_rollout(ctx *x, size_t s, const seq_out *out) {
    const problem *p = x->p;
    size_t n = p->n[s], m = keys_of(p, s);
    const float *got = out->v[O_R];
    for (size_t q = 0; q < n; q++) {
        double sum = 0;
        for (size_t k = 0; k < n; k++) {
            if (got[q * n + k] < 0) {
                complain(x, "sequence %zu: rollout[%zu][%zu] = %g", s, q, k, got[q * n + k]);
                return;
            }
            sum += got[q * n + k];
        }
        if (fabs(sum - 1) > 1e-5) {
            complain(x, "sequence %zu: rollout[%zu] sums to %.9g", s, q, sum);
            return;
        }
    }
    if (!out->v[O_P] || p->hs != p->h || !all_listed(p) || m != n) return;
    double r[MAX_N * MAX_N] = {0}, a[MAX_N * MAX_N], t[MAX_N * MAX_N];
    for (size_t q = 0; q < n; q++)
        r[q * n + q] = 1;
    for (size_t l = 0; l < p->n_layers; l++) {
        const float *pat = out->v[O_P] + (size_t)listed_at(p, l) * p->hs * n * n;
        for (size_t q = 0; q < n; q++) {
            double sum = 0;
            for (size_t k = 0; k < n; k++) {
                double mean = 0;
                for (size_t hh = 0; hh < p->hs; hh++)
                    mean += pat[(hh * n + q) * n + k];
                a[q * n + k] = 0.5 * mean / (double)p->hs + 0.5 * (q == k);
                sum += a[q * n + k];
            }
            for (size_t k = 0; k < n; k++)
                a[q * n + k] /= sum;
        }
        for (size_t q = 0; q < n; q++) /* r = a · r */
            for (size_t k = 0; k < n; k++) {
                t[q * n + k] = 0;
                for (size_t j = 0; j < n; j++)
                    t[q * n + k] += a[q * n + j] * r[j * n + k];
            }
        memcpy(r, t, n * n * sizeof *r);
    }
    for (size_t i = 0; i < n * n; i++)
        if (fabs(got[i] - r[i]) > 1e-5) {
            complain(x, "sequence %zu: rollout[%zu][%zu] is %.9g, the patterns make %.9g", s, i / n,
                     i % n, got[i], r[i]);
            return;
        }
}

/* A stack's stream, layer by layer (the layers' delta and embeddings of a
 * /v1 answer, every layer listed): E_{l+1} − ΔE_l is E_l (E_0 the request's
 * embeddings), the top-level delta is the layers' sum and embeddings the
 * last layer's. */
static void check_stream(ctx *x, size_t s, const seq_out *out) {
    const problem *p = x->p;
    size_t n = p->n[s], size = n * DM;
    const float *ld = out->v[O_LD], *le = out->v[O_LE];
    if (!all_listed(p) || (!ld && !le)) return;
    for (size_t i = 0; i < size; i++) {
        double sum = 0, before = p->emb[s][i];
        for (size_t l = 0; l < p->n_layers; l++) {
            size_t at = (size_t)listed_at(p, l) * size + i;
            double d = ld ? ld[at] : 0, e = le ? le[at] : 0;
            if (ld && le && fabs(e - d - before) > 1e-5 + 1e-5 * fabs(e)) {
                complain(x, "sequence %zu: layer %zu's embeddings[%zu] − delta is %.9g, not %.9g",
                         s, l, i, e - d, before);
                return;
            }
            sum += d, before = e;
        }
        if (ld && out->v[O_D] && fabs(out->v[O_D][i] - sum) > 1e-5 + 1e-5 * fabs(sum)) {
            complain(x, "sequence %zu: delta[%zu] is %.9g, the layers' sum %.9g", s, i,
                     out->v[O_D][i], sum);
            return;
        }
        if (le && out->v[O_E] && fabs(out->v[O_E][i] - before) > 1e-6 + 1e-6 * fabs(before)) {
            complain(x, "sequence %zu: embeddings[%zu] is %.9g, the last layer's %.9g", s, i,
                     out->v[O_E][i], before);
            return;
        }
    }
}

/* Every number finite (masked scores -inf exactly where the key is not
 * allowed); patterns 0 where masked, rows summing to 1 (0 with no key), in
 * every layer; the rollout and the stream. */
static void check_sequence(ctx *x, size_t s, const seq_out *out) {
    const problem *p = x->p;
    size_t n = p->n[s], m = keys_of(p, s);
    for (int o = 0; o < O_COUNT; o++) {
        if (!out->v[o]) continue;
        for (size_t i = 0; i < out->count[o]; i++) {
            float e = out->v[o][i];
            if (o == O_S && e == -INFINITY) continue;
            if (!isfinite(e)) {
                complain(x, "sequence %zu: %s[%zu] is %g", s, out_names[o], i, e);
                return;
            }
        }
    }
    if (out->v[O_R]) check_rollout(x, s, out);
    check_stream(x, s, out);
    size_t layers = p->stack ? p->n_listed : 1;
    for (size_t hh = 0; hh < layers * p->hs; hh++) /* hh: layer-major, as the outputs */
        for (size_t q = 0; q < n; q++) {
            int any = 0;
            double sum = 0;
            for (size_t k = 0; k < m; k++) {
                int a = allowed(p, s, q, k);
                any |= a;
                size_t at = (hh * n + q) * m + k;
                if (out->v[O_S] && (out->v[O_S][at] == -INFINITY) == a) {
                    complain(x, "sequence %zu: scores[%zu][%zu][%zu] = %g, the key %s", s, hh, q, k,
                             out->v[O_S][at], a ? "allowed" : "masked");
                    return;
                }
                if (!out->v[O_P]) continue;
                float w = out->v[O_P][at];
                if (w < 0 || (!a && w != 0)) {
                    complain(x, "sequence %zu: patterns[%zu][%zu][%zu] = %g, the key %s", s, hh, q,
                             k, w, a ? "allowed" : "masked");
                    return;
                }
                sum += w;
            }
            /* with sinks a row sums to less than 1 (the sink's share) */
            if (out->v[O_P] && (p->sinks ? sum > 1.0 + 1e-5 || (!any && sum != 0)
                                         : fabs(sum - (any ? 1.0 : 0.0)) > 1e-5)) {
                complain(x, "sequence %zu: patterns[%zu][%zu] sums to %.9g", s, hh, q, sum);
                return;
            }
        }
}

/* b against the reference a, output by output (those both have). */
static void check_agree(ctx *x, size_t s, const seq_out *a, int a_run, const seq_out *b) {
    for (int o = 0; o < O_COUNT; o++) {
        if (!a->v[o] || !b->v[o]) continue;
        if (a->count[o] != b->count[o]) {
            complain(x, "sequence %zu: %s has %zu values, %s's %zu", s, out_names[o], b->count[o],
                     run_names[a_run], a->count[o]);
            return;
        }
        for (size_t i = 0; i < a->count[o]; i++) {
            float u = a->v[o][i], v = b->v[o][i];
            if (u == v) continue;
            if (fabsf(u - v) <= 1e-5f + 1e-5f * fmaxf(fabsf(u), fabsf(v))) continue;
            complain(x, "sequence %zu: %s[%zu] is %.9g, %s answered %.9g", s, out_names[o], i, v,
                     run_names[a_run], u);
            return;
        }
    }
}

/* The status and body every answer must have: whole, JSON, 200 or the
 * contract's 4xx error. Returns the parsed JSON (of /v2's header part) or
 * NULL after a failure. */
static json_t *check_answer(ctx *x, const hs_response *r, int v2, const verdict *j,
                            oc_result *res) {
    x->rep->requests++;
    if (r->rc != CURLE_OK) {
        complain(x, "no whole answer: %s (status %ld, %zu bytes)", curl_easy_strerror(r->rc),
                 r->status, r->len);
        return NULL;
    }
    if (r->status >= 500 || r->status < 200) {
        complain(x, "status %ld: %.300s", r->status, r->body);
        return NULL;
    }
    json_t *body = NULL;
    if (v2 && r->status == 200) {
        char *hl = hs_header(r, "Inference-Header-Content-Length");
        if (oc_parse(res, r->body, r->len, hl ? atoll(hl) : -1) == 0) body = json_incref(res->json);
        free(hl);
    } else {
        body = json_loadb(r->body, r->len, 0, NULL);
    }
    if (!body) {
        complain(x, "status %ld with a body that is not JSON: %.300s", r->status, r->body);
        return NULL;
    }
    int want_ok = j->faults == 0, may_ok = want_ok || j->pending;
    if (r->status == 200) {
        if (!may_ok) {
            complain(x, "answered 200, but the contract refuses it with %d", j->status);
            json_decref(body);
            return NULL;
        }
        x->rep->answered++;
        return body;
    }
    x->rep->refused++;
    const json_t *e = json_object_get(body, "error");
    int shaped = v2 ? json_is_string(e) && json_object_size(body) == 1
                    : json_is_string(json_object_get(e, "code")) &&
                          json_is_string(json_object_get(e, "message")) &&
                          json_is_string(json_object_get(e, "path"));
    if (!shaped)
        complain(x, "status %ld without the contract's error body: %.300s", r->status, r->body);
    else if (want_ok)
        complain(x, "refused with %ld: %.300s", r->status, r->body);
    else if (r->status != j->status)
        complain(x, "refused with %ld, the contract says %d: %.300s", r->status, j->status,
                 r->body);
    json_decref(body);
    return NULL;
}

/* ---- one combination on every route ---------------------------------------------------- */

typedef struct reference {
    seq_out seq[MAX_SEQS];
    int run; /* the run they came from, -1 before */
} reference;

/* Checks each sequence's outputs and holds them against the reference (or
 * makes them the reference). `bodies`: each sequence's request, when each
 * had its own (/v1), for the messages; else NULL. */
static void take_answers(ctx *x, reference *ref, seq_out *got, char *const *bodies) {
    for (size_t s = 0; s < x->p->n_seqs; s++) {
        if (bodies) x->body = bodies[s], x->body_len = strlen(bodies[s]);
        check_sequence(x, s, &got[s]);
        if (ref->run >= 0) check_agree(x, s, &ref->seq[s], ref->run, &got[s]);
    }
    if (ref->run < 0 && !x->failed) {
        memcpy(ref->seq, got, sizeof ref->seq);
        memset(got, 0, sizeof ref->seq);
        ref->run = x->run;
    }
    for (size_t s = 0; s < MAX_SEQS; s++)
        seq_out_free(&got[s]);
}

static void run_v1(ctx *x, const verdict *j, unsigned port, reference *ref) {
    int model = x->run == RUN_V1_MODEL;
    seq_out got[MAX_SEQS] = {0};
    char *texts[MAX_SEQS] = {0};
    int all = 1;
    for (size_t s = 0; s < x->p->n_seqs; s++) {
        char *text = texts[s] = v1_body(x->p, s, model);
        x->body = text, x->body_len = strlen(text);
        hs_response r;
        hs_exchange(port, "POST", "/v1/attention", NULL, text, strlen(text), ANSWER_TIMEOUT, &r);
        json_t *a = check_answer(x, &r, 0, j, NULL);
        if (a && (check_shared(x, a) < 0 || v1_sequence(x, a, s, &got[s]) < 0)) all = 0;
        all &= a != NULL;
        json_decref(a);
        hs_response_free(&r);
    }
    if (all) take_answers(x, ref, got, texts);
    for (size_t s = 0; s < MAX_SEQS; s++) {
        seq_out_free(&got[s]);
        free(texts[s]);
    }
}

static void run_batch(ctx *x, const verdict *j, unsigned port, reference *ref) {
    char *text = batch_body(x->p, x->run == RUN_BATCH_MODEL);
    x->body = text, x->body_len = strlen(text);
    hs_response r;
    hs_exchange(port, "POST", "/v1/attention/batch", NULL, text, strlen(text), ANSWER_TIMEOUT, &r);
    json_t *a = check_answer(x, &r, 0, j, NULL);
    seq_out got[MAX_SEQS] = {0};
    if (a && check_shared(x, a) == 0) {
        const json_t *seqs = json_object_get(a, "sequences");
        int ok = json_array_size(seqs) == x->p->n_seqs;
        if (!ok) complain(x, "sequences holds %zu answers", json_array_size(seqs));
        for (size_t s = 0; ok && s < x->p->n_seqs; s++)
            ok = v1_sequence(x, json_array_get(seqs, s), s, &got[s]) == 0;
        if (ok) take_answers(x, ref, got, NULL);
    }
    for (size_t s = 0; s < MAX_SEQS; s++)
        seq_out_free(&got[s]);
    json_decref(a);
    hs_response_free(&r);
    free(text);
}

static void run_v2(ctx *x, const verdict *j, unsigned port, reference *ref) {
    const problem *p = x->p;
    v2_layout l = v2_layout_of(p);
    oc_body b;
    v2_body(p, &l, &b);
    x->body = b.data, x->body_len = b.json_len ? b.json_len : b.len;
    char path[64], hl[64];
    snprintf(path, sizeof path, "/v2/models/c%u/infer", p->idx);
    snprintf(hl, sizeof hl, "Inference-Header-Content-Length: %zu", b.json_len);
    /* as tritonclient sends it: no Content-Type with binary data */
    const char *headers[] = {b.json_len ? "Content-Type:" : NULL, b.json_len ? hl : NULL, NULL};
    hs_response r;
    hs_exchange(port, "POST", path, headers, b.data, b.len, ANSWER_TIMEOUT, &r);
    oc_result res = {0};
    json_t *a = check_answer(x, &r, 1, j, &res);
    seq_out got[MAX_SEQS] = {0};
    int ok = a != NULL;
    for (int o = 0; ok && o < O_COUNT; o++) {
        if (!(p->outs & OUT(o)) || o == O_QR || o == O_KR) continue;
        size_t count, rank;
        long long shape[5];
        float *all = v2_values(x, &res, out_names[o], &count, shape, &rank);
        ok = all != NULL;
        for (size_t s = 0; ok && s < p->n_seqs; s++)
            ok = v2_sequence_output(x, &l, all, shape, rank, s, o, &got[s]) == 0;
        free(all);
    }
    if (ok && !x->failed) take_answers(x, ref, got, NULL);
    for (size_t s = 0; s < MAX_SEQS; s++)
        seq_out_free(&got[s]);
    json_decref(a);
    if (res.json) oc_result_free(&res);
    hs_response_free(&r);
    oc_body_free(&b);
}

static void run_combo(report *rep, const combo *c, unsigned idx, const unsigned ports[2]) {
    problem p;
    problem_make(&p, c, idx);
    verdict j = judge(c);
    reference ref = {.run = -1};
    for (int run = 0; run < RUN_COUNT; run++) {
        if (!(j.runs & BIT(run))) continue;
        ctx x = {rep, c, &p, run, "", 0, 0};
        unsigned port = ports[(idx + (unsigned)run) % 2];
        if (run == RUN_V1_INLINE || run == RUN_V1_MODEL)
            run_v1(&x, &j, port, &ref);
        else if (run == RUN_BATCH_INLINE || run == RUN_BATCH_MODEL)
            run_batch(&x, &j, port, &ref);
        else
            run_v2(&x, &j, port, &ref);
    }
    for (size_t s = 0; s < MAX_SEQS; s++)
        seq_out_free(&ref.seq[s]);
    problem_free(&p);
}

/* ---- the test ----------------------------------------------------------------------------- */

START_TEST(test_combinations) {
    /* Each round covers every pair again, in other combinations: a pair
     * then meets more of the values of the other features. */
    enum { ROUNDS = 4 };
    combos cs = {0};
    for (int round = 0; round < ROUNDS; round++)
        generate(&cs, 0x636f6d626f73ull + (uint64_t)round); /* "combos" */
    size_t positive = 0;
    for (size_t i = 0; i < cs.count; i++)
        positive += judge(&cs.c[i]).faults == 0;

    /* a model file for every combination a file can hold */
    char dir[256];
    tf_temp_dir(dir, sizeof dir, "combos");
    size_t files = 0;
    for (size_t i = 0; i < cs.count; i++) {
        verdict j = judge(&cs.c[i]);
        if (!(j.runs & (BIT(RUN_V2) | BIT(RUN_V1_MODEL) | BIT(RUN_BATCH_MODEL)))) continue;
        problem p;
        problem_make(&p, &cs.c[i], (unsigned)i);
        write_model(&p, dir);
        problem_free(&p);
        files++;
    }

    hs_server inl, pooled;
    const char *a1[] = {"--models-dir", dir, "--workers", "2", NULL};
    const char *a2[] = {"--models-dir", dir, "--workers", "2", "--inline-max-flops", "0", NULL};
    ck_assert_int_eq(hs_start(&inl, a1), 0);
    ck_assert_int_eq(hs_start(&pooled, a2), 0);
    unsigned ports[2] = {inl.port, pooled.port};

    report rep = {0};
    rep.f = open_memstream(&rep.text, &rep.len);
    for (size_t i = 0; i < cs.count; i++)
        run_combo(&rep, &cs.c[i], (unsigned)i, ports);
    fclose(rep.f);

    printf("combinations: %zu in %d rounds (%zu without a fault, %zu with one), %zu model "
           "files; each round: %zu pairs of valid values, %zu of them impossible, and %zu "
           "(fault, value) pairs, %zu of them impossible (%ld searches cut); requests: %zu (%zu "
           "answered, %zu refused)\n",
           cs.count, ROUNDS, positive, cs.count - positive, files, cs.pairs / ROUNDS,
           cs.pairs_impossible / ROUNDS, cs.fault_pairs / ROUNDS, cs.fault_impossible / ROUNDS,
           search_given_up, rep.requests, rep.answered, rep.refused);
    fflush(stdout);

    char why[2048];
    int a_ok = hs_finish(&inl, why, sizeof why) == 0;
    ck_assert_msg(a_ok, "%s", why);
    ck_assert_msg(hs_finish(&pooled, why, sizeof why) == 0, "%s", why);
    ck_assert_int_eq(tf_remove_dir(dir), 0);
    /* check's message has a bounded length: the failures go to stderr */
    if (rep.failures) fprintf(stderr, "the first failures:%s\n", rep.text);
    ck_assert_msg(rep.failures == 0, "%d failures of %zu requests (the first above)", rep.failures,
                  rep.requests);
    free(rep.text);
    free(cs.c);
}
END_TEST

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    Suite *s = suite_create("combos");
    TCase *tc = tcase_create("combos");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_combinations);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    curl_global_cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
