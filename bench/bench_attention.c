/*
 * bench_attention.c — how fast attn_compute is, where its time goes beside
 * the GEMMs, how much scratch it needs, and how the server should split the
 * 2 cores between its workers and OpenBLAS's threads.
 *
 * Four measurements, each a median of several repetitions:
 *
 *   latency     one request at a time, OpenBLAS threads 1 and 2, two output
 *               sets: the API's default (patterns + embeddings: the full
 *               path) and embeddings only (the online path). Beside them the
 *               block's GEMMs alone at their real shapes (E·w_qkv, per head
 *               the full n × n Q_i·K_iᵀ and P_i·V_i, Z·w_o) by raw
 *               cblas_sgemm, and our time as a ratio to theirs.
 *   softmax     the softmax kernel alone on the full path's causal rows of
 *               every head (attn_softmax_block over h × n × n), as a share of
 *               the default request's time.
 *   workspace   bytes of scratch one n = 8192 request without patterns grows
 *               the workspace to, against attn_workspace_need and n × n.
 *   throughput  a stream of requests served by W worker threads, each with
 *               its own workspace and outputs (as the server's pool), with
 *               OpenBLAS set to B threads: (W, B) = (2, 1), (1, 2), (2, 2), (1, 1).
 *
 * Every request: causal mask, every head. openblas_set_num_threads is
 * process-global, so it is called from the main thread between
 * measurements only. Configurations are interleaved sample by sample.
 *
 * Usage: bench_attention [--quick]   (--quick: fewer repetitions)
 * Prints markdown tables on stdout, ready for bench/README.md.
 */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention/attention.h"
#include "attention/kernels.h"
#include "attention/naive.h"
#include "attention/vexp.h"

/* ---- timing ---------------------------------------------------------------- */

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

static void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "bench: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

/* ---- one benchmark problem ------------------------------------------------------ */

typedef struct bshape {
    const char *name;
    size_t n, dm, h, dh;
    int w_o;
    int reps;     /* latency samples */
    int requests; /* requests in one throughput stream */
} bshape;

typedef struct problem {
    bshape s;
    attn_weights w;
    attn_input in;
    float *w_qkv, *b_qkv, *w_o, *b_o, *E;
    size_t *heads;
} problem;

static void fill(float *x, size_t count, float amp, uint64_t *st) {
    for (size_t i = 0; i < count; i++) {
        *st = *st * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = amp * ((float)(*st >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
    }
}

static void problem_make(problem *p, bshape s) {
    uint64_t st = 42;
    size_t hd = s.h * s.dh;
    memset(p, 0, sizeof(*p));
    p->s = s;
    p->w_qkv = xmalloc(s.dm * 3 * hd * sizeof(float));
    p->b_qkv = xmalloc(3 * hd * sizeof(float));
    p->b_o = xmalloc(s.dm * sizeof(float));
    p->E = xmalloc(s.n * s.dm * sizeof(float));
    fill(p->w_qkv, s.dm * 3 * hd, 1.0f / sqrtf((float)s.dm), &st);
    fill(p->b_qkv, 3 * hd, 0.1f, &st);
    fill(p->b_o, s.dm, 0.1f, &st);
    fill(p->E, s.n * s.dm, 1.0f, &st);
    if (s.w_o) {
        p->w_o = xmalloc(hd * s.dm * sizeof(float));
        fill(p->w_o, hd * s.dm, 1.0f / sqrtf((float)hd), &st);
    }
    p->heads = xmalloc(s.h * sizeof(size_t));
    for (size_t i = 0; i < s.h; i++)
        p->heads[i] = i;
    p->w = (attn_weights){.d_model = s.dm,
                          .n_heads = s.h,
                          .d_head = s.dh,
                          .w_qkv = p->w_qkv,
                          .b_qkv = p->b_qkv,
                          .w_o = p->w_o,
                          .b_o = p->b_o};
    p->in = (attn_input){.weights = &p->w,
                         .embeddings = p->E,
                         .n_tokens = s.n,
                         .mask = {.kind = ATTN_MASK_CAUSAL},
                         .scale = 1.0f / sqrtf((float)s.dh),
                         .heads = p->heads,
                         .n_heads_out = s.h};
}

static void problem_free(problem *p) {
    free(p->w_qkv), free(p->b_qkv), free(p->w_o), free(p->b_o), free(p->E), free(p->heads);
}

/* The default outputs of the API: patterns (h × n × n) and embeddings. */
typedef struct request_out {
    attn_output out;
} request_out;

/* Output buffers on their own cache lines: tiny outputs of two workers
 * must not share a line (false sharing would be the benchmark's own). */
static float *floats_aligned(size_t count) {
    size_t bytes = (count * sizeof(float) + 127) / 128 * 128;
    float *p = aligned_alloc(128, bytes);
    if (!p) {
        fprintf(stderr, "bench: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

/* patterns: also ask for patterns (the API's default), else embeddings only */
static void request_out_make(request_out *r, const problem *p, int patterns) {
    memset(r, 0, sizeof(*r));
    if (patterns) r->out.patterns = floats_aligned(p->s.h * p->s.n * p->s.n);
    r->out.embeddings = floats_aligned(p->s.n * p->s.dm);
}

static void request_out_free(request_out *r) {
    free(r->out.patterns), free(r->out.embeddings);
}

/* ---- the GEMMs alone ----------------------------------------------------------- */

/* Buffers for the raw GEMM sequence: the same shapes and strides as the
 * engine's (QKV n × 3hd, S n × n, Z n × hd, D n × dm). */
typedef struct gemm_bufs {
    float *qkv, *s, *z, *d;
} gemm_bufs;

static void gemms_run(gemm_bufs *g, const problem *p) {
    const int n = (int)p->s.n, dm = (int)p->s.dm, dh = (int)p->s.dh;
    const int hd = (int)(p->s.h * p->s.dh), ld = 3 * hd;
    /* (m, n, k) = (n, 3hd, dm) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, ld, dm, 1.0f, p->E, dm, p->w_qkv, ld,
                0.0f, g->qkv, ld);
    for (int i = 0; i < (int)p->s.h; i++) {
        /* (m, n, k) = (n, n, dh) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, dh, p->in.scale, g->qkv + i * dh,
                    ld, g->qkv + hd + i * dh, ld, 0.0f, g->s, n);
        /* (m, n, k) = (n, dh, n) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dh, n, 1.0f, g->s, n,
                    g->qkv + 2 * hd + i * dh, ld, 0.0f, g->z + i * dh, hd);
    }
    if (p->w_o) /* (m, n, k) = (n, dm, hd) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dm, hd, 1.0f, g->z, hd, p->w_o,
                    dm, 0.0f, g->d, dm);
}

/* ---- latency --------------------------------------------------------------------- */

/* Calls per timed sample, so that a sample lasts >= ~20 ms. */
static int inner_calls(double seconds_per_call) {
    double k = 0.02 / (seconds_per_call > 1e-9 ? seconds_per_call : 1e-9);
    return k < 1 ? 1 : k > 100000 ? 100000 : (int)k;
}

/* One request's buffers for both timings: the engine's workspace and
 * outputs, and the raw GEMMs' buffers. */
typedef struct lat_ctx {
    const problem *p;
    int patterns;
    attn_workspace *ws;
    request_out r;
    gemm_bufs g;
    int inner_compute, inner_gemms;
} lat_ctx;

static void lat_ctx_make(lat_ctx *c, const problem *p, int patterns) {
    size_t n = p->s.n, hd = p->s.h * p->s.dh;
    c->p = p;
    c->patterns = patterns;
    c->ws = attn_workspace_create();
    request_out_make(&c->r, p, patterns);
    c->g = (gemm_bufs){xmalloc(n * 3 * hd * sizeof(float)), xmalloc(n * n * sizeof(float)),
                       xmalloc(n * hd * sizeof(float)), xmalloc(n * p->s.dm * sizeof(float))};
    double t0 = now(); /* warm-up: the workspace grows, pages are touched */
    if (attn_compute(&c->r.out, c->ws, &p->in)) {
        fprintf(stderr, "bench: attn_compute failed\n");
        exit(1);
    }
    c->inner_compute = inner_calls(now() - t0);
    t0 = now();
    gemms_run(&c->g, p);
    c->inner_gemms = inner_calls(now() - t0);
}

static void lat_ctx_free(lat_ctx *c) {
    free(c->g.qkv), free(c->g.s), free(c->g.z), free(c->g.d);
    request_out_free(&c->r);
    attn_workspace_destroy(c->ws);
}

/* Seconds per call of attn_compute (gemms = 0) or of the raw GEMMs alone. */
static double lat_sample(lat_ctx *c, int gemms) {
    int inner = gemms ? c->inner_gemms : c->inner_compute;
    double t0 = now();
    for (int k = 0; k < inner; k++)
        if (gemms)
            gemms_run(&c->g, c->p);
        else
            attn_compute(&c->r.out, c->ws, &c->p->in);
    return (now() - t0) / inner;
}

static double measure_naive(const problem *p) {
    request_out r;
    request_out_make(&r, p, 1);
    float *scratch =
        xmalloc(attn_naive_scratch_floats(p->s.n, p->s.dm, p->s.h, p->s.dh) * sizeof(float));
    double t0 = now();
    int calls = 0;
    do
        attn_compute_naive(&r.out, scratch, &p->in), calls++;
    while (now() - t0 < 0.05);
    double t = (now() - t0) / calls;
    free(scratch);
    request_out_free(&r);
    return t;
}

/* ---- throughput ------------------------------------------------------------------- */

typedef struct stream {
    const problem *p;
    int patterns;
    atomic_int next; /* next request number to take */
    int requests;
    pthread_barrier_t go; /* workers + main */
} stream;

/* Aligned so that two workers' counters never share a cache line: the
 * benchmark must not add false sharing the server would not have. */
typedef struct worker {
    _Alignas(128) stream *st;
    attn_workspace *ws;
    request_out r;
    double busy;       /* seconds inside attn_compute */
    double start, end; /* this worker's first take and last finish */
    int served, blas_threads_seen;
} worker;

static void *worker_main(void *arg) {
    worker *wk = arg;
    stream *st = wk->st;
    wk->blas_threads_seen = openblas_get_num_threads();
    attn_compute(&wk->r.out, wk->ws, &st->p->in); /* warm-up, outside the clock */
    pthread_barrier_wait(&st->go);
    wk->start = wk->end = now();
    while (atomic_fetch_add(&st->next, 1) < st->requests) {
        double t0 = now();
        attn_compute(&wk->r.out, wk->ws, &st->p->in);
        wk->end = now();
        wk->busy += wk->end - t0;
        wk->served++;
    }
    return NULL;
}

/* One run of a stream: requests per second, and the mean seconds a request
 * spent inside attn_compute (*latency); *blas the thread count the workers saw. */
static double stream_run(const problem *p, int patterns, int workers, double *latency, int *blas) {
    worker wk[8] = {0};
    pthread_t th[8];
    stream st = {.p = p, .patterns = patterns, .requests = p->s.requests};
    atomic_init(&st.next, 0);
    pthread_barrier_init(&st.go, NULL, (unsigned)workers + 1);
    for (int w = 0; w < workers; w++) {
        wk[w] = (worker){.st = &st, .ws = attn_workspace_create()};
        request_out_make(&wk[w].r, p, patterns);
        pthread_create(&th[w], NULL, worker_main, &wk[w]);
    }
    pthread_barrier_wait(&st.go);
    double busy = 0.0, first = 0.0, last = 0.0;
    int served = 0;
    for (int w = 0; w < workers; w++) {
        pthread_join(th[w], NULL);
        busy += wk[w].busy, served += wk[w].served;
        if (w == 0 || wk[w].start < first) first = wk[w].start;
        if (w == 0 || wk[w].end > last) last = wk[w].end;
    }
    double wall = last - first; /* measured by the workers themselves */
    *latency = busy / served;
    *blas = wk[0].blas_threads_seen;
    for (int w = 0; w < workers; w++) {
        request_out_free(&wk[w].r);
        attn_workspace_destroy(wk[w].ws);
    }
    pthread_barrier_destroy(&st.go);
    return served / wall;
}

/* ---- the softmax alone -------------------------------------------------------------- */

/* Seconds of attn_softmax_block over the causal rows of all h heads, as the
 * full path runs it (in place, blocks of 128 rows), on scores like the
 * engine's. Median of `reps`. */
static double measure_softmax(const problem *p, int reps) {
    size_t n = p->s.n;
    float *s = floats_aligned(n * n), *w = floats_aligned(n * n);
    uint64_t st = 7;
    fill(s, n * n, 3.0f, &st);
    double t[32];
    for (int k = 0; k < reps; k++) {
        t[k] = 0.0;
        for (size_t i = 0; i < p->s.h; i++) {
            memcpy(w, s, n * n * sizeof(float)); /* fresh scores for each head, not timed */
            double t0 = now();
            for (size_t r0 = 0; r0 < n; r0 += 128) {
                size_t rb = n - r0 < 128 ? n - r0 : 128;
                attn_softmax_block(w + r0 * n, n, w + r0 * n, n, rb, n, r0, 1);
            }
            t[k] += now() - t0;
        }
    }
    free(s), free(w);
    return median(t, reps);
}

/* ---- main ---------------------------------------------------------------------------- */

static void print_ms(double seconds) {
    if (seconds < 1e-3)
        printf(" %.2f µs |", seconds * 1e6);
    else
        printf(" %.2f ms |", seconds * 1e3);
}

static void spread(double *v, int count, double *lo, double *hi) {
    *lo = *hi = v[0];
    for (int k = 1; k < count; k++)
        *lo = v[k] < *lo ? v[k] : *lo, *hi = v[k] > *hi ? v[k] : *hi;
}

int main(int argc, char **argv) {
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    bshape shapes[] = {
        {"teaching 3×4, 1 head", 3, 4, 1, 4, 0, 15, 40000},
        {"GPT-2 n=128", 128, 768, 12, 64, 1, 15, 100},
        {"GPT-2 n=1024", 1024, 768, 12, 64, 1, 9, 10},
        {"GPT-2 n=4096", 4096, 768, 12, 64, 1, 3, 0},
    };
    enum { NSHAPES = sizeof shapes / sizeof shapes[0], MAXREP = 32 };
    int runs = quick ? 1 : 5;
    if (quick)
        for (int s = 0; s < NSHAPES; s++)
            shapes[s].reps = shapes[s].reps > 3 ? 3 : shapes[s].reps, shapes[s].requests /= 4;
    problem p[NSHAPES];
    for (int s = 0; s < NSHAPES; s++)
        problem_make(&p[s], shapes[s]);

    printf("OpenBLAS: %s; core %s; parallel mode %d (1 = pthreads); %d procs; softmax exp: "
           "SLEEF %s\n",
           openblas_get_config(), openblas_get_corename(), openblas_get_parallel(),
           openblas_get_num_procs(), attn_vexp_path());
    printf("Every request: causal mask, b_qkv and b_o, all heads. GPT-2 shapes: d_model 768, "
           "12 heads of 64, with w_o.\nOutputs: \"default\" = patterns + embeddings (full path), "
           "\"emb\" = embeddings only (online path).\nConfigurations are interleaved sample by "
           "sample, so that noise from other processes falls on all of them alike.\n\n");

    printf("## (a) Latency, one request at a time (median of %d / %d / %d / %d samples)\n\n",
           shapes[0].reps, shapes[1].reps, shapes[2].reps, shapes[3].reps);
    printf("| shape | outputs | BLAS threads | attn_compute | GEMMs alone (full n×n) | ratio | "
           "GFLOP/s (attn_flops / time) |\n|---|---|---|---|---|---|---|\n");
    for (int s = 0; s < NSHAPES; s++) {
        double t[2][3][MAXREP]; /* [BLAS threads − 1][output set, or 2: GEMMs][rep] */
        lat_ctx c[2];
        int np = s == NSHAPES - 1 ? 1 : 2; /* n = 4096: patterns would be 805 MB; emb only */
        for (int o = 0; o < np; o++)
            lat_ctx_make(&c[o], &p[s], np == 2 && o == 0);
        for (int k = 0; k < shapes[s].reps; k++)
            for (int b = 0; b < 2; b++) {
                openblas_set_num_threads(b + 1);
                for (int o = 0; o < np; o++)
                    t[b][o][k] = lat_sample(&c[o], 0);
                t[b][2][k] = lat_sample(&c[0], 1);
            }
        for (int o = 0; o < np; o++)
            lat_ctx_free(&c[o]);
        double f = attn_flops(shapes[s].n, shapes[s].dm, shapes[s].h, shapes[s].dh, shapes[s].w_o);
        for (int b = 0; b < 2; b++) {
            double mg = median(t[b][2], shapes[s].reps);
            for (int o = 0; o < np; o++) {
                double mc = median(t[b][o], shapes[s].reps);
                int patterns = np == 2 && o == 0;
                printf("| %s | %s | %d |", shapes[s].name, patterns ? "default" : "emb", b + 1);
                print_ms(mc);
                print_ms(mg);
                printf(" %.2f | %.1f |\n", mc / mg, f / mc * 1e-9);
            }
        }
        fflush(stdout);
    }
    printf("\nNaive float32 reference (attention/naive.c), for scale:");
    for (int s = 0; s < 2; s++) {
        printf(" %s", shapes[s].name);
        print_ms(measure_naive(&p[s]));
    }
    printf("\n\n");

    printf("## (b) The softmax's share (1 BLAS thread): attn_softmax_block alone over the "
           "causal rows of all 12 heads\n\n| shape | softmax alone | default request | share |\n"
           "|---|---|---|---|\n");
    openblas_set_num_threads(1);
    for (int s = 1; s < 3; s++) {
        lat_ctx c;
        lat_ctx_make(&c, &p[s], 1);
        double tc[MAXREP];
        for (int k = 0; k < shapes[s].reps; k++)
            tc[k] = lat_sample(&c, 0);
        lat_ctx_free(&c);
        double sm = measure_softmax(&p[s], shapes[s].reps), mc = median(tc, shapes[s].reps);
        printf("| %s |", shapes[s].name);
        print_ms(sm);
        print_ms(mc);
        printf(" %.1f %% |\n", 100.0 * sm / mc);
        fflush(stdout);
    }

    printf("\n## (c) Workspace, GPT-2 n=8192, embeddings only (1 BLAS thread)\n\n");
    {
        bshape big = {"GPT-2 n=8192", 8192, 768, 12, 64, 1, 1, 0};
        problem pb;
        problem_make(&pb, big);
        request_out r;
        request_out_make(&r, &pb, 0);
        attn_workspace *ws = attn_workspace_create();
        double t0 = now();
        int rc = attn_compute(&r.out, ws, &pb.in);
        double t1 = now() - t0;
        size_t n = big.n, qkv = n * 3 * 768 * sizeof(float), z = n * 768 * sizeof(float);
        printf("attn_compute %s in %.2f s; workspace %.1f MB (attn_workspace_need %.1f MB; of "
               "which QKV %.1f MB, Z %.1f MB); one n × n float buffer would be %.1f MB\n\n",
               rc ? "FAILED" : "ok", t1, attn_workspace_bytes(ws) / 1e6,
               attn_workspace_need(n, 768, 12, 64) / 1e6, qkv / 1e6, z / 1e6,
               (double)n * n * 4 / 1e6);
        attn_workspace_destroy(ws);
        request_out_free(&r);
        problem_free(&pb);
    }

    static const int configs[][2] = {{2, 1}, {1, 2}, {2, 2}, {1, 1}};
    enum { NCONF = sizeof configs / sizeof configs[0] };
    printf("## (d) Throughput, a stream of default requests (median of %d runs; %d / %d / %d "
           "requests a run)\n\n",
           runs, shapes[0].requests, shapes[1].requests, shapes[2].requests);
    printf("| shape | workers × BLAS threads | requests/s (median) | min – max | "
           "mean time in attn_compute |\n|---|---|---|---|---|\n");
    for (int s = 0; s < 3; s++) {
        double rate[NCONF][MAXREP], lat[NCONF][MAXREP];
        int seen[NCONF] = {0};
        for (int run = 0; run < runs; run++)
            for (int c = 0; c < NCONF; c++) {
                openblas_set_num_threads(configs[c][1]);
                rate[c][run] = stream_run(&p[s], 1, configs[c][0], &lat[c][run], &seen[c]);
            }
        for (int c = 0; c < NCONF; c++) {
            double lo, hi;
            spread(rate[c], runs, &lo, &hi);
            printf("| %s | %d × %d (seen %d) | %.1f | %.1f – %.1f |", shapes[s].name, configs[c][0],
                   configs[c][1], seen[c], median(rate[c], runs), lo, hi);
            print_ms(median(lat[c], runs));
            printf("\n");
        }
        fflush(stdout);
    }
    for (int s = 0; s < NSHAPES; s++)
        problem_free(&p[s]);
    return 0;
}
