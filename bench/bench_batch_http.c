/*
 * bench_batch_http.c — (h) POST /v1/attention/batch against the same sequences
 * as single POST /v1/attention requests, over real HTTP (libcurl).
 *
 *   build/bench_batch_http PORT [--seqs 64] [--tokens 16] [--rounds 7]
 *
 * The server on 127.0.0.1:PORT serves gpt2-small-shape (batch_http.sh starts
 * one). Sequences of random embeddings (multiples of 1/16, a fixed seed),
 * sent as base64 tensor objects, answers asked in base64 too (the default
 * outputs, patterns and embeddings). Each round times, one after the
 * other: the batch of all sequences in one request, then the same
 * sequences as single requests over 1, 2 and 4 keep-alive connections
 * (one thread each, taking the next sequence as it is free). A first
 * round warms the server up and is not counted. Prints sequences per
 * second per round, their medians and the ratio of the batch's median to
 * the best single one, as a markdown table.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/base64.h"

#define D_MODEL    768
#define MAX_ROUNDS 31

static unsigned port;

typedef struct sink {
    size_t len;
} sink;

static size_t drop(char *p, size_t size, size_t n, void *arg) {
    (void)p;
    ((sink *)arg)->len += size * n;
    return size * n;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* POSTs body on c; exits unless the answer is 200. */
static void post(CURL *c, const char *path, const char *body) {
    char url[96];
    sink s = {0};
    long status = 0;
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, drop);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (rc != CURLE_OK || status != 200) {
        fprintf(stderr, "bench_batch_http: %s answered %ld (%s)\n", path, status,
                curl_easy_strerror(rc));
        exit(1);
    }
}

static CURL *handle(void) {
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h); /* kept for the handle's life */
    return c;
}

/* A tensor object of n × D_MODEL values from the seed. */
static char *tensor(size_t n, unsigned *seed) {
    size_t count = n * D_MODEL, b64;
    float *f = malloc(count * sizeof *f);
    for (size_t i = 0; i < count; i++) {
        *seed = *seed * 1103515245u + 12345u;
        f[i] = (float)((int)((*seed >> 8) % 32) - 16) / 16.0f;
    }
    api_base64_encoded_length(count * sizeof *f, &b64);
    char *t = malloc(b64 + 96);
    int head = sprintf(t, "{\"dtype\":\"float32\",\"shape\":[%zu,%d],\"data\":\"", n, D_MODEL);
    size_t w = api_base64_encode(t + head, f, count * sizeof *f);
    strcpy(t + head + w, "\"}");
    free(f);
    return t;
}

typedef struct singles {
    char **bodies;
    size_t count;
    atomic_size_t next;
} singles;

static void *single_worker(void *arg) {
    singles *s = arg;
    CURL *c = handle();
    for (size_t i; (i = atomic_fetch_add(&s->next, 1)) < s->count;)
        post(c, "/v1/attention", s->bodies[i]);
    curl_easy_cleanup(c);
    return NULL;
}

/* Seconds to send every single body over `conns` connections. */
static double run_singles(singles *s, int conns) {
    pthread_t t[8];
    atomic_store(&s->next, 0);
    double t0 = now();
    for (int i = 0; i < conns; i++)
        pthread_create(&t[i], NULL, single_worker, s);
    for (int i = 0; i < conns; i++)
        pthread_join(t[i], NULL);
    return now() - t0;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n) {
    double s[MAX_ROUNDS];
    memcpy(s, v, (size_t)n * sizeof *v);
    qsort(s, (size_t)n, sizeof *s, cmp);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

int main(int argc, char **argv) {
    size_t seqs = 64, tokens = 16;
    int rounds = 7;
    if (argc < 2) {
        fprintf(stderr, "usage: %s PORT [--seqs N] [--tokens N] [--rounds N]\n", argv[0]);
        return 2;
    }
    port = (unsigned)atoi(argv[1]);
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--seqs")) seqs = (size_t)atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--tokens")) tokens = (size_t)atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
    }
    if (rounds < 1 || rounds > MAX_ROUNDS || seqs < 1 || tokens < 1) return 2;
    curl_global_init(CURL_GLOBAL_DEFAULT);

    static const char opts[] = "\"model\":\"gpt2-small-shape\",\"encoding\":\"base64\"";
    singles s = {.bodies = calloc(seqs, sizeof(char *)), .count = seqs};
    size_t batch_len = 64;
    unsigned seed = 2024;
    char **tensors = calloc(seqs, sizeof(char *));
    for (size_t i = 0; i < seqs; i++) {
        tensors[i] = tensor(tokens, &seed);
        s.bodies[i] = malloc(strlen(tensors[i]) + 96);
        sprintf(s.bodies[i], "{%s,\"embeddings\":%s}", opts, tensors[i]);
        batch_len += strlen(tensors[i]) + 24;
    }
    char *batch = malloc(batch_len + 96), *w = batch;
    w += sprintf(w, "{%s,\"sequences\":[", opts);
    for (size_t i = 0; i < seqs; i++)
        w += sprintf(w, "%s{\"embeddings\":%s}", i ? "," : "", tensors[i]);
    strcpy(w, "]}");

    static const int conns[] = {1, 2, 4};
    double rate[4][MAX_ROUNDS];
    CURL *c = handle();
    for (int r = -1; r < rounds; r++) { /* round -1: warm-up */
        double t0 = now();
        post(c, "/v1/attention/batch", batch);
        double tb = now() - t0;
        if (r >= 0) rate[0][r] = (double)seqs / tb;
        for (int k = 0; k < 3; k++) {
            double ts = run_singles(&s, conns[k]);
            if (r >= 0) rate[1 + k][r] = (double)seqs / ts;
        }
    }
    curl_easy_cleanup(c);

    printf("## (h) POST /v1/attention/batch against single requests\n\n");
    printf("gpt2-small-shape, %zu sequences of %zu tokens, base64 tensors both ways (default "
           "outputs: patterns, embeddings), 127.0.0.1; %d interleaved rounds after a warm-up.\n\n",
           seqs, tokens, rounds);
    printf("| how | sequences/s (rounds) | median |\n|---|---|---|\n");
    double best = 0;
    for (int k = 0; k < 4; k++) {
        if (k == 0)
            printf("| one batch request |");
        else
            printf("| %zu single requests, %d connection%s |", seqs, conns[k - 1],
                   conns[k - 1] > 1 ? "s" : "");
        for (int r = 0; r < rounds; r++)
            printf("%s %.0f", r ? "," : "", rate[k][r]);
        double m = median(rate[k], rounds);
        if (k > 0 && m > best) best = m;
        printf(" | %.0f |\n", m);
    }
    printf("\nbatch ÷ best single: %.2f×\n", median(rate[0], rounds) / best);
    for (size_t i = 0; i < seqs; i++) {
        free(tensors[i]);
        free(s.bodies[i]);
    }
    free(tensors);
    free(s.bodies);
    free(batch);
    curl_global_cleanup();
    return 0;
}
