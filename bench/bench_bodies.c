/*
 * bench_bodies.c — the memory one request body can make its decode take.
 *
 * Each shape below is a body of --mib MiB (default 64, the default
 * --max-body-bytes) built to leave as many small values as it can to
 * jansson's tree, or to be the largest accepted body of its kind. Each is
 * decoded by api_request_decode under the server's default limits (those
 * of server/config.c), in a child process of its own: the child resets its
 * peak resident size (writing 5 to /proc/self/clear_refs), decodes, and
 * reports VmHWM less the VmRSS it had before, the body already resident.
 * That growth over the body's size is the figure: what a worker holds, at
 * its peak, for decoding one body, besides the body itself.
 *
 * Usage: bench_bodies [--mib N] [--shape NAME]
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/call.h"
#include "api/error.h"

/* server/config.c's defaults. */
static const api_limits defaults = {.max_tokens = 8192,
                                    .max_heads = 128,
                                    .max_d_model = 16384,
                                    .max_flops = 1e12,
                                    .max_response_bytes = (size_t)256 << 20,
                                    .max_workspace_bytes = (size_t)1 << 30,
                                    .max_json_depth = 32,
                                    .max_string_bytes = 64 << 10};

typedef struct body {
    char *text;
    size_t len, cap;
} body;

static void put(body *b, const char *s) {
    size_t n = strlen(s);
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->text = realloc(b->text, b->cap);
        if (!b->text) abort();
    }
    memcpy(b->text + b->len, s, n + 1);
    b->len += n;
}

/* `head`, then `item` joined by `sep` while the body stays under `size`
 * less the room `tail` needs, then `tail`. */
static void fill(body *b, size_t size, const char *head, const char *item, const char *sep,
                 const char *tail) {
    put(b, head);
    size_t step = strlen(item) + strlen(sep), end = strlen(tail);
    for (int first = 1; b->len + step + end <= size; first = 0) {
        if (!first) put(b, sep);
        put(b, item);
    }
    put(b, tail);
}

/* A mask of n × n `cell`s with n embeddings rows: n as large as fits. */
static void mask_body(body *b, size_t size, const char *cell, const char *last) {
    size_t w = strlen(cell) + 1, n = 1;
    while ((n + 1) * (n + 1) * w + (n + 1) * 8 < size)
        n++;
    put(b, "{\"model\":\"m\",\"embeddings\":[");
    for (size_t i = 0; i < n; i++)
        put(b, i ? ",[0]" : "[0]");
    put(b, "],\"mask\":[");
    for (size_t q = 0; q < n; q++) {
        put(b, q ? ",[" : "[");
        for (size_t k = 0; k < n; k++) {
            if (k) put(b, ",");
            put(b, q == n - 1 && k == n - 1 && last ? last : cell);
        }
        put(b, "]");
    }
    put(b, "]}");
}

/* The largest accepted body of its kind: max_tokens tokens and embeddings
 * rows, max_heads heads of inline weights, select_heads of every head,
 * the per-head outputs that fit the response limit, tensor objects among
 * the arrays; the rest of the size as embeddings width. */
static void legit_body(body *b, size_t size) {
    size_t n = defaults.max_tokens, h = defaults.max_heads, dm = 1, dh = 1;
    char num[64];
    /* about 4 bytes a number of embeddings, 7 a weight row of w_q, w_k, w_v,
     * 6 a number of w_o; the n² cells of a custom mask would not fit */
    while ((n * (dm + 1) * 4 + 4 * h * dm * 4) < size * 9 / 10)
        dm++;
    dm--;
    put(b, "{\"embeddings\":[");
    for (size_t i = 0; i < n; i++) {
        put(b, i ? ",[" : "[");
        for (size_t c = 0; c < dm; c++)
            put(b, c ? ",0.5" : "0.5");
        put(b, "]");
    }
    put(b, "],\"tokens\":[");
    for (size_t i = 0; i < n; i++) {
        snprintf(num, sizeof num, "%s\"t%zu\"", i ? "," : "", i);
        put(b, num);
    }
    put(b, "],\"select_heads\":[");
    for (size_t i = 0; i < h; i++) {
        snprintf(num, sizeof num, "%s%zu", i ? "," : "", h - 1 - i);
        put(b, num);
    }
    put(b, "],\"return\":[\"q\",\"k\",\"v\",\"head_outputs\"],\"mask\":\"causal\",\"weights\":{"
           "\"heads\":[");
    for (size_t i = 0; i < h; i++) {
        put(b, i ? ",{" : "{");
        const char *names[] = {"w_q", "w_k", "w_v"};
        for (int m = 0; m < 3; m++) {
            snprintf(num, sizeof num, "%s\"%s\":[", m ? "," : "", names[m]);
            put(b, num);
            for (size_t r = 0; r < dm; r++) {
                put(b, r ? ",[" : "[");
                for (size_t c = 0; c < dh; c++)
                    put(b, c ? ",0.25" : "0.25");
                put(b, "]");
            }
            put(b, "]");
        }
        put(b, ",\"b_q\":{\"dtype\":\"float32\",\"shape\":[1],\"data\":\"AAAAAA==\"}}");
    }
    put(b, "],\"w_o\":[");
    for (size_t r = 0; r < h * dh; r++) {
        put(b, r ? ",[" : "[");
        for (size_t c = 0; c < dm; c++)
            put(b, c ? ",0.125" : "0.125");
        put(b, "]");
    }
    put(b, "]}}");
}

typedef struct shape {
    const char *name, *what;
} shape;

static const shape shapes[] = {
    {"tokens_objects", "\"tokens\": [{}, {}, …]"},
    {"tokens_strings", "\"tokens\": [\"\", \"\", …]"},
    {"heads_objects", "\"weights\": {\"heads\": [{}, {}, …]}"},
    {"select_heads", "\"select_heads\": [0, 0, …]"},
    {"return_names", "\"return\": [\"q\", \"q\", …]"},
    {"head_fields", "one head of unknown fields {\"a0\": 0, \"a1\": 0, …}"},
    {"unknown_arrays", "an unknown field of empty arrays [[], [], …]"},
    {"nested", "arrays nested 31 deep, side by side"},
    {"short_strings", "\"scale\": [\"\", \"\", …]"},
    {"ragged_embeddings", "embeddings [[0, 0, …], [0]] (ragged: not lifted)"},
    {"embeddings_nulls", "embeddings [[0, null, 0, null, …]] (not lifted)"},
    {"mask_booleans", "an accepted n × n mask of true/false"},
    {"mask_numbers", "an accepted n × n mask of 0/1"},
    {"mask_bad_cell", "an n × n mask of 0/1 with a 2 in its last cell"},
    {"embeddings_zeros", "accepted: embeddings of max_tokens rows of 0s (2 bytes a number)"},
    {"long_tokens", "accepted: tokens of 64 KiB strings, one per embeddings row"},
    {"largest_accepted", "accepted: max_tokens tokens and rows, max_heads inline heads"},
};

static void build(body *b, const char *name, size_t size) {
    const char *pre = "{\"model\":\"m\",\"embeddings\":[[0]],";
    char head[128];
    if (!strcmp(name, "tokens_objects")) {
        snprintf(head, sizeof head, "%s\"tokens\":[", pre);
        fill(b, size, head, "{}", ",", "]}");
    } else if (!strcmp(name, "tokens_strings")) {
        snprintf(head, sizeof head, "%s\"tokens\":[", pre);
        fill(b, size, head, "\"\"", ",", "]}");
    } else if (!strcmp(name, "heads_objects")) {
        fill(b, size, "{\"embeddings\":[[0]],\"weights\":{\"heads\":[", "{}", ",", "]}}");
    } else if (!strcmp(name, "select_heads")) {
        snprintf(head, sizeof head, "%s\"select_heads\":[", pre);
        fill(b, size, head, "0", ",", "]}");
    } else if (!strcmp(name, "return_names")) {
        snprintf(head, sizeof head, "%s\"return\":[", pre);
        fill(b, size, head, "\"q\"", ",", "]}");
    } else if (!strcmp(name, "head_fields")) {
        /* distinct keys: duplicates would stop jansson early */
        put(b, "{\"embeddings\":[[0]],\"weights\":{\"heads\":[{");
        char item[32];
        for (size_t i = 0; b->len + 24 < size; i++) {
            snprintf(item, sizeof item, "%s\"%zx\":0", i ? "," : "", i);
            put(b, item);
        }
        put(b, "}]}}");
    } else if (!strcmp(name, "unknown_arrays")) {
        snprintf(head, sizeof head, "%s\"x\":[", pre);
        fill(b, size, head, "[]", ",", "]}");
    } else if (!strcmp(name, "nested")) {
        char item[128] = "";
        for (int d = 0; d < 30; d++)
            strcat(item, "[");
        for (int d = 0; d < 30; d++)
            strcat(item, "]");
        snprintf(head, sizeof head, "%s\"x\":[", pre);
        fill(b, size, head, item, ",", "]}");
    } else if (!strcmp(name, "short_strings")) {
        snprintf(head, sizeof head, "%s\"scale\":[", pre);
        fill(b, size, head, "\"\"", ",", "]}");
    } else if (!strcmp(name, "ragged_embeddings")) {
        fill(b, size, "{\"model\":\"m\",\"embeddings\":[[", "0", ",", "],[0]]}");
    } else if (!strcmp(name, "embeddings_nulls")) {
        fill(b, size, "{\"model\":\"m\",\"embeddings\":[[", "0,null", ",", "]]}");
    } else if (!strcmp(name, "mask_booleans")) {
        mask_body(b, size, "true", NULL);
    } else if (!strcmp(name, "mask_numbers")) {
        mask_body(b, size, "1", NULL);
    } else if (!strcmp(name, "mask_bad_cell")) {
        mask_body(b, size, "1", "2");
    } else if (!strcmp(name, "embeddings_zeros")) {
        size_t n = defaults.max_tokens, dm = (size - 64) / n / 2;
        put(b, "{\"model\":\"m\",\"embeddings\":[");
        for (size_t i = 0; i < n; i++) {
            put(b, i ? ",[" : "[");
            for (size_t c = 0; c < dm - 1; c++)
                put(b, c ? ",0" : "0");
            put(b, "]");
        }
        put(b, "]}");
    } else if (!strcmp(name, "long_tokens")) {
        size_t str = defaults.max_string_bytes, n = size / (str + 8);
        char *t = malloc(str + 4);
        memset(t + 1, 'x', str), t[0] = '"', t[str + 1] = '"', t[str + 2] = '\0';
        put(b, "{\"model\":\"m\",\"embeddings\":[");
        for (size_t i = 0; i < n; i++)
            put(b, i ? ",[0]" : "[0]");
        put(b, "],\"tokens\":[");
        for (size_t i = 0; i < n; i++) {
            if (i) put(b, ",");
            put(b, t);
        }
        put(b, "]}");
        free(t);
    } else if (!strcmp(name, "largest_accepted")) {
        legit_body(b, size);
    } else {
        abort();
    }
}

static long status_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, n)) kb = strtol(line + n + 1, NULL, 10);
    if (f) fclose(f);
    return kb;
}

/* In a child: decode, and write "growth_kB status code path" to fd. */
static void measure(const body *b, int fd) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f || fputs("5", f) < 0 || fclose(f) != 0) _exit(2);
    long before = status_kb("VmRSS:");
    api_call *req = NULL;
    attn_error err;
    memset(&err, 0, sizeof err);
    int rc = api_call_decode_json(API_CALL_ATTENTION, b->text, b->len, &defaults, &req, &err);
    long peak = status_kb("VmHWM:");
    char out[512];
    int n = snprintf(out, sizeof out, "%ld %d %s %s", peak - before, rc == 0 ? 200 : err.status,
                     rc == 0 ? "ok" : err.code,
                     rc == 0       ? "-"
                     : err.path[0] ? err.path
                                   : "\"\"");
    if (write(fd, out, (size_t)n) != n) _exit(3);
    api_call_free(req);
    _exit(0);
}

int main(int argc, char **argv) {
    size_t mib = 64;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mib") && i + 1 < argc)
            mib = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc)
            only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--mib N] [--shape NAME]\n", argv[0]);
            return 2;
        }
    }
    printf("Bodies of %zu MiB under the default limits: peak resident growth of "
           "api_request_decode over the body's size.\n\n",
           mib);
    printf("| shape | body | answer | peak growth | × body |\n|---|---|---|---|---|\n");
    fflush(stdout);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        if (only && strcmp(only, shapes[s].name)) continue;
        body b = {0};
        build(&b, shapes[s].name, mib << 20);
        memset(b.text + b.len, 0, b.cap - b.len); /* resident before the child starts */
        int fds[2];
        if (pipe(fds) != 0) return 1;
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            measure(&b, fds[1]);
        }
        close(fds[1]);
        char out[512] = "";
        ssize_t got = read(fds[0], out, sizeof out - 1);
        close(fds[0]);
        int st = 0;
        waitpid(pid, &st, 0);
        long kb = 0;
        int status = 0;
        char code[64] = "?", path[256] = "?";
        if (got <= 0 || sscanf(out, "%ld %d %63s %255s", &kb, &status, code, path) != 4)
            printf("| %s | %.1f MiB | (child failed, status %d) | | |\n", shapes[s].what,
                   (double)b.len / (1 << 20), st);
        else
            printf("| %s | %.1f MiB | %d %s %s | %.1f MiB | %.2f |\n", shapes[s].what,
                   (double)b.len / (1 << 20), status, code, path, kb / 1024.0,
                   kb * 1024.0 / (double)b.len);
        fflush(stdout);
        free(b.text);
    }
    return 0;
}
