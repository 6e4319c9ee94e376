/*
 * bench_attention.c — how close the engine comes to the GEMMs it is made
 * of, in the server's threading; how the server should share the cores
 * between workers and OpenBLAS threads; and what one large computation
 * holds in memory.
 *
 * Latency (the default run, first table): for each shape, sample by
 * sample interleaved,
 *   - the engine as the server runs it: a pool of 2 workers × 1 OpenBLAS
 *     thread, the computation split over the idle worker by server/split.c
 *     when it reaches SRV_JOB_SPLIT_FLOPS (server_pool.c);
 *   - the engine on 1 worker (never split), for reference;
 *   - the block's GEMMs alone (problem.c) on 2 and on 1 OpenBLAS threads;
 *   - one 2048³ cblas_sgemm on 2 threads: the FLOP limit of this row is
 *     attn_flops / that sgemm's GFLOP/s, in the same samples.
 * Split results are compared bit for bit with the 1-worker ones.
 *
 * Throughput (second table): a queue of default requests served by W pool
 * workers with OpenBLAS at B threads, (W, B) = (2, 1), (1, 2), (2, 2), (1, 1),
 * interleaved run by run.
 *
 * Usage: bench_attention [--quick]           both tables (--quick: fewer samples)
 *        bench_attention --only NAME           the latency rows whose shape's name
 *            contains NAME, alone
 *        bench_attention --rss N patterns|emb  one GPT-2-shape computation of n = N
 *            on 1 worker, then its memory accounting on one line (for
 *            /usr/bin/time -v; bench/rss.sh)
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention/kernels.h"
#include "attention/plan.h"
#include "attention/vexp.h"
#include "bench/problem.h"
#include "bench/server_pool.h"

enum { MAXREP = 32, PEAK_M = 2048 };

/* Calls per timed sample, so that a sample lasts >= ~20 ms. */
/* Calls per sample: enough for 0.1 s. On a VM, a vCPU that was idle is
 * descheduled by the host, and the first hand-off to a worker on it waits
 * milliseconds for the host to run it again; a server under steady load
 * keeps its cores awake. A sample of many calls in a row measures that
 * steady state, on every configuration alike. */
static int inner_calls(double seconds_per_call) {
    double k = 0.1 / (seconds_per_call > 1e-9 ? seconds_per_call : 1e-9);
    return k < 1 ? 1 : k > 100000 ? 100000 : (int)k;
}

static void print_time(double seconds) {
    if (seconds < 1e-6)
        printf(" %.2f ns", seconds * 1e9);
    else if (seconds < 1e-3)
        printf(" %.2f µs", seconds * 1e6);
    else if (seconds < 10.0)
        printf(" %.2f ms", seconds * 1e3);
    else
        printf(" %.2f s", seconds);
}

/* ---- the sgemm peak -------------------------------------------------------------- */

typedef struct peak_bufs {
    float *a, *b, *c;
} peak_bufs;

static void peak_make(peak_bufs *pk) {
    size_t count = (size_t)PEAK_M * PEAK_M;
    pk->a = bench_floats(count), pk->b = bench_floats(count), pk->c = bench_floats(count);
    for (size_t i = 0; i < count; i++)
        pk->a[i] = (float)(i % 7) * 0.25f - 0.75f, pk->b[i] = (float)(i % 5) * 0.25f - 0.5f;
}

static double peak_gflops(peak_bufs *pk) {
    double s = bench_sgemm_square(pk->c, pk->a, pk->b, PEAK_M);
    return 2.0 * PEAK_M * PEAK_M * PEAK_M / s * 1e-9;
}

/* ---- latency ------------------------------------------------------------------------- */

/* Configurations of one latency row. */
enum { C_SERVER, C_ONE, C_GEMMS2, C_GEMMS1, C_COUNT };

/* Which configurations a shape samples: all; the server and the GEMMs on 2
 * threads (a layer 4096 wide at n = 4096, whose 1-thread runs would take
 * seconds each); the server alone (the 1 worker runs once, for the bit for
 * bit check; a windowed layer, which no full n × n GEMM stands for). */
typedef enum lat_heavy { H_ALL, H_TWO_THREADS, H_SERVER } lat_heavy;

/* Shapes the summary lines below the tables read together. */
typedef enum lat_group { G_NONE, G_LLAMA, G_MISTRAL } lat_group;

typedef struct lat_shape {
    bench_shape s;
    int emb_only; /* the default output set is not measured: its patterns would be too large */
    int target;   /* one of the shapes the 15 % target is stated for */
    int norope;   /* also the same layer without RoPE, in the same samples */
    int half;     /* also the same layer on the first n/2 tokens, in the same samples */
    lat_heavy heavy;
    lat_group group;
} lat_shape;

typedef struct lat_row {
    const char *name;
    const char *outputs; /* "default", "emb", "emb, no RoPE", "emb, first n/2 tokens" */
    int target, norope, half;
    lat_group group;
    int have[C_COUNT];
    double t[C_COUNT]; /* medians, seconds per call */
    double peak;       /* GFLOP/s of the 2048³ sgemm on 2 threads, same samples */
    double flops;
    double helpers; /* accepted per split call */
    int same;       /* split bits == 1-worker bits */
    double rope;    /* RoPE's work alone on 1 thread, seconds (norope shapes), or 0 */
} lat_row;

/* One measured set of a shape: an input and an output set. */
typedef struct lat_set {
    const attn_input *in;
    int patterns;
    const char *label;
} lat_set;

/* RoPE's own work in one computation of p, on this thread: the frequencies,
 * the table of cos and sin of n positions, and the rotation of Q's h heads
 * and K's g heads in a QKV of n × (hd + 2gd), as project.c does them (there
 * spread over the projection's tiles). Median of 7, seconds. */
static double rope_alone(const problem *p) {
    const attn_weights *w = &p->w;
    const size_t n = p->s.n, dims = w->rope.dims, ld = (p->s.h + 2 * p->s.g) * p->s.dh;
    double *freq = bench_alloc(dims / 2 * sizeof(double));
    float *angles = bench_floats(n * dims), *qkv = bench_floats(n * ld);
    unsigned *pos = bench_alloc(n * sizeof(unsigned));
    for (size_t t = 0; t < n; t++)
        pos[t] = (unsigned)t;
    memset(qkv, 0, n * ld * sizeof(float));
    double t[7];
    for (int k = 0; k < 7; k++) {
        double t0 = bench_now();
        attn_rope_frequencies(freq, &w->rope);
        attn_rope_angles(angles, dims, freq, dims, pos, n);
        attn_rope_rows(qkv, ld, angles, dims, n, p->s.h + p->s.g, p->s.dh, dims, w->rope.style);
        t[k] = bench_now() - t0;
    }
    free(freq), free(angles), free(qkv), free(pos);
    return bench_median(t, 7);
}

/* Measures one shape: appends one row per set (output set, or the layer
 * without RoPE) to rows. */
static int latency_shape(lat_row *rows, const lat_shape *ls, server_pool *sp, peak_bufs *pk,
                         double *peaks, int *npeaks) {
    problem p;
    problem_make(&p, ls->s);
    attn_weights w_norope = p.w;
    w_norope.rope = (attn_rope){0};
    attn_input in_norope = p.in, in_half = p.in;
    in_norope.weights = &w_norope;
    in_half.n_tokens = p.s.n / 2;
    lat_set sets[3];
    int nsets = 0;
    if (!ls->emb_only) sets[nsets++] = (lat_set){&p.in, 1, "default"};
    sets[nsets++] = (lat_set){&p.in, 0, "emb"};
    if (ls->norope) sets[nsets++] = (lat_set){&in_norope, 0, "emb, no RoPE"};
    if (ls->half) sets[nsets++] = (lat_set){&in_half, 0, "emb, first n/2 tokens"};
    const int reps = ls->s.reps, all = ls->heavy == H_ALL, gemms = ls->heavy != H_SERVER;
    const double rope = ls->norope ? rope_alone(&p) : 0.0;
    attn_output out[3][2]; /* [set][C_SERVER, C_ONE] */
    problem_gemms g;
    if (gemms) problem_gemms_make(&g, &p);
    for (int o = 0; o < nsets; o++)
        for (int c = 0; c < 2; c++)
            problem_outputs_make(&out[o][c], &p, sets[o].patterns);

    /* Warm-up: workspaces grow and pages are touched; sizes the samples. */
    openblas_set_num_threads(1);
    int inner[3], inner_gemms = 1;
    for (int o = 0; o < nsets; o++) {
        server_pool_time(sp, sets[o].in, &out[o][C_SERVER], SPLIT_AS_SERVER, 1, NULL);
        inner[o] =
            inner_calls(server_pool_time(sp, sets[o].in, &out[o][C_ONE], SPLIT_NEVER, 1, NULL));
    }
    double t0 = bench_now();
    if (gemms) {
        problem_gemms_run(&g, &p);
        inner_gemms = inner_calls(bench_now() - t0);
    }

    double t[3][C_COUNT][MAXREP], pk_gf[MAXREP];
    size_t helpers[3] = {0, 0, 0};
    /* Each round: first everything on 2 OpenBLAS threads, then the GEMMs on
     * 1 thread, then the pool's configurations. After a call on 2 threads,
     * OpenBLAS's other thread spins for work for about 0.1 s (its
     * THREAD_TIMEOUT, 2^28 cycles), holding a core: the 1-thread GEMMs
     * need only one and run meanwhile (followed by a busy wait to 0.15 s when
     * they are shorter), while the pool's two workers, timed after them,
     * find both cores free and awake. (On a VM a vCPU left
     * idle is descheduled by the host, and the first hand-off to a thread
     * on it waits milliseconds: a server under steady load keeps its cores
     * awake, and so does this order.) */
    for (int k = 0; k < reps; k++) {
        if (gemms) {
            openblas_set_num_threads(2);
            t0 = bench_now();
            for (int i = 0; i < inner_gemms; i++)
                problem_gemms_run(&g, &p);
            t[0][C_GEMMS2][k] = (bench_now() - t0) / inner_gemms;
            pk_gf[k] = peaks[(*npeaks)++] = peak_gflops(pk);
            double two_threads_end = bench_now();
            openblas_set_num_threads(1);
            if (all) {
                t0 = bench_now();
                for (int i = 0; i < inner_gemms; i++)
                    problem_gemms_run(&g, &p);
                t[0][C_GEMMS1][k] = (bench_now() - t0) / inner_gemms;
            }
            while (bench_now() - two_threads_end < 0.15) /* busy, not asleep: see above */
                ;
        }
        for (int o = 0; o < nsets; o++) {
            t[o][C_SERVER][k] = server_pool_time(sp, sets[o].in, &out[o][C_SERVER], SPLIT_AS_SERVER,
                                                 inner[o], &helpers[o]);
            if (all)
                t[o][C_ONE][k] =
                    server_pool_time(sp, sets[o].in, &out[o][C_ONE], SPLIT_NEVER, inner[o], NULL);
        }
    }
    openblas_set_num_threads(1);

    double gemms1 = all ? bench_median(t[0][C_GEMMS1], reps) : 0.0;
    double gemms2 = gemms ? bench_median(t[0][C_GEMMS2], reps) : 0.0;
    double peak = gemms ? bench_median(pk_gf, reps) : 0.0;
    for (int o = 0; o < nsets; o++) {
        lat_row *r = &rows[o];
        const attn_input *in = sets[o].in;
        size_t emb = in->n_tokens * p.s.dm * sizeof(float);
        *r = (lat_row){.name = ls->s.name,
                       .outputs = sets[o].label,
                       .target = ls->target,
                       .norope = in == &in_norope,
                       .half = in == &in_half,
                       .group = ls->group,
                       .have = {1, all, gemms, all},
                       .rope = rope};
        r->t[C_SERVER] = bench_median(t[o][C_SERVER], reps);
        r->t[C_ONE] = all ? bench_median(t[o][C_ONE], reps) : 0.0;
        r->t[C_GEMMS1] = gemms1, r->t[C_GEMMS2] = gemms2;
        r->peak = peak;
        r->flops = attn_flops_grouped(in->n_tokens, p.s.dm, p.s.h, p.s.g, p.s.dh, p.s.w_o);
        r->helpers = (double)helpers[o] / ((double)reps * inner[o]);
        r->same = !memcmp(out[o][C_SERVER].embeddings, out[o][C_ONE].embeddings, emb) &&
                  (!sets[o].patterns || !memcmp(out[o][C_SERVER].patterns, out[o][C_ONE].patterns,
                                                problem_patterns_bytes(&p)));
        for (int c = 0; c < 2; c++)
            problem_outputs_free(&out[o][c]);
    }
    if (gemms) problem_gemms_free(&g);
    problem_free(&p);
    return nsets;
}

/* a ÷ b, or a dash when either was not measured. */
static void print_ratio(int have, double a, double b) {
    if (have)
        printf(" %.2f |", a / b);
    else
        printf(" — |");
}

static void print_latency(const lat_row *rows, int nrows, const lat_shape *shapes, int nshapes,
                          const double *peaks, int npeaks, double peak1, double peak2) {
    double all[1024];
    memcpy(all, peaks, (size_t)npeaks * sizeof(double));
    double lo = all[0], hi = all[0];
    for (int i = 1; i < npeaks; i++)
        lo = all[i] < lo ? all[i] : lo, hi = all[i] > hi ? all[i] : hi;
    printf("## (a) Latency: the engine against its GEMMs alone and the sgemm FLOP limit\n\n");
    printf("FLOP limit: one %d³ cblas_sgemm on 2 OpenBLAS threads, %.1f GFLOP/s (median of %d "
           "samples interleaved with the rows below, %.1f – %.1f); before them, 5 samples "
           "interleaved: %.1f GFLOP/s on 1 thread, %.1f on 2.\n"
           "Each row's limit is attn_flops / the median of the sgemm samples taken with that "
           "row's samples.\nSamples per row:",
           PEAK_M, bench_median(all, npeaks), npeaks, lo, hi, peak1, peak2);
    for (int s = 0; s < nshapes; s++)
        printf(" %s %d%s", shapes[s].s.name, shapes[s].s.reps, s + 1 < nshapes ? "," : ".\n\n");

    printf("Times (GFLOP/s = attn_flops, full n × n, / time; — not measured):\n\n"
           "| shape n × d_model × heads | outputs | server: 2 workers × 1 BLAS thread, split | "
           "1 worker × 1 BLAS thread | GEMMs alone, 2 BLAS threads | GEMMs alone, 1 BLAS thread "
           "| FLOP limit (2 threads) |\n|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < nrows; i++) {
        const lat_row *r = &rows[i];
        printf("| %s | %s |", r->name, r->outputs);
        for (int c = 0; c < C_COUNT; c++) {
            if (!r->have[c]) {
                printf(" — |");
                continue;
            }
            print_time(r->t[c]);
            printf(" (%.1f) |", r->flops / r->t[c] * 1e-9);
        }
        if (r->have[C_GEMMS2]) {
            print_time(r->flops / (r->peak * 1e9));
            printf(" (%.1f) |\n", r->peak);
        } else {
            printf(" — |\n");
        }
    }

    printf("\nRatios of times (below 1: faster; the causal engine skips the blocks above the "
           "diagonal that the GEMMs alone compute):\n\n"
           "| shape | outputs | **server ÷ GEMMs alone, 2 threads** | server ÷ FLOP limit | "
           "GEMMs alone 2 threads ÷ FLOP limit | 1 worker ÷ GEMMs alone, 1 thread | "
           "1 worker ÷ server | helpers per call | split = 1 worker, bit for bit |\n"
           "|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < nrows; i++) {
        const lat_row *r = &rows[i];
        double limit = r->flops / (r->peak * 1e9);
        int g2 = r->have[C_GEMMS2], one = r->have[C_ONE];
        printf("| %s | %s |", r->name, r->outputs);
        if (g2)
            printf(" **%.2f** |", r->t[C_SERVER] / r->t[C_GEMMS2]);
        else
            printf(" — |");
        print_ratio(g2, r->t[C_SERVER], limit);
        print_ratio(g2, r->t[C_GEMMS2], limit);
        print_ratio(one, r->t[C_ONE], r->t[C_GEMMS1]);
        print_ratio(one, r->t[C_ONE], r->t[C_SERVER]);
        printf(" %.2f | %s |\n", r->helpers, r->same ? "yes" : "NO");
    }
    printf("\n");
    int met = 1, targets = 0;
    const char *sep = " ";
    for (int i = 0; i < nrows; i++) {
        if (!rows[i].target) continue;
        if (!targets++)
            printf("Target: server ÷ GEMMs alone (2 threads) ≤ 1.0 at GPT-2 n = 128, ≤ 1.15 at "
                   "n = 1024, 4096:");
        double ratio = rows[i].t[C_SERVER] / rows[i].t[C_GEMMS2];
        double most = strncmp(rows[i].name, "128×", strlen("128×")) == 0 ? 1.0 : 1.15;
        met = met && ratio <= most;
        printf("%s%s %s %.2f%s", sep, rows[i].name, rows[i].outputs, ratio,
               ratio <= most ? "" : " (over)");
        sep = "; ";
    }
    if (targets) printf(" — **%s**.\n\n", met ? "met" : "not met");

    /* The layers of today's models. */
    for (int i = 0; i < nrows; i++) {
        const lat_row *r = &rows[i];
        if (r->group == G_LLAMA && !r->norope)
            printf("Llama-3-8B layer, %s: server ÷ GEMMs alone (2 threads) %.2f (goal ≤ 1.10).\n",
                   r->name, r->t[C_SERVER] / r->t[C_GEMMS2]);
        if (r->group == G_LLAMA && r->norope) {
            const lat_row *with = r - 1; /* the same shape's row with RoPE, same samples */
            printf("RoPE's cost, %s: with − without, server %.1f %% of the layer's time (%.2f "
                   "ms with, %.2f ms without), 1 worker %.1f %% (%.2f ms, %.2f ms); RoPE's "
                   "work alone on 1 thread %.2f ms, %.2f %% of the 1-worker layer (goal ≤ 3 "
                   "%%).\n",
                   r->name, 100.0 * (with->t[C_SERVER] - r->t[C_SERVER]) / with->t[C_SERVER],
                   with->t[C_SERVER] * 1e3, r->t[C_SERVER] * 1e3,
                   100.0 * (with->t[C_ONE] - r->t[C_ONE]) / with->t[C_ONE], with->t[C_ONE] * 1e3,
                   r->t[C_ONE] * 1e3, r->rope * 1e3, 100.0 * r->rope / with->t[C_ONE]);
        }
        if (r->group == G_MISTRAL && r->half) {
            const lat_row *all = r - 1; /* all n tokens, same samples */
            printf("Mistral-7B layer, window 1024, %s: server %.2f ms on all tokens, %.2f ms on "
                   "the first half, ratio %.2f (goal ≤ 2.2).\n",
                   r->name, all->t[C_SERVER] * 1e3, r->t[C_SERVER] * 1e3,
                   all->t[C_SERVER] / r->t[C_SERVER]);
        }
    }
    printf("\n");
}

/* ---- throughput ------------------------------------------------------------------------ */

static void throughput(const bench_shape *shapes, const int *requests, int nshapes, int runs,
                       server_pool *pools[2]) {
    static const int conf[][2] = {{2, 1}, {1, 2}, {2, 2}, {1, 1}}; /* workers, BLAS threads */
    enum { NCONF = sizeof conf / sizeof conf[0] };
    printf("## Workers × BLAS threads: a queue of default requests (median of %d runs)\n\n"
           "Requests queued at once on a pool of W workers (split as the server does, which a "
           "full queue leaves no room for), OpenBLAS at B threads; wall time from the first "
           "submit to the last finish.\n\n"
           "| shape | requests a run | W workers × B BLAS threads | requests/s | min – max | "
           "mean compute time |\n|---|---|---|---|---|---|\n",
           runs);
    for (int s = 0; s < nshapes; s++) {
        problem p;
        problem_make(&p, shapes[s]);
        attn_output outs[2];
        for (int w = 0; w < 2; w++)
            problem_outputs_make(&outs[w], &p, 1);
        double rate[NCONF][MAXREP], busy[NCONF][MAXREP], unused;
        for (int c = 0; c < NCONF; c++) { /* warm-up: workspaces, pages */
            openblas_set_num_threads(conf[c][1]);
            server_pool_stream(pools[conf[c][0] - 1], &p.in, outs, 2, SPLIT_AS_SERVER, &unused);
        }
        for (int run = 0; run < runs; run++)
            for (int c = 0; c < NCONF; c++) {
                openblas_set_num_threads(conf[c][1]);
                rate[c][run] = server_pool_stream(pools[conf[c][0] - 1], &p.in, outs, requests[s],
                                                  SPLIT_AS_SERVER, &busy[c][run]);
            }
        openblas_set_num_threads(1);
        for (int c = 0; c < NCONF; c++) {
            double lo = rate[c][0], hi = rate[c][0];
            for (int run = 1; run < runs; run++)
                lo = rate[c][run] < lo ? rate[c][run] : lo,
                hi = rate[c][run] > hi ? rate[c][run] : hi;
            printf("| %s | %d | %d × %d%s | %.1f | %.1f – %.1f |", shapes[s].name, requests[s],
                   conf[c][0], conf[c][1], c == 0 ? " (server)" : "", bench_median(rate[c], runs),
                   lo, hi);
            print_time(bench_median(busy[c], runs));
            printf(" |\n");
        }
        fflush(stdout);
        for (int w = 0; w < 2; w++)
            problem_outputs_free(&outs[w]);
        problem_free(&p);
    }
    printf("\n");
}

/* ---- memory of one computation ------------------------------------------------------- */

/* Resident set of this process now, in bytes (/proc/self/status), or 0. */
static size_t rss_now(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %zu kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb * 1024;
}

/* One computation on 1 worker (this thread, 1 OpenBLAS thread); prints
 * its memory accounting as key=value pairs for bench/rss.sh. */
static int rss_mode(size_t n, int patterns) {
    openblas_set_num_threads(1);
    size_t before = rss_now();
    problem p;
    problem_make(&p, (bench_shape){"GPT-2", n, 768, 12, 64, 1, 1, 0, 0, 0.0, 0});
    attn_output out;
    problem_outputs_make(&out, &p, patterns);
    attn_workspace *ws = attn_workspace_create();
    if (!ws) return 1;
    double t0 = bench_now();
    int rc = attn_compute(&out, ws, &p.in, NULL);
    double secs = bench_now() - t0;
    printf("rss n=%zu outputs=%s status=%d seconds=%.2f rss_before=%zu inputs_weights=%zu "
           "embeddings=%zu patterns=%zu workspace=%zu workspace_need=%zu\n",
           n, patterns ? "patterns" : "emb", rc, secs, before, problem_input_bytes(&p),
           p.s.n * p.s.dm * sizeof(float), patterns ? problem_patterns_bytes(&p) : 0,
           attn_workspace_bytes(ws), attn_workspace_need(n, 768, 12, 64));
    attn_workspace_destroy(ws);
    problem_outputs_free(&out);
    problem_free(&p);
    return rc ? 1 : 0;
}

/* ---- memory of grouped K/V --------------------------------------------------------- */

/* The workspace attn_compute carves for the Llama-3-8B layer at n = 4096 (embeddings
 * only, RoPE), with its 8 K/V heads and with 32 (no grouping): the K and V of g heads
 * take n × 2gd floats of it. */
static void gqa_memory(void) {
    const size_t n = 4096, dm = 4096, h = 32, dh = 128, gs[] = {8, 32};
    printf("## Grouped K/V: workspace of the Llama-3-8B layer at n = %zu\n\n"
           "| K/V heads g | attn_input_workspace_need | of it Q (n × hd) | of it K and V "
           "(n × 2gd) | the rest (Z, E's and ΔE's last row tile, RoPE's table, blocks) "
           "|\n|---|---|---|---|---|\n",
           n);
    for (int k = 0; k < 2; k++) {
        attn_weights w = {.d_model = dm,
                          .n_heads = h,
                          .d_head = dh,
                          .n_kv_heads = gs[k],
                          .w_o = (const float *)&w, /* only its presence is read */
                          .rope = {.dims = dh, .theta = 500000.0}};
        attn_input in = {.weights = &w, .n_tokens = n, .mask = {.kind = ATTN_MASK_CAUSAL}};
        size_t need = attn_input_workspace_need(&in);
        size_t q = n * h * dh * sizeof(float), kv = n * 2 * gs[k] * dh * sizeof(float);
        printf("| %zu | %zu B (%.1f MB) | %zu B | %zu B (%.1f MB) | %zu B |\n", gs[k], need,
               need * 1e-6, q, kv, kv * 1e-6, need - q - kv);
    }
    printf("\n");
}

/* ---- main -------------------------------------------------------------------------------- */

static int usage(const char *argv0) {
    fprintf(stderr, "usage: %s [--quick | --only NAME]\n       %s --rss N patterns|emb\n", argv0,
            argv0);
    return 2;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--rss")) {
        long n = strtol(argv[2], NULL, 10);
        int pat = !strcmp(argv[3], "patterns");
        if (n < 1 || (!pat && strcmp(argv[3], "emb"))) return usage(argv[0]);
        return rss_mode((size_t)n, pat);
    }
    int quick = argc == 2 && !strcmp(argv[1], "--quick");
    const char *only = argc == 3 && !strcmp(argv[1], "--only") ? argv[2] : NULL;
    if (argc > 1 && !quick && !only) return usage(argv[0]);

    /* The layers 4096 wide: 32 heads of 128, 8 K/V heads, RoPE (half style) on all 128
     * coordinates, θ 500000 for Llama 3, 10000 for Mistral, whose window is 1024 here.
     * Their samples take 0.5 – 5 s each: few of them. */
    /* patterns: 805 MB at GPT-2 n = 4096, 4 GB at Llama's; emb only there */
    // clang-format off
    lat_shape shapes[] = {
        {{"3×4×1", 3, 4, 1, 4, 0, 15, 0, 0, 0.0, 0}, 0, 0, 0, 0, H_ALL, G_NONE},
        {{"16×64×4", 16, 64, 4, 16, 1, 15, 0, 0, 0.0, 0}, 0, 0, 0, 0, H_ALL, G_NONE},
        {{"128×768×12 (GPT-2)", 128, 768, 12, 64, 1, 15, 0, 0, 0.0, 0}, 0, 1, 0, 0, H_ALL, G_NONE},
        {{"1024×768×12 (GPT-2)", 1024, 768, 12, 64, 1, 11, 0, 0, 0.0, 0}, 0, 1, 0, 0, H_ALL, G_NONE},
        {{"4096×768×12 (GPT-2)", 4096, 768, 12, 64, 1, 7, 0, 0, 0.0, 0}, 1, 1, 0, 0, H_ALL, G_NONE},
        {{"128×12288×96 (GPT-3 width)", 128, 12288, 96, 128, 1, 5, 0, 0, 0.0, 0}, 0, 0, 0, 0, H_ALL,
         G_NONE},
        {{"1024×4096×32/8 (Llama-3-8B)", 1024, 4096, 32, 128, 1, 7, 8, 128, 500000.0, 0}, 1, 0, 1, 0,
         H_ALL, G_LLAMA},
        {{"4096×4096×32/8 (Llama-3-8B)", 4096, 4096, 32, 128, 1, 3, 8, 128, 500000.0, 0}, 1, 0, 0, 0,
         H_TWO_THREADS, G_LLAMA},
        {{"8192×4096×32/8 w1024 (Mistral-7B)", 8192, 4096, 32, 128, 1, 5, 8, 128, 10000.0, 1024},
         1, 0, 0, 1, H_SERVER, G_MISTRAL},
    };
    // clang-format on
    enum { NSHAPES = sizeof shapes / sizeof shapes[0] };
    bench_shape tp[] = {shapes[2].s, shapes[3].s};
    int nshapes = 0;
    for (int s = 0; s < NSHAPES; s++) {
        /* quick: the GPT-3-width weights alone take ~10 s to fill and 2.4 GB, the layers
         * 4096 wide at n ≥ 4096 seconds a call; the Llama row at n = 1024 stays, once */
        if (quick && (s == 5 || (shapes[s].group != G_NONE && shapes[s].s.n > 1024))) continue;
        if (only && !strstr(shapes[s].s.name, only)) continue;
        shapes[nshapes] = shapes[s];
        if (quick) shapes[nshapes].s.reps = s < 3 ? 3 : 1;
        nshapes++;
    }

    printf("OpenBLAS: %s; core %s; %d procs; softmax exp: SLEEF %s.\n", openblas_get_config(),
           openblas_get_corename(), openblas_get_num_procs(), attn_vexp_path());
    printf("Every computation: causal mask, b_qkv and b_o, every head; w_o except 3×4×1 (d_head "
           "= d_model / heads). Outputs: \"default\" = patterns + embeddings, \"emb\" = "
           "embeddings only.\nConfigurations are interleaved sample by sample, so that load "
           "from other processes falls on all of them alike; medians are shown.\n\n");
    fflush(stdout);

    server_pool *pools[2] = {server_pool_create(1), server_pool_create(2)};
    peak_bufs pk;
    peak_make(&pk);
    double peak1[MAXREP], peak2[MAXREP];
    for (int k = 0; k < 5; k++) { /* the 1-thread figure, for scale */
        openblas_set_num_threads(1);
        peak1[k] = peak_gflops(&pk);
        openblas_set_num_threads(2);
        peak2[k] = peak_gflops(&pk);
    }
    openblas_set_num_threads(1);

    lat_row rows[3 * NSHAPES];
    double peaks[NSHAPES * MAXREP];
    int nrows = 0, npeaks = 0;
    for (int s = 0; s < nshapes; s++) {
        double t0 = bench_now();
        nrows += latency_shape(rows + nrows, &shapes[s], pools[1], &pk, peaks, &npeaks);
        fprintf(stderr, "bench_attention: %s measured in %.0f s\n", shapes[s].s.name,
                bench_now() - t0);
    }
    print_latency(rows, nrows, shapes, nshapes, peaks, npeaks, bench_median(peak1, 5),
                  bench_median(peak2, 5));
    fflush(stdout);

    gqa_memory();
    int requests[] = {quick ? 16 : 60, quick ? 4 : 10};
    if (!only) throughput(tp, requests, 2, quick ? 1 : 5, pools);

    int same = 1;
    for (int i = 0; i < nrows; i++)
        same = same && rows[i].same;
    server_pool_destroy(pools[0]);
    server_pool_destroy(pools[1]);
    free(pk.a), free(pk.b), free(pk.c);
    return same ? 0 : 1;
}
