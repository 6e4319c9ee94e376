/*
 * bench_stack.c — (k) a stack of L attention layers against L times one
 * layer, in time and in memory.
 *
 * The stack: GPT-2's shape (d_model 768, 12 heads of 64, causal, b_qkv, w_o,
 * b_o), 12 layers, each with weights of its own from a fixed seed (layer 0
 * is problem.c's), one sequence of n tokens; attn_compute_stack of the
 * first L layers.
 *
 * Time (the default run): n = 128 and 1024, L = 1, 2, 4, 12, two output
 * sets — emb, the final embeddings only, and pat, the patterns of every
 * layer with them — and two threadings: the server's (a pool of 2 workers
 * × 1 OpenBLAS thread, each stack call split by server/split.c's runner
 * when its attn_stack_flops reaches SRV_JOB_SPLIT_FLOPS, timed inside the
 * job as the server's compute_ms: server_pool.c) and one thread (no
 * runner). A sample computes layers 0 … 11 in order (twice at n = 128) in
 * calls of L layers: twelve one-layer calls, six of two, three of four, or
 * one stack of twelve. So every configuration does the same layers' work
 * on the same weights in the same order, with the same caches: 12 layers'
 * weights (113 MB) do not fit in the 32 MiB L3, so each layer reads its
 * weights from memory whatever L; and many calls in a row keep the pool's
 * workers awake, as a loaded server's are (bench/README.md, (a)). What
 * differs is only whether layer l + 1 is the next call or the next layer
 * of the same call. At n = 128 a fifth configuration computes layer 0
 * alone twelve times (its 9.4 MB cached): what the cache is worth. Rounds interleave
 * every configuration, their order rotated and the threadings' swapped
 * from round to round; medians. The figures: time(L) ÷ (L · time(1)) from
 * the medians per layer, the middle half of the rounds' own ratios, and
 * the overhead per layer (time(L) − L · time(1)) ÷ L.
 *
 * Checks, after the rounds: every split E_L bit for bit the one-thread
 * one, the one-layer stack bit for bit attn_compute_batch of layer 0, and
 * a hash of each E_L, to compare two builds by.
 *
 * Memory (--rss L): one stack of L layers at n tokens (default 4096),
 * final embeddings only, in the server's threading; all 12 layers are
 * allocated and filled whatever L, so that only the computation differs.
 * The peak is reset (/proc/self/clear_refs) once everything is allocated;
 * prints one line of key=value pairs (VmRSS before, VmHWM after, the
 * workspace needs) for bench/stack_rss.sh.
 *
 *   ./bench_stack [--reps R] [--n N] [--only emb|pat]
 *       R rounds at n = 1024 (default 7), 2R at n = 128; --n N: that
 *       size alone, R rounds
 *   ./bench_stack --rss L [--n N]
 */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention/attention.h"
#include "bench/problem.h"
#include "bench/server_pool.h"

enum { LAYERS = 12, NL = 4, DM = 768, H = 12, DH = 64 };
static const size_t Ls[NL] = {1, 2, 4, 12};
/* configurations of one output set and threading: L = 1, 2, 4, 12, and
 * L = 1 with its weights cached */
enum { C_WARM = NL, C_COUNT };
/* threadings run (T_RUNS), and the one thread's own CPU time, which
 * leaves out the time other work held its core */
enum { T_SERVER, T_ONE, T_RUNS, T_CPU = T_RUNS, T_COUNT };
static const char *const threadings[T_COUNT] = {"server (2 workers, split)", "1 thread",
                                                "1 thread, CPU time"};
enum { O_EMB, O_PAT, O_COUNT };
static const char *const outsets[O_COUNT] = {"emb", "pat"};

/* Written after the cached configuration, so that its layer 0 does not
 * favour the next sample: twice the 32 MiB L3 of the machine. */
#define FLUSH_BYTES ((size_t)64 << 20)

/* ---- the layers --------------------------------------------------------------- */

typedef struct layers {
    problem p; /* E, layer 0's weights, the input */
    attn_weights w[LAYERS];
    const attn_weights *ptr[LAYERS];
    float *own[LAYERS][4]; /* layers 1 … 11: w_qkv, b_qkv, w_o, b_o */
} layers;

static void fill(float *x, size_t count, float amp, uint64_t *st) {
    for (size_t i = 0; i < count; i++) {
        *st = *st * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = amp * ((float)(*st >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
    }
}

static void layers_make(layers *ls, size_t n) {
    problem_make(&ls->p,
                 (bench_shape){.name = "gpt2", .n = n, .dm = DM, .h = H, .dh = DH, .w_o = 1});
    const size_t hd = H * DH, ld = 3 * hd;
    memset(ls->own, 0, sizeof ls->own);
    for (size_t l = 0; l < LAYERS; l++) {
        ls->w[l] = ls->p.w;
        if (l > 0) { /* the scales of problem.c, a seed per layer */
            uint64_t st = 1000 + l;
            float **o = ls->own[l];
            o[0] = bench_alloc(DM * ld * sizeof(float));
            o[1] = bench_alloc(ld * sizeof(float));
            o[2] = bench_alloc(hd * DM * sizeof(float));
            o[3] = bench_alloc(DM * sizeof(float));
            fill(o[0], DM * ld, 1.0f / sqrtf((float)DM), &st);
            fill(o[1], ld, 0.1f, &st);
            fill(o[2], hd * DM, 1.0f / sqrtf((float)hd), &st);
            fill(o[3], DM, 0.1f, &st);
            ls->w[l].w_qkv = o[0], ls->w[l].b_qkv = o[1];
            ls->w[l].w_o = o[2], ls->w[l].b_o = o[3];
        }
        ls->ptr[l] = &ls->w[l];
    }
}

static void layers_free(layers *ls) {
    for (size_t l = 1; l < LAYERS; l++)
        for (int k = 0; k < 4; k++)
            free(ls->own[l][k]);
    problem_free(&ls->p);
}

/* The first L layers as a stack. */
static attn_stack stack_of(const layers *ls, size_t L) {
    return (attn_stack){.layers = ls->ptr, .n_layers = L};
}

static uint64_t hash_floats(const float *x, size_t count) {
    const unsigned char *b = (const unsigned char *)x;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < count * sizeof(float); i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static void flush_caches(unsigned char *buf) {
    for (size_t i = 0; i < FLUSH_BYTES; i += 64)
        buf[i]++;
}

static double load_average(void) {
    double v = -1.0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f && fscanf(f, "%lf", &v) != 1) v = -1.0;
    if (f) fclose(f);
    return v;
}

/* ---- time ------------------------------------------------------------------------ */

/* One sample: `count` stack calls one after the other, together the layers
 * 0 … 11 in order `passes` times, in calls of L layers (L = 1: twelve
 * one-layer calls; L = 12: one call of the whole stack), or, for C_WARM,
 * layer 0 alone 12 × passes times. */
typedef struct sample {
    size_t count;
    attn_stack st[2 * LAYERS];
    server_stack calls[2 * LAYERS];
} sample;

/* The outputs of one output set and threading: the final embeddings of
 * every call, and for pat the patterns of every layer (layer l's in
 * patterns[l] whichever call computes it, shared by the threadings). */
typedef struct sample_outs {
    float *final;
    attn_stack_output fin;
    attn_output lo[LAYERS];
    const attn_output *lp[LAYERS];
} sample_outs;

static void sample_make(sample *sa, const layers *ls, const sample_outs *so, int pat, int c,
                        int passes) {
    const size_t L = c == C_WARM ? 1 : Ls[c];
    sa->count = 0;
    for (int p = 0; p < passes; p++)
        for (size_t first = 0; first < LAYERS; first += L) {
            const size_t at = c == C_WARM ? 0 : first, k = sa->count++;
            sa->st[k] = (attn_stack){.layers = ls->ptr + at, .n_layers = L};
            sa->calls[k] =
                (server_stack){pat ? so->lp + at : NULL, &so->fin, &ls->p.in, 1, &sa->st[k]};
        }
}

static double thread_cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds of the sample's calls in a row, in the threading t (T_SERVER or
 * T_ONE); for T_ONE the thread's CPU seconds in *cpu. */
static double sample_run(server_pool *sp, attn_workspace *ws, const sample *sa, int t,
                         size_t *helpers, double *cpu) {
    if (t == T_SERVER)
        return server_pool_time_stacks(sp, sa->calls, sa->count, SPLIT_AS_SERVER, helpers);
    attn_error err = {0};
    double c0 = thread_cpu(), t0 = bench_now();
    for (size_t k = 0; k < sa->count; k++) {
        const server_stack *c = &sa->calls[k];
        if (attn_compute_stack(c->layer_outs, c->outs, ws, c->ins, 1, c->stack, NULL, &err, NULL,
                               NULL)) {
            fprintf(stderr, "bench_stack: attn_compute_stack failed (%s: %s)\n", err.code,
                    err.message);
            exit(1);
        }
    }
    double dt = bench_now() - t0;
    *cpu = thread_cpu() - c0;
    return dt;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of v[0 … count), sorted in place (nearest rank). */
static double quantile(double *v, int count, double q) {
    qsort(v, (size_t)count, sizeof(double), cmp_double);
    int k = (int)(q * (count - 1) + 0.5);
    return v[k];
}

static void time_size(server_pool *sp, size_t n, int reps, int passes, int only,
                      unsigned char *flush) {
    layers ls;
    layers_make(&ls, n);
    const size_t rows = n * DM, pat = (size_t)H * n * n;
    sample_outs so[O_COUNT][T_RUNS]; /* [output set][threading] */
    float *patterns[LAYERS];
    for (size_t l = 0; l < LAYERS; l++) {
        patterns[l] = only == O_EMB ? NULL : bench_floats(pat);
        if (patterns[l]) memset(patterns[l], 0, pat * sizeof(float)); /* fault the pages in */
    }
    static sample sa[O_COUNT][T_RUNS][C_COUNT];
    for (int o = 0; o < O_COUNT; o++)
        for (int t = 0; t < T_RUNS; t++) {
            sample_outs *s = &so[o][t];
            s->final = bench_floats(rows);
            memset(s->final, 0, rows * sizeof(float));
            s->fin = (attn_stack_output){NULL, s->final};
            for (size_t l = 0; l < LAYERS; l++) {
                s->lo[l] = (attn_output){.patterns = patterns[l]};
                s->lp[l] = &s->lo[l];
            }
            for (int c = 0; c < C_COUNT; c++)
                sample_make(&sa[o][t][c], &ls, s, o == O_PAT, c, passes);
        }
    attn_workspace *ws = attn_workspace_create();
    double *tm[O_COUNT][T_COUNT][C_COUNT];
    size_t helpers[O_COUNT][C_COUNT] = {{0}};
    for (int o = 0; o < O_COUNT; o++)
        for (int t = 0; t < T_COUNT; t++)
            for (int c = 0; c < C_COUNT; c++)
                tm[o][t][c] = bench_alloc((size_t)reps * sizeof(double));
    /* the cached configuration at the small size only: at n = 1024 a
     * layer's work dwarfs its weights' 9.4 MB, and the run is long enough */
    const int configs = passes > 1 ? C_COUNT : NL;
    const double load0 = load_average(), t_start = bench_now();

    for (int k = -1; k < reps; k++) { /* k = -1: a warm-up, not kept */
        for (int o = 0; o < O_COUNT; o++) {
            if (only >= 0 && o != only) continue;
            for (int j = 0; j < configs; j++) {
                const int c = (j + (k < 0 ? 0 : k)) % configs; /* rotated by round */
                for (int u = 0; u < T_RUNS; u++) {
                    const int t = (u + (k < 0 ? 0 : k)) % T_RUNS;
                    size_t hp = 0;
                    double cpu = 0.0, dt = sample_run(sp, ws, &sa[o][t][c], t, &hp, &cpu);
                    /* layer 0 cached by C_WARM would favour the next sample */
                    if (c == C_WARM) flush_caches(flush);
                    if (k < 0) continue;
                    tm[o][t][c][k] = dt;
                    if (t == T_ONE) tm[o][T_CPU][c][k] = cpu;
                    if (t == T_SERVER) helpers[o][c] += hp;
                }
            }
        }
    }
    const double seconds = bench_now() - t_start, load1 = load_average();
    const double layers_per = (double)(LAYERS * passes);

    printf("### n = %zu: %d rounds, %.0f s, load average %.2f before, %.2f after\n\n", n, reps,
           seconds, load0, load1);
    printf("A sample: layers 0 … 11 in order, %d × over, in calls of L layers; time per layer "
           "(sample ÷ %.0f). attn_stack_flops: ",
           passes, layers_per);
    for (int c = 0; c < NL; c++) {
        attn_stack st = stack_of(&ls, Ls[c]);
        printf("%sL = %zu %.3f GFLOP", c ? ", " : "", Ls[c],
               attn_stack_flops(&ls.p.in, 1, &st) / 1e9);
    }
    printf(" (split when ≥ %.0e, as the server).\n\n", 1e8);
    printf("| outputs | threading | L = 1 | L = 2 | L = 4 | L = 12 | layer 0 × 12 (cached) |\n"
           "|---|---|---:|---:|---:|---:|---:|\n");
    double med[O_COUNT][T_COUNT][C_COUNT] = {{{0}}};
    for (int o = 0; o < O_COUNT; o++) {
        if (only >= 0 && o != only) continue;
        for (int t = 0; t < T_COUNT; t++) {
            double tmp[reps];
            for (int c = 0; c < configs; c++) {
                memcpy(tmp, tm[o][t][c], sizeof tmp);
                med[o][t][c] = bench_median(tmp, reps) / layers_per;
            }
            char warm[32] = "—";
            if (configs > C_WARM) snprintf(warm, sizeof warm, "%.3f ms", 1e3 * med[o][t][C_WARM]);
            printf("| %s | %s | %.3f ms | %.3f ms | %.3f ms | %.3f ms | %s |\n", outsets[o],
                   threadings[t], 1e3 * med[o][t][0], 1e3 * med[o][t][1], 1e3 * med[o][t][2],
                   1e3 * med[o][t][3], warm);
        }
    }
    printf("\n| outputs | threading | L | **time(L) ÷ (L · time(1))** | rounds' ratios: median "
           "(middle half) | overhead per layer | helpers per call |\n"
           "|---|---|---|---:|---|---:|---:|\n");
    static const char *const lname[C_COUNT] = {"1", "2", "4", "12", "layer 0 × 12 (cached)"};
    for (int o = 0; o < O_COUNT; o++) {
        if (only >= 0 && o != only) continue;
        for (int t = 0; t < T_COUNT; t++)
            for (int c = 1; c < configs; c++) {
                double r[reps];
                for (int k = 0; k < reps; k++)
                    r[k] = tm[o][t][c][k] / tm[o][t][0][k];
                const double lo = quantile(r, reps, 0.25), hi = quantile(r, reps, 0.75),
                             mid = bench_median(r, reps);
                const double ratio = med[o][t][c] / med[o][t][0];
                const double over = med[o][t][c] - med[o][t][0];
                char hbuf[32] = "—";
                if (t == T_SERVER)
                    snprintf(hbuf, sizeof hbuf, "%.2f",
                             (double)helpers[o][c] /
                                 ((double)reps * (double)sa[o][T_SERVER][c].count));
                printf("| %s | %s | %s | **%.3f** | %.3f (%.3f – %.3f) | %+.0f µs | %s |\n",
                       outsets[o], threadings[t], lname[c], ratio, mid, lo, hi, 1e6 * over, hbuf);
            }
    }

    /* checks: the split against one thread, a one-layer stack against a batch */
    attn_error err = {0};
    int same_split = 1;
    printf("\nE_L of layers 0 … L − 1, FNV-1a of its bytes:");
    for (int c = 0; c < NL; c++) {
        sample one[T_RUNS];
        for (int t = 0; t < T_RUNS; t++) {
            sample_make(&one[t], &ls, &so[O_EMB][t], 0, NL - 1, 1);
            one[t].count = 1, one[t].st[0].n_layers = Ls[c];
            sample_run(sp, ws, &one[t], t, &(size_t){0}, &(double){0});
        }
        same_split &=
            !memcmp(so[O_EMB][T_ONE].final, so[O_EMB][T_SERVER].final, rows * sizeof(float));
        printf(" L = %zu %016llx;", Ls[c],
               (unsigned long long)hash_floats(so[O_EMB][T_ONE].final, rows));
    }
    sample one;
    sample_make(&one, &ls, &so[O_EMB][T_ONE], 0, 0, 1);
    one.count = 1;
    sample_run(sp, ws, &one, T_ONE, &(size_t){0}, &(double){0});
    attn_output bo = {.embeddings = so[O_PAT][T_ONE].final};
    size_t failed;
    if (attn_compute_batch(&bo, ws, &ls.p.in, 1, NULL, &err, &failed)) exit(1);
    const int same_batch = !memcmp(bo.embeddings, so[O_EMB][T_ONE].final, rows * sizeof(float));
    printf("\nsplit = one thread, bit for bit, every L: %s; one-layer stack = attn_compute_batch: "
           "%s\n\n",
           same_split ? "yes" : "**no**", same_batch ? "yes" : "**no**");

    for (int o = 0; o < O_COUNT; o++) {
        for (int t = 0; t < T_RUNS; t++)
            free(so[o][t].final);
        for (int t = 0; t < T_COUNT; t++)
            for (int c = 0; c < C_COUNT; c++)
                free(tm[o][t][c]);
    }
    for (size_t l = 0; l < LAYERS; l++)
        free(patterns[l]);
    attn_workspace_destroy(ws);
    layers_free(&ls);
}

/* ---- memory ---------------------------------------------------------------------- */

/* A field of /proc/self/status in bytes ("VmRSS", "VmHWM"), or 0. */
static size_t status_bytes(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t kb = 0, len = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, len) && line[len] == ':') {
            sscanf(line + len + 1, "%zu", &kb);
            break;
        }
    if (f) fclose(f);
    return kb * 1024;
}

static int rss_mode(size_t L, size_t n) {
    const size_t at_start = status_bytes("VmRSS");
    layers ls;
    layers_make(&ls, n);
    float *final = bench_floats(n * DM);
    memset(final, 0, n * DM * sizeof(float));
    server_pool *sp = server_pool_create(2);
    attn_stack st = stack_of(&ls, L), one = stack_of(&ls, 1);
    attn_stack_output fin = {NULL, final};
    server_stack sk = {NULL, &fin, &ls.p.in, 1, &st};

    /* every layer's weights resident, whatever L */
    size_t weights = 0;
    for (size_t l = 0; l < LAYERS; l++)
        weights += (DM * 3 * H * DH + 3 * H * DH + H * DH * DM + DM) * sizeof(float);
    FILE *f = fopen("/proc/self/clear_refs", "w");
    int reset = f && fputs("5", f) >= 0;
    if (f) reset &= fclose(f) == 0;
    const size_t before = status_bytes("VmRSS");
    size_t helpers = 0;
    double secs = server_pool_time_stacks(sp, &sk, 1, SPLIT_AS_SERVER, &helpers);
    const size_t peak = status_bytes("VmHWM");
    printf("stack_rss L=%zu n=%zu reset=%d seconds=%.2f rss_start=%zu rss_before=%zu peak=%zu "
           "weights=%zu embeddings=%zu need=%zu need_one=%zu batch_need=%zu helpers=%zu "
           "hash=%016llx\n",
           L, n, reset, secs, at_start, before, peak, weights, n * DM * sizeof(float),
           attn_stack_workspace_need(&ls.p.in, 1, &st),
           attn_stack_workspace_need(&ls.p.in, 1, &one), attn_batch_workspace_need(&ls.p.in, 1),
           helpers, (unsigned long long)hash_floats(final, n * DM));
    server_pool_destroy(sp);
    free(final);
    layers_free(&ls);
    return 0;
}

int main(int argc, char **argv) {
    int reps = 7, only = -1;
    size_t n_only = 0, rss_L = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--reps") && a + 1 < argc)
            reps = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--n") && a + 1 < argc)
            n_only = (size_t)atol(argv[++a]);
        else if (!strcmp(argv[a], "--rss") && a + 1 < argc)
            rss_L = (size_t)atol(argv[++a]);
        else if (!strcmp(argv[a], "--only") && a + 1 < argc) {
            a++;
            only = !strcmp(argv[a], "emb") ? O_EMB : !strcmp(argv[a], "pat") ? O_PAT : -2;
        } else
            only = -2;
        if (only == -2 || reps < 1 || reps > 1000 || (n_only && n_only > 65536) || rss_L > LAYERS) {
            fprintf(stderr,
                    "usage: %s [--reps R] [--n N] [--only emb|pat]\n       %s --rss L [--n N]\n",
                    argv[0], argv[0]);
            return 2;
        }
    }
    openblas_set_num_threads(1);
    if (rss_L) return rss_mode(rss_L, n_only ? n_only : 4096);

    printf("## (k) A stack of L layers against L × one layer, GPT-2's shape\n\n"
           "Medians of interleaved rounds. pat = the patterns of every layer and the final "
           "embeddings; emb = the final embeddings only.\n\n");
    unsigned char *flush = bench_alloc(FLUSH_BYTES);
    memset(flush, 0, FLUSH_BYTES);
    server_pool *sp = server_pool_create(2);
    if (n_only) {
        time_size(sp, n_only, reps, n_only < 512 ? 2 : 1, only, flush);
    } else {
        time_size(sp, 128, 2 * reps, 2, only, flush);
        time_size(sp, 1024, reps, 1, only, flush);
    }
    server_pool_destroy(sp);
    free(flush);
    return 0;
}
