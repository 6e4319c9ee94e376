/*
 * bench_float.c — float → JSON text: nanoseconds per number and MB/s of text.
 *
 * Compared on the same floats, each writing every number into one large
 * buffer the way the response encoder does (number, ','):
 *   - api_float_format        (api/float_format.c, Ryū shortest digits),
 *   - api_float_format_naive  (the previous snprintf + strtof search),
 *   - snprintf("%.9g")        (9 digits always: round-trips, not shortest),
 *   - jansson json_dumps of a json_real array (its "%.17g" path; only the
 *     dump is timed, not building the array).
 * Two sets of floats: bit patterns drawn uniformly over the normal range
 * (every exponent alike), and uniform values in [-1, 1) (what attention
 * outputs look like). Each figure is the median of --runs runs; the methods
 * are interleaved run by run so that other load on the machine falls on all
 * of them alike. The naive one is timed on the first tenth of the floats
 * only (it is ~20× slower); jansson in chunks of 1M (a node per number).
 *
 *   bench_float [--n COUNT] [--runs R]      defaults: 10000000, 5
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/float_format.h"

enum { CHUNK = 1000000 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t splitmix64(uint64_t *s) {
    uint64_t x = (*s += 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Each returns the bytes written, so that the work cannot be optimised away. */
typedef size_t (*method_fn)(char *out, const float *x, size_t n);

static size_t run_fast(char *out, const float *x, size_t n) {
    char *o = out;
    for (size_t i = 0; i < n; i++) {
        o += api_float_format(o, x[i]);
        *o++ = ',';
    }
    return (size_t)(o - out);
}

static size_t run_naive(char *out, const float *x, size_t n) {
    char *o = out;
    for (size_t i = 0; i < n; i++) {
        o += api_float_format_naive(o, x[i]);
        *o++ = ',';
    }
    return (size_t)(o - out);
}

static size_t run_snprintf(char *out, const float *x, size_t n) {
    char *o = out;
    for (size_t i = 0; i < n; i++) {
        o += snprintf(o, API_FLOAT_TEXT_MAX, "%.9g", (double)x[i]);
        *o++ = ',';
    }
    return (size_t)(o - out);
}

/* jansson: arrays built once (not timed), dumped per run. */
static json_t **jansson_arrays;

static void jansson_build(const float *x, size_t n) {
    size_t chunks = (n + CHUNK - 1) / CHUNK;
    jansson_arrays = calloc(chunks, sizeof *jansson_arrays);
    for (size_t c = 0; c < chunks; c++) {
        json_t *a = json_array();
        for (size_t i = c * CHUNK; i < n && i < (c + 1) * CHUNK; i++)
            json_array_append_new(a, json_real((double)x[i]));
        jansson_arrays[c] = a;
    }
}

static void jansson_free(size_t n) {
    for (size_t c = 0; c < (n + CHUNK - 1) / CHUNK; c++)
        json_decref(jansson_arrays[c]);
    free(jansson_arrays);
}

static size_t run_jansson(char *out, const float *x, size_t n) {
    size_t total = 0;
    (void)out, (void)x;
    for (size_t c = 0; c < (n + CHUNK - 1) / CHUNK; c++) {
        char *s = json_dumps(jansson_arrays[c], JSON_COMPACT);
        total += strlen(s);
        free(s);
    }
    return total;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static const struct {
    const char *name;
    method_fn fn;
    size_t divisor; /* timed on n / divisor floats */
} methods[] = {
    {"api_float_format (Ryū)", run_fast, 1},
    {"api_float_format_naive (old)", run_naive, 10},
    {"snprintf(\"%.9g\")", run_snprintf, 1},
    {"jansson json_dumps (%.17g)", run_jansson, 1},
};
enum { M = sizeof methods / sizeof methods[0] };

static void bench_set(const char *set, const float *x, size_t n, int runs, char *out) {
    double *t = calloc((size_t)runs * M, sizeof *t), med[M];
    size_t bytes[M];

    jansson_build(x, n);
    for (int r = 0; r < runs; r++) {
        for (int m = 0; m < M; m++) {
            size_t count = n / methods[m].divisor;
            double t0 = now();
            bytes[m] = methods[m].fn(out, x, count);
            t[m * runs + r] = (now() - t0) / (double)count * 1e9;
        }
    }
    jansson_free(n);
    printf("\n%s, %zu floats, median of %d runs\n\n", set, n, runs);
    printf("| method | ns / number | min – max | bytes / number | MB/s of text | "
           "vs api_float_format (time) |\n");
    printf("|---|---|---|---|---|---|\n");
    for (int m = 0; m < M; m++) {
        qsort(t + m * runs, (size_t)runs, sizeof *t, cmp_double);
        med[m] = t[m * runs + runs / 2];
    }
    for (int m = 0; m < M; m++) {
        double per = (double)bytes[m] / (double)(n / methods[m].divisor); /* ',' included */
        printf("| %s | %.1f | %.1f – %.1f | %.2f | %.0f | %.1f× |\n", methods[m].name, med[m],
               t[m * runs], t[m * runs + runs - 1], per, per / med[m] * 1e3, med[m] / med[0]);
    }
    free(t);
}

int main(int argc, char **argv) {
    size_t n = 10000000;
    int runs = 5;
    uint64_t seed = 42;
    float *x;
    char *out;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n") && i + 1 < argc) {
            n = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
            runs = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: %s [--n COUNT] [--runs R]\n", argv[0]);
            return 2;
        }
    }
    if (n < 10 || runs < 1) {
        fprintf(stderr, "need --n >= 10 and --runs >= 1\n");
        return 2;
    }
    x = malloc(n * sizeof *x);
    out = malloc(n * (API_FLOAT_TEXT_MAX + 1));
    if (!x || !out) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    memset(out, ' ', n * (API_FLOAT_TEXT_MAX + 1)); /* fault the pages in before timing */
    printf("## (d) JSON encode: float32 → text, one number and a comma at a time\n");

    for (size_t i = 0; i < n; i++) { /* normal range: exponent field 1…254 */
        uint32_t b = (uint32_t)(splitmix64(&seed) >> 32);
        uint32_t e = 1 + (b >> 23 & 0xff) % 254;
        b = (b & 0x807fffffu) | e << 23;
        memcpy(&x[i], &b, sizeof b);
    }
    bench_set("Random bit patterns, normal range", x, n, runs, out);

    for (size_t i = 0; i < n; i++)
        x[i] = (float)((double)(splitmix64(&seed) >> 11) * 0x1p-52 - 1.0);
    bench_set("Uniform in [-1, 1)", x, n, runs, out);

    free(out);
    free(x);
    return 0;
}
