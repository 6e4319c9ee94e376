/*
 * bench_cost.c — does attn_input_flops follow time? The server limits and
 * schedules a computation by that count (--max-flops, the split), so a
 * shape that takes far longer per counted flop than GPT-2's would hold a
 * worker far longer than its count admits. Each row is one computation on
 * one thread with no runner, timed by the thread's CPU time (median of
 * `reps`); its "cost" is seconds × the machine's sgemm rate measured in
 * the same run (a square sgemm of side 512, one thread), i.e. the flops
 * the same time would have bought in a GEMM; "cost / count" is that over
 * attn_input_flops. GPT-2's shape is the yardstick; the rows after it are
 * made so that the per-(query, key) and per-row work dominates (heads one
 * wide, few model dimensions) with each score rule, where the GEMMs are
 * nothing and the exp, tanh and ALiBi terms are everything.
 *
 * Also prints the per-pair and per-row costs in flop units that the rows
 * imply (attention/compute.c charges them): pair_cost = (cost − GEMMs of
 * the projections) / pairs − 4 · dh, for the dh = 1 rows.
 *
 * The second table measures the rules charged per coordinate (norm.c's
 * COST_NORM_COORD, COST_TEMPERATURE_COORD) by difference: one problem
 * computed with and without the rule, in interleaved rounds (each sample
 * enough calls in a row for ~20 ms), so that the rule's time is the median
 * of the rounds' differences; its cost in flop units per coordinate is that
 * × the sgemm rate ÷ the coordinates the rule touches, beside the units the
 * count charges for it. The shapes are made so that the rule is a large
 * share of the work: a wide E and one narrow head for the norms of E's and
 * ΔE's rows; many heads over few tokens and few model dimensions for
 * qk_norm and the temperature.
 *
 * Usage: bench_cost [--reps R] [--n N]   (defaults 5, 1024; the second table
 *        takes 4 × R rounds and its own sizes)
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention/attention.h"
#include "bench/problem.h"

enum { MAXREP = 101 };

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The flops one CPU second buys in a square sgemm on this thread. */
static double sgemm_rate(int reps) {
    const size_t m = 512;
    float *a = bench_floats(m * m), *b = bench_floats(m * m), *c = bench_floats(m * m);
    for (size_t i = 0; i < m * m; i++)
        a[i] = (float)(i % 7) * 0.1f, b[i] = (float)(i % 5) * 0.1f;
    double t[MAXREP];
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)m, (int)m, 1.0f, a,
                    (int)m, b, (int)m, 0.0f, c, (int)m);
        t[r] = cpu_now() - t0;
    }
    free(a), free(b), free(c);
    return 2.0 * (double)m * m * m / bench_median(t, reps);
}

typedef struct variant {
    const char *name;
    size_t n, dm, h, dh;
    int w_o;
    int causal;    /* else no mask */
    float softcap; /* or 0 */
    int alibi;     /* slopes */
    size_t window; /* or 0 */
    size_t rope;   /* dims, or 0 */
    int patterns;  /* patterns asked, besides the embeddings */
    int custom;    /* a custom mask allowing every other key (causal ignored) */
} variant;

/* A shape of the second table: the rules charged per coordinate, each
 * with and without. */
typedef struct per_coord {
    variant v;     /* causal or not, w_o, RoPE; no score rule */
    size_t g;      /* K/V heads, or 0: h */
    int norm;      /* RMS norm of E's rows, with a weight */
    int post_norm; /* RMS norm of ΔE's rows, with a weight */
    int qk_norm;   /* RMS norm of Q's and K's heads, with weights */
    int temp;      /* Llama 4's temperature (F 8192, a 0.1) */
} per_coord;

/* The (query, key) pairs a row's mask and window allow, per head. */
static double allowed_pairs(const variant *v) {
    double pairs = 0.0;
    for (size_t q = 0; q < v->n; q++) {
        size_t lo = 0, hi = v->causal ? q + 1 : v->n;
        if (v->window) {
            lo = q + 1 > v->window ? q + 1 - v->window : 0;
            if (!v->causal && q + v->window < hi) hi = q + v->window;
        }
        pairs += (double)(hi - lo);
    }
    return v->custom ? pairs / 2 : pairs;
}

typedef struct row {
    double seconds, count, pairs;
} row;

/* Weights of 0.5 … 1.5 for the norms of pc, set in w; the caller frees
 * what is returned. */
static float *norm_weights(const per_coord *pc, attn_weights *w) {
    const size_t dm = pc->v.dm, dh = pc->v.dh, count = 2 * dm + 2 * dh;
    float *x = bench_floats(count);
    for (size_t i = 0; i < count; i++)
        x[i] = 0.5f + (float)((i * 2654435761u) % 1000) / 1000.0f;
    if (pc->norm) w->norm = (attn_norm){.type = ATTN_NORM_RMS, .weight = x, .eps = 1e-6};
    if (pc->post_norm)
        w->post_norm = (attn_norm){.type = ATTN_NORM_RMS, .weight = x + dm, .eps = 1e-6};
    if (pc->qk_norm) {
        w->qk_norm.q = (attn_norm){.type = ATTN_NORM_RMS, .weight = x + 2 * dm, .eps = 1e-6};
        w->qk_norm.k = (attn_norm){.type = ATTN_NORM_RMS, .weight = x + 2 * dm + dh, .eps = 1e-6};
    }
    if (pc->temp) w->temperature = (attn_temperature){.floor_scale = 8192.0, .attn_scale = 0.1};
    return x;
}

static bench_shape shape_of(const variant *v, size_t g, int reps) {
    return (bench_shape){.name = v->name,
                         .n = v->n,
                         .dm = v->dm,
                         .h = v->h,
                         .dh = v->dh,
                         .g = g,
                         .w_o = v->w_o,
                         .reps = reps,
                         .rope = v->rope,
                         .theta = 10000.0,
                         .window = v->window};
}

static row run(const variant *v, int reps) {
    problem p;
    problem_make(&p, shape_of(v, 0, reps));
    float *slopes = NULL;
    if (v->alibi) {
        slopes = bench_alloc(v->h * sizeof(float));
        attn_alibi_slopes(slopes, v->h);
        p.w.alibi = slopes;
    }
    p.w.softcap = v->softcap;
    if (!v->causal) p.in.mask.kind = ATTN_MASK_NONE;
    unsigned char *allowed = NULL;
    if (v->custom) {
        allowed = bench_alloc(v->n * v->n);
        for (size_t i = 0; i < v->n * v->n; i++)
            allowed[i] = (unsigned char)(i % 2 == 0);
        p.in.mask = (attn_mask){.kind = ATTN_MASK_CUSTOM, .allowed = allowed};
    }
    attn_output out;
    problem_outputs_make(&out, &p, v->patterns);
    attn_workspace *ws = attn_workspace_create();
    attn_error err;
    double t[MAXREP];
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_now();
        if (attn_compute(&out, ws, &p.in, &err) < 0) {
            fprintf(stderr, "bench_cost: %s: %s\n", v->name, err.message);
            exit(1);
        }
        t[r] = cpu_now() - t0;
    }
    row res = {.seconds = bench_median(t, reps), .count = attn_input_flops(&p.in)};
    res.pairs = (double)v->h * (double)allowed_pairs(v);
    attn_workspace_destroy(ws);
    problem_outputs_free(&out);
    free(slopes);
    free(allowed);
    problem_free(&p);
    return res;
}

/* The coordinates pc's per-coordinate rules touch: the norms' rows of dm,
 * qk_norm's Q and K rows of h and g heads, the temperature's Q. */
static double rule_coords(const per_coord *pc) {
    const variant *v = &pc->v;
    const double n = (double)v->n, dm = (double)v->dm, dh = (double)v->dh;
    const double h = (double)v->h, g = (double)(pc->g ? pc->g : v->h);
    double c = 0.0;
    if (pc->norm) c += n * dm;
    if (pc->post_norm) c += n * dm;
    if (pc->qk_norm) c += n * (h + g) * dh;
    if (pc->temp) c += n * h * dh;
    return c;
}

typedef struct marginal {
    double base, with, coords, count_base, count_with;
} marginal;

/* pc computed without and with its per-coordinate rules, rounds interleaved
 * (the order alternating), each sample `inner` calls in a row: the median
 * seconds of one call of each, and of the rounds' differences in .with −
 * .base order. */
static marginal run_marginal(const per_coord *pc, int rounds, double *diff) {
    const variant *v = &pc->v;
    problem p;
    problem_make(&p, shape_of(v, pc->g, rounds));
    if (!v->causal) p.in.mask.kind = ATTN_MASK_NONE;
    attn_weights wr = p.w;
    float *nw = norm_weights(pc, &wr);
    attn_input in[2] = {p.in, p.in};
    in[1].weights = &wr;
    attn_output out;
    problem_outputs_make(&out, &p, 0);
    attn_workspace *ws = attn_workspace_create();
    attn_error err;
    double t1 = 0.0;
    for (int c = 0; c < 2; c++) { /* warm, and one call's time */
        double t0 = cpu_now();
        if (attn_compute(&out, ws, &in[c], &err) < 0) {
            fprintf(stderr, "bench_cost: %s: %s\n", v->name, err.message);
            exit(1);
        }
        t1 = cpu_now() - t0;
    }
    const int inner = t1 > 0.02 ? 1 : (int)(0.02 / (t1 > 1e-6 ? t1 : 1e-6)) + 1;
    double t[2][MAXREP];
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < 2; k++) {
            const int c = (r + k) % 2;
            double t0 = cpu_now();
            for (int i = 0; i < inner; i++)
                if (attn_compute(&out, ws, &in[c], &err) < 0) exit(1);
            t[c][r] = (cpu_now() - t0) / inner;
        }
        diff[r] = t[1][r] - t[0][r];
    }
    marginal m = {.coords = rule_coords(pc),
                  .count_base = attn_input_flops(&in[0]),
                  .count_with = attn_input_flops(&in[1])};
    m.base = bench_median(t[0], rounds), m.with = bench_median(t[1], rounds);
    attn_workspace_destroy(ws);
    problem_outputs_free(&out);
    free(nw);
    problem_free(&p);
    return m;
}

int main(int argc, char **argv) {
    int reps = 5;
    size_t n = 1024;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--n"))
            n = (size_t)atol(argv[i + 1]);
    }
    if (reps < 1 || reps > MAXREP || n < 16) {
        fprintf(stderr, "usage: bench_cost [--reps 1..%d] [--n N ≥ 16]\n", MAXREP);
        return 2;
    }
    openblas_set_num_threads(1);
    const double rate = sgemm_rate(reps * 4);
    const variant vs[] = {
        {"gpt2 (768, 12 × 64, causal, w_o)", n, 768, 12, 64, 1, 1, 0, 0, 0, 0, 0, 0},
        {"gpt2 + patterns", n, 768, 12, 64, 1, 1, 0, 0, 0, 0, 1, 0},
        {"64 × 1, no mask", n, 64, 64, 1, 0, 0, 0, 0, 0, 0, 0, 0},
        {"64 × 1, causal", n, 64, 64, 1, 0, 1, 0, 0, 0, 0, 0, 0},
        {"64 × 1, no mask, patterns", n, 64, 64, 1, 0, 0, 0, 0, 0, 0, 1, 0},
        {"64 × 1, no mask, softcap", n, 64, 64, 1, 0, 0, 30.0f, 0, 0, 0, 0, 0},
        {"64 × 1, no mask, alibi", n, 64, 64, 1, 0, 0, 0, 1, 0, 0, 0, 0},
        {"64 × 1, no mask, softcap + alibi", n, 64, 64, 1, 0, 0, 30.0f, 1, 0, 0, 0, 0},
        {"64 × 1, custom mask", n, 64, 64, 1, 0, 0, 0, 0, 0, 0, 0, 1},
        {"64 × 1, window 16", n, 64, 64, 1, 0, 0, 0, 0, 16, 0, 0, 0},
        {"64 × 1, window n/2", n, 64, 64, 1, 0, 0, 0, 0, n / 2, 0, 0, 0},
        {"64 × 1, softcap + alibi + window", n, 64, 64, 1, 0, 0, 30.0f, 1, n / 2, 0, 0, 0},
        {"64 × 8, no mask, softcap + alibi", n, 512, 64, 8, 0, 0, 30.0f, 1, 0, 0, 0, 0},
        {"64 × 2, rope, no mask", n, 128, 64, 2, 0, 0, 0, 0, 0, 2, 0, 0},
    };
    printf("## Cost per counted flop (n = %zu, one thread, CPU time, median of %d)\n\n", n, reps);
    printf("sgemm 512³ on one thread: %.2f GFLOP/s\n\n", rate / 1e9);
    printf("| computation | pairs | ns / pair | count (GFLOP) | seconds | cost / count |\n");
    printf("|---|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
        row r = run(&vs[i], reps);
        printf("| %s | %.3g | %.2f | %.3f | %.4f | %.2f |\n", vs[i].name, r.pairs,
               1e9 * r.seconds / r.pairs, r.count / 1e9, r.seconds, r.seconds * rate / r.count);
        fflush(stdout);
    }

    /* n, dm, h, dh, w_o, causal, softcap, alibi, window, rope, patterns, custom */
    const per_coord ms[] = {
        {.v = {"norm, 1024 × 4096, 1 head of 8", 1024, 4096, 1, 8, 1, 1, 0, 0, 0, 0, 0, 0},
         .g = 1,
         .norm = 1},
        {.v = {"post_norm, 1024 × 4096, 1 head of 8", 1024, 4096, 1, 8, 1, 1, 0, 0, 0, 0, 0, 0},
         .g = 1,
         .post_norm = 1},
        {.v = {"qk_norm, 128 × 32, 32 heads of 128", 128, 32, 32, 128, 1, 1, 0, 0, 0, 0, 0, 0},
         .g = 32,
         .qk_norm = 1},
        {.v = {"qk_norm, 128 × 32, 32/8 heads of 128, rope", 128, 32, 32, 128, 1, 1, 0, 0, 0, 128,
               0, 0},
         .g = 8,
         .qk_norm = 1},
        {.v = {"temperature, 32 × 16, 64 heads of 64, 1 K/V", 32, 16, 64, 64, 1, 1, 0, 0, 0, 0, 0,
               0},
         .g = 1,
         .temp = 1},
    };
    const int rounds = 4 * reps > MAXREP ? MAXREP : 4 * reps;
    printf("\n## Per-coordinate rules by difference (one thread, CPU time, median of %d rounds)"
           "\n\n",
           rounds);
    printf("| rule, shape | coordinates | without (ms) | with (ms) | rule: ns / coordinate "
           "(rounds' middle half) | flop units / coordinate | charged | cost / count with "
           "|\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
        double diff[MAXREP];
        marginal m = run_marginal(&ms[i], rounds, diff);
        const double med = bench_median(diff, rounds); /* sorts diff */
        const double lo = diff[rounds / 4], hi = diff[(3 * rounds) / 4];
        printf("| %s | %.3g | %.3f | %.3f | %.2f (%.2f – %.2f) | %.0f | %.0f | %.2f |\n",
               ms[i].v.name, m.coords, 1e3 * m.base, 1e3 * m.with, 1e9 * med / m.coords,
               1e9 * lo / m.coords, 1e9 * hi / m.coords, med * rate / m.coords,
               (m.count_with - m.count_base) / m.coords, m.with * rate / m.count_with);
        fflush(stdout);
    }
    return 0;
}
