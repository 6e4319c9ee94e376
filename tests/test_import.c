/*
 * test_import.c — the check suite of store/import.c and of
 * tools/import_checkpoint.
 *
 * Each test writes small checkpoints in the exact Hugging Face layouts into
 * its own temporary directory, with the store's writer: GPT-2 (Conv1D
 * c_attn [d, 3d], c_proj [d, d]) and BERT (nn.Linear query/key/value/
 * output.dense [out, in]), d = 8, 2 heads, 2 layers of different random
 * weights (a fixed seed), with and without the `transformer.` / `bert.`
 * prefix, in F32, F16 and BF16, among decoy tensors (embeddings, layer
 * norms, MLPs, GPT-2's old attn.bias mask buffer and masked_bias scalar).
 *
 * A layer is imported, the result loaded with store_model_load and run
 * through attn_compute (the model's mask, scale 1/sqrt(dh)) on random
 * embeddings; the answer is compared with a float64 reference computed
 * straight from the checkpoint's tensors as read back from the file (so
 * F16 / BF16 rounding is the checkpoint's, not the test's): Conv1D x·W + b
 * or Linear x·Wᵀ + b, heads split by columns, causal for GPT-2, none for
 * BERT, then ·c_proj or ·denseᵀ + bias. Tolerance: max-abs error ≤ 1e-5 ·
 * max |reference|.
 *
 * Faults are checked through the library (message pieces) and through the
 * binary build/tools/import_checkpoint (exit codes and stderr), which the
 * tests run from the repository root; without the binary those tests are
 * skipped with a note.
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attention/attention.h"
#include "store/import.h"
#include "store/model.h"
#include "store/safetensors.h"
#include "store/tensor.h"

enum { D = 8, H = 2, DH = D / H, LAYERS = 2, N_TOK = 5 };

/* The tool of the build under test: make passes $ATTN_TOOLS_DIR (so that
 * the sanitizer build runs its own tools). */
static char TOOL[4096] = "build/tools/import_checkpoint";

__attribute__((constructor)) static void tool_path(void) {
    const char *dir = getenv("ATTN_TOOLS_DIR");
    if (dir) snprintf(TOOL, sizeof TOOL, "%s/import_checkpoint", dir);
}

/* ---- fixture: one temporary directory per test --------------------------- */

static char tmpdir[256];

static void setup(void) {
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/test_import.XXXXXX", base && *base ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void) {
    DIR *d = opendir(tmpdir);
    if (!d) return;
    struct dirent *de;
    char path[600];
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        snprintf(path, sizeof path, "%s/%s", tmpdir, de->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(tmpdir);
}

/* "<tmpdir>/<name>" in a static buffer (one of a few, rotating). */
static const char *tpath(const char *name) {
    static char bufs[6][512];
    static int next;
    char *p = bufs[next++ % 6];
    snprintf(p, sizeof bufs[0], "%s/%s", tmpdir, name);
    return p;
}

/* ---- random numbers: splitmix64 ------------------------------------------- */

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* k/1024 for k in −400 … 400: exact in F16 (and in F32). */
static float rng_weight(uint64_t *s) {
    return (float)((int)(rng_next(s) % 801) - 400) / 1024.0f;
}

/* ---- checkpoints ------------------------------------------------------------ */

enum { CK_MAX = 64 };

typedef struct ck_tensor {
    char name[128];
    size_t rank;
    size_t shape[4];
    size_t count;
    float *vals;
} ck_tensor;

typedef struct ckpt {
    store_dtype dtype; /* every tensor's */
    size_t n;
    ck_tensor t[CK_MAX];
} ckpt;

static ck_tensor *ck_add(ckpt *c, const char *name, size_t rank, size_t d0, size_t d1, size_t d2,
                         size_t d3, uint64_t *rng) {
    ck_assert_uint_lt(c->n, CK_MAX);
    ck_tensor *t = &c->t[c->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    size_t dims[4] = {d0, d1, d2, d3};
    t->rank = rank;
    t->count = 1;
    for (size_t i = 0; i < rank; i++) {
        t->shape[i] = dims[i];
        t->count *= dims[i];
    }
    t->vals = malloc(t->count * sizeof(float) + 1);
    for (size_t i = 0; i < t->count; i++)
        t->vals[i] = rng_weight(rng);
    return t;
}

static ck_tensor *ck_find(ckpt *c, const char *name) {
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->t[i].name, name) == 0) return &c->t[i];
    return NULL;
}

static void ck_remove(ckpt *c, const char *name) {
    ck_tensor *t = ck_find(c, name);
    ck_assert_ptr_nonnull(t);
    free(t->vals);
    *t = c->t[--c->n];
}

static void ck_free(ckpt *c) {
    for (size_t i = 0; i < c->n; i++)
        free(c->t[i].vals);
    c->n = 0;
}

/* An exactly representable float (zero or a normal half) as F16 bits. */
static uint16_t f16_from_exact(float x) {
    if (x == 0) return 0;
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    uint32_t e = (b >> 23) & 0xFF, mant = b & 0x7FFFFF;
    ck_assert_msg(e >= 113 && e <= 142 && (mant & 0x1FFF) == 0, "%g is not a half", (double)x);
    return (uint16_t)(((b >> 16) & 0x8000) | (e - 112) << 10 | mant >> 13);
}

static void ck_write(const ckpt *c, const char *path) {
    store_write_tensor w[CK_MAX];
    void *bufs[CK_MAX];
    for (size_t i = 0; i < c->n; i++) {
        const ck_tensor *t = &c->t[i];
        if (c->dtype == STORE_DTYPE_F32) {
            bufs[i] = NULL;
        } else {
            uint16_t *h = malloc(t->count * 2 + 1);
            for (size_t k = 0; k < t->count; k++) {
                uint32_t b;
                memcpy(&b, &t->vals[k], sizeof b);
                h[k] = c->dtype == STORE_DTYPE_F16 ? f16_from_exact(t->vals[k])
                                                   : (uint16_t)(b >> 16); /* BF16: truncated */
            }
            bufs[i] = h;
        }
        w[i] = (store_write_tensor){
            t->name, c->dtype, t->rank, t->shape, bufs[i] ? bufs[i] : (const void *)t->vals,
            NULL,    NULL};
    }
    store_metadata meta[] = {{"format", "pt"}};
    attn_error err;
    int rc = store_file_write(path, meta, 1, w, c->n, NULL, &err);
    for (size_t i = 0; i < c->n; i++)
        free(bufs[i]);
    ck_assert_msg(rc == 0, "%s", err.message);
}

/* GPT-2 as GPT2Model ("") or GPT2LMHeadModel ("transformer.") saves it. */
static void gpt2_build(ckpt *c, const char *prefix, store_dtype dtype, uint64_t seed) {
    uint64_t rng = seed;
    char n[128];
    c->dtype = dtype;
    c->n = 0;
#define NAME(...) (snprintf(n, sizeof n, __VA_ARGS__), n)
    ck_add(c, NAME("%swte.weight", prefix), 2, 16, D, 0, 0, &rng);
    ck_add(c, NAME("%swpe.weight", prefix), 2, N_TOK, D, 0, 0, &rng);
    for (int l = 0; l < LAYERS; l++) {
        ck_add(c, NAME("%sh.%d.ln_1.weight", prefix, l), 1, D, 0, 0, 0, &rng);
        ck_add(c, NAME("%sh.%d.ln_1.bias", prefix, l), 1, D, 0, 0, 0, &rng);
        /* The old causal-mask buffer and its scalar: not weights. */
        ck_tensor *mask = ck_add(c, NAME("%sh.%d.attn.bias", prefix, l), 4, 1, 1, 4, 4, &rng);
        for (size_t i = 0; i < 16; i++)
            mask->vals[i] = i % 4 <= i / 4;
        ck_add(c, NAME("%sh.%d.attn.masked_bias", prefix, l), 0, 0, 0, 0, 0, &rng)->vals[0] = -1e4f;
        ck_add(c, NAME("%sh.%d.attn.c_attn.weight", prefix, l), 2, D, 3 * D, 0, 0, &rng);
        ck_add(c, NAME("%sh.%d.attn.c_attn.bias", prefix, l), 1, 3 * D, 0, 0, 0, &rng);
        ck_add(c, NAME("%sh.%d.attn.c_proj.weight", prefix, l), 2, D, D, 0, 0, &rng);
        ck_add(c, NAME("%sh.%d.attn.c_proj.bias", prefix, l), 1, D, 0, 0, 0, &rng);
        ck_add(c, NAME("%sh.%d.mlp.c_fc.weight", prefix, l), 2, D, 4 * D, 0, 0, &rng);
    }
    ck_add(c, NAME("%sln_f.weight", prefix), 1, D, 0, 0, 0, &rng);
    if (*prefix) ck_add(c, "lm_head.weight", 2, 16, D, 0, 0, &rng);
}

/* BERT as BertModel ("") or BertForMaskedLM & co. ("bert.") save it. */
static void bert_build(ckpt *c, const char *prefix, store_dtype dtype, uint64_t seed) {
    uint64_t rng = seed;
    char n[128];
    c->dtype = dtype;
    c->n = 0;
    ck_add(c, NAME("%sembeddings.word_embeddings.weight", prefix), 2, 16, D, 0, 0, &rng);
    ck_add(c, NAME("%sembeddings.LayerNorm.weight", prefix), 1, D, 0, 0, 0, &rng);
    static const char *const parts[] = {"self.query", "self.key", "self.value", "output.dense"};
    for (int l = 0; l < LAYERS; l++) {
        for (int p = 0; p < 4; p++) {
            ck_add(c, NAME("%sencoder.layer.%d.attention.%s.weight", prefix, l, parts[p]), 2, D, D,
                   0, 0, &rng);
            ck_add(c, NAME("%sencoder.layer.%d.attention.%s.bias", prefix, l, parts[p]), 1, D, 0, 0,
                   0, &rng);
        }
        ck_add(c, NAME("%sencoder.layer.%d.attention.output.LayerNorm.weight", prefix, l), 1, D, 0,
               0, 0, &rng);
        ck_add(c, NAME("%sencoder.layer.%d.intermediate.dense.weight", prefix, l), 2, 4 * D, D, 0,
               0, &rng);
    }
    ck_add(c, NAME("%spooler.dense.weight", prefix), 2, D, D, 0, 0, &rng);
    if (*prefix) ck_add(c, "cls.predictions.bias", 1, 16, 0, 0, 0, &rng);
#undef NAME
}

/* ---- the float64 reference, from the checkpoint file ------------------------ */

/* The tensor `<name>` of f as doubles (count checked); the caller frees. */
static double *tensor_f64(const store_file *f, const char *name, size_t count) {
    const store_tensor *t = store_file_find(f, name);
    ck_assert_msg(t != NULL, "reference: no tensor %s", name);
    ck_assert_uint_eq(t->count, count);
    double *out = malloc(count * sizeof(double));
    const unsigned char *p = t->data;
    for (size_t i = 0; i < count; i++) {
        if (t->dtype == STORE_DTYPE_F32) {
            float x;
            memcpy(&x, p + 4 * i, sizeof x);
            out[i] = x;
        } else {
            unsigned short h = (unsigned short)(p[2 * i] | p[2 * i + 1] << 8);
            out[i] = t->dtype == STORE_DTYPE_F16 ? store_f16_to_f32(h) : store_bf16_to_f32(h);
        }
    }
    return out;
}

/*
 * ΔE (n × D) of layer `layer` of the checkpoint at path, for embeddings e
 * (n × D), as the Hugging Face modules compute it:
 *   GPT-2: [Q|K|V] = e · c_attn.weight + c_attn.bias; … ; Z · c_proj.weight + bias
 *   BERT:  Q = e · queryᵀ + query.bias, likewise K, V; … ; Z · denseᵀ + bias
 */
static void reference_delta(double *out, const char *path, int bert, const char *prefix, int layer,
                            const float *e, size_t n) {
    store_file *f;
    attn_error err;
    ck_assert_msg(store_file_open(&f, path, &err) == 0, "%s", err.message);
    char name[160];
    double q[N_TOK][D], k[N_TOK][D], v[N_TOK][D], z[N_TOK][D];
    ck_assert_uint_le(n, N_TOK);
    double *w_o, *b_o;
    int o_transposed;
    if (!bert) {
        snprintf(name, sizeof name, "%sh.%d.attn.c_attn.weight", prefix, layer);
        double *w = tensor_f64(f, name, D * 3 * D);
        snprintf(name, sizeof name, "%sh.%d.attn.c_attn.bias", prefix, layer);
        double *b = tensor_f64(f, name, 3 * D);
        for (size_t t = 0; t < n; t++)
            for (size_t c = 0; c < 3 * D; c++) {
                double s = b[c];
                for (size_t r = 0; r < D; r++)
                    s += (double)e[t * D + r] * w[r * 3 * D + c];
                (c < D ? q : c < 2 * D ? k : v)[t][c % D] = s;
            }
        free(w);
        free(b);
        snprintf(name, sizeof name, "%sh.%d.attn.c_proj.weight", prefix, layer);
        w_o = tensor_f64(f, name, D * D);
        snprintf(name, sizeof name, "%sh.%d.attn.c_proj.bias", prefix, layer);
        b_o = tensor_f64(f, name, D);
        o_transposed = 0;
    } else {
        static const char *const qkv[3] = {"query", "key", "value"};
        for (int p = 0; p < 3; p++) {
            snprintf(name, sizeof name, "%sencoder.layer.%d.attention.self.%s.weight", prefix,
                     layer, qkv[p]);
            double *w = tensor_f64(f, name, D * D);
            snprintf(name, sizeof name, "%sencoder.layer.%d.attention.self.%s.bias", prefix, layer,
                     qkv[p]);
            double *b = tensor_f64(f, name, D);
            double(*dst)[D] = p == 0 ? q : p == 1 ? k : v;
            for (size_t t = 0; t < n; t++)
                for (size_t c = 0; c < D; c++) {
                    double s = b[c];
                    for (size_t r = 0; r < D; r++)
                        s += (double)e[t * D + r] * w[c * D + r]; /* W[out = c, in = r] */
                    dst[t][c] = s;
                }
            free(w);
            free(b);
        }
        snprintf(name, sizeof name, "%sencoder.layer.%d.attention.output.dense.weight", prefix,
                 layer);
        w_o = tensor_f64(f, name, D * D);
        snprintf(name, sizeof name, "%sencoder.layer.%d.attention.output.dense.bias", prefix,
                 layer);
        b_o = tensor_f64(f, name, D);
        o_transposed = 1;
    }

    /* Heads are column blocks of DH; causal for GPT-2 only. */
    for (size_t h = 0; h < H; h++)
        for (size_t a = 0; a < n; a++) {
            double s[N_TOK], mx = -INFINITY, sum = 0;
            size_t keys = bert ? n : a + 1;
            for (size_t b = 0; b < keys; b++) {
                s[b] = 0;
                for (size_t j = 0; j < DH; j++)
                    s[b] += q[a][h * DH + j] * k[b][h * DH + j];
                s[b] /= sqrt((double)DH);
                mx = s[b] > mx ? s[b] : mx;
            }
            for (size_t b = 0; b < keys; b++)
                sum += (s[b] = exp(s[b] - mx));
            for (size_t j = 0; j < DH; j++) {
                double acc = 0;
                for (size_t b = 0; b < keys; b++)
                    acc += s[b] / sum * v[b][h * DH + j];
                z[a][h * DH + j] = acc;
            }
        }
    for (size_t t = 0; t < n; t++)
        for (size_t c = 0; c < D; c++) {
            double s = b_o[c];
            for (size_t r = 0; r < D; r++)
                s += z[t][r] * (o_transposed ? w_o[c * D + r] : w_o[r * D + c]);
            out[t * D + c] = s;
        }
    free(w_o);
    free(b_o);
    store_file_close(f);
}

/* ---- importing and comparing ------------------------------------------------ */

static void embeddings_random(float *e, size_t count, uint64_t seed) {
    for (size_t i = 0; i < count; i++)
        e[i] = (float)((double)(rng_next(&seed) >> 11) / 9007199254740992.0 * 2 - 1);
}

/* max |got − want| / max |want| */
static double rel_error(const float *got, const double *want, size_t count) {
    double err = 0, scale = 0;
    for (size_t i = 0; i < count; i++) {
        err = fmax(err, fabs(got[i] - want[i]));
        scale = fmax(scale, fabs(want[i]));
    }
    return err / scale;
}

/* Runs the loaded model on e: ΔE and E' into delta and emb. */
static void model_run(const store_model *m, const float *e, float *delta, float *emb) {
    attn_workspace *ws = attn_workspace_create();
    ck_assert_ptr_nonnull(ws);
    attn_output out = {.delta = delta, .embeddings = emb};
    attn_input in = {.weights = &m->weights,
                     .embeddings = e,
                     .n_tokens = N_TOK,
                     .mask = {m->mask, NULL},
                     .scale = (float)(1 / sqrt((double)m->weights.d_head))};
    ck_assert_int_eq(attn_compute(&out, ws, &in, NULL), 0);
    attn_workspace_destroy(ws);
}

/*
 * Imports `layer` of the checkpoint at ckpt_path (arch given or auto),
 * checks the model's shape and mask, and its answer against the reference
 * of that layer and against the other layer's (which must differ).
 */
static void import_and_compare(const char *ckpt_path, store_import_arch arch, int bert,
                               const char *prefix, int layer) {
    const char *out = tpath("imported.safetensors");
    store_import_options opt = {.arch = arch, .layer = (size_t)layer, .n_heads = H};
    store_import_result res;
    attn_error err;
    ck_assert_msg(store_import_checkpoint(ckpt_path, out, &opt, &res, &err) == 0, "%s",
                  err.message);
    ck_assert_int_eq(res.arch, bert ? STORE_IMPORT_BERT : STORE_IMPORT_GPT2);
    ck_assert_uint_eq(res.n_layers, LAYERS);
    ck_assert_uint_eq(res.d_model, D);
    ck_assert_uint_eq(res.d_head, DH);
    ck_assert_str_eq(res.name, "imported");

    store_model *m;
    ck_assert_msg(store_model_load(&m, out, &err) == 0, "%s", err.message);
    ck_assert_str_eq(m->name, "imported");
    ck_assert_int_eq(m->mask, bert ? ATTN_MASK_NONE : ATTN_MASK_CAUSAL);
    ck_assert_uint_eq(m->weights.d_model, D);
    ck_assert_uint_eq(m->weights.n_heads, H);
    ck_assert_uint_eq(m->weights.d_head, DH);
    ck_assert_ptr_nonnull(m->weights.b_qkv);
    ck_assert_ptr_nonnull(m->weights.w_o);
    ck_assert_ptr_nonnull(m->weights.b_o);
    char want_desc[128];
    snprintf(want_desc, sizeof want_desc, "%s layer %d attention, from %s", bert ? "BERT" : "GPT-2",
             layer, strrchr(ckpt_path, '/') + 1);
    ck_assert_str_eq(m->description, want_desc);

    float e[N_TOK * D], delta[N_TOK * D], emb[N_TOK * D];
    embeddings_random(e, N_TOK * D, 0x5eed0000u + (uint64_t)layer);
    model_run(m, e, delta, emb);
    store_model_destroy(m);

    double ref[N_TOK * D], ref_e[N_TOK * D], other[N_TOK * D];
    reference_delta(ref, ckpt_path, bert, prefix, layer, e, N_TOK);
    for (size_t i = 0; i < N_TOK * D; i++)
        ref_e[i] = e[i] + ref[i];
    double r = rel_error(delta, ref, N_TOK * D), r_e = rel_error(emb, ref_e, N_TOK * D);
    ck_assert_msg(r <= 1e-5, "ΔE relative error %g", r);
    ck_assert_msg(r_e <= 1e-5, "E' relative error %g", r_e);

    /* The other layer's answer is far away: the right layer was taken. */
    reference_delta(other, ckpt_path, bert, prefix, 1 - layer, e, N_TOK);
    ck_assert_msg(rel_error(delta, other, N_TOK * D) > 0.05, "layer %d looks like layer %d", layer,
                  1 - layer);
}

START_TEST(test_gpt2) {
    ckpt c;
    gpt2_build(&c, "", STORE_DTYPE_F32, 1);
    ck_write(&c, tpath("gpt2.safetensors"));
    ck_free(&c);
    import_and_compare(tpath("gpt2.safetensors"), STORE_IMPORT_GPT2, 0, "", 1);
    import_and_compare(tpath("gpt2.safetensors"), STORE_IMPORT_AUTO, 0, "", 0);
}
END_TEST

START_TEST(test_gpt2_prefixed) {
    ckpt c;
    gpt2_build(&c, "transformer.", STORE_DTYPE_F32, 2);
    ck_write(&c, tpath("gpt2-lm.safetensors"));
    ck_free(&c);
    import_and_compare(tpath("gpt2-lm.safetensors"), STORE_IMPORT_AUTO, 0, "transformer.", 1);
}
END_TEST

START_TEST(test_gpt2_f16) {
    ckpt c;
    gpt2_build(&c, "transformer.", STORE_DTYPE_F16, 3);
    ck_write(&c, tpath("gpt2-f16.safetensors"));
    ck_free(&c);
    import_and_compare(tpath("gpt2-f16.safetensors"), STORE_IMPORT_GPT2, 0, "transformer.", 1);
}
END_TEST

START_TEST(test_gpt2_bf16) {
    ckpt c;
    gpt2_build(&c, "", STORE_DTYPE_BF16, 4);
    ck_write(&c, tpath("gpt2-bf16.safetensors"));
    ck_free(&c);
    import_and_compare(tpath("gpt2-bf16.safetensors"), STORE_IMPORT_AUTO, 0, "", 1);
}
END_TEST

START_TEST(test_bert) {
    ckpt c;
    bert_build(&c, "", STORE_DTYPE_F32, 5);
    ck_write(&c, tpath("bert.safetensors"));
    ck_free(&c);
    import_and_compare(tpath("bert.safetensors"), STORE_IMPORT_BERT, 1, "", 1);
    import_and_compare(tpath("bert.safetensors"), STORE_IMPORT_AUTO, 1, "", 0);
}
END_TEST

START_TEST(test_bert_prefixed) {
    ckpt c;
    bert_build(&c, "bert.", STORE_DTYPE_F32, 6);
    ck_write(&c, tpath("bert-mlm.safetensors"));
    ck_free(&c);
    import_and_compare(tpath("bert-mlm.safetensors"), STORE_IMPORT_AUTO, 1, "bert.", 1);
}
END_TEST

START_TEST(test_bert_f16) {
    ckpt c;
    bert_build(&c, "bert.", STORE_DTYPE_F16, 7);
    ck_write(&c, tpath("bert-f16.safetensors"));
    ck_free(&c);
    import_and_compare(tpath("bert-f16.safetensors"), STORE_IMPORT_BERT, 1, "bert.", 1);
}
END_TEST

/* The exact layout: GPT-2's c_attn copied bit for bit, BERT's transposed. */
START_TEST(test_layout_exact) {
    ckpt c;
    attn_error err;
    store_model *m;
    gpt2_build(&c, "", STORE_DTYPE_F32, 8);
    ck_write(&c, tpath("g.safetensors"));
    store_import_options opt = {.arch = STORE_IMPORT_AUTO, .layer = 1, .n_heads = H};
    ck_assert_msg(store_import_checkpoint(tpath("g.safetensors"), tpath("g1.safetensors"), &opt,
                                          NULL, &err) == 0,
                  "%s", err.message);
    ck_assert_msg(store_model_load(&m, tpath("g1.safetensors"), &err) == 0, "%s", err.message);
    ck_assert(memcmp(m->weights.w_qkv, ck_find(&c, "h.1.attn.c_attn.weight")->vals,
                     sizeof(float) * D * 3 * D) == 0);
    ck_assert(memcmp(m->weights.w_o, ck_find(&c, "h.1.attn.c_proj.weight")->vals,
                     sizeof(float) * D * D) == 0);
    store_model_destroy(m);
    ck_free(&c);

    bert_build(&c, "", STORE_DTYPE_F32, 9);
    ck_write(&c, tpath("b.safetensors"));
    ck_assert_msg(store_import_checkpoint(tpath("b.safetensors"), tpath("b1.safetensors"), &opt,
                                          NULL, &err) == 0,
                  "%s", err.message);
    ck_assert_msg(store_model_load(&m, tpath("b1.safetensors"), &err) == 0, "%s", err.message);
    const float *wk = ck_find(&c, "encoder.layer.1.attention.self.key.weight")->vals;
    const float *bv = ck_find(&c, "encoder.layer.1.attention.self.value.bias")->vals;
    const float *wo = ck_find(&c, "encoder.layer.1.attention.output.dense.weight")->vals;
    for (size_t r = 0; r < D; r++)
        for (size_t col = 0; col < D; col++) {
            ck_assert(m->weights.w_qkv[r * 3 * D + D + col] == wk[col * D + r]);
            ck_assert(m->weights.w_o[r * D + col] == wo[col * D + r]);
        }
    for (size_t col = 0; col < D; col++)
        ck_assert(m->weights.b_qkv[2 * D + col] == bv[col]);
    store_model_destroy(m);
    ck_free(&c);
}
END_TEST

/* ---- names, descriptions, faults through the library ---------------------------- */

/* Imports with opt, expects failure, and checks the message holds every
 * piece (NULL-terminated). */
static void expect_fail(const char *in, const store_import_options *opt, ...) {
    attn_error err;
    const char *out = tpath("fail.safetensors");
    ck_assert_int_eq(store_import_checkpoint(in, out, opt, NULL, &err), -1);
    ck_assert_int_ne(access(out, F_OK), 0);
    va_list ap;
    va_start(ap, opt);
    for (const char *piece; (piece = va_arg(ap, const char *));)
        ck_assert_msg(strstr(err.message, piece), "'%s' lacks '%s'", err.message, piece);
    va_end(ap);
}

START_TEST(test_name_and_description) {
    ckpt c;
    gpt2_build(&c, "", STORE_DTYPE_F32, 10);
    ck_write(&c, tpath("g.safetensors"));
    ck_free(&c);
    store_import_options opt = {
        .layer = 1, .n_heads = H, .name = "gpt2-l1", .description = "GPT-2 layer one, ünïcode"};
    store_import_result res;
    attn_error err;
    store_model *m;
    ck_assert(store_import_checkpoint(tpath("g.safetensors"), tpath("x.safetensors"), &opt, &res,
                                      &err) == 0);
    ck_assert_str_eq(res.name, "gpt2-l1");
    ck_assert_msg(store_model_load(&m, tpath("x.safetensors"), &err) == 0, "%s", err.message);
    ck_assert_str_eq(m->name, "gpt2-l1");
    ck_assert_str_eq(m->description, "GPT-2 layer one, ünïcode");
    store_model_destroy(m);

    /* The name from the output's file name must be a valid name. */
    store_import_options plain = {.layer = 0, .n_heads = H};
    const char *bad = tpath("bad name.safetensors");
    ck_assert_int_eq(store_import_checkpoint(tpath("g.safetensors"), bad, &plain, NULL, &err), -1);
    ck_assert(strstr(err.message, "'bad name'") && strstr(err.message, "--name"));
    ck_assert_int_ne(access(bad, F_OK), 0);
    store_import_options named = {.layer = 0, .n_heads = H, .name = "a/b"};
    expect_fail(tpath("g.safetensors"), &named, "'a/b'", "[A-Za-z0-9._-]{1,64}", NULL);

    /* Never over the checkpoint itself. */
    ck_assert_int_eq(
        store_import_checkpoint(tpath("g.safetensors"), tpath("g.safetensors"), &plain, NULL, &err),
        -1);
    ck_assert(strstr(err.message, "checkpoint itself"));
    ck_assert_msg(store_model_load(&m, tpath("g.safetensors"), &err) == -1, "replaced");
}
END_TEST

START_TEST(test_wrong_layer) {
    ckpt c;
    gpt2_build(&c, "transformer.", STORE_DTYPE_F32, 11);
    ck_write(&c, tpath("g.safetensors"));
    ck_free(&c);
    store_import_options opt = {.layer = 2, .n_heads = H};
    expect_fail(tpath("g.safetensors"), &opt, tpath("g.safetensors"), "no layer 2",
                "'h.2.attn.c_attn.weight'", "'transformer.h.2.attn.c_attn.weight'",
                "GPT-2 layers 0 … 1", NULL);

    bert_build(&c, "", STORE_DTYPE_F32, 12);
    ck_write(&c, tpath("b.safetensors"));
    ck_free(&c);
    opt.layer = 7;
    expect_fail(tpath("b.safetensors"), &opt, "no layer 7",
                "'encoder.layer.7.attention.self.query.weight'", "BERT layers 0 … 1", NULL);
}
END_TEST

START_TEST(test_missing_tensor) {
    ckpt c;
    store_import_options opt = {.layer = 1, .n_heads = H};
    gpt2_build(&c, "transformer.", STORE_DTYPE_F32, 13);
    ck_remove(&c, "transformer.h.1.attn.c_proj.bias");
    ck_write(&c, tpath("g.safetensors"));
    ck_free(&c);
    expect_fail(tpath("g.safetensors"), &opt, "no tensor 'transformer.h.1.attn.c_proj.bias'",
                "GPT-2 layer 1", NULL);
    opt.layer = 0; /* layer 0 is whole */
    attn_error err;
    ck_assert_msg(store_import_checkpoint(tpath("g.safetensors"), tpath("ok.safetensors"), &opt,
                                          NULL, &err) == 0,
                  "%s", err.message);

    bert_build(&c, "bert.", STORE_DTYPE_F32, 14);
    ck_remove(&c, "bert.encoder.layer.1.attention.self.key.weight");
    ck_write(&c, tpath("b.safetensors"));
    ck_free(&c);
    opt.layer = 1;
    expect_fail(tpath("b.safetensors"), &opt,
                "no tensor 'bert.encoder.layer.1.attention.self.key.weight'", "BERT layer 1", NULL);

    /* Both prefixes for one layer: refused, not guessed. */
    gpt2_build(&c, "", STORE_DTYPE_F32, 15);
    uint64_t rng = 99;
    ck_add(&c, "transformer.h.1.attn.c_attn.weight", 2, D, 3 * D, 0, 0, &rng);
    ck_write(&c, tpath("two.safetensors"));
    ck_free(&c);
    expect_fail(tpath("two.safetensors"), &opt, "ambiguous", NULL);
}
END_TEST

START_TEST(test_shapes_and_heads) {
    ckpt c;
    store_import_options opt = {.layer = 1, .n_heads = 3};
    gpt2_build(&c, "", STORE_DTYPE_F32, 16);
    ck_write(&c, tpath("g.safetensors"));
    expect_fail(tpath("g.safetensors"), &opt, "d_model 8", "not divisible by 3 heads", NULL);
    opt.n_heads = 0;
    expect_fail(tpath("g.safetensors"), &opt, "heads", NULL);

    /* c_proj of the wrong width. */
    opt.n_heads = H;
    ck_tensor *t = ck_find(&c, "h.1.attn.c_proj.weight");
    t->shape[1] = 4;
    t->count = D * 4;
    ck_write(&c, tpath("g.safetensors"));
    expect_fail(tpath("g.safetensors"), &opt, "'h.1.attn.c_proj.weight' has shape [8, 4]",
                "expected [8, 8]", NULL);
    /* c_attn stored [3d, d] (as nn.Linear would) is not Conv1D. */
    t->shape[1] = D;
    t->count = D * D;
    t = ck_find(&c, "h.1.attn.c_attn.weight");
    t->shape[0] = 3 * D;
    t->shape[1] = D;
    ck_write(&c, tpath("g.safetensors"));
    expect_fail(tpath("g.safetensors"), &opt, "'h.1.attn.c_attn.weight' has shape [24, 8]",
                "expected [24, 72]", NULL);
    ck_free(&c);

    bert_build(&c, "", STORE_DTYPE_F32, 17);
    t = ck_find(&c, "encoder.layer.1.attention.self.value.bias");
    t->shape[0] = t->count = 6;
    ck_write(&c, tpath("b.safetensors"));
    ck_free(&c);
    expect_fail(tpath("b.safetensors"), &opt,
                "'encoder.layer.1.attention.self.value.bias' has shape [6], expected [8]", NULL);
}
END_TEST

START_TEST(test_arch) {
    ckpt c;
    store_import_options opt = {.arch = STORE_IMPORT_BERT, .layer = 0, .n_heads = H};
    gpt2_build(&c, "", STORE_DTYPE_F32, 18);
    ck_write(&c, tpath("g.safetensors"));
    ck_free(&c);
    expect_fail(tpath("g.safetensors"), &opt, "no BERT layer at all", "--arch", NULL);

    /* Neither architecture: detection says so. */
    uint64_t rng = 1;
    c.dtype = STORE_DTYPE_F32;
    c.n = 0;
    ck_add(&c, "transformer.blocks.0.attn.Wqkv.weight", 2, 3 * D, D, 0, 0, &rng); /* MPT's */
    ck_write(&c, tpath("mpt.safetensors"));
    ck_free(&c);
    opt.arch = STORE_IMPORT_AUTO;
    expect_fail(tpath("mpt.safetensors"), &opt, "no GPT-2", "nor BERT", "nor Llama", NULL);

    /* Not a safetensors file at all; no file at all. */
    FILE *f = fopen(tpath("junk.safetensors"), "w");
    fputs("not a checkpoint", f);
    fclose(f);
    expect_fail(tpath("junk.safetensors"), &opt, tpath("junk.safetensors"), NULL);
    expect_fail(tpath("none.safetensors"), &opt, tpath("none.safetensors"), NULL);

    store_import_arch a;
    ck_assert_int_eq(store_import_arch_parse("gpt2", &a), 0);
    ck_assert_int_eq(a, STORE_IMPORT_GPT2);
    ck_assert_int_eq(store_import_arch_parse("bert", &a), 0);
    ck_assert_int_eq(a, STORE_IMPORT_BERT);
    ck_assert_int_eq(store_import_arch_parse("gpt3", &a), -1);
    ck_assert_str_eq(store_import_arch_name(STORE_IMPORT_BERT), "bert");
}
END_TEST

START_TEST(test_values_and_dtypes) {
    ckpt c;
    store_import_options opt = {.layer = 1, .n_heads = H};
    gpt2_build(&c, "", STORE_DTYPE_F32, 19);
    ck_find(&c, "h.1.attn.c_attn.bias")->vals[5] = NAN;
    ck_write(&c, tpath("g.safetensors"));
    expect_fail(tpath("g.safetensors"), &opt, "'h.1.attn.c_attn.bias'", "NaN", "element 5", NULL);
    /* The NaN of layer 1 does not matter to layer 0. */
    opt.layer = 0;
    attn_error err;
    ck_assert_msg(store_import_checkpoint(tpath("g.safetensors"), tpath("ok.safetensors"), &opt,
                                          NULL, &err) == 0,
                  "%s", err.message);
    ck_free(&c);

    /* F64 is not read (write the file by hand: one F64 tensor). */
    gpt2_build(&c, "", STORE_DTYPE_F32, 20);
    store_write_tensor w[CK_MAX];
    double big[D * 3 * D] = {0};
    for (size_t i = 0; i < c.n; i++) {
        w[i] = (store_write_tensor){
            c.t[i].name, STORE_DTYPE_F32, c.t[i].rank, c.t[i].shape, c.t[i].vals, NULL, NULL};
        if (strcmp(c.t[i].name, "h.0.attn.c_attn.weight") == 0) {
            w[i].dtype = STORE_DTYPE_F64;
            w[i].data = big;
        }
    }
    ck_assert(store_file_write(tpath("f64.safetensors"), NULL, 0, w, c.n, NULL, &err) == 0);
    ck_free(&c);
    expect_fail(tpath("f64.safetensors"), &opt, "'h.0.attn.c_attn.weight' has dtype F64", NULL);
}
END_TEST

/* ---- the binary -------------------------------------------------------------------- */

/* Runs the tool with args (NULL-terminated), stdout and stderr into
 * tmpdir/stdout and tmpdir/stderr; returns its exit status. */
static int tool_run(const char *const *args) {
    char *argv[16];
    size_t n = 0;
    argv[n++] = (char *)TOOL;
    for (; args[n - 1]; n++) {
        ck_assert_uint_lt(n, 15);
        argv[n] = (char *)args[n - 1];
    }
    argv[n] = NULL;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int o = open(tpath("stdout"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(tpath("stderr"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0) _exit(127);
        execv(TOOL, argv);
        _exit(127);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* The text of tmpdir/<name> (static buffer). */
static const char *slurp(const char *name) {
    static char buf[8192];
    FILE *f = fopen(tpath(name), "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

#define TOOL_EXPECT(code, stream, piece, ...)                                                      \
    do {                                                                                           \
        const char *const args_[] = {__VA_ARGS__, NULL};                                           \
        ck_assert_int_eq(tool_run(args_), code);                                                   \
        const char *text_ = slurp(stream);                                                         \
        ck_assert_msg(strstr(text_, piece), "%s lacks '%s': %s", stream, piece, text_);            \
    } while (0)

START_TEST(test_binary) {
    if (access(TOOL, X_OK) != 0) {
        fprintf(stderr, "test_binary: %s not built, skipped\n", TOOL);
        return;
    }
    ckpt c;
    gpt2_build(&c, "transformer.", STORE_DTYPE_F16, 21);
    ck_write(&c, tpath("gpt2.safetensors"));
    ck_free(&c);
    /* Own copies: tpath's buffers rotate under tool_run. */
    char in[512], out[512], o2[512], holed[512], bert_in[512], bert_out[512], none[512], x[512];
    snprintf(in, sizeof in, "%s", tpath("gpt2.safetensors"));
    snprintf(out, sizeof out, "%s", tpath("gpt2-layer1.safetensors"));
    snprintf(o2, sizeof o2, "%s", tpath("o2.safetensors"));
    snprintf(holed, sizeof holed, "%s", tpath("holed.safetensors"));
    snprintf(bert_in, sizeof bert_in, "%s", tpath("bert.safetensors"));
    snprintf(bert_out, sizeof bert_out, "%s", tpath("bert1.safetensors"));
    snprintf(none, sizeof none, "%s", tpath("none.safetensors"));
    snprintf(x, sizeof x, "%s", tpath("x.safetensors"));

    TOOL_EXPECT(0, "stdout", "usage: import_checkpoint", "--help");
    TOOL_EXPECT(0, "stdout", "model 'gpt2-layer1' from GPT-2 layer 1 (of 2)", "--layer", "1",
                "--heads", "2", in, out);
    store_model *m;
    attn_error err;
    ck_assert_msg(store_model_load(&m, out, &err) == 0, "%s", err.message);
    ck_assert_str_eq(m->name, "gpt2-layer1");
    ck_assert_int_eq(m->mask, ATTN_MASK_CAUSAL);
    store_model_destroy(m);
    float e[N_TOK * D], delta[N_TOK * D];
    double ref[N_TOK * D];
    embeddings_random(e, N_TOK * D, 42);
    ck_assert(store_model_load(&m, out, &err) == 0);
    model_run(m, e, delta, NULL);
    store_model_destroy(m);
    reference_delta(ref, in, 0, "transformer.", 1, e, N_TOK);
    ck_assert_double_le(rel_error(delta, ref, N_TOK * D), 1e-5);

    TOOL_EXPECT(0, "stdout", "mask causal", "--arch=gpt2", "--heads=2", "--name", "x",
                "--description", "layer zero", in, x);

    /* Usage: 2. */
    TOOL_EXPECT(1, "stderr", "the number of heads is unknown: give it (--heads)", in, out);
    TOOL_EXPECT(2, "stderr", "unknown arch 'gpt3'", "--arch", "gpt3", "--heads", "2", in, out);
    TOOL_EXPECT(2, "stderr", "--heads '0'", "--heads", "0", in, out);
    TOOL_EXPECT(2, "stderr", "--heads 'x'", "--heads", "x", in, out);
    TOOL_EXPECT(2, "stderr", "--layer '-1'", "--layer=-1", "--heads", "2", in, out);
    TOOL_EXPECT(2, "stderr", "unknown option '--bogus'", "--bogus", "--heads", "2", in, out);
    TOOL_EXPECT(2, "stderr", "OUTPUT is missing", "--heads", "2", in);
    TOOL_EXPECT(2, "stderr", "unexpected argument", "--heads", "2", in, out, "third");
    TOOL_EXPECT(2, "stderr", "--layer needs a value", "--heads", "2", in, out, "--layer");
    TOOL_EXPECT(2, "stderr", "--name 'a b'", "--heads", "2", "--name", "a b", in, out);

    /* The checkpoint's faults: 1, with the message. */
    TOOL_EXPECT(1, "stderr", "no layer 5", "--layer", "5", "--heads", "2", in, o2);
    TOOL_EXPECT(1, "stderr", "not divisible by 3 heads", "--heads", "3", in, o2);
    TOOL_EXPECT(1, "stderr", "no BERT layer at all", "--arch", "bert", "--heads", "2", in, o2);
    TOOL_EXPECT(1, "stderr", "none.safetensors", "--heads", "2", none, o2);
    ck_assert_int_ne(access(o2, F_OK), 0);

    gpt2_build(&c, "", STORE_DTYPE_F32, 22);
    ck_remove(&c, "h.1.attn.c_attn.bias");
    ck_write(&c, holed);
    ck_free(&c);
    TOOL_EXPECT(1, "stderr", "no tensor 'h.1.attn.c_attn.bias'", "--layer", "1", "--heads", "2",
                holed, o2);
    ck_assert_int_ne(access(o2, F_OK), 0);

    /* BERT through the binary, detected. */
    bert_build(&c, "bert.", STORE_DTYPE_BF16, 23);
    ck_write(&c, bert_in);
    ck_free(&c);
    TOOL_EXPECT(0, "stdout", "from BERT layer 1 (of 2): d_model 8, 2 heads of 4, mask none",
                "--layer", "1", "--heads", "2", bert_in, bert_out);
}
END_TEST

/* ---- the suite -------------------------------------------------------------------- */

static Suite *import_suite(void) {
    Suite *s = suite_create("import");
    TCase *tc = tcase_create("layers");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_gpt2);
    tcase_add_test(tc, test_gpt2_prefixed);
    tcase_add_test(tc, test_gpt2_f16);
    tcase_add_test(tc, test_gpt2_bf16);
    tcase_add_test(tc, test_bert);
    tcase_add_test(tc, test_bert_prefixed);
    tcase_add_test(tc, test_bert_f16);
    tcase_add_test(tc, test_layout_exact);
    suite_add_tcase(s, tc);

    tc = tcase_create("faults");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_name_and_description);
    tcase_add_test(tc, test_wrong_layer);
    tcase_add_test(tc, test_missing_tensor);
    tcase_add_test(tc, test_shapes_and_heads);
    tcase_add_test(tc, test_arch);
    tcase_add_test(tc, test_values_and_dtypes);
    suite_add_tcase(s, tc);

    tc = tcase_create("binary");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_binary);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(import_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
