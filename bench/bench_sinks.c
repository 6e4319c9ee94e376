/*
 * bench_sinks.c — (l) the layers of GPT-OSS and Llama 4 are linear in n past
 * their window or chunk (bench/README.md, (l)).
 *
 * Two layers, each at n = 4096 and 8192 tokens, causal, the final
 * embeddings only (the online path: no n × n output exists):
 *
 *   gpt-oss   d_model 2880, 64 heads of 64, 8 K/V heads, RoPE (dims 64, θ
 *             150000, plain: no YaRN here), sinks, a window of 128, w_o
 *   chunked   d_model 2048, 16 heads of 128, 4 K/V heads, RoPE (dims 128,
 *             θ 500000), chunks of 1024 tokens, w_o
 *
 * One thread (OpenBLAS's thread count as the build has it; set
 * OPENBLAS_NUM_THREADS=1 for the README's rows), attn_compute alone. A
 * sample is one call's wall clock; each row is the median of --reps
 * samples (default 5), the sizes interleaved sample by sample so that the
 * machine's drift falls on both. The goal: time(8192) ÷ time(4096) ≤ 2.2,
 * the work doubling with n and not growing as n², and attn_input_flops
 * doubling with it (its ratio printed beside).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/problem.h"

enum { N_SIZES = 2, MAX_REPS = 64 };

typedef struct layer {
    const char *name;
    bench_shape shape;
    int sinks;
    size_t chunk;
} layer;

/* Wall-clock seconds of one call on p. */
static double sample(problem *p, attn_output *out, attn_workspace *ws) {
    attn_error err;
    double t0 = bench_now();
    if (attn_compute(out, ws, &p->in, &err) != 0) {
        fprintf(stderr, "bench_sinks: %s\n", err.message);
        exit(1);
    }
    return bench_now() - t0;
}

int main(int argc, char **argv) {
    int reps = 5;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    if (reps < 1 || reps > MAX_REPS) reps = 5;
    static const size_t sizes[N_SIZES] = {4096, 8192};
    const layer layers[] = {
        {"gpt-oss (sinks, window 128, YaRN)",
         {.dm = 2880,
          .h = 64,
          .dh = 64,
          .g = 8,
          .w_o = 1,
          .rope = 64,
          .theta = 150000.0,
          .window = 128},
         1,
         0},
        {"chunked (chunk 1024)",
         {.dm = 2048, .h = 16, .dh = 128, .g = 4, .w_o = 1, .rope = 128, .theta = 500000.0},
         0,
         1024},
    };
    printf("| layer | n | median ms | time ratio 8192 ÷ 4096 | flops ratio |\n");
    printf("|---|---|---|---|---|\n");
    for (size_t l = 0; l < sizeof layers / sizeof layers[0]; l++) {
        problem p[N_SIZES];
        attn_output out[N_SIZES];
        float *sinks = NULL;
        double t[N_SIZES][MAX_REPS], med[N_SIZES], flops[N_SIZES];
        attn_workspace *ws = attn_workspace_create();
        for (int s = 0; s < N_SIZES; s++) {
            bench_shape sh = layers[l].shape;
            sh.n = sizes[s];
            problem_make(&p[s], sh);
            if (layers[l].sinks) {
                if (!sinks) {
                    sinks = bench_floats(sh.h);
                    for (size_t i = 0; i < sh.h; i++)
                        sinks[i] = 0.25f * (float)(i % 8) - 1.0f;
                }
                p[s].w.sinks = sinks;
            }
            p[s].w.chunk = layers[l].chunk;
            if (layers[l].sinks) { /* GPT-OSS's RoPE: YaRN, factor 32 over 4096, untruncated */
                p[s].w.rope.scaling = ATTN_ROPE_SCALING_YARN;
                p[s].w.rope.factor = 32.0;
                p[s].w.rope.original_max_position = 4096.0;
                p[s].w.rope.untruncated = 1;
            }
            problem_outputs_make(&out[s], &p[s], 0);
            flops[s] = attn_input_flops(&p[s].in);
            sample(&p[s], &out[s], ws); /* warm: the workspace grown, the pages touched */
        }
        for (int r = 0; r < reps; r++)
            for (int s = 0; s < N_SIZES; s++)
                t[s][r] = sample(&p[s], &out[s], ws);
        for (int s = 0; s < N_SIZES; s++)
            med[s] = bench_median(t[s], reps);
        for (int s = 0; s < N_SIZES; s++) {
            printf("| %s | %zu | %.1f |", layers[l].name, sizes[s], med[s] * 1e3);
            if (s == N_SIZES - 1)
                printf(" %.2f%s | %.2f |\n", med[s] / med[0],
                       med[s] / med[0] <= 2.2 ? "" : " (over 2.2)", flops[s] / flops[0]);
            else
                printf(" | |\n");
        }
        for (int s = 0; s < N_SIZES; s++)
            problem_outputs_free(&out[s]), problem_free(&p[s]);
        free(sinks);
        attn_workspace_destroy(ws);
    }
    return 0;
}
