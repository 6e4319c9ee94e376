/*
 * builtin.c — writing the built-in models (builtin.h).
 *
 * demo-4d's w_qkv is spelled out below and demo-stories' tensors in
 * stories.c; every other tensor comes from a
 * per-tensor splitmix64 stream through the writer's fill callback, a chunk
 * at a time, so that gpt3-shape (2.4 GB) never sits in memory.
 */
#include "store/builtin.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/safetensors.h"
#include "store/stories.h"

static const store_builtin table[] = {
    {"demo-4d",
     "The worked example 我爱你: d_model 4, one head of width 4, no mask",
     4,
     1,
     4,
     ATTN_MASK_NONE,
     0,
     0,
     0,
     0,
     0,
     {.dims = 0},
     NULL,
     0,
     0},
    {"demo-stories",
     "Designed, not trained: 16 named dimensions, a vocabulary of 40 words, and 5 heads that "
     "tell the classic stories (adjective to noun, context to meaning, fiction, royalty, "
     "previous token); causal",
     STORIES_D_MODEL,
     STORIES_HEADS,
     STORIES_D_HEAD,
     ATTN_MASK_CAUSAL,
     0,
     0,
     0,
     0,
     0,
     {.dims = 0},
     &store_stories_design,
     0,
     0},
    {"demo-layers",
     "A stack of 2 attention layers, each 2 heads of 8 with w_o, over demo-stories' 16 named "
     "dimensions and 40 words (no position table); pseudo-random weights; causal",
     STORIES_D_MODEL,
     2,
     8,
     ATTN_MASK_CAUSAL,
     0,
     1,
     0,
     0,
     0,
     {.dims = 0},
     NULL,
     2,
     1},
    {"gpt2-small-shape",
     "GPT-2 small's attention shape (d_model 768, 12 heads of 64, causal) with "
     "pseudo-random weights",
     768,
     12,
     64,
     ATTN_MASK_CAUSAL,
     1,
     1,
     1,
     0,
     0,
     {.dims = 0},
     NULL,
     0,
     0},
    {"gpt3-shape",
     "GPT-3's attention shape (d_model 12288, 96 heads of 128, causal) with "
     "pseudo-random weights",
     12288,
     96,
     128,
     ATTN_MASK_CAUSAL,
     0,
     1,
     0,
     1,
     0,
     {.dims = 0},
     NULL,
     0,
     0},
    {"llama-small-shape",
     "A Llama-style attention shape (d_model 2048, 32 query heads of 64 sharing 8 K/V heads, "
     "RoPE theta 500000, causal) with pseudo-random weights",
     2048,
     32,
     64,
     ATTN_MASK_CAUSAL,
     0,
     1,
     0,
     0,
     8,
     {.dims = 64, .theta = 500000, .style = ATTN_ROPE_HALF},
     NULL,
     0,
     0},
    {"llama3-8b-shape",
     "Llama 3.1 8B's attention shape (d_model 4096, 32 query heads of 128 sharing 8 K/V heads, "
     "RoPE theta 500000 with llama3 scaling, causal) with pseudo-random weights",
     4096,
     32,
     128,
     ATTN_MASK_CAUSAL,
     0,
     1,
     0,
     1,
     8,
     {.dims = 128,
      .theta = 500000,
      .style = ATTN_ROPE_HALF,
      .scaling = ATTN_ROPE_SCALING_LLAMA3,
      .factor = 8,
      .low_freq_factor = 1,
      .high_freq_factor = 4,
      .original_max_position = 8192},
     NULL,
     0,
     0},
};

const float store_builtin_demo_w_q[16] = {1, 0, 1, 0, 0, 1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0};
const float store_builtin_demo_w_k[16] = {0, 1, 0, 1, 1, 0, 1, 0, 0, 1, 1, 0, 1, 0, 0, 1};
const float store_builtin_demo_w_v[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};

size_t store_builtin_count(void) {
    return sizeof table / sizeof table[0];
}

const store_builtin *store_builtin_at(size_t index) {
    return index < store_builtin_count() ? &table[index] : NULL;
}

const store_builtin *store_builtin_find(const char *name) {
    for (size_t i = 0; i < store_builtin_count(); i++)
        if (strcmp(table[i].name, name) == 0) return &table[i];
    return NULL;
}

/* Columns of w_qkv: hd + 2gd. */
static size_t qkv_cols(const store_builtin *b) {
    size_t g = b->n_kv_heads ? b->n_kv_heads : b->n_heads;
    return (b->n_heads + 2 * g) * b->d_head;
}

/* Layers of b: 1 unless it is a stack. */
static size_t layers_of(const store_builtin *b) {
    return b->n_layers > 1 ? b->n_layers : 1;
}

size_t store_builtin_data_bytes(const store_builtin *b) {
    if (b->design) return b->design->data_bytes();
    size_t dm = b->d_model, hd = b->n_heads * b->d_head;
    size_t floats = dm * qkv_cols(b);
    if (b->has_b_qkv) floats += qkv_cols(b);
    if (b->has_w_o) floats += hd * dm;
    if (b->has_b_o) floats += dm;
    floats *= layers_of(b);
    if (b->stories_vocabulary) floats += (size_t)STORIES_WORDS * STORIES_D_MODEL;
    return floats * sizeof(float);
}

/* ---- the pseudo-random streams ------------------------------------------ */

typedef struct stream {
    uint64_t state;
    double amp;
} stream;

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static uint64_t fnv1a64(const char *a, const char *b) {
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (const char *s = a; *s; s++)
        h = (h ^ (unsigned char)*s) * UINT64_C(0x100000001b3);
    h = (h ^ '/') * UINT64_C(0x100000001b3);
    for (const char *s = b; *s; s++)
        h = (h ^ (unsigned char)*s) * UINT64_C(0x100000001b3);
    return h;
}

static int stream_fill(void *ctx, void *buf, size_t first, size_t count) {
    (void)first; /* chunks come in order: the stream is simply continued */
    stream *s = ctx;
    float *out = buf;
    for (size_t i = 0; i < count; i++) {
        double x = (double)(splitmix64(&s->state) >> 40);
        out[i] = (float)((x - 8388608.0) / 8388608.0 * s->amp);
    }
    return 0;
}

/* "layers.<l>.<base>" into buf (48 bytes); returns buf. */
static const char *layer_name(char *buf, size_t l, const char *base) {
    snprintf(buf, 48, "layers.%zu.%s", l, base);
    return buf;
}

/* ---- writing ---------------------------------------------------------------- */

int store_builtin_write(const store_builtin *b, const char *dir, size_t *file_bytes,
                        attn_error *err) {
    size_t dm = b->d_model, hd = b->n_heads * b->d_head;
    size_t shape_w_qkv[2] = {dm, qkv_cols(b)}, shape_b_qkv[1] = {qkv_cols(b)};
    size_t shape_w_o[2] = {hd, dm}, shape_b_o[1] = {dm};
    enum { TENSORS_MAX = 4 * STORE_BUILTIN_LAYERS_MAX + 1 };
    store_write_tensor t[TENSORS_MAX];
    stream streams[TENSORS_MAX];
    char names[TENSORS_MAX][48]; /* a stack's prefixed names */
    size_t n = 0, n_layers = layers_of(b);
    float tokens[STORIES_WORDS * STORIES_D_MODEL];
    char *vocabulary = NULL, *dimensions = NULL;
    if (n_layers > STORE_BUILTIN_LAYERS_MAX)
        return store_error_set(err, b->name, "%zu layers, over %d", n_layers,
                               STORE_BUILTIN_LAYERS_MAX);
    float demo[4 * 12];

    char heads[32];
    snprintf(heads, sizeof heads, "%zu", b->n_heads);
    char source[96];
    if (b->design)
        snprintf(source, sizeof source, "%s", b->design->source);
    else
        snprintf(source, sizeof source, "tools/make_models, seed 0x%016llx",
                 (unsigned long long)STORE_BUILTIN_SEED);
    store_metadata meta[16] = {
        {"name", b->name},  {"description", b->description},
        {"n_heads", heads}, {"mask", b->mask == ATTN_MASK_NONE ? "none" : "causal"},
        {"source", source},
    };
    size_t n_meta = 5;
    /* %.17g: every double back exactly (the loader's strtod). */
    char kv[32], theta[32], dims[32], factor[32], low[32], high[32], orig[32];
    if (b->n_kv_heads) {
        snprintf(kv, sizeof kv, "%zu", b->n_kv_heads);
        meta[n_meta++] = (store_metadata){"n_kv_heads", kv};
    }
    if (b->rope.dims) {
        snprintf(theta, sizeof theta, "%.17g", b->rope.theta);
        snprintf(dims, sizeof dims, "%zu", b->rope.dims);
        meta[n_meta++] = (store_metadata){"rope_theta", theta};
        meta[n_meta++] = (store_metadata){"rope_dims", dims};
        meta[n_meta++] = (store_metadata){
            "rope_style", b->rope.style == ATTN_ROPE_INTERLEAVED ? "interleaved" : "half"};
    }
    if (b->rope.dims && b->rope.scaling != ATTN_ROPE_SCALING_NONE) {
        int llama3 = b->rope.scaling == ATTN_ROPE_SCALING_LLAMA3;
        snprintf(factor, sizeof factor, "%.17g", b->rope.factor);
        meta[n_meta++] = (store_metadata){"rope_scaling", llama3 ? "llama3" : "linear"};
        meta[n_meta++] = (store_metadata){"rope_factor", factor};
        if (llama3) {
            snprintf(low, sizeof low, "%.17g", b->rope.low_freq_factor);
            snprintf(high, sizeof high, "%.17g", b->rope.high_freq_factor);
            snprintf(orig, sizeof orig, "%.17g", b->rope.original_max_position);
            meta[n_meta++] = (store_metadata){"rope_low_freq_factor", low};
            meta[n_meta++] = (store_metadata){"rope_high_freq_factor", high};
            meta[n_meta++] = (store_metadata){"rope_original_max_position", orig};
        }
    }

    /* One tensor; random when data is NULL. */
#define ADD(tname, trank, tshape, tdata, tamp)                                                     \
    do {                                                                                           \
        streams[n] = (stream){STORE_BUILTIN_SEED ^ fnv1a64(b->name, tname), (tamp)};               \
        t[n] = (store_write_tensor){.name = tname,                                                 \
                                    .dtype = STORE_DTYPE_F32,                                      \
                                    .rank = trank,                                                 \
                                    .shape = tshape,                                               \
                                    .data = tdata,                                                 \
                                    .fill = stream_fill,                                           \
                                    .fill_ctx = &streams[n]};                                      \
        n++;                                                                                       \
    } while (0)

    double amp = 1.0 / sqrt((double)dm);
    if (strcmp(b->name, "demo-4d") == 0) {
        /* w_qkv row r = [W_q row r | W_k row r | W_v row r]. */
        for (size_t r = 0; r < 4; r++)
            for (size_t c = 0; c < 4; c++) {
                demo[r * 12 + c] = store_builtin_demo_w_q[r * 4 + c];
                demo[r * 12 + 4 + c] = store_builtin_demo_w_k[r * 4 + c];
                demo[r * 12 + 8 + c] = store_builtin_demo_w_v[r * 4 + c];
            }
        ADD("w_qkv", 2, shape_w_qkv, demo, 0.0);
    } else if (!b->design) {
        for (size_t l = 0; l < n_layers; l++) {
            /* one layer's names as ever; a stack's layers.<l>.<name> */
#define NAME(base) (n_layers > 1 ? layer_name(names[n], l, base) : base)
            ADD(NAME("w_qkv"), 2, shape_w_qkv, NULL, amp);
            if (b->has_b_qkv) ADD(NAME("b_qkv"), 1, shape_b_qkv, NULL, 0.02);
            if (b->has_w_o) ADD(NAME("w_o"), 2, shape_w_o, NULL, amp);
            if (b->has_b_o) ADD(NAME("b_o"), 1, shape_b_o, NULL, 0.02);
#undef NAME
        }
    }
    static const size_t shape_tokens[2] = {STORIES_WORDS, STORIES_D_MODEL};
    if (b->stories_vocabulary) {
        if (store_stories_vocabulary(tokens, &vocabulary, &dimensions) != 0)
            return store_error_set(err, b->name, "out of memory");
        ADD("token_embeddings", 2, shape_tokens, tokens, 0.0);
        meta[n_meta++] = (store_metadata){"vocabulary", vocabulary};
        meta[n_meta++] = (store_metadata){"dimensions", dimensions};
    }
    char layers_text[32];
    if (n_layers > 1) {
        snprintf(layers_text, sizeof layers_text, "%zu", n_layers);
        meta[n_meta++] = (store_metadata){"n_layers", layers_text};
    }
#undef ADD

    size_t len = strlen(dir) + strlen(b->name) + 16;
    char *path = malloc(len);
    int rc = -1;
    if (!path) {
        store_error_set(err, dir, "out of memory");
    } else {
        snprintf(path, len, "%s/%s.safetensors", dir, b->name);
        rc = b->design ? b->design->write(path, meta, n_meta, file_bytes, err)
                       : store_file_write(path, meta, n_meta, t, n, file_bytes, err);
    }
    free(path);
    free(vocabulary);
    free(dimensions);
    return rc;
}
