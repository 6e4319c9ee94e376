/*
 * bench_split.c — one large request on the server's pool: computed on one
 * worker (attn_compute) or split by heads over the idle workers
 * (attn_compute_with and server/split.c's runner), with the server's
 * threading, 2 workers × 1 OpenBLAS thread. Beside them the same request by
 * attn_compute with OpenBLAS on 2 threads, and the block's GEMMs alone (the
 * full n × n products, as bench_attention's) on 1 and 2 BLAS threads.
 *
 * GPT-2 shape, n = 1024, causal, b_qkv, w_o and b_o; two output sets:
 * default (patterns + embeddings: the full path) and emb (embeddings only:
 * the online path). The pool's jobs are timed inside the job (the compute
 * alone, as the server's compute_ms); the main thread waits for each job
 * before the next, so the other worker is idle and may help. Samples of the
 * configurations are interleaved; medians are shown. Split results are
 * checked to be bit for bit those of one worker.
 *
 * Usage: bench_split [--quick]
 */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attention/attention.h"
#include "server/job.h"
#include "server/pool.h"
#include "server/split.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int count) {
    qsort(v, (size_t)count, sizeof(double), cmp_double);
    return count % 2 ? v[count / 2] : 0.5 * (v[count / 2 - 1] + v[count / 2]);
}

static float *xfloats(size_t count) {
    float *p = malloc(count * sizeof(float));
    if (!p) {
        fprintf(stderr, "bench_split: out of memory\n");
        exit(1);
    }
    return p;
}

static void fill(float *x, size_t count, float amp, uint64_t *st) {
    for (size_t i = 0; i < count; i++) {
        *st = *st * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = amp * ((float)(*st >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
    }
}

enum { N = 1024, DM = 768, H = 12, DH = 64, HD = H * DH };

/* ---- the pool's workers: a srv_worker each, as split.c expects ----------- */

static void *worker_init(pool *p, void *ctx) {
    (void)ctx;
    srv_worker *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->ws = attn_workspace_create();
    w->pool = p;
    if (!w->ws) {
        free(w);
        return NULL;
    }
    return w;
}

static void worker_fini(void *wctx, void *ctx) {
    (void)ctx;
    srv_worker *w = wctx;
    attn_workspace_destroy(w->ws);
    free(w);
}

/* One request as a pool job; the main thread waits on `done`. */
typedef struct bench_job {
    const attn_input *in;
    const attn_output *out;
    int split;
    size_t helpers;
    double seconds;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
} bench_job;

static void bench_job_fn(void *arg, void *wctx) {
    bench_job *j = arg;
    srv_worker *w = wctx;
    double t0 = now();
    int rc;
    if (j->split) {
        srv_split s = {.pool = w->pool, .ws = w->ws};
        attn_runner r = srv_split_runner(&s);
        rc = attn_compute_with(j->out, w->ws, j->in, &r);
        j->helpers = s.helpers;
    } else {
        rc = attn_compute(j->out, w->ws, j->in);
    }
    j->seconds = now() - t0;
    if (rc) {
        fprintf(stderr, "bench_split: attn_compute failed (%d)\n", rc);
        exit(1);
    }
    pthread_mutex_lock(&j->mu);
    j->done = 1;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

static double pool_sample(pool *p, const attn_input *in, const attn_output *out, int split,
                          size_t *helpers) {
    bench_job j = {.in = in, .out = out, .split = split};
    pthread_mutex_init(&j.mu, NULL);
    pthread_cond_init(&j.cv, NULL);
    if (pool_submit(p, bench_job_fn, &j) != POOL_OK) {
        fprintf(stderr, "bench_split: pool_submit failed\n");
        exit(1);
    }
    pthread_mutex_lock(&j.mu);
    while (!j.done)
        pthread_cond_wait(&j.cv, &j.mu);
    pthread_mutex_unlock(&j.mu);
    pthread_cond_destroy(&j.cv);
    pthread_mutex_destroy(&j.mu);
    if (helpers) *helpers += j.helpers;
    return j.seconds;
}

/* The block's GEMMs alone, full n × n (as bench_attention's gemms_run). */
static void gemms_run(float *qkv, float *s, float *z, float *d, const float *E, const float *w_qkv,
                      const float *w_o, float scale) {
    const int ld = 3 * HD;
    /* (m, n, k) = (n, 3hd, dm) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, ld, DM, 1.0f, E, DM, w_qkv, ld, 0.0f,
                qkv, ld);
    for (int i = 0; i < H; i++) {
        /* (m, n, k) = (n, n, dh) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, N, DH, scale, qkv + i * DH, ld,
                    qkv + HD + i * DH, ld, 0.0f, s, N);
        /* (m, n, k) = (n, dh, n) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, DH, N, 1.0f, s, N,
                    qkv + 2 * HD + i * DH, ld, 0.0f, z + i * DH, HD);
    }
    /* (m, n, k) = (n, dm, hd) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, DM, HD, 1.0f, z, HD, w_o, DM, 0.0f, d,
                DM);
}

enum { C_ONE, C_SPLIT, C_ATTN2, C_COUNT };
static const char *const c_name[C_COUNT] = {"1 worker (attn_compute), 1 BLAS thread",
                                            "split over 2 workers, 1 BLAS thread each",
                                            "attn_compute, 2 BLAS threads"};

int main(int argc, char **argv) {
    int reps = argc > 1 && !strcmp(argv[1], "--quick") ? 3 : 15;
    uint64_t st = 42;
    float *w_qkv = xfloats((size_t)DM * 3 * HD), *b_qkv = xfloats(3 * HD);
    float *w_o = xfloats((size_t)HD * DM), *b_o = xfloats(DM), *E = xfloats((size_t)N * DM);
    fill(w_qkv, (size_t)DM * 3 * HD, 1.0f / sqrtf((float)DM), &st);
    fill(b_qkv, 3 * HD, 0.1f, &st);
    fill(w_o, (size_t)HD * DM, 1.0f / sqrtf((float)HD), &st);
    fill(b_o, DM, 0.1f, &st);
    fill(E, (size_t)N * DM, 1.0f, &st);
    size_t heads[H];
    for (size_t i = 0; i < H; i++)
        heads[i] = i;
    attn_weights w = {.d_model = DM, .n_heads = H, .d_head = DH, .w_qkv = w_qkv, .b_qkv = b_qkv,
                      .w_o = w_o, .b_o = b_o};
    attn_input in = {.weights = &w, .embeddings = E, .n_tokens = N,
                     .mask = {.kind = ATTN_MASK_CAUSAL}, .scale = 1.0f / sqrtf((float)DH),
                     .heads = heads, .n_heads_out = H};
    /* outputs per configuration, so that the split ones can be compared */
    attn_output out[2][C_COUNT];
    for (int k = 0; k < 2; k++)
        for (int c = 0; c < C_COUNT; c++)
            out[k][c] = (attn_output){.patterns = k ? NULL : xfloats((size_t)H * N * N),
                                      .embeddings = xfloats((size_t)N * DM)};
    float *g_qkv = xfloats((size_t)N * 3 * HD), *g_s = xfloats((size_t)N * N);
    float *g_z = xfloats((size_t)N * HD), *g_d = xfloats((size_t)N * DM);
    attn_workspace *main_ws = attn_workspace_create();

    openblas_set_num_threads(1);
    pool *p = pool_create(2, 4, worker_init, worker_fini, NULL);
    if (!p || !main_ws) {
        fprintf(stderr, "bench_split: could not start the pool\n");
        return 1;
    }
    double t[2][C_COUNT][64], g[2][64];
    size_t helpers[2] = {0, 0};
    for (int r = 0; r < reps + 1; r++) { /* sample 0: warm-up, not counted */
        for (int k = 0; k < 2; k++) {
            openblas_set_num_threads(1);
            t[k][C_ONE][r] = pool_sample(p, &in, &out[k][C_ONE], 0, NULL);
            t[k][C_SPLIT][r] = pool_sample(p, &in, &out[k][C_SPLIT], 1, r ? &helpers[k] : NULL);
            openblas_set_num_threads(2);
            double t0 = now();
            if (attn_compute(&out[k][C_ATTN2], main_ws, &in)) return 1;
            t[k][C_ATTN2][r] = now() - t0;
        }
        for (int b = 0; b < 2; b++) {
            openblas_set_num_threads(b + 1);
            double t0 = now();
            gemms_run(g_qkv, g_s, g_z, g_d, E, w_qkv, w_o, in.scale);
            g[b][r] = now() - t0;
        }
    }
    openblas_set_num_threads(1);
    pool_destroy(p);

    int same[2];
    for (int k = 0; k < 2; k++) {
        same[k] = !memcmp(out[k][C_ONE].embeddings, out[k][C_SPLIT].embeddings,
                          (size_t)N * DM * sizeof(float));
        if (!k)
            same[k] = same[k] && !memcmp(out[k][C_ONE].patterns, out[k][C_SPLIT].patterns,
                                         (size_t)H * N * N * sizeof(float));
    }
    double gm[2] = {median(g[0] + 1, reps), median(g[1] + 1, reps)};
    printf("GPT-2 n=%d, causal, every head; median of %d samples; machine: %ld cores online\n\n",
           N, reps, (long)sysconf(_SC_NPROCESSORS_ONLN));
    printf("| outputs | configuration | time | vs 1 worker | vs GEMMs alone, 2 BLAS threads |\n"
           "|---|---|---|---|---|\n");
    for (int k = 0; k < 2; k++) {
        double one = median(t[k][C_ONE] + 1, reps);
        for (int c = 0; c < C_COUNT; c++) {
            double m = c == C_ONE ? one : median(t[k][c] + 1, reps);
            printf("| %s | %s | %.2f ms | %.2f× | %.2f |\n", k ? "emb" : "default", c_name[c],
                   m * 1e3, one / m, m / gm[1]);
        }
    }
    printf("| — | GEMMs alone (full n×n), 1 BLAS thread | %.2f ms | | %.2f |\n", gm[0] * 1e3,
           gm[0] / gm[1]);
    printf("| — | GEMMs alone (full n×n), 2 BLAS threads | %.2f ms | | 1.00 |\n\n", gm[1] * 1e3);
    for (int k = 0; k < 2; k++)
        printf("%s: split results bit for bit those of one worker: %s; helpers accepted: %zu in "
               "%d runs\n",
               k ? "emb" : "default", same[k] ? "yes" : "NO", helpers[k], reps);
    return same[0] && same[1] ? 0 : 1;
}
