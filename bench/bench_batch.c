/*
 * bench_batch.c — (g) a batch of short sequences through one weight set.
 *
 * GPT-2's shape (d_model 768, 12 heads of 64, w_o, biases), 64 causal
 * sequences of 16 tokens, the API's default outputs (patterns of every
 * head, embeddings), computed three ways:
 *
 *   batch     attn_compute_batch of the 64: W_qkv and W_o packed once per
 *             column tile for all 1024 rows
 *   separate  64 calls of attn_compute, one per sequence
 *   packed    one sequence of the 1024 tokens with a block-diagonal custom
 *             mask (64 causal blocks of 16): what a caller that packs them
 *             gets, the attention over 1024 keys per query included
 *
 * in two threadings: one thread and 1 BLAS thread (no runner), and the
 * server's pool of 2 workers (bench/server_pool.c) where the batch and the
 * packed sequence are one job split by the server's runner and the
 * separate sequences are 64 requests queued at once. Samples of the
 * configurations are interleaved; the table gives medians.
 *
 *   ./bench_batch [--reps N]
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "bench/problem.h"
#include "bench/server_pool.h"

enum { SEQS = 64, LEN = 16, N = SEQS * LEN };
enum { C_BATCH, C_SEPARATE, C_PACKED, C_COUNT };
static const char *const names[C_COUNT] = {"batch", "separate", "packed"};

static void check(int rc, const char *what, const attn_error *err) {
    if (rc) {
        fprintf(stderr, "bench_batch: %s failed (%s: %s)\n", what, err->code, err->message);
        exit(1);
    }
}

int main(int argc, char **argv) {
    int reps = 11;
    for (int a = 1; a < argc; a++)
        if (!strcmp(argv[a], "--reps") && a + 1 < argc) reps = atoi(argv[++a]);
    if (reps < 1 || reps > 1000) reps = 11;
    openblas_set_num_threads(1);

    bench_shape s = {.name = "gpt2", .n = N, .dm = 768, .h = 12, .dh = 64, .w_o = 1};
    problem p;
    problem_make(&p, s);
    const size_t dm = s.dm, h = s.h;

    /* the 64 sequences: 16 rows each of p's E, one after the other */
    attn_input ins[SEQS];
    attn_output outs[SEQS];
    for (size_t i = 0; i < SEQS; i++) {
        ins[i] = p.in;
        ins[i].embeddings = p.E + i * LEN * dm;
        ins[i].n_tokens = LEN;
        ins[i].mask = (attn_mask){ATTN_MASK_CAUSAL, NULL};
        outs[i] = (attn_output){.patterns = bench_floats(h * LEN * LEN),
                                .embeddings = bench_floats(LEN * dm)};
    }
    /* the packed sequence: 64 causal blocks of 16 on the diagonal */
    unsigned char *allowed = bench_alloc((size_t)N * N);
    for (size_t q = 0; q < N; q++)
        for (size_t k = 0; k < N; k++)
            allowed[q * N + k] = k / LEN == q / LEN && k <= q;
    attn_input packed = p.in;
    packed.mask = (attn_mask){ATTN_MASK_CUSTOM, allowed};
    attn_output pout = {.patterns = bench_floats(h * (size_t)N * N),
                        .embeddings = bench_floats((size_t)N * dm)};

    attn_workspace *ws = attn_workspace_create();
    attn_error err = {0};
    size_t failed;
    server_pool *sp = server_pool_create(2);
    attn_output *stream_outs = bench_alloc(2 * sizeof(attn_output));
    for (int w = 0; w < 2; w++)
        stream_outs[w] = (attn_output){.patterns = bench_floats(h * LEN * LEN),
                                       .embeddings = bench_floats(LEN * dm)};

    double *t[2][C_COUNT];
    for (int m = 0; m < 2; m++)
        for (int c = 0; c < C_COUNT; c++)
            t[m][c] = bench_alloc((size_t)reps * sizeof(double));
    double load0 = 0.0;
    FILE *la = fopen("/proc/loadavg", "r");
    if (la && fscanf(la, "%lf", &load0) != 1) load0 = -1.0;
    if (la) fclose(la);

    for (int k = -1; k < reps; k++) { /* k = -1: a warm-up, not kept */
        double t0, dt[2][C_COUNT];
        t0 = bench_now();
        check(attn_compute_batch(outs, ws, ins, SEQS, NULL, &err, &failed), "batch", &err);
        dt[0][C_BATCH] = bench_now() - t0;
        t0 = bench_now();
        for (size_t i = 0; i < SEQS; i++)
            check(attn_compute(&outs[i], ws, &ins[i], &err), "attn_compute", &err);
        dt[0][C_SEPARATE] = bench_now() - t0;
        t0 = bench_now();
        check(attn_compute(&pout, ws, &packed, &err), "packed", &err);
        dt[0][C_PACKED] = bench_now() - t0;

        dt[1][C_BATCH] = server_pool_time_batch(sp, ins, outs, SEQS, SPLIT_AS_SERVER, 1, NULL);
        double busy;
        dt[1][C_SEPARATE] =
            SEQS / server_pool_stream(sp, &ins[0], stream_outs, SEQS, SPLIT_AS_SERVER, &busy);
        dt[1][C_PACKED] = server_pool_time(sp, &packed, &pout, SPLIT_AS_SERVER, 1, NULL);
        if (k < 0) continue;
        for (int m = 0; m < 2; m++)
            for (int c = 0; c < C_COUNT; c++)
                t[m][c][k] = dt[m][c];
    }
    double load1 = 0.0;
    la = fopen("/proc/loadavg", "r");
    if (la && fscanf(la, "%lf", &load1) != 1) load1 = -1.0;
    if (la) fclose(la);

    printf("## (g) A batch of 64 sequences of 16 tokens, GPT-2's shape (median of %d)\n\n", reps);
    printf("Default outputs (patterns + embeddings); attn_batch_flops %.2f GFLOP, the packed "
           "sequence's attn_input_flops %.2f GFLOP. Load average %.2f before, %.2f after.\n\n",
           attn_batch_flops(ins, SEQS) / 1e9, attn_input_flops(&packed) / 1e9, load0, load1);
    printf("| threading | batch ms | 64 separate ms | packed 1024 ms | separate / batch | "
           "packed / batch |\n|---|---:|---:|---:|---:|---:|\n");
    static const char *const modes[2] = {"1 thread, 1 BLAS thread",
                                         "2 workers (server pool, split)"};
    for (int m = 0; m < 2; m++) {
        double med[C_COUNT];
        for (int c = 0; c < C_COUNT; c++)
            med[c] = bench_median(t[m][c], reps);
        printf("| %s | %.1f | %.1f | %.1f | %.2f | %.2f |\n", modes[m], 1e3 * med[C_BATCH],
               1e3 * med[C_SEPARATE], 1e3 * med[C_PACKED], med[C_SEPARATE] / med[C_BATCH],
               med[C_PACKED] / med[C_BATCH]);
    }
    printf("\n(2 workers: %s and %s are one job each, split over the idle worker by the "
           "server's runner; %s is 64 requests queued at once, wall time to the last.)\n",
           names[C_BATCH], names[C_PACKED], names[C_SEPARATE]);

    server_pool_destroy(sp);
    attn_workspace_destroy(ws);
    for (size_t i = 0; i < SEQS; i++)
        free(outs[i].patterns), free(outs[i].embeddings);
    for (int w = 0; w < 2; w++)
        free(stream_outs[w].patterns), free(stream_outs[w].embeddings);
    free(stream_outs), free(pout.patterns), free(pout.embeddings), free(allowed);
    for (int m = 0; m < 2; m++)
        for (int c = 0; c < C_COUNT; c++)
            free(t[m][c]);
    problem_free(&p);
    return 0;
}
