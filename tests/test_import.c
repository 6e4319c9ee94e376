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
#include "tests/fixtures.h"
#include "tests/rope_ref.h"

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
    tf_temp_dir(tmpdir, sizeof tmpdir, "import");
}

static void teardown(void) {
    tf_remove_dir(tmpdir);
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
 *   GPT-2: x = ln_1(e) (LayerNorm, eps 1e-5); [Q|K|V] = x · c_attn.weight +
 *          c_attn.bias; … ; Z · c_proj.weight + bias
 *   BERT:  Q = e · queryᵀ + query.bias, likewise K, V; … ; Z · denseᵀ + bias
 *          (its LayerNorm comes after the residual add: none here)
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
        double x[N_TOK * D];
        snprintf(name, sizeof name, "%sh.%d.ln_1.weight", prefix, layer);
        double *lw = tensor_f64(f, name, D);
        snprintf(name, sizeof name, "%sh.%d.ln_1.bias", prefix, layer);
        double *lb = tensor_f64(f, name, D);
        for (size_t t = 0; t < n; t++) {
            double mean = 0, var = 0;
            for (size_t c = 0; c < D; c++)
                mean += e[t * D + c] / (double)D;
            for (size_t c = 0; c < D; c++)
                var += (e[t * D + c] - mean) * (e[t * D + c] - mean) / D;
            for (size_t c = 0; c < D; c++)
                x[t * D + c] = (e[t * D + c] - mean) / sqrt(var + 1e-5) * lw[c] + lb[c];
        }
        free(lw);
        free(lb);
        snprintf(name, sizeof name, "%sh.%d.attn.c_attn.weight", prefix, layer);
        double *w = tensor_f64(f, name, D * 3 * D);
        snprintf(name, sizeof name, "%sh.%d.attn.c_attn.bias", prefix, layer);
        double *b = tensor_f64(f, name, 3 * D);
        for (size_t t = 0; t < n; t++)
            for (size_t c = 0; c < 3 * D; c++) {
                double s = b[c];
                for (size_t r = 0; r < D; r++)
                    s += x[t * D + r] * w[r * 3 * D + c];
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

    /* A description the server would refuse is refused before anything
     * is written: at most 4096 bytes. */
    char long_text[4098];
    memset(long_text, 'd', 4097);
    long_text[4097] = '\0';
    store_import_options described = {.layer = 0, .n_heads = H, .description = long_text};
    expect_fail(tpath("g.safetensors"), &described, "--description", "4097 bytes long, over 4096",
                NULL);
    long_text[4096] = '\0';
    ck_assert_msg(store_import_checkpoint(tpath("g.safetensors"), tpath("x.safetensors"),
                                          &described, NULL, &err) == 0,
                  "%s", err.message);
    ck_assert_msg(store_model_load(&m, tpath("x.safetensors"), &err) == 0, "%s", err.message);
    ck_assert_uint_eq(strlen(m->description), 4096);
    store_model_destroy(m);

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

/* ---- today's layouts: checkpoint directories with config.json ---------------- */

/* Writes c as a Hugging Face checkpoint directory `dir`: config.json with
 * `config`, and model.safetensors, or (shards) two files and
 * model.safetensors.index.json whose weight_map names each tensor's. */
static void ck_write_dir(const ckpt *c, const char *dir, const char *config, int shards) {
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    char p[700];
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(config, f);
    ck_assert_int_eq(fclose(f), 0);
    if (!shards) {
        snprintf(p, sizeof p, "%s/model.safetensors", dir);
        ck_write(c, p);
        return;
    }
    /* tensor i into shard i % 2, so that a layer spans both */
    static const char *const shard_names[2] = {"model-00001-of-00002.safetensors",
                                               "model-00002-of-00002.safetensors"};
    ckpt *half = malloc(sizeof *half);
    size_t len = 0, cap = 65536;
    char *index = malloc(cap);
    len += (size_t)snprintf(index + len, cap - len,
                            "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {");
    for (int sh = 0; sh < 2; sh++) {
        half->dtype = c->dtype;
        half->n = 0;
        for (size_t i = (size_t)sh; i < c->n; i += 2) {
            half->t[half->n++] = c->t[i]; /* borrowed values */
            len += (size_t)snprintf(index + len, cap - len, "%s\"%s\": \"%s\"",
                                    len > 60 ? ", " : "", c->t[i].name, shard_names[sh]);
        }
        snprintf(p, sizeof p, "%s/%s", dir, shard_names[sh]);
        ck_write(half, p);
    }
    snprintf(index + len, cap - len, "}}");
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(index, f);
    ck_assert_int_eq(fclose(f), 0);
    free(index);
    free(half);
}

/* The tensor `name` of the checkpoint directory (any of its .safetensors
 * files) or file, as doubles; count checked; the caller frees. */
static double *ck_tensor_f64(const char *path, const char *name, size_t count) {
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    char files[8][700];
    size_t n = 0;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *de;
        while ((de = readdir(d)) && n < 8) {
            size_t l = strlen(de->d_name);
            if (l > 12 && strcmp(de->d_name + l - 12, ".safetensors") == 0)
                snprintf(files[n++], sizeof files[0], "%s/%s", path, de->d_name);
        }
        closedir(d);
    } else {
        snprintf(files[n++], sizeof files[0], "%s", path);
    }
    for (size_t i = 0; i < n; i++) {
        store_file *f;
        attn_error err;
        ck_assert_msg(store_file_open(&f, files[i], &err) == 0, "%s", err.message);
        double *v = store_file_find(f, name) ? tensor_f64(f, name, count) : NULL;
        store_file_close(f);
        if (v) return v;
    }
    ck_abort_msg("reference: no tensor %s in %s", name, path);
    return NULL;
}

/* x · Wᵀ + b for nn.Linear W [out, in], rows of x n × in; b may be NULL. */
static void linear_f64(double *y, const double *x, size_t n, const double *w, const double *b,
                       size_t out, size_t in) {
    for (size_t t = 0; t < n; t++)
        for (size_t c = 0; c < out; c++) {
            double s = b ? b[c] : 0;
            for (size_t r = 0; r < in; r++)
                s += x[t * in + r] * w[c * in + r];
            y[t * out + c] = s;
        }
}

/*
 * A norm as transformers' modules compute it, over rows of width d:
 *   LayerNorm   (x − mean) / sqrt(var + eps) · w + b   (population variance)
 *   RMSNorm     x / sqrt(mean(x²) + eps) · (offset + w)   (Llama's; Gemma's 1 + w)
 */
typedef struct hf_norm {
    int type; /* 0 none, 1 LayerNorm, 2 RMSNorm */
    double eps, offset;
    double *w, *b; /* d, or NULL */
} hf_norm;

/* The rows x (n × d) normed in place. */
static void hf_norm_rows(const hf_norm *nm, double *x, size_t n, size_t d) {
    if (!nm->type) return;
    for (size_t t = 0; t < n; t++) {
        double *row = x + t * d, mean = 0, var = 0;
        if (nm->type == 1) {
            for (size_t c = 0; c < d; c++)
                mean += row[c] / (double)d;
        }
        for (size_t c = 0; c < d; c++)
            var += (row[c] - mean) * (row[c] - mean) / (double)d;
        double inv = 1 / sqrt(var + nm->eps);
        for (size_t c = 0; c < d; c++)
            row[c] = (row[c] - mean) * inv * (nm->offset + (nm->w ? nm->w[c] : 1)) +
                     (nm->b ? nm->b[c] : 0);
    }
}

static void hf_norm_free(hf_norm *nm) {
    free(nm->w);
    free(nm->b);
}

/* Rows as doubles, normed by nm. */
static double *hf_rows(const float *x, size_t n, size_t d, const hf_norm *nm) {
    double *y = malloc(n * d * sizeof(double));
    for (size_t i = 0; i < n * d; i++)
        y[i] = x[i];
    if (nm) hf_norm_rows(nm, y, n, d);
    return y;
}

/* The norm "<base>.weight" (and ".bias" for LayerNorm) of the checkpoint. */
static hf_norm hf_norm_load(const char *path, const char *base, int type, double eps, double offset,
                            size_t d) {
    char name[400];
    hf_norm nm = {.type = type, .eps = eps, .offset = offset};
    snprintf(name, sizeof name, "%s.weight", base);
    nm.w = ck_tensor_f64(path, name, d);
    if (type == 1) {
        snprintf(name, sizeof name, "%s.bias", base);
        nm.b = ck_tensor_f64(path, name, d);
    }
    return nm;
}

/*
 * One layer as the Hugging Face modules compute it, from its per-head
 * projections. q is n × (h·dh) and k, v m × (g·dh), heads side by side
 * (q.view(n, h, dh)); query head i uses K/V head i / (h/g) (repeat_kv).
 */
typedef struct hf_layer {
    size_t n, m, d, h, g, dh;
    double *q, *k, *v;
    double *wo, *bo; /* o_proj [d, h·dh], bias or NULL */
    /* RoPE as modeling_llama / modeling_gpt_neox: inv_freq, then
     * q·cos + rotate_half(q)·sin on the first rope_dims coordinates */
    size_t rope_dims;
    double theta;
    int scaling; /* 0 none, 1 linear, 2 llama3 */
    double factor, low, high, original;
    const double *bloom_alibi; /* h slopes: scores + slope · key position */
    int causal;
    size_t window;              /* sliding window: keys with q − k < window */
    double softcap;             /* Gemma 2: tanh(s / c) · c after the scaling */
    double scaling_;            /* scores = scaling · q·kᵀ */
    const attn_rope *long_rope; /* yarn or longrope: inv_freq and attention factor from
                                   rope_ref.c (HF's modeling_rope_utils) */
    int interleaved;            /* Llama 4's view_as_complex: pairs (2t, 2t + 1) */
    hf_norm qn, kn;             /* q_norm, k_norm (RMS) before RoPE: per head, or over */
    int qk_all;                 /* the whole projection */
    int l2_after_rope;          /* Llama 4's weightless L2 norm per head after RoPE */
    int has_sinks;              /* llama_ref_p loads self_attn.sinks into sinks */
    double eps_l2;
    double floor_scale, attn_scale; /* Llama 4's NoPE temperature (floor_scale > 0) */
    const double *sinks;            /* h: GPT-OSS's sink logits in each row's softmax */
    size_t chunk;                   /* Llama 4's chunked attention: ⌊q/c⌋ = ⌊k/c⌋ */
    hf_norm norm;                   /* of the queries' rows (and the keys' without a context) */
    hf_norm post;                   /* of the output, before the residual add */
    const char *layers;             /* the layers' names: NULL "model.layers." */
    int qkv_blocks;                 /* Phi-3's qkv_proj, fused block-wise [Q | K | V] */
    double *p; /* h × n × m: the patterns (output_attentions), by hf_attend */
} hf_layer;

/* modeling_rope_utils: the default, linear and llama3 inv_freq. */
static void hf_inv_freq(const hf_layer *L, double *inv) {
    for (size_t t = 0; L->long_rope && t < L->rope_dims / 2; t++)
        inv[t] =
            L->long_rope->scaling == ATTN_ROPE_SCALING_YARN
                ? rope_ref_yarn_freq(L->long_rope, t)
                : rope_ref_longrope_freq(L->long_rope, t, rope_ref_long(L->long_rope, NULL, L->n));
    for (size_t t = 0; !L->long_rope && t < L->rope_dims / 2; t++) {
        double f = 1.0 / pow(L->theta, (double)(2 * t) / (double)L->rope_dims);
        if (L->scaling == 1) f /= L->factor;
        if (L->scaling == 2) {
            double low_wavelen = L->original / L->low, high_wavelen = L->original / L->high;
            double wavelen = 2 * M_PI / f;
            if (wavelen > low_wavelen) {
                f = f / L->factor;
            } else if (!(wavelen < high_wavelen)) {
                double smooth = (L->original / wavelen - L->low) / (L->high - L->low);
                f = (1 - smooth) * f / L->factor + smooth * f;
            }
        }
        inv[t] = f;
    }
}

/* apply_rotary_pos_emb on one row x[dh] at position pos. */
static void hf_rotate(const hf_layer *L, const double *inv, double *x, size_t pos) {
    size_t half = L->rope_dims / 2;
    double rot[256], a = L->long_rope ? rope_ref_attention_factor(L->long_rope) : 1;
    for (size_t j = 0; j < L->rope_dims; j++) {
        if (L->interleaved) { /* (x_2t + i·x_2t+1) · e^(i·pos·f_t) */
            double ang = (double)pos * inv[j / 2];
            rot[j] = j % 2 ? x[j] * cos(ang) + x[j - 1] * sin(ang)
                           : x[j] * cos(ang) - x[j + 1] * sin(ang);
            continue;
        }
        double ang = (double)pos * inv[j % half];
        double rh = j < half ? -x[j + half] : x[j - half]; /* rotate_half: [−x2, x1] */
        rot[j] = x[j] * cos(ang) * a + rh * sin(ang) * a;
    }
    memcpy(x, rot, L->rope_dims * sizeof(double));
}

/* ΔE (n × d) of the layer into out. */
static void hf_attend(hf_layer *L, double *out) {
    size_t hd = L->h * L->dh, gd = L->g * L->dh, rep = L->h / L->g;
    double inv[128];
    /* q_norm, k_norm: RMS over each head's dh, or over the whole row */
    if (L->qn.type) {
        size_t qw = L->qk_all ? hd : L->dh, kw = L->qk_all ? gd : L->dh;
        hf_norm_rows(&L->qn, L->q, L->n * hd / qw, qw);
        hf_norm_rows(&L->kn, L->k, L->m * gd / kw, kw);
    }
    if (L->rope_dims) {
        hf_inv_freq(L, inv);
        for (size_t t = 0; t < L->n; t++)
            for (size_t i = 0; i < L->h; i++)
                hf_rotate(L, inv, L->q + t * hd + i * L->dh, t);
        for (size_t t = 0; t < L->m; t++)
            for (size_t u = 0; u < L->g; u++)
                hf_rotate(L, inv, L->k + t * gd + u * L->dh, t);
    }
    if (L->l2_after_rope) {
        hf_norm l2 = {.type = 2, .eps = L->eps_l2};
        hf_norm_rows(&l2, L->q, L->n * L->h, L->dh);
        hf_norm_rows(&l2, L->k, L->m * L->g, L->dh);
    }
    for (size_t t = 0; L->floor_scale > 0 && t < L->n; t++) {
        double tau = log(floor((double)(t + 1) / L->floor_scale) + 1) * L->attn_scale + 1;
        for (size_t c = 0; c < hd; c++)
            L->q[t * hd + c] *= tau;
    }
    double *z = calloc(L->n * hd, sizeof(double)), *s = malloc(L->m * sizeof(double));
    L->p = calloc(L->h * L->n * L->m, sizeof(double));
    for (size_t i = 0; i < L->h; i++) {
        size_t u = i / rep;
        for (size_t a = 0; a < L->n; a++) {
            double mx = -INFINITY, sum = 0;
            for (size_t b = 0; b < L->m; b++) {
                if ((L->causal && b > a) || (L->window && a >= b + L->window) ||
                    (L->chunk && a / L->chunk != b / L->chunk)) {
                    s[b] = -INFINITY;
                    continue;
                }
                double dot = 0;
                for (size_t j = 0; j < L->dh; j++)
                    dot += L->q[a * hd + i * L->dh + j] * L->k[b * gd + u * L->dh + j];
                double sc = L->scaling_ * dot;
                if (L->softcap > 0) sc = tanh(sc / L->softcap) * L->softcap;
                if (L->bloom_alibi) sc += L->bloom_alibi[i] * (double)b;
                s[b] = sc;
                mx = sc > mx ? sc : mx;
            }
            /* GPT-OSS: the sink joins the max and the denominator, then is dropped */
            if (L->sinks && L->sinks[i] > mx) mx = L->sinks[i];
            if (L->sinks) sum += exp(L->sinks[i] - mx);
            for (size_t b = 0; b < L->m; b++)
                sum += (s[b] = s[b] == -INFINITY ? 0 : exp(s[b] - mx));
            for (size_t b = 0; b < L->m; b++)
                L->p[(i * L->n + a) * L->m + b] = s[b] / sum;
            for (size_t b = 0; b < L->m; b++)
                for (size_t j = 0; j < L->dh; j++)
                    z[a * hd + i * L->dh + j] += s[b] / sum * L->v[b * gd + u * L->dh + j];
        }
    }
    for (size_t t = 0; t < L->n; t++)
        for (size_t c = 0; c < L->d; c++) {
            double acc = L->bo ? L->bo[c] : 0;
            for (size_t r = 0; r < hd; r++)
                acc += z[t * hd + r] * L->wo[c * hd + r];
            out[t * L->d + c] = acc;
        }
    hf_norm_rows(&L->post, out, L->n, L->d);
    free(z);
    free(s);
}

static void hf_free(hf_layer *L) {
    hf_norm_free(&L->qn);
    hf_norm_free(&L->kn);
    hf_norm_free(&L->norm);
    hf_norm_free(&L->post);
    free(L->p);
    free(L->q);
    free(L->k);
    free(L->v);
    free(L->wo);
    free(L->bo);
}

/* `<base>.<part>` of the checkpoint as doubles, or NULL when `optional`
 * and absent. */
static double *part_f64(const char *path, const ckpt *c, const char *base, const char *part,
                        size_t count, int optional) {
    char name[320];
    snprintf(name, sizeof name, "%s.%s", base, part);
    if (optional && !ck_find((ckpt *)c, name)) return NULL;
    return ck_tensor_f64(path, name, count);
}

/* Separate q, k, v, o nn.Linear projections (Llama, Gemma 2, Whisper):
 * fills L's q (from e), k, v (from kv_rows: e, or a context), wo, bo. */
static void hf_separate(hf_layer *L, const char *path, const ckpt *c, const char *att,
                        const char *o_name, const float *e, const float *kv_rows) {
    size_t hd = L->h * L->dh, gd = L->g * L->dh;
    char base[256];
    const char *names[3] = {"q_proj", "k_proj", "v_proj"};
    size_t outs[3] = {hd, gd, gd};
    double **dst[3] = {&L->q, &L->k, &L->v};
    double *xq = hf_rows(e, L->n, L->d, &L->norm);
    double *xkv = kv_rows == e ? xq : hf_rows(kv_rows, L->m, L->d, NULL);
    for (int p = 0; p < 3; p++) {
        snprintf(base, sizeof base, "%s.%s", att, names[p]);
        double *w = part_f64(path, c, base, "weight", outs[p] * L->d, 0);
        double *b = part_f64(path, c, base, "bias", outs[p], 1);
        size_t rows = p == 0 ? L->n : L->m;
        *dst[p] = malloc(rows * outs[p] * sizeof(double));
        linear_f64(*dst[p], p == 0 ? xq : xkv, rows, w, b, outs[p], L->d);
        free(w);
        free(b);
    }
    if (xkv != xq) free(xkv);
    free(xq);
    snprintf(base, sizeof base, "%s.%s", att, o_name);
    L->wo = part_f64(path, c, base, "weight", L->d * hd, 0);
    L->bo = part_f64(path, c, base, "bias", L->d, 1);
}

/* GPT-NeoX's and BLOOM's fused query_key_value: y = x·Wᵀ + b, viewed as
 * (n, h, 3, dh) and split into q, k, v (modeling_gpt_neox's
 * view(…, h, 3·dh) and modeling_bloom's _split_heads). */
static void hf_fused(hf_layer *L, const char *path, const ckpt *c, const char *att,
                     const float *e) {
    size_t hd = L->h * L->dh, n = L->n;
    char base[256];
    snprintf(base, sizeof base, "%s.query_key_value", att);
    double *w = part_f64(path, c, base, "weight", 3 * hd * L->d, 0);
    double *b = part_f64(path, c, base, "bias", 3 * hd, 1);
    double *y = malloc(n * 3 * hd * sizeof(double)), *x = hf_rows(e, n, L->d, &L->norm);
    linear_f64(y, x, n, w, b, 3 * hd, L->d);
    free(x);
    L->q = malloc(n * hd * sizeof(double));
    L->k = malloc(n * hd * sizeof(double));
    L->v = malloc(n * hd * sizeof(double));
    double *dst[3] = {L->q, L->k, L->v};
    for (size_t t = 0; t < n; t++)
        for (size_t i = 0; i < L->h; i++)
            for (size_t p = 0; p < 3; p++)
                for (size_t j = 0; j < L->dh; j++)
                    dst[p][t * hd + i * L->dh + j] = y[t * 3 * hd + (i * 3 + p) * L->dh + j];
    free(w);
    free(b);
    free(y);
    snprintf(base, sizeof base, "%s.dense", att);
    L->wo = part_f64(path, c, base, "weight", L->d * hd, 0);
    L->bo = part_f64(path, c, base, "bias", L->d, 1);
}

/* Phi-3's qkv_proj [hd + 2gd, d]: y = x·Wᵀ split as qkv[..., :hd],
 * [hd : hd + gd], [hd + gd :] (modeling_phi3's Phi3Attention), and o_proj. */
static void hf_blocks(hf_layer *L, const char *path, const ckpt *c, const char *att,
                      const float *e) {
    size_t hd = L->h * L->dh, gd = L->g * L->dh, cols = hd + 2 * gd, n = L->n;
    char base[256];
    snprintf(base, sizeof base, "%s.qkv_proj", att);
    double *w = part_f64(path, c, base, "weight", cols * L->d, 0);
    double *y = malloc(n * cols * sizeof(double)), *x = hf_rows(e, n, L->d, &L->norm);
    linear_f64(y, x, n, w, NULL, cols, L->d);
    free(x);
    L->q = malloc(n * hd * sizeof(double));
    L->k = malloc(n * gd * sizeof(double));
    L->v = malloc(n * gd * sizeof(double));
    for (size_t t = 0; t < n; t++) {
        memcpy(L->q + t * hd, y + t * cols, hd * sizeof(double));
        memcpy(L->k + t * gd, y + t * cols + hd, gd * sizeof(double));
        memcpy(L->v + t * gd, y + t * cols + hd + gd, gd * sizeof(double));
    }
    free(w);
    free(y);
    snprintf(base, sizeof base, "%s.o_proj", att);
    L->wo = part_f64(path, c, base, "weight", L->d * hd, 0);
    L->bo = part_f64(path, c, base, "bias", L->d, 1);
}

/* A checkpoint of `layers` layers with the given projections: q/k/v/o
 * (separate: q [h·dh, d], k, v [g·dh, d], o [d, h·dh]; biases on q, k, v
 * when qkv_bias, on o when o_bias) or fused [3·h·dh, d] and dense; among
 * decoys (embeddings, norms, an MLP). */
static void modern_build(ckpt *c, store_dtype dtype, uint64_t seed, const char *layer_head,
                         const char *att, int fused, size_t d, size_t h, size_t g, size_t dh,
                         int qkv_bias, int o_bias, const char *o_name, int k_bias) {
    uint64_t rng = seed;
    char n[256];
    size_t hd = h * dh, gd = g * dh;
    c->dtype = dtype;
    c->n = 0;
    ck_add(c, "model.embed_tokens.weight", 2, 16, d, 0, 0, &rng);
    for (int l = 0; l < LAYERS; l++) {
        /* every family's norms: each reads its own, the rest are decoys */
        static const char *const norms[] = {
            "input_layernorm.weight", "input_layernorm.bias", "post_attention_layernorm.weight",
            "encoder_attn_layer_norm.weight", "encoder_attn_layer_norm.bias"};
        for (size_t i = 0; i < sizeof norms / sizeof norms[0]; i++) {
            snprintf(n, sizeof n, "%s%d.%s", layer_head, l, norms[i]);
            ck_add(c, n, 1, d, 0, 0, 0, &rng);
        }
        if (fused) {
            snprintf(n, sizeof n, "%s%d%s.query_key_value.weight", layer_head, l, att);
            ck_add(c, n, 2, 3 * hd, d, 0, 0, &rng);
            snprintf(n, sizeof n, "%s%d%s.query_key_value.bias", layer_head, l, att);
            if (qkv_bias) ck_add(c, n, 1, 3 * hd, 0, 0, 0, &rng);
            snprintf(n, sizeof n, "%s%d%s.dense.weight", layer_head, l, att);
            ck_add(c, n, 2, d, hd, 0, 0, &rng);
            snprintf(n, sizeof n, "%s%d%s.dense.bias", layer_head, l, att);
            if (o_bias) ck_add(c, n, 1, d, 0, 0, 0, &rng);
        } else {
            const char *p[3] = {"q_proj", "k_proj", "v_proj"};
            size_t outs[3] = {hd, gd, gd};
            for (int i = 0; i < 3; i++) {
                snprintf(n, sizeof n, "%s%d%s.%s.weight", layer_head, l, att, p[i]);
                ck_add(c, n, 2, outs[i], d, 0, 0, &rng);
                snprintf(n, sizeof n, "%s%d%s.%s.bias", layer_head, l, att, p[i]);
                if (qkv_bias && (i != 1 || k_bias)) ck_add(c, n, 1, outs[i], 0, 0, 0, &rng);
            }
            snprintf(n, sizeof n, "%s%d%s.%s.weight", layer_head, l, att, o_name);
            ck_add(c, n, 2, d, hd, 0, 0, &rng);
            snprintf(n, sizeof n, "%s%d%s.%s.bias", layer_head, l, att, o_name);
            if (o_bias) ck_add(c, n, 1, d, 0, 0, 0, &rng);
        }
        snprintf(n, sizeof n, "%s%d.mlp.up_proj.weight", layer_head, l);
        ck_add(c, n, 2, 2 * d, d, 0, 0, &rng);
    }
    ck_add(c, "model.norm.weight", 1, d, 0, 0, 0, &rng);
}

/* Imports with opt, loads, runs (the model's mask and default scale; a
 * context when ctx is not NULL) and returns the model (caller destroys)
 * with ΔE in delta and, when not NULL, the patterns (h × n × m). */
static store_model *import_run_p(const char *in, const store_import_options *opt, const float *e,
                                 size_t n, const float *ctx, size_t m_ctx, float *delta,
                                 float *patterns) {
    const char *out = tpath("imported.safetensors");
    attn_error err;
    store_import_result res;
    ck_assert_msg(store_import_checkpoint(in, out, opt, &res, &err) == 0, "%s", err.message);
    store_model *m;
    ck_assert_msg(store_model_load(&m, out, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(res.n_kv_heads, m->weights.n_kv_heads);
    attn_workspace *ws = attn_workspace_create();
    attn_output o = {.delta = delta, .patterns = patterns};
    float scale =
        m->weights.scale > 0 ? m->weights.scale : (float)(1 / sqrt((double)m->weights.d_head));
    size_t heads[64];
    for (size_t i = 0; i < 64; i++)
        heads[i] = i;
    ck_assert_uint_le(m->weights.n_heads, 64);
    attn_input in_ = {.weights = &m->weights,
                      .heads = patterns ? heads : NULL,
                      .n_heads_out = patterns ? m->weights.n_heads : 0,
                      .embeddings = e,
                      .n_tokens = n,
                      .mask = {m->mask, NULL},
                      .scale = scale,
                      .context = ctx,
                      .n_context = m_ctx};
    attn_error cerr = {0};
    ck_assert_msg(attn_compute(&o, ws, &in_, &cerr) == 0, "attn_compute: %s", cerr.message);
    attn_workspace_destroy(ws);
    return m;
}

static store_model *import_run(const char *in, const store_import_options *opt, const float *e,
                               size_t n, const float *ctx, size_t m_ctx, float *delta) {
    return import_run_p(in, opt, e, n, ctx, m_ctx, delta, NULL);
}

/* The patterns against the reference's (output_attentions), max-abs. */
static void expect_patterns(const float *got, const double *want, size_t count) {
    double worst = 0;
    for (size_t i = 0; i < count; i++)
        worst = fmax(worst, fabs(got[i] - want[i]));
    ck_assert_msg(worst <= 1e-5, "patterns differ by %g", worst);
}

/* ΔE against the reference, and against the other layer's (far). */
static void expect_close(const float *delta, const double *ref, const double *other, size_t count) {
    double r = rel_error(delta, ref, count);
    ck_assert_msg(r <= 1e-5, "ΔE relative error %g", r);
    if (other) ck_assert_msg(rel_error(delta, other, count) > 0.05, "looks like the other layer");
}

enum { LD = 16, LH = 4, LG = 2, LDH = 4, LN = 7 };

/* L's norms (their type, eps and offset set) from "<base>.<name>" and
 * "<base>.<post_name>" of the checkpoint. */
static void hf_norms_load(hf_layer *L, const char *path, const char *base, const char *name,
                          const char *post_name) {
    char full[320];
    if (L->norm.type) {
        snprintf(full, sizeof full, "%s.%s", base, name);
        L->norm = hf_norm_load(path, full, L->norm.type, L->norm.eps, L->norm.offset, L->d);
    }
    if (L->post.type) {
        snprintf(full, sizeof full, "%s.%s", base, post_name);
        L->post = hf_norm_load(path, full, L->post.type, L->post.eps, L->post.offset, L->d);
    }
}

/* The Llama reference of layer `layer` of checkpoint `path`: ΔE, and the
 * patterns into pat when not NULL. The variant's norms are
 * input_layernorm and post_attention_layernorm. */
static void llama_ref_p(double *out, double *pat, const char *path, const ckpt *c, int layer,
                        const float *e, size_t h, size_t g, size_t dh, size_t d,
                        const hf_layer *variant) {
    hf_layer L = *variant;
    L.n = L.m = LN;
    L.d = d;
    L.h = h;
    L.g = g;
    L.dh = dh;
    char att[128], base[128];
    const char *layers = L.layers ? L.layers : "model.layers.";
    snprintf(base, sizeof base, "%s%d", layers, layer);
    hf_norms_load(&L, path, base, "input_layernorm", "post_attention_layernorm");
    snprintf(att, sizeof att, "%s%d.self_attn", layers, layer);
    char name[200];
    if (L.qn.type) {
        size_t qw = L.qk_all ? h * dh : dh, kw = L.qk_all ? g * dh : dh;
        snprintf(name, sizeof name, "%s.q_norm", att);
        L.qn = hf_norm_load(path, name, 2, L.qn.eps, L.qn.offset, qw);
        snprintf(name, sizeof name, "%s.k_norm", att);
        L.kn = hf_norm_load(path, name, 2, L.kn.eps, L.kn.offset, kw);
    }
    double *sinks = NULL;
    if (L.has_sinks) {
        snprintf(name, sizeof name, "%s.sinks", att);
        L.sinks = sinks = ck_tensor_f64(path, name, h);
    }
    if (L.qkv_blocks)
        hf_blocks(&L, path, c, att, e);
    else
        hf_separate(&L, path, c, att, "o_proj", e, e);
    hf_attend(&L, out);
    if (pat) memcpy(pat, L.p, h * LN * LN * sizeof(double));
    hf_free(&L);
    free(sinks);
}

static void llama_ref(double *out, const char *path, const ckpt *c, int layer, const float *e,
                      size_t h, size_t g, size_t dh, size_t d, const hf_layer *variant) {
    llama_ref_p(out, NULL, path, c, layer, e, h, g, dh, d, variant);
}

/* A Llama layer (grouped heads, llama3 RoPE scaling of factor s, l and u,
 * Qwen2-like q/k/v biases) from folder `name`, against Hugging Face's. */
static void llama_check(const char *name, double s, double l, double u) {
    ckpt c;
    modern_build(&c, STORE_DTYPE_F32, 31, "model.layers.", ".self_attn", 0, LD, LH, LG, LDH, 1, 0,
                 "o_proj", 1);
    const char *dir = tpath(name);
    char config[1024];
    snprintf(config, sizeof config,
             "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", "
             "\"hidden_size\": 16, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
             "\"num_hidden_layers\": 2, \"rope_theta\": 100.0, \"attention_bias\": true, "
             "\"rms_norm_eps\": 1e-05, "
             "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": %g, "
             "\"low_freq_factor\": %g, \"high_freq_factor\": %g, "
             "\"original_max_position_embeddings\": 8}}",
             s, l, u);
    ck_write_dir(&c, dir, config, 0);
    float e[LN * LD], delta[LN * LD], pat[LH * LN * LN];
    embeddings_random(e, LN * LD, 77);
    store_import_options opt = {.layer = 1};
    store_model *m = import_run_p(dir, &opt, e, LN, NULL, 0, delta, pat);
    ck_assert_int_eq(m->weights.norm.type, ATTN_NORM_RMS);
    ck_assert(m->weights.norm.eps == 1e-5 && m->weights.norm.offset == 0);
    ck_assert_int_eq(m->weights.post_norm.type, ATTN_NORM_NONE);
    ck_assert_uint_eq(m->weights.n_heads, LH);
    ck_assert_uint_eq(m->weights.n_kv_heads, LG);
    ck_assert_uint_eq(m->weights.d_head, LDH);
    ck_assert_uint_eq(m->weights.rope.dims, LDH);
    ck_assert_int_eq(m->weights.rope.scaling, ATTN_ROPE_SCALING_LLAMA3);
    ck_assert(m->weights.rope.factor == s && m->weights.rope.low_freq_factor == l &&
              m->weights.rope.high_freq_factor == u);
    ck_assert_int_eq(m->mask, ATTN_MASK_CAUSAL);
    ck_assert_ptr_nonnull(m->weights.b_qkv);
    ck_assert_ptr_null(m->weights.b_o);
    store_model_destroy(m);
    hf_layer v = {.rope_dims = LDH,
                  .theta = 100,
                  .scaling = 2,
                  .factor = s,
                  .low = l,
                  .high = u,
                  .original = 8,
                  .causal = 1,
                  .scaling_ = 0.5,
                  .norm = {.type = 2, .eps = 1e-5}};
    double ref[LN * LD], other[LN * LD], ref_p[LH * LN * LN];
    llama_ref_p(ref, ref_p, dir, &c, 1, e, LH, LG, LDH, LD, &v);
    llama_ref(other, dir, &c, 0, e, LH, LG, LDH, LD, &v);
    expect_close(delta, ref, other, LN * LD);
    expect_patterns(pat, ref_p, LH * LN * LN);

    /* --no-norm: the attention of the hidden state as it is, as before */
    opt.no_norm = 1;
    store_model_destroy(import_run(dir, &opt, e, LN, NULL, 0, delta));
    v.norm.type = 0;
    llama_ref(ref, dir, &c, 1, e, LH, LG, LDH, LD, &v);
    expect_close(delta, ref, other, LN * LD);
    ck_free(&c);
}

/* Llama 3.1: λ_0 = 2π in the band between L/u = 2 and L/l = 8. */
START_TEST(test_llama) {
    llama_check("llama31", 8, 1, 4);
}
END_TEST

/* Llama 4 Scout's scaling, low_freq_factor = high_freq_factor = 1: no band,
 * λ_0 = 2π < L = 8 kept, λ_1 = 20π divided by the factor. */
START_TEST(test_llama_equal_freq_factors) {
    llama_check("llama4-rope", 16, 1, 1);
}
END_TEST

/* Mistral: multi-query (g = 1), sliding window, sharded, BF16, no biases. */
START_TEST(test_mistral_sharded) {
    ckpt c;
    modern_build(&c, STORE_DTYPE_BF16, 32, "model.layers.", ".self_attn", 0, LD, LH, 1, LDH, 0, 0,
                 "o_proj", 0);
    const char *dir = tpath("mistral");
    ck_write_dir(&c, dir,
                 "{\"model_type\": \"mistral\", \"hidden_size\": 16, \"num_attention_heads\": 4, "
                 "\"num_key_value_heads\": 1, \"rope_theta\": 1000.0, \"sliding_window\": 3}",
                 1);
    float e[LN * LD], delta[LN * LD];
    embeddings_random(e, LN * LD, 78);
    store_import_options opt = {.layer = 0};
    store_model *m = import_run(dir, &opt, e, LN, NULL, 0, delta);
    ck_assert_uint_eq(m->weights.n_kv_heads, 1);
    ck_assert_uint_eq(m->weights.window, 3);
    ck_assert_ptr_null(m->weights.b_qkv);
    store_model_destroy(m);
    hf_layer v = {.rope_dims = LDH,
                  .theta = 1000,
                  .causal = 1,
                  .window = 3,
                  .scaling_ = 0.5,
                  .norm = {.type = 2, .eps = 1e-6}};
    double ref[LN * LD], other[LN * LD];
    llama_ref(ref, dir, &c, 0, e, LH, 1, LDH, LD, &v);
    llama_ref(other, dir, &c, 1, e, LH, 1, LDH, LD, &v);
    expect_close(delta, ref, other, LN * LD);
    ck_free(&c);
}
END_TEST

/* Qwen2's and the newer layer_types' windows, from config.json alone. */
START_TEST(test_windows_from_config) {
    ckpt c;
    modern_build(&c, STORE_DTYPE_F32, 33, "model.layers.", ".self_attn", 0, LD, LH, LG, LDH, 1, 0,
                 "o_proj", 1);
    static const struct {
        const char *config;
        int layer;
        size_t window;
    } cases[] = {
        {"{\"model_type\": \"qwen2\", \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
         "\"sliding_window\": 4, \"use_sliding_window\": false, \"max_window_layers\": 0}",
         1, 0},
        {"{\"model_type\": \"qwen2\", \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
         "\"sliding_window\": 4, \"use_sliding_window\": true, \"max_window_layers\": 1}",
         0, 0},
        {"{\"model_type\": \"qwen2\", \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
         "\"sliding_window\": 4, \"use_sliding_window\": true, \"max_window_layers\": 1}",
         1, 4},
        {"{\"model_type\": \"mistral\", \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
         "\"sliding_window\": null}",
         1, 0},
        {"{\"model_type\": \"llama\", \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
         "\"sliding_window\": 5, \"layer_types\": [\"full_attention\", \"sliding_attention\"]}",
         1, 5},
        {"{\"model_type\": \"llama\", \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
         "\"sliding_window\": 5, \"layer_types\": [\"full_attention\", \"sliding_attention\"]}",
         0, 0},
        /* a stray sliding_window in a Llama config: its attention has none */
        {"{\"model_type\": \"llama\", \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
         "\"sliding_window\": 5}",
         1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "w%zu", i);
        const char *dir = tpath(name);
        ck_write_dir(&c, dir, cases[i].config, 0);
        store_import_options opt = {.layer = (size_t)cases[i].layer};
        attn_error err;
        ck_assert_msg(store_import_checkpoint(dir, tpath("w.safetensors"), &opt, NULL, &err) == 0,
                      "%s", err.message);
        store_model *m;
        ck_assert(store_model_load(&m, tpath("w.safetensors"), &err) == 0);
        ck_assert_msg(m->weights.window == cases[i].window, "case %zu: window %zu", i,
                      m->weights.window);
        store_model_destroy(m);
    }
    ck_free(&c);
}
END_TEST

/* Gemma 2: head_dim · h ≠ d, softcap, query_pre_attn_scalar, windows on
 * the even layers only. */
START_TEST(test_gemma2) {
    enum { GD = 12 };
    ckpt c;
    modern_build(&c, STORE_DTYPE_F32, 34, "model.layers.", ".self_attn", 0, GD, LH, LG, LDH, 0, 0,
                 "o_proj", 0);
    const char *dir = tpath("gemma2");
    ck_write_dir(&c, dir,
                 "{\"architectures\": [\"Gemma2ForCausalLM\"], \"model_type\": \"gemma2\", "
                 "\"hidden_size\": 12, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
                 "\"head_dim\": 4, \"rope_theta\": 10000.0, \"query_pre_attn_scalar\": 8, "
                 "\"attn_logit_softcapping\": 0.75, \"final_logit_softcapping\": 30.0, "
                 "\"sliding_window\": 2}",
                 0);
    float e[LN * GD], delta[LN * GD], pat[LH * LN * LN];
    embeddings_random(e, LN * GD, 79);
    for (int layer = 0; layer < 2; layer++) {
        store_import_options opt = {.layer = (size_t)layer};
        store_model *m = import_run_p(dir, &opt, e, LN, NULL, 0, delta, pat);
        ck_assert(m->weights.norm.type == ATTN_NORM_RMS && m->weights.norm.offset == 1);
        ck_assert(m->weights.post_norm.type == ATTN_NORM_RMS && m->weights.post_norm.offset == 1);
        ck_assert_uint_eq(m->weights.d_head, LDH);
        ck_assert(fabsf(m->weights.scale - (float)(1 / sqrt(8.0))) < 1e-7f);
        ck_assert(m->weights.softcap == 0.75f);
        ck_assert_uint_eq(m->weights.window, layer == 0 ? 2 : 0);
        store_model_destroy(m);
        hf_layer v = {.rope_dims = LDH,
                      .theta = 10000,
                      .causal = 1,
                      .window = layer == 0 ? 2 : 0,
                      .softcap = 0.75,
                      .scaling_ = 1 / sqrt(8.0),
                      .norm = {.type = 2, .eps = 1e-6, .offset = 1},
                      .post = {.type = 2, .eps = 1e-6, .offset = 1}};
        double ref[LN * GD], other[LN * GD], ref_p[LH * LN * LN];
        llama_ref_p(ref, ref_p, dir, &c, layer, e, LH, LG, LDH, GD, &v);
        llama_ref(other, dir, &c, 1 - layer, e, LH, LG, LDH, GD, &v);
        expect_close(delta, ref, other, LN * GD);
        expect_patterns(pat, ref_p, LH * LN * LN);
    }
    /* Without config.json, gemma2 is not told from llama by its names:
     * --arch gemma2 with the options. */
    ckpt single = c;
    (void)single;
    ck_free(&c);
}
END_TEST

/* GPT-NeoX (Pythia): fused per-head rows, partial rotary, F16. */
START_TEST(test_gpt_neox) {
    enum { ND = 8, NH = 2, NDH = 4 };
    ckpt c;
    modern_build(&c, STORE_DTYPE_F16, 35, "gpt_neox.layers.", ".attention", 1, ND, NH, NH, NDH, 1,
                 1, "", 0);
    const char *dir = tpath("pythia");
    ck_write_dir(&c, dir,
                 "{\"architectures\": [\"GPTNeoXForCausalLM\"], \"model_type\": \"gpt_neox\", "
                 "\"hidden_size\": 8, \"num_attention_heads\": 2, \"rotary_pct\": 0.5, "
                 "\"rotary_emb_base\": 100, \"use_parallel_residual\": true, "
                 "\"layer_norm_eps\": 1e-05}",
                 0);
    float e[LN * ND], delta[LN * ND], pat[NH * LN * LN];
    double ref_p[NH * LN * LN];
    embeddings_random(e, LN * ND, 80);
    store_import_options opt = {.layer = 1};
    store_model *m = import_run_p(dir, &opt, e, LN, NULL, 0, delta, pat);
    ck_assert(m->weights.norm.type == ATTN_NORM_LAYER && m->weights.norm.bias);
    ck_assert_uint_eq(m->weights.rope.dims, 2);
    ck_assert(m->weights.rope.theta == 100);
    store_model_destroy(m);
    double ref[LN * ND], other[LN * ND];
    for (int layer = 1; layer >= 0; layer--) {
        hf_layer L = {.n = LN,
                      .m = LN,
                      .d = ND,
                      .h = NH,
                      .g = NH,
                      .dh = NDH,
                      .rope_dims = 2,
                      .theta = 100,
                      .causal = 1,
                      .scaling_ = 0.5,
                      .norm = {.type = 1, .eps = 1e-5}};
        char att[128], base[128];
        snprintf(base, sizeof base, "gpt_neox.layers.%d", layer);
        hf_norms_load(&L, dir, base, "input_layernorm", NULL);
        snprintf(att, sizeof att, "gpt_neox.layers.%d.attention", layer);
        hf_fused(&L, dir, &c, att, e);
        hf_attend(&L, layer == 1 ? ref : other);
        if (layer == 1) memcpy(ref_p, L.p, sizeof ref_p);
        hf_free(&L);
    }
    expect_close(delta, ref, other, LN * ND);
    expect_patterns(pat, ref_p, NH * LN * LN);
    ck_free(&c);
}
END_TEST

/* BLOOM's standard slopes, as its build_alibi_tensor (independently). */
static void bloom_slopes(double *slopes, size_t h) {
    size_t cp = 1;
    while (cp * 2 <= h)
        cp *= 2;
    double base = pow(2, -pow(2, -(log2((double)cp) - 3)));
    for (size_t i = 0; i < cp; i++)
        slopes[i] = pow(base, (double)(i + 1));
    if (cp != h) {
        double extra = pow(2, -pow(2, -(log2((double)(2 * cp)) - 3)));
        size_t rem = h - cp < cp ? h - cp : cp;
        for (size_t i = 0; i < rem; i++)
            slopes[cp + i] = pow(extra, (double)(2 * i + 1));
    }
}

/* BLOOM: fused per head, ALiBi of 6 heads (not a power of two), the
 * transformer. prefix. */
START_TEST(test_bloom) {
    enum { BD = 12, BH = 6, BDH = 2 };
    ckpt c;
    modern_build(&c, STORE_DTYPE_F32, 36, "transformer.h.", ".self_attention", 1, BD, BH, BH, BDH,
                 1, 1, "", 0);
    const char *dir = tpath("bloom");
    ck_write_dir(&c, dir,
                 "{\"architectures\": [\"BloomForCausalLM\"], \"model_type\": \"bloom\", "
                 "\"hidden_size\": 12, \"n_head\": 6, \"n_layer\": 2}",
                 0);
    float e[LN * BD], delta[LN * BD], pat[BH * LN * LN];
    double ref_p[BH * LN * LN];
    embeddings_random(e, LN * BD, 81);
    store_import_options opt = {.layer = 0};
    store_model *m = import_run_p(dir, &opt, e, LN, NULL, 0, delta, pat);
    ck_assert(m->weights.norm.type == ATTN_NORM_LAYER && m->weights.norm.bias);
    ck_assert_ptr_nonnull(m->weights.alibi);
    ck_assert_uint_eq(m->weights.rope.dims, 0);
    store_model_destroy(m);
    double slopes[BH], ref[LN * BD], other[LN * BD];
    bloom_slopes(slopes, BH);
    for (int layer = 0; layer < 2; layer++) {
        hf_layer L = {.n = LN,
                      .m = LN,
                      .d = BD,
                      .h = BH,
                      .g = BH,
                      .dh = BDH,
                      .bloom_alibi = slopes,
                      .causal = 1,
                      .scaling_ = 1 / sqrt((double)BDH),
                      .norm = {.type = 1, .eps = 1e-5}};
        char att[128], base[128];
        snprintf(base, sizeof base, "transformer.h.%d", layer);
        hf_norms_load(&L, dir, base, "input_layernorm", NULL);
        snprintf(att, sizeof att, "transformer.h.%d.self_attention", layer);
        hf_fused(&L, dir, &c, att, e);
        hf_attend(&L, layer == 0 ? ref : other);
        if (layer == 0) memcpy(ref_p, L.p, sizeof ref_p);
        hf_free(&L);
    }
    expect_close(delta, ref, other, LN * BD);
    expect_patterns(pat, ref_p, BH * LN * LN);

    /* a residual of the normed state is refused, but for the attention alone */
    char dir2[512];
    snprintf(dir2, sizeof dir2, "%s", tpath("bloom-post"));
    ck_write_dir(&c, dir2,
                 "{\"model_type\": \"bloom\", \"n_head\": 6, "
                 "\"apply_residual_connection_post_layernorm\": true}",
                 0);
    expect_fail(dir2, &opt, "\"apply_residual_connection_post_layernorm\" is true", "--no-norm",
                NULL);
    opt.no_norm = 1;
    store_model_destroy(import_run(dir2, &opt, e, LN, NULL, 0, delta));
    ck_free(&c);
}
END_TEST

/* Whisper's decoder cross-attention: k_proj without bias, a context of
 * m ≠ n rows, mask none. */
START_TEST(test_whisper) {
    enum { WD = 8, WH = 2, WDH = 4, WM = 9 };
    ckpt c;
    modern_build(&c, STORE_DTYPE_F32, 37, "model.decoder.layers.", ".encoder_attn", 0, WD, WH, WH,
                 WDH, 1, 1, "out_proj", 0);
    const char *dir = tpath("whisper");
    ck_write_dir(&c, dir,
                 "{\"architectures\": [\"WhisperForConditionalGeneration\"], \"model_type\": "
                 "\"whisper\", \"d_model\": 8, \"decoder_attention_heads\": 2, "
                 "\"encoder_attention_heads\": 2}",
                 1);
    float e[LN * WD], ctx[WM * WD], delta[LN * WD], pat[WH * LN * WM];
    double ref_p[WH * LN * WM];
    embeddings_random(e, LN * WD, 82);
    embeddings_random(ctx, WM * WD, 83);
    store_import_options opt = {.layer = 1};
    store_model *m = import_run_p(dir, &opt, e, LN, ctx, WM, delta, pat);
    ck_assert(m->weights.norm.type == ATTN_NORM_LAYER && m->weights.norm.eps == 1e-5);
    ck_assert_ptr_nonnull(m->weights.w_kv);
    ck_assert_uint_eq(m->weights.d_context, WD);
    ck_assert_int_eq(m->mask, ATTN_MASK_NONE);
    store_model_destroy(m);
    double ref[LN * WD], other[LN * WD];
    for (int layer = 1; layer >= 0; layer--) {
        /* WhisperAttention: q = q_proj(x) · dh^−0.5, scores q·kᵀ, no mask */
        hf_layer L = {.n = LN,
                      .m = WM,
                      .d = WD,
                      .h = WH,
                      .g = WH,
                      .dh = WDH,
                      .scaling_ = 1,
                      .norm = {.type = 1, .eps = 1e-5}};
        char att[128], base[128];
        snprintf(base, sizeof base, "model.decoder.layers.%d", layer);
        hf_norms_load(&L, dir, base, "encoder_attn_layer_norm", NULL);
        snprintf(att, sizeof att, "model.decoder.layers.%d.encoder_attn", layer);
        hf_separate(&L, dir, &c, att, "out_proj", e, ctx);
        for (size_t i = 0; i < LN * WH * WDH; i++)
            L.q[i] *= pow(WDH, -0.5);
        hf_attend(&L, layer == 1 ? ref : other);
        if (layer == 1) memcpy(ref_p, L.p, sizeof ref_p);
        hf_free(&L);
    }
    expect_close(delta, ref, other, LN * WD);
    expect_patterns(pat, ref_p, WH * LN * WM);
    ck_free(&c);
}
END_TEST

/* One .safetensors file: the options are the configuration. */
START_TEST(test_single_file_options) {
    ckpt c;
    modern_build(&c, STORE_DTYPE_F32, 38, "model.layers.", ".self_attn", 0, LD, LH, LG, LDH, 0, 0,
                 "o_proj", 0);
    const char *file = tpath("llama.safetensors");
    ck_write(&c, file);
    float e[LN * LD], delta[LN * LD];
    embeddings_random(e, LN * LD, 84);
    store_import_options opt = {.layer = 1,
                                .n_heads = LH,
                                .n_kv_heads = LG,
                                .rope_theta = 50,
                                .rope_scaling = ATTN_ROPE_SCALING_LINEAR,
                                .rope_factor = 2,
                                .window = 4};
    store_model *m = import_run(file, &opt, e, LN, NULL, 0, delta);
    ck_assert_uint_eq(m->weights.n_kv_heads, LG);
    ck_assert_uint_eq(m->weights.window, 4);
    ck_assert_int_eq(m->weights.rope.scaling, ATTN_ROPE_SCALING_LINEAR);
    store_model_destroy(m);
    hf_layer v = {.rope_dims = LDH,
                  .theta = 50,
                  .scaling = 1,
                  .factor = 2,
                  .causal = 1,
                  .window = 4,
                  .scaling_ = 0.5,
                  .norm = {.type = 2, .eps = 1e-6}};
    double ref[LN * LD], other[LN * LD];
    llama_ref(ref, file, &c, 1, e, LH, LG, LDH, LD, &v);
    llama_ref(other, file, &c, 0, e, LH, LG, LDH, LD, &v);
    expect_close(delta, ref, other, LN * LD);

    /* gemma2 read from names it shares with llama: by --arch alone */
    store_import_options g2 = {.arch = STORE_IMPORT_GEMMA2,
                               .layer = 0,
                               .n_heads = LH,
                               .n_kv_heads = LG,
                               .softcap = 20,
                               .scale = 0.3};
    m = import_run(file, &g2, e, LN, NULL, 0, delta);
    ck_assert(m->weights.softcap == 20 && m->weights.scale == 0.3f);
    ck_assert_uint_eq(m->weights.window, 0);
    store_model_destroy(m);
    ck_free(&c);
}
END_TEST

/* A checkpoint directory's faults. */
START_TEST(test_config_faults) {
    ckpt c;
    modern_build(&c, STORE_DTYPE_F32, 39, "model.layers.", ".self_attn", 0, LD, LH, LG, LDH, 0, 0,
                 "o_proj", 0);
    store_import_options opt = {.layer = 0};
    static const struct {
        const char *config;
        const char *fault;
    } cases[] = {
        {"{\"model_type\": \"llama\", ", "config.json: not JSON"},
        {"[1]", "config.json: not a JSON object"},
        {"{\"model_type\": \"mamba\", \"num_attention_heads\": 4}",
         "model_type 'mamba' is not one this tool reads"},
        {"{\"model_type\": \"llama\", \"num_attention_heads\": \"4\"}",
         "\"num_attention_heads\" is not a positive integer"},
        {"{\"model_type\": \"llama\"}", "the number of heads is unknown: config.json does not say"},
        {"{\"model_type\": \"llama\", \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
         "\"hidden_size\": 32}",
         "config.json's d_model 32 disagrees with 'model.layers.0.self_attn.q_proj.weight'"},
        {"{\"model_type\": \"llama\", \"num_attention_heads\": 4, \"num_key_value_heads\": 3}",
         "3 K/V heads do not divide 4 heads"},
        {"{\"model_type\": \"llama\", \"num_attention_heads\": 4, \"num_key_value_heads\": 4}",
         "'model.layers.0.self_attn.k_proj.weight' has shape [8, 16], expected [16, 16]"},
        {"{\"model_type\": \"llama\", \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
         "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}}",
         "rope_scaling type 'yarn' is not one the engine has"},
        {"{\"model_type\": \"llama\", \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
         "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8}}",
         "rope_scaling 'llama3' has no \"low_freq_factor\""},
        {"{\"model_type\": \"llama\", \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
         "\"rope_theta\": -1}",
         "\"rope_theta\" is not a number > 0"},
        {"{\"model_type\": \"llama\", \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
         "\"partial_rotary_factor\": 0.25}",
         "RoPE on 1 of the 4 coordinates"},
        {"{\"model_type\": \"bloom\", \"n_head\": 4}", "no BLOOM layer at all"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "bad%zu", i);
        const char *dir = tpath(name);
        ck_write_dir(&c, dir, cases[i].config, 0);
        expect_fail(dir, &opt, cases[i].fault, NULL);
    }
    /* A directory without weights; an index naming a missing shard. */
    const char *empty = tpath("empty");
    ck_assert_int_eq(mkdir(empty, 0755), 0);
    expect_fail(empty, &opt, "model.safetensors or model.safetensors.index.json", NULL);
    const char *sharded = tpath("sharded");
    ck_write_dir(&c, sharded, "{\"model_type\": \"llama\", \"num_attention_heads\": 4}", 1);
    char shard[700];
    snprintf(shard, sizeof shard, "%s/model-00002-of-00002.safetensors", sharded);
    ck_assert_int_eq(unlink(shard), 0);
    expect_fail(sharded, &opt, "model-00002-of-00002.safetensors", NULL);
    ck_free(&c);
}
END_TEST

/* Writes dir/model.safetensors.index.json naming `shard` (a JSON value's
 * text) for every tensor of c. */
static void index_write(const ckpt *c, const char *dir, const char *shard) {
    char p[700];
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"metadata\": {\"total_size\": 0}, \"weight_map\": {", f);
    for (size_t i = 0; i < c->n; i++)
        fprintf(f, "%s\"%s\": %s", i ? ", " : "", c->t[i].name, shard);
    fputs("}}", f);
    ck_assert_int_eq(fclose(f), 0);
}

/* A shard the index names is a file of the checkpoint's directory: a name
 * with a '/' (up and out of it, down into a folder, or from the root), an
 * empty one or one that is not a string is refused by name, even where a
 * readable checkpoint lies at the path it spells. */
START_TEST(test_shard_names) {
    ckpt c;
    modern_build(&c, STORE_DTYPE_F32, 43, "model.layers.", ".self_attn", 0, LD, LH, LG, LDH, 0, 0,
                 "o_proj", 0);
    static const char config[] = "{\"model_type\": \"llama\", \"num_attention_heads\": 4, "
                                 "\"num_key_value_heads\": 2}";
    store_import_options opt = {.layer = 0};
    /* whole checkpoints where the names below lead */
    ck_write(&c, tpath("outside.safetensors"));
    char dir[600], p[700], abs_shard[800];
    snprintf(dir, sizeof dir, "%s", tpath("ck")); /* tpath's buffers rotate */
    ck_write_dir(&c, dir, config, 0);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    ck_assert_int_eq(unlink(p), 0);
    snprintf(p, sizeof p, "%s/sub", dir);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/sub/inner.safetensors", dir);
    ck_write(&c, p);
    snprintf(p, sizeof p, "%s/inner.safetensors", dir);
    ck_write(&c, p);
    /* named plainly, the shard is read */
    index_write(&c, dir, "\"inner.safetensors\"");
    float e[LN * LD], delta[LN * LD];
    embeddings_random(e, LN * LD, 79);
    store_model_destroy(import_run(dir, &opt, e, LN, NULL, 0, delta));

    char *root = realpath(tmpdir, NULL);
    ck_assert_ptr_nonnull(root);
    snprintf(abs_shard, sizeof abs_shard, "\"%s/outside.safetensors\"", root);
    free(root);
    const char *const shards[] = {"\"../outside.safetensors\"",
                                  "\"sub/inner.safetensors\"",
                                  "\"./inner.safetensors\"",
                                  abs_shard,
                                  "\"\"",
                                  "5"};
    for (size_t i = 0; i < sizeof shards / sizeof *shards; i++) {
        index_write(&c, dir, shards[i]);
        char want[200];
        snprintf(want, sizeof want, "weight_map's \"%s\" is not a file name of the directory",
                 c.t[0].name);
        expect_fail(dir, &opt, "model.safetensors.index.json", want, NULL);
    }
    ck_free(&c);
}
END_TEST

/* Replaces the file `name` of directory dir by a FIFO. */
static void fifo_plant(const char *dir, const char *name) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    ck_assert_int_eq(unlink(p), 0);
    ck_assert_int_eq(mkfifo(p, 0600), 0);
}

/* Every file of a checkpoint directory that is a FIFO (or anything but a
 * regular file) is refused at once, by name: opening a FIFO for reading
 * would wait for a writer that never comes. The case's timeout fails a
 * wait. */
START_TEST(test_not_regular_files) {
    ckpt c;
    modern_build(&c, STORE_DTYPE_F32, 41, "model.layers.", ".self_attn", 0, LD, LH, LG, LDH, 0, 0,
                 "o_proj", 0);
    static const char config[] = "{\"model_type\": \"llama\", \"num_attention_heads\": 4, "
                                 "\"num_key_value_heads\": 2}";
    store_import_options opt = {.layer = 0};

    const char *dir = tpath("fifo-config");
    ck_write_dir(&c, dir, config, 0);
    fifo_plant(dir, "config.json");
    expect_fail(dir, &opt, "/config.json: not a regular file", NULL);

    dir = tpath("fifo-index");
    ck_write_dir(&c, dir, config, 1);
    fifo_plant(dir, "model.safetensors.index.json");
    expect_fail(dir, &opt, "/model.safetensors.index.json: not a regular file", NULL);

    dir = tpath("fifo-shard");
    ck_write_dir(&c, dir, config, 1);
    fifo_plant(dir, "model-00002-of-00002.safetensors");
    expect_fail(dir, &opt, "/model-00002-of-00002.safetensors: not a regular file", NULL);

    /* A directory is not a file either. */
    dir = tpath("dir-config");
    ck_write_dir(&c, dir, config, 0);
    char p[700];
    snprintf(p, sizeof p, "%s/config.json", dir);
    ck_assert_int_eq(unlink(p), 0);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    expect_fail(dir, &opt, "/config.json: not a regular file", NULL);

    /* One file given alone. */
    const char *fifo = tpath("pipe.safetensors");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    store_import_options one = {.layer = 0, .n_heads = LH};
    expect_fail(fifo, &one, "pipe.safetensors: not a regular file", NULL);
    ck_free(&c);
}
END_TEST

/* Products of configuration values are checked before they are used: a
 * head_dim of 2^61 + 1 with 8 heads would wrap n_heads·d_head to 8, which
 * the tensors below (q [8, 16]: 8 heads of 1) would then match. */
START_TEST(test_config_products) {
    ckpt c;
    modern_build(&c, STORE_DTYPE_F32, 42, "model.layers.", ".self_attn", 0, LD, 8, 8, 1, 0, 0,
                 "o_proj", 0);
    const char *dir = tpath("wraps");
    ck_write_dir(&c, dir,
                 "{\"model_type\": \"llama\", \"num_attention_heads\": 8, "
                 "\"head_dim\": 2305843009213693953}",
                 0);
    store_import_options opt = {.layer = 0};
    expect_fail(dir, &opt, "config.json's \"num_attention_heads\"", "\"head_dim\"",
                "(8 × 2305843009213693953) overflows", NULL);
    /* The same through the options. */
    store_import_options heads = {.layer = 0, .n_heads = 8, .d_head = (size_t)1 << 62};
    expect_fail(dir, &heads, "--heads × --head-dim (8 × 4611686018427387904) overflows", NULL);
    ck_free(&c);

    /* h·dh fits, q, k and v's 3·h·dh does not (a fused GPT-NeoX layer). */
    modern_build(&c, STORE_DTYPE_F32, 43, "gpt_neox.layers.", ".attention", 1, LD, LH, LH, LDH, 1,
                 1, "dense", 1);
    dir = tpath("wraps-fused");
    ck_write_dir(&c, dir, "{\"model_type\": \"gpt_neox\", \"num_attention_heads\": 4}", 0);
    store_import_options fused = {.layer = 0, .d_head = ((size_t)1 << 62) / 3 + 1};
    expect_fail(dir, &fused, "3 × config.json's \"num_attention_heads\" × --head-dim", "overflows",
                NULL);
    ck_free(&c);

    /* A rotary fraction times d_head: a fraction above 1 is no fraction. */
    modern_build(&c, STORE_DTYPE_F32, 44, "model.layers.", ".self_attn", 0, LD, LH, LG, LDH, 0, 0,
                 "o_proj", 0);
    dir = tpath("rotary");
    ck_write_dir(&c, dir,
                 "{\"model_type\": \"llama\", \"num_attention_heads\": 4, "
                 "\"num_key_value_heads\": 2, \"partial_rotary_factor\": 1e300}",
                 0);
    expect_fail(dir, &opt, "config.json's \"partial_rotary_factor\" 1e+300 is more than 1", NULL);
    ck_free(&c);
}
END_TEST

/* ---- the binary -------------------------------------------------------------------- */

/* Runs the tool with args (NULL-terminated), stdout and stderr into
 * tmpdir/stdout and tmpdir/stderr; returns its exit status. */
static int tool_run(const char *const *args) {
    char *argv[32];
    size_t n = 0;
    argv[n++] = (char *)TOOL;
    for (; args[n - 1]; n++) {
        ck_assert_uint_lt(n, 31);
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
    TOOL_EXPECT(2, "stderr", "--layers '3-1': the range 3-1 runs backwards", "--layers", "3-1",
                "--heads", "2", in, out);
    TOOL_EXPECT(2, "stderr", "--layers '0,0': layer 0 is named twice", "--layers=0,0", "--heads",
                "2", in, out);
    TOOL_EXPECT(2, "stderr", "--layers 'x' is not a list of layers", "--layers", "x", "--heads",
                "2", in, out);
    TOOL_EXPECT(1, "stderr", "no layer 5", "--layers", "0,5", "--heads", "2", in, x);
    TOOL_EXPECT(0, "stdout", "a stack of 2 GPT-2 layers (of 2)", "--layers", "1,0", "--heads", "2",
                in, x);
    ck_assert_msg(store_model_load(&m, x, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(m->n_layers, 2);
    store_model_destroy(m);
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

    /* A checkpoint directory: no --heads; its variants reported. */
    char llama_dir[512], llama_out[512], llama_file[512];
    snprintf(llama_dir, sizeof llama_dir, "%s", tpath("llama-dir"));
    snprintf(llama_out, sizeof llama_out, "%s", tpath("llama-l1.safetensors"));
    snprintf(llama_file, sizeof llama_file, "%s", tpath("llama-one.safetensors"));
    modern_build(&c, STORE_DTYPE_F32, 40, "model.layers.", ".self_attn", 0, LD, LH, LG, LDH, 0, 0,
                 "o_proj", 0);
    ck_write_dir(&c, llama_dir,
                 "{\"model_type\": \"mistral\", \"num_attention_heads\": 4, "
                 "\"num_key_value_heads\": 2, \"rope_theta\": 1000000.0, \"sliding_window\": 4}",
                 1);
    ck_write(&c, llama_file);
    ck_free(&c);
    TOOL_EXPECT(0, "stdout",
                "from Llama layer 1 (of 2): d_model 16, 4 heads of 4, mask causal, 2 K/V heads, "
                "RoPE on 4 dims (theta 1e+06), window 4",
                "--layer", "1", llama_dir, llama_out);
    /* One file: the options. */
    TOOL_EXPECT(
        0, "stdout", "2 K/V heads, RoPE on 2 dims (theta 500), window 3, softcap 30, scale 0.25",
        "--arch", "llama", "--heads", "4", "--kv-heads", "2", "--rope-theta", "500", "--rope-dims",
        "2", "--window", "3", "--softcap", "30", "--scale", "0.25", llama_file, llama_out);
    TOOL_EXPECT(0, "stdout", "RoPE on 4 dims", "--heads=4", "--kv-heads=2",
                "--rope-scaling=llama3:8:1:4:8192", llama_file, llama_out);
    ck_assert(store_model_load(&m, llama_out, &err) == 0);
    ck_assert_int_eq(m->weights.rope.scaling, ATTN_ROPE_SCALING_LLAMA3);
    ck_assert(m->weights.rope.original_max_position == 8192);
    store_model_destroy(m);
    TOOL_EXPECT(2, "stderr", "--rope-scaling 'yarn:2'", "--heads=4", "--rope-scaling=yarn:2",
                llama_file, llama_out);
    TOOL_EXPECT(2, "stderr", "--rope-scaling 'llama3:8'", "--heads=4", "--rope-scaling", "llama3:8",
                llama_file, llama_out);
    TOOL_EXPECT(2, "stderr", "--kv-heads '0'", "--kv-heads", "0", llama_file, llama_out);
    TOOL_EXPECT(2, "stderr", "--softcap '-1'", "--softcap", "-1", llama_file, llama_out);
    TOOL_EXPECT(2, "stderr", "--window '0'", "--window", "0", llama_file, llama_out);
    TOOL_EXPECT(2, "stderr", "--rope-theta 'x'", "--rope-theta", "x", llama_file, llama_out);
    TOOL_EXPECT(2, "stderr", "unknown arch 'mpt'", "--arch", "mpt", llama_file, llama_out);
    TOOL_EXPECT(1, "stderr", "3 K/V heads do not divide 4 heads", "--heads", "4", "--kv-heads", "3",
                llama_file, llama_out);
    TOOL_EXPECT(0, "stdout", "whisper", "--help");
    TOOL_EXPECT(0, "stdout", "--no-norm", "--help");
    /* the norm is reported; --no-norm leaves it out */
    TOOL_EXPECT(0, "stdout", "window 4, norm rms (eps 1e-06)", "--layer", "1", llama_dir,
                llama_out);
    TOOL_EXPECT(0, "stdout", "window 4;", "--no-norm", "--layer", "1", llama_dir, llama_out);
    ck_assert(store_model_load(&m, llama_out, &err) == 0);
    ck_assert_int_eq(m->weights.norm.type, ATTN_NORM_NONE);
    store_model_destroy(m);
}
END_TEST

/* ---- the newer families ------------------------------------------------------------ */

/* modern_build's Llama layout (o without bias unless `bias`) plus, per
 * layer, self_attn.q_norm.weight [qlen] and k_norm.weight [klen] (0: none)
 * and self_attn.sinks [h] when `sinks`. */
static void newer_build(ckpt *c, uint64_t seed, size_t d, size_t h, size_t g, size_t dh, int bias,
                        size_t qlen, size_t klen, int sinks) {
    modern_build(c, STORE_DTYPE_F32, seed, "model.layers.", ".self_attn", 0, d, h, g, dh, bias,
                 bias, "o_proj", 1);
    uint64_t rng = seed * 7 + 1;
    char n[128];
    for (int l = 0; l < LAYERS; l++) {
        snprintf(n, sizeof n, "model.layers.%d.self_attn.q_norm.weight", l);
        if (qlen) ck_add(c, n, 1, qlen, 0, 0, 0, &rng);
        snprintf(n, sizeof n, "model.layers.%d.self_attn.k_norm.weight", l);
        if (klen) ck_add(c, n, 1, klen, 0, 0, 0, &rng);
        snprintf(n, sizeof n, "model.layers.%d.self_attn.sinks", l);
        if (sinks) ck_add(c, n, 1, h, 0, 0, 0, &rng);
    }
}

/* Runs one layer's weights on e (n = LN tokens, the model's mask, the
 * layer's default scale): ΔE and every head's patterns. */
static void weights_run(const attn_weights *w, attn_mask_kind mask, const float *e, float *delta,
                        float *pat) {
    size_t heads[64];
    for (size_t i = 0; i < 64; i++)
        heads[i] = i;
    attn_workspace *ws = attn_workspace_create();
    attn_output o = {.delta = delta, .patterns = pat};
    attn_input in = {.weights = w,
                     .embeddings = e,
                     .n_tokens = LN,
                     .heads = heads,
                     .n_heads_out = w->n_heads,
                     .mask = {mask, NULL},
                     .scale = w->scale > 0 ? w->scale : (float)(1 / sqrt((double)w->d_head))};
    attn_error err = {0};
    ck_assert_msg(attn_compute(&o, ws, &in, &err) == 0, "attn_compute: %s", err.message);
    attn_workspace_destroy(ws);
}

/* The reference's variant of checkpoint layer l. */
typedef hf_layer (*variant_of)(int layer);

/*
 * Imports layers 0 and 1 of dir as a stack (`--layers 0,1`: their kinds
 * alternate) and each alone; runs each layer from hidden states before its
 * norm, and compares ΔE (= post_norm(attn(norm(x)))) and the patterns with
 * the float64 reference of Hugging Face's modeling file (vf's variant).
 * The stack's layer l must answer as the lone layer l. Returns the stack
 * (the caller destroys it) for further checks.
 */
static store_model *family_check(const char *dir, const store_import_options *base, const ckpt *c,
                                 size_t d, size_t h, size_t g, size_t dh, variant_of vf) {
    char in[512];
    snprintf(in, sizeof in, "%s", dir);
    float e[LN * 32], delta[LN * 32], pat[8 * LN * LN], d1[LN * 32], p1[8 * LN * LN];
    ck_assert_uint_le(d, 32);
    ck_assert_uint_le(h, 8);
    embeddings_random(e, LN * d, 0xfa11);
    size_t both[2] = {0, 1};
    store_import_options opt = *base;
    opt.layers = both;
    opt.n_layers = 2;
    attn_error err;
    ck_assert_msg(store_import_checkpoint(in, tpath("stack.safetensors"), &opt, NULL, &err) == 0,
                  "%s", err.message);
    store_model *stack;
    ck_assert_msg(store_model_load(&stack, tpath("stack.safetensors"), &err) == 0, "%s",
                  err.message);
    ck_assert_uint_eq(stack->n_layers, 2);
    double ref[2][LN * 32], ref_p[8 * LN * LN];
    for (int l = 0; l < 2; l++) {
        hf_layer v = vf(l);
        llama_ref_p(ref[l], ref_p, in, c, l, e, h, g, dh, d, &v);
        weights_run(stack->layers[l], stack->mask, e, delta, pat);
        expect_close(delta, ref[l], NULL, LN * d);
        expect_patterns(pat, ref_p, h * LN * LN);
        store_import_options one = *base;
        one.layer = (size_t)l;
        store_model *m = import_run_p(in, &one, e, LN, NULL, 0, d1, p1);
        ck_assert(memcmp(d1, delta, LN * d * sizeof(float)) == 0);
        ck_assert(memcmp(p1, pat, h * LN * LN * sizeof(float)) == 0);
        store_model_destroy(m);
    }
    ck_assert_msg(rel_error(delta, ref[0], LN * d) > 0.05, "layer 1 looks like layer 0");
    return stack;
}

static hf_layer qwen3_variant(int layer) {
    static attn_rope yarn = {.dims = 8,
                             .theta = 1000,
                             .scaling = ATTN_ROPE_SCALING_YARN,
                             .factor = 4,
                             .original_max_position = 4};
    return (hf_layer){.rope_dims = 8,
                      .theta = 1000,
                      .long_rope = &yarn,
                      .causal = 1,
                      .window = layer == 1 ? 3 : 0,
                      .scaling_ = 1 / sqrt(8.0),
                      .norm = {.type = 2, .eps = 1e-6},
                      .qn = {.type = 2, .eps = 1e-6},
                      .kn = {.type = 2, .eps = 1e-6}};
}

/* Qwen3: per-head q/k RMS norms, h·dh ≠ d, YaRN, a sliding layer by
 * layer_types. */
START_TEST(test_qwen3) {
    ckpt c;
    newer_build(&c, 51, 16, 4, 2, 8, 0, 8, 8, 0);
    const char *dir = tpath("qwen3");
    ck_write_dir(&c, dir,
                 "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", "
                 "\"hidden_size\": 16, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
                 "\"head_dim\": 8, \"rope_theta\": 1000, \"rms_norm_eps\": 1e-06, "
                 "\"max_position_embeddings\": 16, \"sliding_window\": 3, "
                 "\"layer_types\": [\"full_attention\", \"sliding_attention\"], "
                 "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4, "
                 "\"original_max_position_embeddings\": 4}}",
                 0);
    store_import_options none = {0};
    store_model *m = family_check(dir, &none, &c, 16, 4, 2, 8, qwen3_variant);
    const attn_weights *w = m->layers[1];
    ck_assert(w->qk_norm.q.type == ATTN_NORM_RMS && !w->qk_norm.all);
    ck_assert_int_eq(w->rope.scaling, ATTN_ROPE_SCALING_YARN);
    ck_assert_uint_eq(m->layers[0]->window, 0);
    ck_assert_uint_eq(w->window, 3);
    store_model_destroy(m);
    /* the names are Llama's: model_type or --arch tells them apart */
    ck_assert_int_eq(store_import_arch_parse("qwen3", &none.arch), 0);
    ck_assert_int_eq(none.arch, STORE_IMPORT_QWEN3);
    ck_free(&c);
}
END_TEST

static hf_layer olmo2_variant(int layer) {
    (void)layer;
    return (hf_layer){.rope_dims = 4,
                      .theta = 500000,
                      .causal = 1,
                      .scaling_ = 0.5,
                      .post = {.type = 2, .eps = 1e-5},
                      .qn = {.type = 2, .eps = 1e-5},
                      .kn = {.type = 2, .eps = 1e-5},
                      .qk_all = 1};
}

/* OLMo 2: no input norm, a post-attention norm, q/k norms over the whole
 * projection. */
START_TEST(test_olmo2) {
    ckpt c;
    newer_build(&c, 52, 16, 4, 2, 4, 0, 16, 8, 0);
    const char *dir = tpath("olmo2");
    ck_write_dir(&c, dir,
                 "{\"architectures\": [\"Olmo2ForCausalLM\"], \"model_type\": \"olmo2\", "
                 "\"hidden_size\": 16, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
                 "\"rope_theta\": 500000, \"rms_norm_eps\": 1e-05, \"attention_bias\": false}",
                 1);
    store_import_options none = {0};
    store_model *m = family_check(dir, &none, &c, 16, 4, 2, 4, olmo2_variant);
    ck_assert(m->weights.qk_norm.all && m->weights.norm.type == ATTN_NORM_NONE &&
              m->weights.post_norm.type == ATTN_NORM_RMS);
    store_model_destroy(m);
    ck_free(&c);
}
END_TEST

static hf_layer gemma3_variant(int layer) {
    /* sliding_window_pattern 2: layer 0 sliding (local base 10, unscaled),
     * layer 1 full (rope_theta 1000, linear 2) */
    return (hf_layer){.rope_dims = 8,
                      .theta = layer ? 1000 : 10,
                      .scaling = layer ? 1 : 0,
                      .factor = 2,
                      .causal = 1,
                      .window = layer ? 0 : 3,
                      .scaling_ = 1 / sqrt(16.0),
                      .norm = {.type = 2, .eps = 1e-6, .offset = 1},
                      .post = {.type = 2, .eps = 1e-6, .offset = 1},
                      .qn = {.type = 2, .eps = 1e-6, .offset = 1},
                      .kn = {.type = 2, .eps = 1e-6, .offset = 1}};
}

/* Gemma 3 (a multimodal config's text_config): (1 + w) norms before and
 * after, per-head q/k norms, local and global layers with their own RoPE. */
START_TEST(test_gemma3) {
    ckpt c;
    newer_build(&c, 53, 16, 4, 2, 8, 0, 8, 8, 0);
    const char *dir = tpath("gemma3");
    ck_write_dir(&c, dir,
                 "{\"architectures\": [\"Gemma3ForConditionalGeneration\"], "
                 "\"model_type\": \"gemma3\", \"vision_config\": {\"hidden_size\": 32}, "
                 "\"text_config\": {\"model_type\": \"gemma3_text\", \"hidden_size\": 16, "
                 "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 8, "
                 "\"query_pre_attn_scalar\": 16, \"rope_theta\": 1000, "
                 "\"rope_local_base_freq\": 10, \"sliding_window\": 3, "
                 "\"sliding_window_pattern\": 2, \"rms_norm_eps\": 1e-06, "
                 "\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2}}}",
                 0);
    store_import_options none = {0};
    store_model *m = family_check(dir, &none, &c, 16, 4, 2, 8, gemma3_variant);
    ck_assert(m->layers[0]->rope.theta == 10 && m->layers[1]->rope.theta == 1000);
    ck_assert_int_eq(m->layers[0]->rope.scaling, ATTN_ROPE_SCALING_NONE);
    ck_assert(m->weights.qk_norm.q.offset == 1 && m->weights.post_norm.offset == 1);
    store_model_destroy(m);
    ck_free(&c);
}
END_TEST

static hf_layer gpt_oss_variant(int layer) {
    static attn_rope yarn = {.dims = 4,
                             .theta = 1000,
                             .scaling = ATTN_ROPE_SCALING_YARN,
                             .factor = 4,
                             .original_max_position = 4,
                             .beta_fast = 32,
                             .beta_slow = 1,
                             .untruncated = 1};
    return (hf_layer){.rope_dims = 4,
                      .theta = 1000,
                      .long_rope = &yarn,
                      .causal = 1,
                      .window = layer ? 0 : 3,
                      .scaling_ = 0.5,
                      .has_sinks = 1,
                      .norm = {.type = 2, .eps = 1e-5}};
}

/* gpt-oss: biases, sinks, sliding and full layers by layer_types, YaRN
 * without truncation. */
START_TEST(test_gpt_oss) {
    ckpt c;
    newer_build(&c, 54, 16, 4, 2, 4, 1, 0, 0, 1);
    const char *dir = tpath("gpt-oss");
    ck_write_dir(
        &c, dir,
        "{\"architectures\": [\"GptOssForCausalLM\"], \"model_type\": \"gpt_oss\", "
        "\"hidden_size\": 16, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
        "\"head_dim\": 4, \"rope_theta\": 1000, \"rms_norm_eps\": 1e-05, "
        "\"attention_bias\": true, \"sliding_window\": 3, \"max_position_embeddings\": 16, "
        "\"layer_types\": [\"sliding_attention\", \"full_attention\"], "
        "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4, \"beta_fast\": 32, "
        "\"beta_slow\": 1, \"truncate\": false, "
        "\"original_max_position_embeddings\": 4}}",
        0);
    store_import_options none = {0};
    store_model *m = family_check(dir, &none, &c, 16, 4, 2, 4, gpt_oss_variant);
    ck_assert_ptr_nonnull(m->layers[1]->sinks);
    ck_assert(m->layers[1]->rope.untruncated);
    ck_assert_uint_eq(m->layers[0]->window, 3);
    store_model_destroy(m);
    ck_free(&c);
}
END_TEST

/* Phi-3's layout: per layer self_attn.qkv_proj [(h + 2g)·dh, d] and
 * o_proj, no biases, among decoys (norms, the fused MLP). */
static void phi3_build(ckpt *c, uint64_t seed, size_t d, size_t h, size_t g, size_t dh) {
    uint64_t rng = seed;
    char n[128];
    c->dtype = STORE_DTYPE_F32;
    c->n = 0;
    ck_add(c, "model.embed_tokens.weight", 2, 16, d, 0, 0, &rng);
    for (int l = 0; l < LAYERS; l++) {
        snprintf(n, sizeof n, "model.layers.%d.input_layernorm.weight", l);
        ck_add(c, n, 1, d, 0, 0, 0, &rng);
        snprintf(n, sizeof n, "model.layers.%d.post_attention_layernorm.weight", l);
        ck_add(c, n, 1, d, 0, 0, 0, &rng);
        snprintf(n, sizeof n, "model.layers.%d.self_attn.qkv_proj.weight", l);
        ck_add(c, n, 2, (h + 2 * g) * dh, d, 0, 0, &rng);
        snprintf(n, sizeof n, "model.layers.%d.self_attn.o_proj.weight", l);
        ck_add(c, n, 2, d, h * dh, 0, 0, &rng);
        snprintf(n, sizeof n, "model.layers.%d.mlp.gate_up_proj.weight", l);
        ck_add(c, n, 2, 4 * d, d, 0, 0, &rng);
    }
    ck_add(c, "model.norm.weight", 1, d, 0, 0, 0, &rng);
}

static int phi3_long; /* the sequence (LN = 7 positions) reaches original_max_position_embeddings */

static hf_layer phi3_variant(int layer) {
    (void)layer;
    static const float short_factor[2] = {1.25f, 2}, long_factor[2] = {3, 6.5f};
    static attn_rope longrope = {.dims = 4,
                                 .theta = 1000,
                                 .scaling = ATTN_ROPE_SCALING_LONGROPE,
                                 .factor = 4,
                                 .short_factor = short_factor,
                                 .long_factor = long_factor};
    longrope.original_max_position = phi3_long ? 4 : 8;
    return (hf_layer){.rope_dims = 4,
                      .theta = 1000,
                      .long_rope = &longrope,
                      .causal = 1,
                      .window = 3,
                      .scaling_ = 1 / sqrt(8.0),
                      .qkv_blocks = 1,
                      .norm = {.type = 2, .eps = 1e-5}};
}

/* Phi-3: qkv_proj split block-wise, RoPE on half of each head (partial_rotary_factor),
 * LongRoPE's short factors for a sequence within original_max_position_embeddings
 * (8, of 32) and its long ones past it (4, of 16), sliding_window on every layer. */
START_TEST(test_phi3) {
    ckpt c;
    phi3_build(&c, 56, 32, 4, 2, 8);
    static const char *const config =
        "{\"architectures\": [\"Phi3ForCausalLM\"], \"model_type\": \"phi3\", "
        "\"hidden_size\": 32, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
        "\"partial_rotary_factor\": 0.5, \"rope_theta\": 1000, \"rms_norm_eps\": 1e-05, "
        "\"sliding_window\": 3, \"max_position_embeddings\": %d, "
        "\"original_max_position_embeddings\": %d, "
        "\"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1.25, 2.0], "
        "\"long_factor\": [3.0, 6.5]}}";
    for (phi3_long = 0; phi3_long < 2; phi3_long++) {
        char text[1024], dir[64];
        snprintf(text, sizeof text, config, phi3_long ? 16 : 32, phi3_long ? 4 : 8);
        snprintf(dir, sizeof dir, "%s", tpath(phi3_long ? "phi3-long" : "phi3-short"));
        ck_write_dir(&c, dir, text, 0);
        store_import_options none = {0};
        store_model *m = family_check(dir, &none, &c, 32, 4, 2, 8, phi3_variant);
        const attn_weights *w = m->layers[1];
        ck_assert_uint_eq(w->d_head, 8);
        ck_assert_uint_eq(w->n_kv_heads, 2);
        ck_assert_uint_eq(w->rope.dims, 4);
        ck_assert_int_eq(w->rope.scaling, ATTN_ROPE_SCALING_LONGROPE);
        ck_assert(w->rope.factor == 4 && w->rope.original_max_position == (phi3_long ? 4 : 8));
        ck_assert(m->layers[0]->window == 3 && w->window == 3);
        store_model_destroy(m);
    }
    /* qkv_proj is Phi-3's alone: the names tell it, without config.json */
    store_import_options opt = {.n_heads = 4, .n_kv_heads = 2};
    attn_error err;
    char file[512];
    snprintf(file, sizeof file, "%s/model.safetensors", tpath("phi3-long"));
    store_import_result res;
    ck_assert_msg(
        store_import_checkpoint(file, tpath("phi3-named.safetensors"), &opt, &res, &err) == 0, "%s",
        err.message);
    ck_assert_int_eq(res.arch, STORE_IMPORT_PHI3);
    ck_free(&c);
}
END_TEST

static hf_layer llama4_variant(int layer) {
    /* layer 0: RoPE (interleaved, llama3), weightless L2 q/k norm, chunks of
     * 3; layer 1: NoPE, full, the temperature of floor_scale 2, attn_scale 0.5 */
    if (layer == 1)
        return (hf_layer){.causal = 1,
                          .floor_scale = 2,
                          .attn_scale = 0.5,
                          .scaling_ = 0.5,
                          .layers = "language_model.model.layers.",
                          .norm = {.type = 2, .eps = 1e-5}};
    return (hf_layer){.rope_dims = 4,
                      .theta = 1000,
                      .scaling = 2,
                      .factor = 4,
                      .low = 1,
                      .high = 4,
                      .original = 16,
                      .interleaved = 1,
                      .l2_after_rope = 1,
                      .eps_l2 = 1e-5,
                      .chunk = 3,
                      .causal = 1,
                      .scaling_ = 0.5,
                      .layers = "language_model.model.layers.",
                      .norm = {.type = 2, .eps = 1e-5}};
}

/* Llama 4 (a multimodal config's text_config, language_model.model.): a RoPE
 * layer, chunked, with its weightless q/k norm, and a NoPE layer with the
 * temperature; by no_rope_layers, then by the default rule of
 * no_rope_layer_interval. */
START_TEST(test_llama4) {
    ckpt c;
    modern_build(&c, STORE_DTYPE_F32, 55, "language_model.model.layers.", ".self_attn", 0, 16, 4, 2,
                 4, 0, 0, "o_proj", 1);
    static const char *const config =
        "{\"architectures\": [\"Llama4ForConditionalGeneration\"], \"model_type\": \"llama4\", "
        "\"vision_config\": {\"hidden_size\": 32}, "
        "\"text_config\": {\"model_type\": \"llama4_text\", \"hidden_size\": 16, "
        "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 4, "
        "\"rope_theta\": 1000, \"rms_norm_eps\": 1e-05, \"attention_chunk_size\": 3, %s, "
        "\"use_qk_norm\": true, \"floor_scale\": 2, \"attn_scale\": 0.5, "
        "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 4, \"low_freq_factor\": 1, "
        "\"high_freq_factor\": 4, \"original_max_position_embeddings\": 16}}}";
    static const char *const kinds[2] = {
        "\"no_rope_layers\": [1, 0], \"attn_temperature_tuning\": true",
        "\"no_rope_layers\": [], \"no_rope_layer_interval\": 2, \"attn_temperature_tuning\": 4"};
    for (int k = 0; k < 2; k++) {
        char text[2048], dir[64];
        snprintf(text, sizeof text, config, kinds[k]);
        snprintf(dir, sizeof dir, "%s", tpath(k ? "llama4-default" : "llama4"));
        ck_write_dir(&c, dir, text, k);
        store_import_options none = {0};
        store_model *m = family_check(dir, &none, &c, 16, 4, 2, 4, llama4_variant);
        const attn_weights *r = m->layers[0], *n = m->layers[1];
        ck_assert_int_eq(r->rope.style, ATTN_ROPE_INTERLEAVED);
        ck_assert_int_eq(r->rope.scaling, ATTN_ROPE_SCALING_LLAMA3);
        ck_assert_uint_eq(r->chunk, 3);
        ck_assert(r->qk_norm.q.type == ATTN_NORM_RMS && !r->qk_norm.q.weight && !r->qk_norm.all);
        ck_assert(r->temperature.floor_scale == 0);
        ck_assert(n->rope.dims == 0 && n->chunk == 0 && n->qk_norm.q.type == ATTN_NORM_NONE);
        ck_assert(n->temperature.floor_scale == 2 && n->temperature.attn_scale == 0.5);
        store_model_destroy(m);
    }
    store_import_options none = {0};
    ck_assert_int_eq(store_import_arch_parse("llama4", &none.arch), 0);
    ck_assert_int_eq(none.arch, STORE_IMPORT_LLAMA4);
    ck_free(&c);
}
END_TEST

/* ---- the suite -------------------------------------------------------------------- */

/* ---- stacks: --layers ------------------------------------------------------ */

/* Bitwise equality of n floats (both NULL, or both there and equal). */
static int bits_equal(const float *a, const float *b, size_t n) {
    if (!a || !b) return a == b;
    return memcmp(a, b, n * sizeof(float)) == 0;
}

/* Layer l of stack equals the one-layer model one, weight for weight. */
static void layer_equal(const attn_weights *s, const attn_weights *o, size_t l) {
    ck_assert_msg(s->d_model == o->d_model && s->n_heads == o->n_heads && s->d_head == o->d_head &&
                      s->n_kv_heads == o->n_kv_heads && s->d_context == o->d_context,
                  "layer %zu: shapes differ", l);
    size_t hd = s->n_heads * s->d_head, gd = s->n_kv_heads * s->d_head;
    size_t cols = s->w_kv ? hd : hd + 2 * gd;
    ck_assert_msg(bits_equal(s->w_qkv, o->w_qkv, s->d_model * cols), "layer %zu: w_qkv", l);
    ck_assert_msg(bits_equal(s->b_qkv, o->b_qkv, cols), "layer %zu: b_qkv", l);
    ck_assert_msg(bits_equal(s->w_kv, o->w_kv, s->d_context * 2 * gd), "layer %zu: w_kv", l);
    ck_assert_msg(bits_equal(s->b_kv, o->b_kv, 2 * gd), "layer %zu: b_kv", l);
    ck_assert_msg(bits_equal(s->w_o, o->w_o, hd * s->d_model), "layer %zu: w_o", l);
    ck_assert_msg(bits_equal(s->b_o, o->b_o, s->d_model), "layer %zu: b_o", l);
    ck_assert_msg(bits_equal(s->alibi, o->alibi, s->n_heads), "layer %zu: alibi", l);
    ck_assert_msg(memcmp(&s->rope, &o->rope, sizeof s->rope) == 0, "layer %zu: rope", l);
    ck_assert_msg(s->window == o->window && s->softcap == o->softcap && s->scale == o->scale,
                  "layer %zu: window, softcap or scale", l);
    const attn_norm *sn[2] = {&s->norm, &s->post_norm}, *on[2] = {&o->norm, &o->post_norm};
    for (int k = 0; k < 2; k++)
        ck_assert_msg(sn[k]->type == on[k]->type && sn[k]->eps == on[k]->eps &&
                          sn[k]->offset == on[k]->offset &&
                          bits_equal(sn[k]->weight, on[k]->weight, s->d_model) &&
                          bits_equal(sn[k]->bias, on[k]->bias, s->d_model),
                      "layer %zu: norm %d", l, k);
}

/* Imports `spec` of the checkpoint at in (with base's other options) as a
 * stack and each of its layers alone; requires layer l of the stack to be
 * the lone import of checkpoint layer spec[l]. Returns the stack's L. */
static size_t stack_matches(const char *in_path, const store_import_options *base,
                            const char *spec) {
    char in[512]; /* tpath's buffers rotate */
    snprintf(in, sizeof in, "%s", in_path);
    attn_error err;
    store_import_options opt = *base;
    size_t *layers, n;
    int all;
    ck_assert_msg(store_import_layers_parse(spec, &layers, &n, &all, &err) == 0, "%s", err.message);
    opt.layers = layers;
    opt.n_layers = n;
    opt.all_layers = all;
    const char *out = tpath("stack.safetensors"), *one_out = tpath("one.safetensors");
    store_import_result res;
    ck_assert_msg(store_import_checkpoint(in, out, &opt, &res, &err) == 0, "%s", err.message);
    store_model *stack, *one;
    ck_assert_msg(store_model_load(&stack, out, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(res.n_imported, stack->n_layers);
    if (all) ck_assert_uint_eq(stack->n_layers, res.n_layers);
    for (size_t l = 0; l < stack->n_layers; l++) {
        store_import_options o1 = *base;
        o1.layer = all ? l : layers[l];
        ck_assert_msg(store_import_checkpoint(in, one_out, &o1, NULL, &err) == 0, "%s",
                      err.message);
        ck_assert_msg(store_model_load(&one, one_out, &err) == 0, "%s", err.message);
        ck_assert_int_eq(stack->mask, one->mask);
        ck_assert_uint_eq(one->n_layers, 1);
        layer_equal(stack->layers[l], &one->weights, l);
        store_model_destroy(one);
    }
    size_t count = stack->n_layers;
    store_model_destroy(stack);
    free(layers);
    return count;
}

START_TEST(test_stacks_every_arch) {
    /* GPT-2 and BERT in one file each, the heads given */
    ckpt c;
    store_import_options o = {.n_heads = H};
    gpt2_build(&c, "transformer.", STORE_DTYPE_F32, 11);
    ck_write(&c, tpath("gpt2.safetensors"));
    ck_free(&c);
    ck_assert_uint_eq(stack_matches(tpath("gpt2.safetensors"), &o, "1,0"), 2);
    ck_assert_uint_eq(stack_matches(tpath("gpt2.safetensors"), &o, "all"), 2);
    bert_build(&c, "", STORE_DTYPE_F16, 12);
    ck_write(&c, tpath("bert.safetensors"));
    ck_free(&c);
    ck_assert_uint_eq(stack_matches(tpath("bert.safetensors"), &o, "0-1"), 2);

    /* the others from a directory with config.json */
    static const struct {
        const char *dir, *head, *att, *o_name, *config;
        int fused, cross;
        size_t d, h, g, dh;
    } archs[] = {
        {"llama", "model.layers.", ".self_attn", "o_proj",
         "{\"model_type\": \"llama\", \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
         "\"rope_theta\": 100.0, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, "
         "\"low_freq_factor\": 1, \"high_freq_factor\": 4, "
         "\"original_max_position_embeddings\": 8}}",
         0, 0, 16, 4, 2, 4},
        {"gemma2", "model.layers.", ".self_attn", "o_proj",
         "{\"model_type\": \"gemma2\", \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
         "\"head_dim\": 4, \"query_pre_attn_scalar\": 8, \"attn_logit_softcapping\": 0.75, "
         "\"sliding_window\": 2}",
         0, 0, 12, 4, 2, 4},
        {"pythia", "gpt_neox.layers.", ".attention", "",
         "{\"model_type\": \"gpt_neox\", \"num_attention_heads\": 2, \"rotary_pct\": 0.5, "
         "\"rotary_emb_base\": 100}",
         1, 0, 8, 2, 2, 4},
        {"bloom", "transformer.h.", ".self_attention", "",
         "{\"model_type\": \"bloom\", \"n_head\": 6}", 1, 0, 12, 6, 6, 2},
        {"whisper", "model.decoder.layers.", ".encoder_attn", "out_proj",
         "{\"model_type\": \"whisper\", \"decoder_attention_heads\": 2}", 0, 1, 8, 2, 2, 4},
    };
    store_import_options none = {0};
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
        modern_build(&c, STORE_DTYPE_F32, 40 + i, archs[i].head, archs[i].att, archs[i].fused,
                     archs[i].d, archs[i].h, archs[i].g, archs[i].dh, 1, 1, archs[i].o_name, 0);
        char dir[512];
        snprintf(dir, sizeof dir, "%s", tpath(archs[i].dir));
        ck_write_dir(&c, dir, archs[i].config, (int)(i % 2));
        ck_free(&c);
        ck_assert_uint_eq(stack_matches(dir, &none, "1,0"), 2);
        ck_assert_uint_eq(stack_matches(dir, &none, "all"), 2);
        ck_assert_uint_eq(stack_matches(dir, &none, "1"), 1);
    }

    /* gemma2's window is its even layers': each layer of the stack keeps its own */
    store_model *m;
    attn_error err;
    size_t both[2] = {0, 1};
    store_import_options g = {.layers = both, .n_layers = 2};
    ck_assert_int_eq(
        store_import_checkpoint(tpath("gemma2"), tpath("g.safetensors"), &g, NULL, &err), 0);
    ck_assert_msg(store_model_load(&m, tpath("g.safetensors"), &err) == 0, "%s", err.message);
    ck_assert_uint_eq(m->layers[0]->window, 2);
    ck_assert_uint_eq(m->layers[1]->window, 0);
    ck_assert_str_eq(m->description, "Gemma 2 layers 0, 1 attention, from gemma2");
    store_model_destroy(m);

    /* a layer the checkpoint lacks is named */
    size_t three[2] = {0, 2};
    g.layers = three;
    ck_assert_int_eq(
        store_import_checkpoint(tpath("gemma2"), tpath("g.safetensors"), &g, NULL, &err), -1);
    ck_assert_msg(strstr(err.message, "no layer 2") != NULL, "%s", err.message);
}
END_TEST

/* --layers SPEC parsed, or refused with a message that says why. */
START_TEST(test_layers_spec) {
    size_t *l, n;
    int all;
    attn_error err;
    ck_assert_int_eq(store_import_layers_parse("4,0-2,7", &l, &n, &all, &err), 0);
    ck_assert_int_eq(all, 0);
    ck_assert_uint_eq(n, 5);
    static const size_t want[] = {4, 0, 1, 2, 7};
    ck_assert(memcmp(l, want, sizeof want) == 0);
    free(l);
    ck_assert_int_eq(store_import_layers_parse("all", &l, &n, &all, &err), 0);
    ck_assert_int_eq(all, 1);
    ck_assert_ptr_null(l);
    ck_assert_int_eq(store_import_layers_parse("0-1023", &l, &n, &all, &err), 0);
    ck_assert_uint_eq(n, 1024);
    free(l);
    static const struct {
        const char *spec, *fault;
    } bad[] = {
        {"", "is not a list of layers"},      {"1,,2", "is not a list of layers"},
        {"1,", "is not a list of layers"},    {"a", "is not a list of layers"},
        {"-1", "is not a list of layers"},    {"1-", "is not a list of layers"},
        {"1-2-3", "is not a list of layers"}, {" 1", "is not a list of layers"},
        {"ALL", "is not a list of layers"},   {"3-1", "the range 3-1 runs backwards"},
        {"0,1,0", "layer 0 is named twice"},  {"0-3,2", "layer 2 is named twice"},
        {"0-1024", "more than 1024 layers"},  {"99999999999", "is not a list of layers"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        l = (size_t *)1;
        ck_assert_msg(store_import_layers_parse(bad[i].spec, &l, &n, &all, &err) == -1, "'%s'",
                      bad[i].spec);
        ck_assert_ptr_null(l);
        ck_assert_msg(strstr(err.message, bad[i].fault) != NULL, "'%s': %s", bad[i].spec,
                      err.message);
        ck_assert_msg(strstr(err.message, "--layers") != NULL, "%s", err.message);
    }
}
END_TEST

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

    tc = tcase_create("today");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_llama);
    tcase_add_test(tc, test_llama_equal_freq_factors);
    tcase_add_test(tc, test_mistral_sharded);
    tcase_add_test(tc, test_windows_from_config);
    tcase_add_test(tc, test_gemma2);
    tcase_add_test(tc, test_gpt_neox);
    tcase_add_test(tc, test_bloom);
    tcase_add_test(tc, test_whisper);
    tcase_add_test(tc, test_single_file_options);
    tcase_add_test(tc, test_config_faults);
    tcase_add_test(tc, test_shard_names);
    tcase_add_test(tc, test_stacks_every_arch);
    tcase_add_test(tc, test_layers_spec);
    suite_add_tcase(s, tc);

    tc = tcase_create("newer");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_qwen3);
    tcase_add_test(tc, test_olmo2);
    tcase_add_test(tc, test_gemma3);
    tcase_add_test(tc, test_gpt_oss);
    tcase_add_test(tc, test_phi3);
    tcase_add_test(tc, test_llama4);
    suite_add_tcase(s, tc);

    /* A FIFO waited on would hang: the timeout turns that into a failure. */
    tc = tcase_create("files");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_not_regular_files);
    tcase_add_test(tc, test_config_products);
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
