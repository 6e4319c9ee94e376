/*
 * bench_attention.c — how fast attn_compute is, and how the server should
 * split the 2 cores between its workers and OpenBLAS's threads.
 *
 * Three measurements, each a median of several repetitions:
 *
 *   latency     one request at a time, OpenBLAS threads 1 and 2; beside it,
 *               the block's GEMMs alone at their real shapes (E·w_qkv, per
 *               head Q_i·K_iᵀ and P_i·V_i, Z·w_o) by raw cblas_sgemm, and
 *               our time as a ratio to theirs; the naive reference once.
 *   throughput  a stream of requests served by W worker threads, each with
 *               its own workspace and outputs (as the server's pool), with
 *               OpenBLAS set to B threads: (W, B) = (2, 1), (1, 2), (2, 2).
 *
 * Every request asks for the API's default outputs, patterns and
 * embeddings, for every head. openblas_set_num_threads is process-global,
 * so it is called from the main thread between measurements only.
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
#include "attention/naive.h"

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

static void request_out_make(request_out *r, const problem *p) {
    memset(r, 0, sizeof(*r));
    r->out.patterns = floats_aligned(p->s.h * p->s.n * p->s.n);
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
    attn_workspace *ws;
    request_out r;
    gemm_bufs g;
    int inner_compute, inner_gemms;
} lat_ctx;

static void lat_ctx_make(lat_ctx *c, const problem *p) {
    size_t n = p->s.n, hd = p->s.h * p->s.dh;
    c->p = p;
    c->ws = attn_workspace_create();
    request_out_make(&c->r, p);
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
    request_out_make(&r, p);
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
static double stream_run(const problem *p, int workers, double *latency, int *blas) {
    worker wk[8] = {0};
    pthread_t th[8];
    stream st = {.p = p, .requests = p->s.requests};
    atomic_init(&st.next, 0);
    pthread_barrier_init(&st.go, NULL, (unsigned)workers + 1);
    for (int w = 0; w < workers; w++) {
        wk[w] = (worker){.st = &st, .ws = attn_workspace_create()};
        request_out_make(&wk[w].r, p);
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
    };
    enum { NSHAPES = sizeof shapes / sizeof shapes[0], MAXREP = 32 };
    int runs = quick ? 1 : 5;
    if (quick)
        for (int s = 0; s < NSHAPES; s++)
            shapes[s].reps = 3, shapes[s].requests /= 4;
    problem p[NSHAPES];
    for (int s = 0; s < NSHAPES; s++)
        problem_make(&p[s], shapes[s]);

    printf("OpenBLAS: %s; core %s; parallel mode %d (1 = pthreads); %d procs\n",
           openblas_get_config(), openblas_get_corename(), openblas_get_parallel(),
           openblas_get_num_procs());
    printf("Every request: causal mask, b_qkv and b_o, outputs patterns + embeddings, all "
           "heads. GPT-2 shapes: d_model 768, 12 heads of 64, with w_o.\n"
           "Configurations are interleaved sample by sample, so that noise from other "
           "processes falls on all of them alike.\n\n");

    printf("## (a) Latency, one request at a time (median of %d / %d / %d samples)\n\n",
           shapes[0].reps, shapes[1].reps, shapes[2].reps);
    printf("| shape | BLAS threads | attn_compute | GEMMs alone | ratio | GFLOP/s "
           "(attn_flops / time) |\n|---|---|---|---|---|---|\n");
    for (int s = 0; s < NSHAPES; s++) {
        double t[2][2][MAXREP]; /* [BLAS threads − 1][gemms][rep] */
        lat_ctx c;
        lat_ctx_make(&c, &p[s]);
        for (int k = 0; k < shapes[s].reps; k++)
            for (int b = 0; b < 2; b++) {
                openblas_set_num_threads(b + 1);
                t[b][0][k] = lat_sample(&c, 0);
                t[b][1][k] = lat_sample(&c, 1);
            }
        lat_ctx_free(&c);
        double f = attn_flops(shapes[s].n, shapes[s].dm, shapes[s].h, shapes[s].dh, shapes[s].w_o);
        for (int b = 0; b < 2; b++) {
            double mc = median(t[b][0], shapes[s].reps), mg = median(t[b][1], shapes[s].reps);
            printf("| %s | %d |", shapes[s].name, b + 1);
            print_ms(mc);
            print_ms(mg);
            printf(" %.2f | %.1f |\n", mc / mg, f / mc * 1e-9);
        }
        fflush(stdout);
    }
    printf("\nNaive float32 reference (attention/naive.c), for scale:");
    for (int s = 0; s < 2; s++) {
        printf(" %s", shapes[s].name);
        print_ms(measure_naive(&p[s]));
    }
    printf("\n\n");

    static const int configs[][2] = {{2, 1}, {1, 2}, {2, 2}, {1, 1}};
    enum { NCONF = sizeof configs / sizeof configs[0] };
    printf("## (b) Throughput, a stream of requests (median of %d runs; %d / %d / %d "
           "requests a run)\n\n",
           runs, shapes[0].requests, shapes[1].requests, shapes[2].requests);
    printf("| shape | workers × BLAS threads | requests/s (median) | min – max | "
           "mean time in attn_compute |\n|---|---|---|---|---|\n");
    for (int s = 0; s < NSHAPES; s++) {
        double rate[NCONF][MAXREP], lat[NCONF][MAXREP];
        int seen[NCONF] = {0};
        for (int run = 0; run < runs; run++)
            for (int c = 0; c < NCONF; c++) {
                openblas_set_num_threads(configs[c][1]);
                rate[c][run] = stream_run(&p[s], configs[c][0], &lat[c][run], &seen[c]);
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
