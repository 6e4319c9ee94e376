/*
 * test_http.c — the built server over real HTTP on 127.0.0.1.
 *
 * Starts $ATTN_SERVER_BIN (default build/attention-server) as a child with
 * --port 0 and reads the port from its log (tests/http_harness.c). Results
 * are checked against a float64 reference computed here, independently of
 * attention/. Three servers are used:
 *
 *   shared     --workers 2, small limits       endpoints, every error status,
 *                                              request ids, examples, concurrency
 *   overload   --workers 1 --queue-depth 1     503 overloaded, made certain by
 *                                              requests of ~0.5 s each
 *   drain      --workers 1                     SIGTERM with requests in flight
 */
#include <check.h>
#include <curl/curl.h>
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/fixtures.h"
#include "tests/http_harness.h"

#define SHARED_MAX_BODY   65536
#define SHARED_MAX_TOKENS 16

static hs_server shared;

static void shared_start(void) {
    static const char *const args[] = {"--workers",
                                       "2",
                                       "--queue-depth",
                                       "64",
                                       "--max-body-bytes",
                                       "65536",
                                       "--max-tokens",
                                       "16",
                                       "--io-threads",
                                       "2",
                                       NULL};
    if (hs_start(&shared, args) != 0) {
        fprintf(stderr, "test_http: could not start the server (ATTN_SERVER_BIN=%s)\n",
                getenv("ATTN_SERVER_BIN") ? getenv("ATTN_SERVER_BIN") : "");
        exit(1);
    }
}

/* Set when the shared server did not end cleanly; main() then fails. The
 * teardown runs in check's parent process, where no test can fail. */
static int shared_unclean;

static void shared_stop(void) {
    char why[2048];
    if (hs_finish(&shared, why, sizeof why) != 0) {
        fprintf(stderr, "test_http: the shared server: %s\n", why);
        shared_unclean = 1;
    }
}

/* Stops a server a test started; the test fails unless it exits 0 with
 * no sanitizer report in its log. */
static void finish(hs_server *s) {
    char why[2048];
    ck_assert_msg(hs_finish(s, why, sizeof why) == 0, "%s", why);
}

/* ------------------------------------------------------------ helpers */

static json_t *parse_body(const hs_response *r) {
    json_error_t e;
    json_t *j = json_loadb(r->body, r->len, 0, &e);
    ck_assert_msg(j != NULL, "body is not JSON (%s): %.300s", e.text, r->body);
    return j;
}

static void assert_header(const hs_response *r, const char *name, const char *want) {
    char *v = hs_header(r, name);
    ck_assert_msg(v != NULL, "no %s header in:\n%s", name, r->headers);
    if (want) ck_assert_msg(strcasecmp(v, want) == 0, "%s is \"%s\", want \"%s\"", name, v, want);
    free(v);
}

static int id_is_sane(const char *id) {
    size_t n = strlen(id);
    if (n < 1 || n > 128) return 0;
    return strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-") == n;
}

/* Checks the contract's error answer: status, JSON content type, body shape
 * and code, a sane X-Request-Id. */
static json_t *assert_error(const hs_response *r, long status, const char *code) {
    ck_assert_msg(r->rc == CURLE_OK, "curl: %s", curl_easy_strerror(r->rc));
    ck_assert_msg(r->status == status, "status %ld, want %ld: %.300s", r->status, status, r->body);
    char *ct = hs_header(r, "Content-Type");
    ck_assert_msg(ct && strncmp(ct, "application/json", 16) == 0, "content type %s", ct);
    free(ct);
    json_t *j = parse_body(r);
    json_t *err = json_object_get(j, "error");
    ck_assert_msg(json_is_object(err), "no error object: %s", r->body);
    ck_assert_msg(json_is_string(json_object_get(err, "code")), "no code: %s", r->body);
    ck_assert_msg(strcmp(json_string_value(json_object_get(err, "code")), code) == 0,
                  "code %s, want %s (%s)", json_string_value(json_object_get(err, "code")), code,
                  r->body);
    ck_assert(json_is_string(json_object_get(err, "message")));
    ck_assert(json_string_length(json_object_get(err, "message")) > 0);
    ck_assert(json_is_string(json_object_get(err, "path")));
    char *id = hs_header(r, "X-Request-Id");
    ck_assert_msg(id && id_is_sane(id), "bad X-Request-Id %s", id ? id : "(none)");
    free(id);
    return j;
}

static void assert_healthy(unsigned port) {
    hs_response r;
    hs_request(NULL, port, "GET", "/healthz", NULL, NULL, 0, &r);
    ck_assert_msg(r.rc == CURLE_OK && r.status == 200, "server is down after bad requests");
    hs_response_free(&r);
}

static void assert_server_timing(const hs_response *r) {
    char *t = hs_header(r, "Server-Timing");
    ck_assert_msg(t != NULL, "no Server-Timing");
    static const char *const parts[] = {"queue;dur=", "decode;dur=", "compute;dur=", "encode;dur="};
    for (int i = 0; i < 4; i++) {
        const char *p = strstr(t, parts[i]);
        ck_assert_msg(p, "Server-Timing \"%s\" lacks %s", t, parts[i]);
        char *end;
        double ms = strtod(p + strlen(parts[i]), &end);
        ck_assert_msg(end != p + strlen(parts[i]) && ms >= 0, "bad duration in %s", t);
    }
    free(t);
}

static hs_response post(unsigned port, const char *body) {
    hs_response r;
    hs_request(NULL, port, "POST", "/v1/attention", NULL, body, strlen(body), &r);
    return r;
}

/* -------------------------------------------------- float64 reference */

/* A problem with float32-exact values, so that the server reads exactly
 * the numbers the reference uses. */
typedef struct problem {
    int n, dm, h, dh;
    int causal;              /* else no mask */
    double scale;            /* 0: 1/sqrt(dh), and not sent */
    double *E;               /* n × dm */
    double **wq, **wk, **wv; /* h of dm × dh */
    double **bq, **bk, **bv; /* h of dh, or NULL */
    double *wo, *bo;         /* hd × dm, dm, or NULL */
} problem;

typedef struct reference {
    double *q, *k, *v;   /* h × n × dh */
    double *scores;      /* h × n × n, NAN where masked */
    double *patterns;    /* h × n × n */
    double *z;           /* h × n × dh */
    double *delta, *emb; /* n × dm */
} reference;

static double rnd(unsigned *seed) {
    *seed = *seed * 1103515245u + 12345u;
    /* multiples of 1/1024 in [-1, 1): exact in float32 */
    return (double)((int)((*seed >> 8) % 2048) - 1024) / 1024.0;
}

static double *rnd_vec(unsigned *seed, size_t n) {
    double *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = rnd(seed);
    return v;
}

static problem problem_random(int n, int dm, int h, int dh, int with_wo, int with_bias, int causal,
                              unsigned seed) {
    problem p = {.n = n, .dm = dm, .h = h, .dh = dh, .causal = causal};
    p.E = rnd_vec(&seed, (size_t)n * dm);
    p.wq = calloc(h, sizeof *p.wq);
    p.wk = calloc(h, sizeof *p.wk);
    p.wv = calloc(h, sizeof *p.wv);
    p.bq = calloc(h, sizeof *p.bq);
    p.bk = calloc(h, sizeof *p.bk);
    p.bv = calloc(h, sizeof *p.bv);
    for (int i = 0; i < h; i++) {
        p.wq[i] = rnd_vec(&seed, (size_t)dm * dh);
        p.wk[i] = rnd_vec(&seed, (size_t)dm * dh);
        p.wv[i] = rnd_vec(&seed, (size_t)dm * dh);
        if (with_bias) {
            p.bq[i] = rnd_vec(&seed, dh);
            p.bk[i] = rnd_vec(&seed, dh);
            p.bv[i] = rnd_vec(&seed, dh);
        }
    }
    if (with_wo) p.wo = rnd_vec(&seed, (size_t)h * dh * dm);
    if (with_bias) p.bo = rnd_vec(&seed, dm);
    return p;
}

static void problem_free(problem *p) {
    for (int i = 0; i < p->h; i++) {
        free(p->wq[i]), free(p->wk[i]), free(p->wv[i]);
        free(p->bq[i]), free(p->bk[i]), free(p->bv[i]);
    }
    free(p->wq), free(p->wk), free(p->wv), free(p->bq), free(p->bk), free(p->bv);
    free(p->E), free(p->wo), free(p->bo);
}

static void reference_compute(const problem *p, reference *r) {
    int n = p->n, dm = p->dm, h = p->h, dh = p->dh, hd = h * dh;
    double scale = p->scale > 0 ? p->scale : 1.0 / sqrt((double)dh);
    r->q = calloc((size_t)h * n * dh, sizeof(double));
    r->k = calloc((size_t)h * n * dh, sizeof(double));
    r->v = calloc((size_t)h * n * dh, sizeof(double));
    r->z = calloc((size_t)h * n * dh, sizeof(double));
    r->scores = calloc((size_t)h * n * n, sizeof(double));
    r->patterns = calloc((size_t)h * n * n, sizeof(double));
    r->delta = calloc((size_t)n * dm, sizeof(double));
    r->emb = calloc((size_t)n * dm, sizeof(double));
    double *concat = calloc((size_t)n * hd, sizeof(double));
    for (int i = 0; i < h; i++) {
        double *Q = r->q + (size_t)i * n * dh, *K = r->k + (size_t)i * n * dh;
        double *V = r->v + (size_t)i * n * dh, *Z = r->z + (size_t)i * n * dh;
        double *S = r->scores + (size_t)i * n * n, *P = r->patterns + (size_t)i * n * n;
        for (int t = 0; t < n; t++)
            for (int c = 0; c < dh; c++) {
                double q = p->bq[i] ? p->bq[i][c] : 0, k = p->bk[i] ? p->bk[i][c] : 0,
                       v = p->bv[i] ? p->bv[i][c] : 0;
                for (int e = 0; e < dm; e++) {
                    double x = p->E[t * dm + e];
                    q += x * p->wq[i][e * dh + c];
                    k += x * p->wk[i][e * dh + c];
                    v += x * p->wv[i][e * dh + c];
                }
                Q[t * dh + c] = q, K[t * dh + c] = k, V[t * dh + c] = v;
            }
        for (int a = 0; a < n; a++) {
            double mx = -INFINITY;
            for (int b = 0; b < n; b++) {
                if (p->causal && b > a) {
                    S[a * n + b] = NAN;
                    continue;
                }
                double s = 0;
                for (int c = 0; c < dh; c++)
                    s += Q[a * dh + c] * K[b * dh + c];
                S[a * n + b] = s * scale;
                if (S[a * n + b] > mx) mx = S[a * n + b];
            }
            double sum = 0;
            for (int b = 0; b < n; b++) {
                P[a * n + b] = isnan(S[a * n + b]) ? 0 : exp(S[a * n + b] - mx);
                sum += P[a * n + b];
            }
            for (int b = 0; b < n; b++)
                P[a * n + b] /= sum;
            for (int c = 0; c < dh; c++) {
                double z = 0;
                for (int b = 0; b < n; b++)
                    z += P[a * n + b] * V[b * dh + c];
                Z[a * dh + c] = z;
                concat[a * hd + i * dh + c] = z;
            }
        }
    }
    for (int t = 0; t < n; t++)
        for (int e = 0; e < dm; e++) {
            double d = p->bo ? p->bo[e] : 0;
            if (p->wo)
                for (int c = 0; c < hd; c++)
                    d += concat[t * hd + c] * p->wo[c * dm + e];
            else
                d += concat[t * hd + e];
            r->delta[t * dm + e] = d;
            r->emb[t * dm + e] = p->E[t * dm + e] + d;
        }
    free(concat);
}

static void reference_free(reference *r) {
    free(r->q), free(r->k), free(r->v), free(r->z), free(r->scores), free(r->patterns);
    free(r->delta), free(r->emb);
}

static void fput_matrix(FILE *f, const double *m, int rows, int cols) {
    fputc('[', f);
    for (int i = 0; i < rows; i++) {
        fputs(i ? ",[" : "[", f);
        for (int j = 0; j < cols; j++)
            fprintf(f, j ? ",%.10g" : "%.10g", m[i * cols + j]);
        fputc(']', f);
    }
    fputc(']', f);
}

static void fput_vector(FILE *f, const double *v, int n) {
    fputc('[', f);
    for (int j = 0; j < n; j++)
        fprintf(f, j ? ",%.10g" : "%.10g", v[j]);
    fputc(']', f);
}

/* The request body for p; `extra` is spliced in as more members (may be ""). */
static char *problem_json(const problem *p, const char *extra) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fputs("{\"embeddings\":", f);
    fput_matrix(f, p->E, p->n, p->dm);
    fprintf(f, ",\"mask\":\"%s\"", p->causal ? "causal" : "none");
    if (p->scale > 0) fprintf(f, ",\"scale\":%.10g", p->scale);
    fputs(",\"weights\":{\"heads\":[", f);
    for (int i = 0; i < p->h; i++) {
        fputs(i ? ",{\"w_q\":" : "{\"w_q\":", f);
        fput_matrix(f, p->wq[i], p->dm, p->dh);
        fputs(",\"w_k\":", f);
        fput_matrix(f, p->wk[i], p->dm, p->dh);
        fputs(",\"w_v\":", f);
        fput_matrix(f, p->wv[i], p->dm, p->dh);
        if (p->bq[i]) {
            fputs(",\"b_q\":", f);
            fput_vector(f, p->bq[i], p->dh);
            fputs(",\"b_k\":", f);
            fput_vector(f, p->bk[i], p->dh);
            fputs(",\"b_v\":", f);
            fput_vector(f, p->bv[i], p->dh);
        }
        fputc('}', f);
    }
    fputc(']', f);
    if (p->wo) {
        fputs(",\"w_o\":", f);
        fput_matrix(f, p->wo, p->h * p->dh, p->dm);
    }
    if (p->bo) {
        fputs(",\"b_o\":", f);
        fput_vector(f, p->bo, p->dm);
    }
    fputc('}', f);
    if (extra && *extra) fprintf(f, ",%s", extra);
    fputc('}', f);
    fclose(f);
    return buf;
}

/* Compares a nested JSON array of `count` numbers (row-major over dims)
 * with ref; NAN in ref means the JSON value must be null. Returns the
 * number of mismatches and describes the first in why. */
static int compare_values(json_t *j, const double *ref, size_t count, int depth, const int *dims,
                          char *why, size_t whylen) {
    /* flatten */
    size_t pos = 0;
    int bad = 0;
    json_t *stack[4] = {j};
    size_t idx[4] = {0};
    if (!json_is_array(j) || (int)json_array_size(j) != dims[0]) {
        snprintf(why, whylen, "outer size %zu, want %d", json_array_size(j), dims[0]);
        return 1;
    }
    int d = 0;
    while (d >= 0) {
        if (idx[d] >= json_array_size(stack[d])) {
            d--;
            if (d >= 0) idx[d]++;
            continue;
        }
        json_t *e = json_array_get(stack[d], idx[d]);
        if (d + 1 < depth) {
            if (!json_is_array(e) || (int)json_array_size(e) != dims[d + 1]) {
                snprintf(why, whylen, "row size mismatch at depth %d", d + 1);
                return bad + 1;
            }
            stack[++d] = e;
            idx[d] = 0;
            continue;
        }
        if (pos >= count) {
            snprintf(why, whylen, "too many values");
            return bad + 1;
        }
        double want = ref[pos++];
        if (isnan(want)) {
            if (!json_is_null(e) && !bad++) snprintf(why, whylen, "value %zu not null", pos - 1);
        } else if (!json_is_number(e)) {
            if (!bad++) snprintf(why, whylen, "value %zu not a number", pos - 1);
        } else {
            double got = json_number_value(e);
            if (!(fabs(got - want) <= 1e-4 + 1e-4 * fabs(want)) && !bad++)
                snprintf(why, whylen, "value %zu is %.9g, want %.9g", pos - 1, got, want);
        }
        idx[d]++;
    }
    if (pos != count && !bad++) snprintf(why, whylen, "%zu values, want %zu", pos, count);
    return bad;
}

/* Checks every output present in the response against the reference. */
static int check_outputs(json_t *resp, const problem *p, const reference *r, char *why,
                         size_t whylen) {
    int n = p->n, dm = p->dm, h = p->h, dh = p->dh;
    const struct {
        const char *name;
        const double *ref;
        int depth, dims[3];
    } outs[] = {
        {"q", r->q, 3, {h, n, dh}},
        {"k", r->k, 3, {h, n, dh}},
        {"v", r->v, 3, {h, n, dh}},
        {"scores", r->scores, 3, {h, n, n}},
        {"patterns", r->patterns, 3, {h, n, n}},
        {"head_outputs", r->z, 3, {h, n, dh}},
        {"delta", r->delta, 2, {n, dm}},
        {"embeddings", r->emb, 2, {n, dm}},
    };
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        json_t *j = json_object_get(resp, outs[i].name);
        if (!j) continue;
        size_t count =
            (size_t)outs[i].dims[0] * outs[i].dims[1] * (outs[i].depth == 3 ? outs[i].dims[2] : 1);
        char sub[200] = "";
        if (compare_values(j, outs[i].ref, count, outs[i].depth, outs[i].dims, sub, sizeof sub)) {
            snprintf(why, whylen, "%s: %s", outs[i].name, sub);
            return 1;
        }
    }
    if (json_integer_value(json_object_get(resp, "n_tokens")) != n ||
        json_integer_value(json_object_get(resp, "d_model")) != dm ||
        json_integer_value(json_object_get(resp, "n_heads")) != h ||
        json_integer_value(json_object_get(resp, "d_head")) != dh) {
        snprintf(why, whylen, "dimensions in the answer are wrong");
        return 1;
    }
    return 0;
}

/* ---------------------------------------------------------- endpoints */

START_TEST(endpoints) {
    unsigned port = shared.port;
    hs_response r;

    hs_request(NULL, port, "GET", "/healthz", NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    json_t *j = parse_body(&r);
    ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "ok");
    json_decref(j);
    assert_header(&r, "Content-Type", "application/json");
    assert_header(&r, "X-Request-Id", NULL);
    hs_response_free(&r);

    hs_request(NULL, port, "HEAD", "/healthz", NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(r.len, 0);
    hs_response_free(&r);

    hs_request(NULL, port, "GET", "/readyz", NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    hs_response_free(&r);

    hs_request(NULL, port, "GET", "/v1/openapi.yaml", NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    assert_header(&r, "Content-Type", "application/yaml");
    ck_assert_ptr_nonnull(strstr(r.body, "openapi"));
    /* byte for byte the document in the tree, when the tests run there */
    FILE *f = fopen("api/openapi.yaml", "rb");
    if (f) {
        char *doc = malloc(r.len + 2);
        size_t n = fread(doc, 1, r.len + 1, f);
        fclose(f);
        ck_assert_uint_eq(n, r.len);
        ck_assert(memcmp(doc, r.body, r.len) == 0);
        free(doc);
    }
    hs_response_free(&r);

    /* one computed request, so the metrics have something to show */
    hs_response a = post(port, "{\"embeddings\":[[1,0]],\"weights\":{\"heads\":[{\"w_q\":[[1],[0]],"
                               "\"w_k\":[[1],[0]],\"w_v\":[[1],[0]]}],\"w_o\":[[1,0]]}}");
    ck_assert_int_eq(a.status, 200);
    hs_response_free(&a);
    hs_request(NULL, port, "GET", "/nowhere/at/all", NULL, NULL, 0, &r);
    hs_response_free(&r);

    /* A request is counted when libmicrohttpd reports it complete, which may
     * be a moment after the client has the answer. */
    ck_assert_int_ge(
        hs_wait_metric_at_least(port, "attn_http_requests_total{route=\"attention\",code=\"200\"} ",
                                1, 10),
        1);
    ck_assert_int_ge(hs_wait_metric_at_least(
                         port, "attn_http_requests_total{route=\"other\",code=\"404\"} ", 1, 10),
                     1);
    hs_request(NULL, port, "GET", "/metrics", NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    assert_header(&r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    static const char *const want[] = {
        "# TYPE attn_http_requests_total counter",
        "attn_http_requests_total{route=\"attention\",code=\"200\"}",
        "attn_http_requests_total{route=\"healthz\",code=\"200\"}",
        "attn_http_requests_total{route=\"other\",code=\"404\"}",
        "# TYPE attn_http_request_duration_seconds histogram",
        "attn_http_request_duration_seconds_bucket{route=\"attention\",le=\"+Inf\"}",
        "attn_queue_depth ",
        "attn_workers_busy ",
        "attn_workers 2",
        "attn_phase_seconds_total{phase=\"compute\"}",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(r.body, want[i]), "metrics lack %s", want[i]);
    /* the unknown path is not a label */
    ck_assert_ptr_null(strstr(r.body, "nowhere"));
    hs_response_free(&r);
}
END_TEST

/* ------------------------------------------------------------- errors */

#define W2                                                                                         \
    "\"weights\":{\"heads\":[{\"w_q\":[[1,0],[0,1]],\"w_k\":[[1,0],[0,1]],\"w_v\":[[1,0],[0,1]]}]" \
    "}"
#define E2 "\"embeddings\":[[0.5,1],[1,0.25]]"

static const struct {
    const char *what, *body;
    long status;
    const char *code;
} bad_bodies[] = {
    {"not JSON", "{not json", 400, "invalid_json"},
    {"empty body", "", 400, "invalid_json"},
    {"not an object", "[1,2]", 400, "invalid_json"},
    {"duplicate key", "{" E2 "," E2 "," W2 "}", 400, "invalid_json"},
    {"unknown field", "{" E2 "," W2 ",\"bogus\":1}", 400, "unknown_field"},
    {"neither model nor weights", "{" E2 "}", 400, "missing_field"},
    {"no embeddings", "{" W2 "}", 400, "missing_field"},
    {"both model and weights", "{" E2 "," W2 ",\"model\":\"m\"}", 400, "invalid_value"},
    {"wrong type", "{\"embeddings\":\"abc\"," W2 "}", 400, "wrong_type"},
    {"unknown return name", "{" E2 "," W2 ",\"return\":[\"everything\"]}", 400, "invalid_value"},
    {"unknown mask word", "{" E2 "," W2 ",\"mask\":\"diagonal\"}", 400, "invalid_value"},
    {"unknown model", "{" E2 ",\"model\":\"gpt-2\"}", 404, "unknown_model"},
    {"ragged rows", "{\"embeddings\":[[0.5,1],[1]]," W2 "}", 422, "dimension_mismatch"},
    {"d_model mismatch", "{\"embeddings\":[[0.5,1,2]]," W2 "}", 422, "dimension_mismatch"},
    {"mask of the wrong size", "{" E2 "," W2 ",\"mask\":[[1]]}", 422, "dimension_mismatch"},
    {"number too large for float32", "{\"embeddings\":[[1e39,1],[1,0.25]]," W2 "}", 422,
     "non_finite_number"},
    {"scale zero", "{" E2 "," W2 ",\"scale\":0}", 422, "out_of_range"},
    {"head index out of range", "{" E2 "," W2 ",\"select_heads\":[3]}", 422, "out_of_range"},
    {"too many tokens",
     "{\"embeddings\":[[1,0],[1,0],[1,0],[1,0],[1,0],[1,0],[1,0],[1,0],[1,0],[1,0],[1,0],[1,0],"
     "[1,0],[1,0],[1,0],[1,0],[1,0]]," W2 "}",
     422, "limit_exceeded"},
};

/* Every line of the module web/js/`name` is in the page `body`, as
 * tools/inline_page.sh copies it: its import statements left out (they
 * become comments), a leading "export " dropped. */
static void assert_module_inlined(const char *body, const char *name) {
    char path[300], line[4096];
    snprintf(path, sizeof path, "web/js/%s", name);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s is missing", path);
    int in_import = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!strncmp(line, "import ", 7) || !strncmp(line, "import{", 7)) in_import = 1;
        if (in_import) {
            if (strstr(line, " from ") || strchr(line, ';')) in_import = 0;
            continue;
        }
        const char *text = !strncmp(line, "export ", 7) ? line + 7 : line;
        if (!*text) continue;
        ck_assert_msg(strstr(body, text) != NULL, "%s: \"%s\" is not in the page", path, text);
    }
    fclose(f);
}

/* GET /: the teaching page, web/index.html with its parts in place, cacheable only
 * with revalidation, and fetching nothing from anywhere else. */
START_TEST(teaching_page) {
    unsigned port = shared.port;
    hs_response r;
    hs_request(NULL, port, "GET", "/", NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    assert_header(&r, "Content-Type", "text/html; charset=utf-8");
    assert_header(&r, "Cache-Control", "no-cache");
    assert_header(&r, "X-Content-Type-Options", "nosniff");
    assert_header(&r, "X-Request-Id", NULL);
    char *csp = hs_header(&r, "Content-Security-Policy");
    ck_assert_ptr_nonnull(csp);
    ck_assert_ptr_nonnull(strstr(csp, "default-src 'none'"));
    ck_assert_ptr_nonnull(strstr(csp, "connect-src 'self'"));
    free(csp);
    ck_assert(strncmp(r.body, "<!doctype html>", 15) == 0);
    /* no CDN, font or script from elsewhere: no absolute URL at all */
    ck_assert_msg(!strstr(r.body, "http://") && !strstr(r.body, "https://") &&
                      !strstr(r.body, "//cdn"),
                  "the page names another site");
    /* every style sheet and script web/index.html names is in the page, copied
     * in place (tools/inline_page.sh), and none is left to be fetched */
    ck_assert_ptr_null(strstr(r.body, "<script src="));
    ck_assert_ptr_null(strstr(r.body, " src=\"js/"));
    ck_assert_ptr_null(strstr(r.body, "<link rel=\"stylesheet\""));
    FILE *f = fopen("web/index.html", "rb");
    if (f) { /* when the tests run in the tree */
        char line[512];
        int named = 0;
        while (fgets(line, sizeof line, f)) {
            char file[256], path[300];
            if (sscanf(line, "<script src=\"%255[^\"]\"></script>", file) != 1 &&
                sscanf(line, "<link rel=\"stylesheet\" href=\"%255[^\"]\">", file) != 1)
                continue;
            snprintf(path, sizeof path, "web/%s", file);
            FILE *part = fopen(path, "rb");
            ck_assert_msg(part != NULL, "%s is missing", path);
            char *text = malloc(r.len + 2);
            size_t n = fread(text, 1, r.len + 1, part);
            fclose(part);
            text[n] = '\0';
            ck_assert_msg(n > 0 && n <= r.len && strstr(r.body, text), "%s is not in the page",
                          path);
            free(text);
            named++;
        }
        fclose(f);
        ck_assert_int_gt(named, 1);
        /* the modules main.js imports, one script of all of them */
        DIR *js = opendir("web/js");
        ck_assert_ptr_nonnull(js);
        int modules = 0;
        for (struct dirent *e; (e = readdir(js));) {
            size_t len = strlen(e->d_name);
            if (len < 4 || strcmp(e->d_name + len - 3, ".js")) continue;
            assert_module_inlined(r.body, e->d_name);
            modules++;
        }
        closedir(js);
        ck_assert_int_gt(modules, 1);
    }
    char *etag = hs_header(&r, "ETag");
    ck_assert_ptr_nonnull(etag);
    ck_assert_int_eq(etag[0], '"');
    hs_response_free(&r);

    /* revalidation: the same tag (alone, weak, or in a list) is a 304 without a body */
    const char *forms[] = {"%s", "W/%s", "\"other\", %s", "*"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char line[128], value[96];
        snprintf(value, sizeof value, forms[i], etag);
        snprintf(line, sizeof line, "If-None-Match: %s", value);
        const char *h[] = {line, NULL};
        hs_request(NULL, port, "GET", "/", h, NULL, 0, &r);
        ck_assert_msg(r.status == 304, "If-None-Match: %s gave %ld", value, r.status);
        ck_assert_uint_eq(r.len, 0);
        assert_header(&r, "ETag", etag);
        hs_response_free(&r);
    }
    const char *stale[] = {"If-None-Match: \"0000000000000000\"", NULL};
    hs_request(NULL, port, "GET", "/", stale, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_gt(r.len, 1000);
    hs_response_free(&r);
    free(etag);

    hs_request(NULL, port, "HEAD", "/", NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(r.len, 0);
    hs_response_free(&r);
    hs_request(NULL, port, "POST", "/", NULL, "{}", 2, &r);
    ck_assert_int_eq(r.status, 405);
    assert_header(&r, "Allow", "GET, HEAD");
    assert_header(&r, "Cache-Control", "no-store");
    hs_response_free(&r);
    /* only the page itself lives there */
    hs_request(NULL, port, "GET", "/index.html", NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 404);
    hs_response_free(&r);

    /* the four 304s are counted as such (a moment after the client has them) */
    ck_assert_int_eq(
        hs_wait_metric(port, "attn_http_requests_total{route=\"page\",code=\"304\"} ", 4, 1), 4);
}
END_TEST

START_TEST(error_bodies) {
    hs_response r = post(shared.port, bad_bodies[_i].body);
    json_t *j = assert_error(&r, bad_bodies[_i].status, bad_bodies[_i].code);
    assert_server_timing(&r);
    if (strcmp(bad_bodies[_i].code, "unknown_model") == 0)
        ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "path")),
                         "/model");
    json_decref(j);
    hs_response_free(&r);
    assert_healthy(shared.port);
}
END_TEST

/* A model name is the store's rule, applied before the lookup: a name no
 * model could have is a 400 at /model, one that could is a 404. */
START_TEST(error_model_names) {
    const char *bad[] = {"", "a b", "../etc/passwd", "名前",
                         "a2345678901234567890123456789012345678901234567890123456789012345"};
    for (size_t i = 0; i <= sizeof bad / sizeof bad[0]; i++) {
        /* the last one: a NUL byte inside, which a C string would cut to "a" */
        json_t *name =
            i < sizeof bad / sizeof bad[0] ? json_string(bad[i]) : json_stringn("a\0b", 3);
        json_t *req = json_pack("{s:o, s:[[i]]}", "model", name, "embeddings", 1);
        char *body = json_dumps(req, JSON_COMPACT);
        json_decref(req);
        hs_response r = post(shared.port, body);
        json_t *j = assert_error(&r, 400, "invalid_value");
        json_t *err = json_object_get(j, "error");
        ck_assert_str_eq(json_string_value(json_object_get(err, "path")), "/model");
        ck_assert_str_eq(json_string_value(json_object_get(err, "message")),
                         "model name must match [A-Za-z0-9._-]{1,64}");
        json_decref(j);
        hs_response_free(&r);
        free(body);
    }
    hs_response r = post(shared.port, "{\"model\":\"Az09._-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                                      "xxxxxxxxxxxxxxxxxxx\",\"embeddings\":[[1]]}");
    json_decref(assert_error(&r, 404, "unknown_model"));
    hs_response_free(&r);
}
END_TEST

START_TEST(error_routes) {
    unsigned port = shared.port;
    hs_response r;

    hs_request(NULL, port, "GET", "/v1/attentions", NULL, NULL, 0, &r);
    json_decref(assert_error(&r, 404, "not_found"));
    hs_response_free(&r);
    hs_request(NULL, port, "POST", "/nope", NULL, "{}", 2, &r);
    json_decref(assert_error(&r, 404, "not_found"));
    hs_response_free(&r);
    /* started without --models-dir: no models */
    hs_request(NULL, port, "GET", "/v1/models", NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "{\"models\":[]}");
    hs_response_free(&r);
    hs_request(NULL, port, "GET", "/v1/models/demo-4d", NULL, NULL, 0, &r);
    json_decref(assert_error(&r, 404, "unknown_model"));
    hs_response_free(&r);
    hs_request(NULL, port, "GET", "/v1/models/a/b", NULL, NULL, 0, &r);
    json_decref(assert_error(&r, 404, "not_found"));
    hs_response_free(&r);
    hs_request(NULL, port, "POST", "/v1/models", NULL, "{}", 2, &r);
    json_decref(assert_error(&r, 405, "method_not_allowed"));
    assert_header(&r, "Allow", "GET, HEAD");
    hs_response_free(&r);

    hs_request(NULL, port, "GET", "/v1/attention", NULL, NULL, 0, &r);
    json_decref(assert_error(&r, 405, "method_not_allowed"));
    assert_header(&r, "Allow", "POST");
    hs_response_free(&r);
    hs_request(NULL, port, "PUT", "/v1/attention", NULL, "{}", 2, &r);
    json_decref(assert_error(&r, 405, "method_not_allowed"));
    assert_header(&r, "Allow", "POST");
    hs_response_free(&r);
    hs_request(NULL, port, "POST", "/healthz", NULL, "{}", 2, &r);
    json_decref(assert_error(&r, 405, "method_not_allowed"));
    assert_header(&r, "Allow", "GET, HEAD");
    hs_response_free(&r);
    hs_request(NULL, port, "DELETE", "/metrics", NULL, NULL, 0, &r);
    json_decref(assert_error(&r, 405, "method_not_allowed"));
    assert_header(&r, "Allow", "GET, HEAD");
    hs_response_free(&r);

    static const char *const types[] = {"Content-Type: text/plain",
                                        "Content-Type: application/x-www-form-urlencoded",
                                        "Content-Type: text/json", NULL};
    for (int i = 0; types[i]; i++) {
        const char *h[] = {types[i], NULL};
        hs_request(NULL, port, "POST", "/v1/attention", h, "{" E2 "," W2 "}",
                   strlen("{" E2 "," W2 "}"), &r);
        json_decref(assert_error(&r, 415, "unsupported_media_type"));
        assert_server_timing(&r);
        hs_response_free(&r);
    }
    assert_healthy(port);
}
END_TEST

START_TEST(json_content_types_accepted) {
    static const char *const types[] = {
        "Content-Type: application/json; charset=utf-8", "Content-Type: APPLICATION/JSON",
        "Content-Type: application/vnd.attention+json", "Content-Type:", /* none at all */
        NULL};
    const char *body = "{" E2 "," W2 "}";
    for (int i = 0; types[i]; i++) {
        const char *h[] = {types[i], NULL};
        hs_response r;
        hs_request(NULL, shared.port, "POST", "/v1/attention", h, body, strlen(body), &r);
        ck_assert_msg(r.status == 200, "%s: %ld %s", types[i], r.status, r.body);
        hs_response_free(&r);
    }
}
END_TEST

/* Finds a header in a raw answer; malloc'd value or NULL. */
static char *raw_header(const char *raw, const char *name) {
    hs_response r = {.headers = (char *)raw};
    return hs_header(&r, name);
}

START_TEST(body_too_large) {
    unsigned port = shared.port;
    /* Content-Length over the limit and no body at all: the answer must
     * come from the headers alone, or this would wait for the timeout. */
    const char *req = "POST /v1/attention HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      "Content-Type: application/json\r\nX-Request-Id: big-1\r\n"
                      "Content-Length: 1000000000\r\n\r\n";
    char *raw = hs_raw(port, req, strlen(req), 5.0);
    ck_assert_ptr_nonnull(raw);
    ck_assert_msg(strncmp(raw, "HTTP/1.1 413", 12) == 0, "got: %.200s", raw);
    ck_assert_ptr_nonnull(strstr(raw, "\"body_too_large\""));
    char *id = raw_header(raw, "X-Request-Id");
    ck_assert_str_eq(id, "big-1");
    free(id);
    char *ct = raw_header(raw, "Content-Type");
    ck_assert_str_eq(ct, "application/json");
    free(ct);
    free(raw);

    /* over the limit by one byte, sent in full */
    char *body = malloc(SHARED_MAX_BODY + 2);
    memset(body, ' ', SHARED_MAX_BODY + 1);
    body[SHARED_MAX_BODY + 1] = 0;
    hs_response r = post(port, body);
    json_decref(assert_error(&r, 413, "body_too_large"));
    hs_response_free(&r);

    /* chunked, no Content-Length: counted as it arrives */
    char *chunked = NULL;
    size_t clen = 0;
    FILE *f = open_memstream(&chunked, &clen);
    fputs("POST /v1/attention HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
          "Transfer-Encoding: chunked\r\n\r\n",
          f);
    for (int i = 0; i < 20; i++) {
        fprintf(f, "1000\r\n");
        for (int k = 0; k < 4096; k++)
            fputc(' ', f);
        fputs("\r\n", f);
    }
    fputs("0\r\n\r\n", f);
    fclose(f);
    raw = hs_raw(port, chunked, clen, 10.0);
    ck_assert_ptr_nonnull(raw);
    ck_assert_msg(strncmp(raw, "HTTP/1.1 413", 12) == 0, "got: %.200s", raw);
    ck_assert_ptr_nonnull(strstr(raw, "\"body_too_large\""));
    free(raw);
    free(chunked);

    /* just under the limit is read (and then fails as JSON, not as size) */
    body[SHARED_MAX_BODY - 2] = 0;
    body[0] = '{';
    body[SHARED_MAX_BODY - 3] = '}';
    r = post(port, body);
    json_decref(assert_error(&r, 400, "missing_field"));
    hs_response_free(&r);
    free(body);
    assert_healthy(port);
}
END_TEST

/* --------------------------------------------------------- request ids */

START_TEST(request_ids) {
    unsigned port = shared.port;
    hs_response r;
    const char *sane[] = {"X-Request-Id: trace-01.AB:cd_ef", NULL};
    hs_request(NULL, port, "GET", "/healthz", sane, NULL, 0, &r);
    assert_header(&r, "X-Request-Id", "trace-01.AB:cd_ef");
    hs_response_free(&r);
    hs_request(NULL, port, "GET", "/missing", sane, NULL, 0, &r);
    ck_assert_int_eq(r.status, 404);
    assert_header(&r, "X-Request-Id", "trace-01.AB:cd_ef");
    hs_response_free(&r);
    hs_request(NULL, port, "POST", "/v1/attention", sane, "{bad", 4, &r);
    ck_assert_int_eq(r.status, 400);
    assert_header(&r, "X-Request-Id", "trace-01.AB:cd_ef");
    hs_response_free(&r);

    /* generated when absent: sane and different each time */
    char *ids[3];
    for (int i = 0; i < 3; i++) {
        hs_request(NULL, port, "GET", i == 2 ? "/nope" : "/healthz", NULL, NULL, 0, &r);
        ids[i] = hs_header(&r, "X-Request-Id");
        ck_assert_ptr_nonnull(ids[i]);
        ck_assert(id_is_sane(ids[i]));
        hs_response_free(&r);
    }
    ck_assert_str_ne(ids[0], ids[1]);
    ck_assert_str_ne(ids[1], ids[2]);
    for (int i = 0; i < 3; i++)
        free(ids[i]);

    /* never reflected when not sane */
    char longid[160] = "X-Request-Id: ";
    memset(longid + 14, 'a', 129);
    longid[14 + 129] = 0;
    const char *insane[][2] = {{"X-Request-Id: has space", NULL},
                               {"X-Request-Id: <script>", NULL},
                               {"X-Request-Id: caf\xc3\xa9", NULL},
                               {longid, NULL}};
    for (int i = 0; i < 4; i++) {
        hs_request(NULL, port, "GET", "/healthz", insane[i], NULL, 0, &r);
        char *id = hs_header(&r, "X-Request-Id");
        ck_assert_ptr_nonnull(id);
        ck_assert(id_is_sane(id));
        ck_assert_ptr_null(strstr(id, "script"));
        ck_assert_ptr_null(strstr(id, "has"));
        ck_assert(strlen(id) < 129);
        free(id);
        hs_response_free(&r);
    }
    longid[14 + 128] = 0; /* exactly 128 is fine */
    const char *ok128[] = {longid, NULL};
    hs_request(NULL, port, "GET", "/healthz", ok128, NULL, 0, &r);
    assert_header(&r, "X-Request-Id", longid + 14);
    hs_response_free(&r);
}
END_TEST

/* ------------------------------------------------------------ examples */

START_TEST(example_wo_ai_ni) {
    static const double E[12] = {0.1, -0.2, 0.3, 0.1, -0.1, 0.2, 0.2, -0.3, 0.2, 0.1, -0.1, 0.2};
    problem p = problem_random(3, 4, 1, 4, 0, 0, 0, 42);
    for (int i = 0; i < 12; i++)
        p.E[i] = (float)E[i]; /* what the server reads */
    p.scale = 0.5;
    reference ref;
    reference_compute(&p, &ref);
    /* The embeddings go out as written in the example, not as float32. */
    char *weights = problem_json(&p, "");
    char *w = strstr(weights, "\"weights\"");
    char body[8192];
    snprintf(body, sizeof body,
             "{\"embeddings\":[[0.1,-0.2,0.3,0.1],[-0.1,0.2,0.2,-0.3],[0.2,0.1,-0.1,0.2]],"
             "\"tokens\":[\"我\",\"爱\",\"你\"],\"mask\":\"none\",\"scale\":0.5,%.*s",
             (int)(strlen(w) - 1), w);
    strcat(body, "}");
    free(weights);

    const char *hdr[] = {"X-Request-Id: wo-ai-ni", NULL};
    hs_response r;
    hs_request(NULL, shared.port, "POST", "/v1/attention", hdr, body, strlen(body), &r);
    ck_assert_msg(r.status == 200, "status %ld: %s", r.status, r.body);
    assert_header(&r, "Content-Type", "application/json");
    assert_header(&r, "X-Request-Id", "wo-ai-ni");
    assert_server_timing(&r);
    json_t *j = parse_body(&r);
    ck_assert(json_is_null(json_object_get(j, "model")));
    ck_assert_str_eq(json_string_value(json_object_get(j, "mask")), "none");
    ck_assert(fabs(json_number_value(json_object_get(j, "scale")) - 0.5) < 1e-7);
    json_t *tokens = json_object_get(j, "tokens");
    ck_assert_int_eq(json_array_size(tokens), 3);
    ck_assert_str_eq(json_string_value(json_array_get(tokens, 0)), "我");
    ck_assert_str_eq(json_string_value(json_array_get(tokens, 1)), "爱");
    ck_assert_str_eq(json_string_value(json_array_get(tokens, 2)), "你");
    ck_assert_int_eq(json_array_size(json_object_get(j, "heads")), 1);
    ck_assert(json_object_get(j, "patterns") && json_object_get(j, "embeddings"));
    ck_assert_ptr_null(json_object_get(j, "q")); /* default return */
    char why[256] = "";
    ck_assert_msg(check_outputs(j, &p, &ref, why, sizeof why) == 0, "%s", why);
    json_decref(j);
    hs_response_free(&r);
    reference_free(&ref);
    problem_free(&p);
}
END_TEST

/* hidden_states through the server's job: each layer reads its own hidden
 * state (no embeddings sent), its embeddings are that plus its delta, and
 * the answer has no top-level delta or embeddings. */
START_TEST(example_stack_hidden_states) {
    json_error_t jerr;
    json_t *req = json_load_file("tests/cases/hidden_states_two_layers/request.json", 0, &jerr);
    ck_assert_msg(req != NULL, "%s", jerr.text);
    char *body = json_dumps(req, JSON_COMPACT);
    hs_response r = post(shared.port, body);
    ck_assert_msg(r.status == 200, "status %ld: %s", r.status, r.body);
    json_t *j = parse_body(&r);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "n_layers")), 2);
    const json_t *layers = json_object_get(j, "layers"),
                 *hidden = json_object_get(req, "hidden_states");
    ck_assert_uint_eq(json_array_size(layers), 2);
    for (size_t l = 0; l < 2; l++) {
        const json_t *e = json_array_get(layers, l), *h = json_array_get(hidden, l);
        const json_t *d = json_object_get(e, "delta"), *emb = json_object_get(e, "embeddings");
        ck_assert_uint_eq(json_array_size(json_object_get(e, "patterns")), 2);
        for (size_t q = 0; q < 3; q++)
            for (size_t c = 0; c < 4; c++) {
                double want = json_number_value(json_array_get(json_array_get(h, q), c)) +
                              json_number_value(json_array_get(json_array_get(d, q), c));
                double got = json_number_value(json_array_get(json_array_get(emb, q), c));
                ck_assert_double_lt(fabs(got - want), 1e-5);
            }
    }
    ck_assert_ptr_null(json_object_get(j, "embeddings"));
    ck_assert_ptr_null(json_object_get(j, "delta"));
    json_decref(j);
    json_decref(req);
    free(body);
    hs_response_free(&r);
}
END_TEST

/* A stack of two inline layers through the server's job (attn_compute_stack
 * on a worker): each listed layer's embeddings are the one before's plus
 * its delta, the last one the answer's, whose delta is E_L − E_0. */
START_TEST(example_stack_of_layers) {
    json_error_t jerr;
    json_t *req = json_load_file("tests/cases/weights_layers_two/request.json", 0, &jerr);
    ck_assert_msg(req != NULL, "%s", jerr.text);
    json_object_set_new(req, "return", json_pack("[s,s,s]", "patterns", "delta", "embeddings"));
    char *body = json_dumps(req, JSON_COMPACT);
    hs_response r = post(shared.port, body);
    ck_assert_msg(r.status == 200, "status %ld: %s", r.status, r.body);
    json_t *j = parse_body(&r);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "n_layers")), 2);
    const json_t *layers = json_object_get(j, "layers"), *e0 = json_object_get(req, "embeddings");
    ck_assert_uint_eq(json_array_size(layers), 2);
    const json_t *prev = e0;
    for (size_t l = 0; l < 2; l++) {
        const json_t *e = json_array_get(layers, l);
        ck_assert_int_eq(json_integer_value(json_object_get(e, "layer")), (json_int_t)l);
        ck_assert_uint_eq(json_array_size(json_object_get(e, "patterns")), 2);
        const json_t *d = json_object_get(e, "delta"), *emb = json_object_get(e, "embeddings");
        for (size_t q = 0; q < 3; q++)
            for (size_t c = 0; c < 4; c++) {
                double want = json_number_value(json_array_get(json_array_get(prev, q), c)) +
                              json_number_value(json_array_get(json_array_get(d, q), c));
                double got = json_number_value(json_array_get(json_array_get(emb, q), c));
                ck_assert_double_lt(fabs(got - want), 1e-5);
            }
        prev = emb;
    }
    ck_assert_ptr_null(json_object_get(j, "patterns"));
    const json_t *top = json_object_get(j, "embeddings"), *delta = json_object_get(j, "delta");
    for (size_t q = 0; q < 3; q++)
        for (size_t c = 0; c < 4; c++) {
            double last = json_number_value(json_array_get(json_array_get(prev, q), c));
            ck_assert(json_number_value(json_array_get(json_array_get(top, q), c)) == last);
            double d = last - json_number_value(json_array_get(json_array_get(e0, q), c));
            ck_assert_double_lt(
                fabs(json_number_value(json_array_get(json_array_get(delta, q), c)) - d), 1e-5);
        }
    json_decref(j);
    hs_response_free(&r);
    free(body);
    json_decref(req);
}
END_TEST

START_TEST(example_two_heads_causal) {
    problem p = problem_random(5, 4, 2, 2, 1, 1, 1, 7);
    reference ref;
    reference_compute(&p, &ref);
    char *body = problem_json(
        &p, "\"return\":[\"q\",\"k\",\"v\",\"scores\",\"patterns\",\"head_outputs\",\"delta\","
            "\"embeddings\"]");
    hs_response r = post(shared.port, body);
    ck_assert_msg(r.status == 200, "status %ld: %s", r.status, r.body);
    assert_server_timing(&r);
    json_t *j = parse_body(&r);
    ck_assert_str_eq(json_string_value(json_object_get(j, "mask")), "causal");
    ck_assert(fabs(json_number_value(json_object_get(j, "scale")) - 1 / sqrt(2.0)) < 1e-6);
    static const char *const names[] = {
        "q", "k", "v", "scores", "patterns", "head_outputs", "delta", "embeddings"};
    for (int i = 0; i < 8; i++)
        ck_assert_msg(json_object_get(j, names[i]), "%s missing", names[i]);
    /* masked patterns are exactly 0, masked scores null */
    json_t *pat = json_array_get(json_object_get(j, "patterns"), 1);
    ck_assert(json_number_value(json_array_get(json_array_get(pat, 0), 4)) == 0.0);
    ck_assert(json_is_null(
        json_array_get(json_array_get(json_array_get(json_object_get(j, "scores"), 0), 1), 2)));
    char why[256] = "";
    ck_assert_msg(check_outputs(j, &p, &ref, why, sizeof why) == 0, "%s", why);
    json_decref(j);
    hs_response_free(&r);
    free(body);
    reference_free(&ref);
    problem_free(&p);
}
END_TEST

/* ---------------------------------------------------------- concurrency */

#define CLIENTS    4
#define PER_CLIENT 8

typedef struct client_result {
    int ok, failed;
    char why[400];
} client_result;

static void *client_thread(void *arg) {
    client_result *res = arg;
    unsigned seed = (unsigned)(uintptr_t)res * 2654435761u;
    CURL *c = curl_easy_init(); /* one handle per thread: keep-alive */
    for (int i = 0; i < PER_CLIENT; i++) {
        seed = seed * 1103515245u + 12345u;
        int n = 1 + (int)(seed >> 16) % SHARED_MAX_TOKENS, h = 1 + (int)(seed >> 8) % 3;
        int dh = 1 + (int)(seed >> 12) % 5, dm = 2 + (int)(seed >> 20) % 10;
        int with_wo = (h * dh != dm) || (seed & 1);
        problem p =
            problem_random(n, dm, h, dh, with_wo, (int)(seed >> 3) & 1, (int)(seed >> 5) & 1, seed);
        reference ref;
        reference_compute(&p, &ref);
        char *body = problem_json(&p, "\"return\":[\"patterns\",\"delta\",\"embeddings\"]");
        hs_response r;
        hs_request(c, shared.port, "POST", "/v1/attention", NULL, body, strlen(body), &r);
        json_t *j = r.status == 200 ? json_loadb(r.body, r.len, 0, NULL) : NULL;
        char why[200] = "";
        if (!j || check_outputs(j, &p, &ref, why, sizeof why) != 0) {
            if (!res->failed++)
                snprintf(res->why, sizeof res->why, "n=%d dm=%d h=%d dh=%d: status %ld %s %.80s", n,
                         dm, h, dh, r.status, why, r.body);
        } else {
            res->ok++;
        }
        json_decref(j);
        hs_response_free(&r);
        free(body);
        reference_free(&ref);
        problem_free(&p);
    }
    curl_easy_cleanup(c);
    return NULL;
}

START_TEST(concurrent_clients) {
    pthread_t t[CLIENTS];
    client_result res[CLIENTS];
    memset(res, 0, sizeof res);
    for (int i = 0; i < CLIENTS; i++)
        pthread_create(&t[i], NULL, client_thread, &res[i]);
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < CLIENTS; i++) {
        ck_assert_msg(res[i].failed == 0, "client %d: %s", i, res[i].why);
        ck_assert_int_eq(res[i].ok, PER_CLIENT);
    }
    assert_healthy(shared.port);
}
END_TEST

/* ----------------------------------------------------- heavy requests */

/* Waits until at least n exchanges are in flight besides the asking one. */
static void wait_in_flight(unsigned port, long n) {
    ck_assert_int_ge(hs_wait_metric_at_least(port, "\nattn_http_requests_in_flight ", n + 1, 20),
                     n + 1);
}

/* A body whose computation takes a good fraction of a second (n tokens
 * attending to each other in 32 heads), asking back only the embeddings. */
static char *heavy_body(int n) {
    problem p = problem_random(n, 16, 32, 16, 1, 0, 0, (unsigned)n);
    char *body = problem_json(&p, "\"return\":[\"embeddings\"]");
    problem_free(&p);
    return body;
}

typedef struct poster {
    unsigned port;
    const char *body;
    long status;
    char code[64];
    int retry_after;
    double seconds; /* from the first byte sent to the whole answer */
    CURLcode rc;
} poster;

static void *post_thread(void *arg) {
    poster *ps = arg;
    hs_response r;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    hs_request(NULL, ps->port, "POST", "/v1/attention", NULL, ps->body, strlen(ps->body), &r);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ps->seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    ps->rc = r.rc;
    ps->status = r.status;
    char *ra = hs_header(&r, "Retry-After");
    ps->retry_after = ra != NULL;
    free(ra);
    json_t *j = json_loadb(r.body, r.len, 0, NULL);
    const char *code = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
    snprintf(ps->code, sizeof ps->code, "%s", code ? code : "");
    if (r.status == 200 && !json_is_array(json_object_get(j, "embeddings"))) ps->status = -200;
    json_decref(j);
    hs_response_free(&r);
    return NULL;
}

START_TEST(overload_503) {
    hs_server s;
    static const char *const args[] = {"--workers", "1", "--queue-depth", "1", NULL};
    ck_assert_int_eq(hs_start(&s, args), 0);
    char *body = heavy_body(1536);
    enum { N = 5 };
    poster ps[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        ps[i] = (poster){.port = s.port, .body = body};
        pthread_create(&t[i], NULL, post_thread, &ps[i]);
    }
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    /* one computing and one waiting at most while the bodies arrive */
    int ok = 0, overloaded = 0;
    double fastest_ok = INFINITY;
    for (int i = 0; i < N; i++) {
        ck_assert_msg(ps[i].rc == CURLE_OK, "curl: %s", curl_easy_strerror(ps[i].rc));
        if (ps[i].status == 200) ok++;
        if (ps[i].status == 200 && ps[i].seconds < fastest_ok) fastest_ok = ps[i].seconds;
        if (ps[i].status == 503) {
            overloaded++;
            ck_assert_str_eq(ps[i].code, "overloaded");
            ck_assert(ps[i].retry_after);
        }
    }
    /* at once, not after the computations ahead of it: faster than any
     * answer that had a computation to wait for */
    for (int i = 0; i < N; i++)
        ck_assert_msg(ps[i].status != 503 || ps[i].seconds < fastest_ok,
                      "503 after %.3f s, a computed answer after %.3f s", ps[i].seconds,
                      fastest_ok);
    ck_assert_int_eq(ok + overloaded, N);
    ck_assert_int_ge(ok, 1);
    ck_assert_int_ge(overloaded, 1);
    ck_assert_int_le(ok, 3);

    hs_response r;
    hs_request(NULL, s.port, "GET", "/metrics", NULL, NULL, 0, &r);
    ck_assert_ptr_nonnull(
        strstr(r.body, "attn_http_requests_total{route=\"attention\",code=\"503\"}"));
    hs_response_free(&r);
    assert_healthy(s.port);
    free(body);
    finish(&s);
}
END_TEST

/* Posts `body` again and again until *stop, counting the answers. */
typedef struct looper {
    unsigned port;
    const char *body;
    atomic_int *stop;
    int answers, bad;
} looper;

static void *loop_thread(void *arg) {
    looper *l = arg;
    while (!atomic_load(l->stop)) {
        hs_response r = post(l->port, l->body);
        l->answers++;
        l->bad += r.status != 200 && r.status != 503;
        hs_response_free(&r);
    }
    return NULL;
}

/* Tiny requests are answered on the polling thread: while heavy requests
 * keep the one worker and the one queue slot full, a request under
 * --inline-max-flops is always answered, never queued (its queue time is
 * microseconds), while one over the cap, small as its body is, goes to the
 * queue like any other and is refused whenever the queue is full. */
START_TEST(tiny_requests_inline) {
    hs_server s;
    static const char *const args[] = {"--workers", "1", "--queue-depth", "1", "--inline-max-flops",
                                       "1000",      NULL};
    ck_assert_int_eq(hs_start(&s, args), 0);
    char *body = heavy_body(1536);
    atomic_int stop;
    atomic_init(&stop, 0);
    enum { N = 3 };
    looper ls[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        ls[i] = (looper){.port = s.port, .body = body, .stop = &stop};
        pthread_create(&t[i], NULL, loop_thread, &ls[i]);
    }

    problem tiny = problem_random(1, 2, 1, 2, 0, 0, 0, 7);  /* ~370 flops */
    problem small = problem_random(3, 4, 1, 4, 0, 0, 0, 8); /* ~2,300 flops: over the cap */
    char *tiny_body = problem_json(&tiny, NULL), *small_body = problem_json(&small, NULL);
    int refused = 0;
    for (int k = 0; k < 400 && refused < 3; k++) {
        hs_response r = post(s.port, tiny_body);
        ck_assert_int_eq(r.status, 200);
        char *timing = hs_header(&r, "Server-Timing");
        ck_assert_ptr_nonnull(timing);
        /* never queued: a queued job waits for a heavy one, a good part of
         * 0.2 s; an inline one's queue time is the moment between taken and
         * run, microseconds but for the polling thread being preempted */
        ck_assert_msg(!strncmp(timing, "queue;dur=", 10) && strtod(timing + 10, NULL) < 20,
                      "Server-Timing: %s", timing);
        free(timing);
        hs_response_free(&r);

        r = post(s.port, small_body);
        if (r.status == 503) {
            json_decref(assert_error(&r, 503, "overloaded"));
            refused++;
        } else {
            ck_assert_int_eq(r.status, 200);
        }
        hs_response_free(&r);
        usleep(2000);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(ls[i].bad, 0);
    }
    ck_assert_int_ge(refused, 1); /* it did go through the queue */
    free(tiny_body), free(small_body), free(body);
    problem_free(&tiny), problem_free(&small);
    finish(&s);
}
END_TEST

/* A request answered on its polling thread never waited in a queue: its
 * Server-Timing queue time is the instant between being taken and being
 * run, far less than its decode, which it does not count again. */
START_TEST(inline_queue_time_excludes_decode) {
    problem p = problem_random(6, 8, 2, 4, 1, 0, 0, 11);
    char *body = problem_json(&p, NULL);
    ck_assert_uint_le(strlen(body), 4096); /* small enough to be answered inline */
    for (int i = 0; i < 5; i++) {
        hs_response r = post(shared.port, body);
        ck_assert_int_eq(r.status, 200);
        char *t = hs_header(&r, "Server-Timing");
        ck_assert_ptr_nonnull(t);
        const char *q = strstr(t, "queue;dur="), *d = strstr(t, "decode;dur=");
        ck_assert(q && d);
        double queue = strtod(q + 10, NULL), decode = strtod(d + 11, NULL);
        ck_assert_msg(decode > 0 && queue < decode, "Server-Timing: %s", t);
        free(t);
        hs_response_free(&r);
    }
    free(body);
    problem_free(&p);
}
END_TEST

/* -------------------------------------------------------------- drain */

START_TEST(sigterm_drains) {
    hs_server s;
    static const char *const args[] = {"--workers", "1", "--queue-depth", "8", NULL};
    ck_assert_int_eq(hs_start(&s, args), 0);
    char *body = heavy_body(1024);

    /* two kept-alive connections, opened before the signal */
    CURL *ready = curl_easy_init(), *late = curl_easy_init();
    hs_response r;
    hs_request(ready, s.port, "GET", "/readyz", NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    hs_response_free(&r);
    hs_request(late, s.port, "GET", "/healthz", NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    hs_response_free(&r);

    enum { N = 3 };
    poster ps[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        ps[i] = (poster){.port = s.port, .body = body};
        pthread_create(&t[i], NULL, post_thread, &ps[i]);
    }
    wait_in_flight(s.port, N);

    hs_signal(&s, SIGTERM);
    ck_assert(hs_wait_log(&s, "signal 15: draining", 10));

    /* draining: readyz 503 (once the drain has begun) and new work refused
     * on a live connection */
    hs_request(ready, s.port, "GET", "/readyz", NULL, NULL, 0, &r);
    for (int i = 0; i < 1000 && r.status == 200; i++) {
        hs_response_free(&r);
        usleep(10000);
        hs_request(ready, s.port, "GET", "/readyz", NULL, NULL, 0, &r);
    }
    json_decref(assert_error(&r, 503, "shutting_down"));
    assert_header(&r, "Retry-After", NULL);
    hs_response_free(&r);
    const char *small = "{" E2 "," W2 "}";
    hs_request(late, s.port, "POST", "/v1/attention", NULL, small, strlen(small), &r);
    json_decref(assert_error(&r, 503, "shutting_down"));
    hs_response_free(&r);
    /* and no new connections, once the listening socket is shut (right
     * after the drain begins) */
    hs_request(NULL, s.port, "GET", "/healthz", NULL, NULL, 0, &r);
    for (int i = 0; i < 1000 && r.rc == CURLE_OK; i++) {
        hs_response_free(&r);
        usleep(10000);
        hs_request(NULL, s.port, "GET", "/healthz", NULL, NULL, 0, &r);
    }
    ck_assert_msg(r.rc != CURLE_OK, "new connections were still served 10 s into the drain");
    hs_response_free(&r);

    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < N; i++)
        ck_assert_msg(ps[i].rc == CURLE_OK && ps[i].status == 200,
                      "request %d in flight at SIGTERM: rc %d status %ld", i, ps[i].rc,
                      ps[i].status);
    int rc = hs_wait(&s, 20);
    char *log = hs_log(&s);
    ck_assert_msg(rc == 0, "exit status %d; log:\n%s", rc, log ? log : "");
    ck_assert_ptr_nonnull(strstr(log, "draining"));
    /* one access line per request, no bodies */
    ck_assert_ptr_nonnull(strstr(log, "access POST /v1/attention 200 "));
    ck_assert_ptr_null(strstr(log, "\"embeddings\""));
    free(log);
    finish(&s);
    curl_easy_cleanup(ready);
    curl_easy_cleanup(late);
    free(body);
}
END_TEST

/* OpenBLAS's threads do not inherit a signal mask set in main(), so a
 * second SIGTERM while the main thread drained once reached one of them and
 * its default action ended the process, dropping every request in flight. */
START_TEST(second_sigterm_during_drain) {
    hs_server s;
    static const char *const args[] = {"--workers", "1", "--queue-depth", "8", NULL};
    ck_assert_int_eq(hs_start(&s, args), 0);
    char *body = heavy_body(1024);
    enum { N = 4 };
    poster ps[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        ps[i] = (poster){.port = s.port, .body = body};
        pthread_create(&t[i], NULL, post_thread, &ps[i]);
    }
    wait_in_flight(s.port, N);

    /* each signal once the one before has been taken: the second and the
     * third come during the drain */
    hs_signal(&s, SIGTERM);
    ck_assert(hs_wait_log(&s, "signal 15: draining", 10));
    hs_signal(&s, SIGTERM);
    ck_assert(hs_wait_log(&s, "signal 15: already draining; ignored", 10));
    hs_signal(&s, SIGINT);

    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    int rc = hs_wait(&s, 30);
    char *log = hs_log(&s);
    for (int i = 0; i < N; i++)
        ck_assert_msg(ps[i].rc == CURLE_OK && ps[i].status == 200,
                      "request %d: rc %d status %ld (server exit %d); log:\n%s", i, ps[i].rc,
                      ps[i].status, rc, log ? log : "");
    ck_assert_msg(rc == 0, "exit status %d; log:\n%s", rc, log ? log : "");
    ck_assert_ptr_nonnull(strstr(log, "signal 15: draining"));
    ck_assert_ptr_nonnull(strstr(log, "signal 15: already draining; ignored"));
    ck_assert_ptr_nonnull(strstr(log, "signal 2: already draining; ignored"));
    free(log);
    finish(&s);
    free(body);
}
END_TEST

/* A body of exactly len bytes: a small valid request after leading spaces. */
static char *padded_body(size_t len) {
    static const char small[] = "{" E2 "," W2 "}";
    char *b = malloc(len + 1);
    memset(b, ' ', len);
    memcpy(b + len - (sizeof small - 1), small, sizeof small - 1);
    b[len] = 0;
    return b;
}

static char *post_head(const char *id, size_t content_length) {
    char *h = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&h, &n);
    fprintf(f,
            "POST /v1/attention HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "X-Request-Id: %s\r\n",
            id);
    if (content_length != (size_t)-1)
        fprintf(f, "Content-Length: %zu\r\n\r\n", content_length);
    else
        fputs("Transfer-Encoding: chunked\r\n\r\n", f);
    fclose(f);
    return h;
}

static void assert_raw_overloaded(const char *raw) {
    ck_assert_msg(strncmp(raw, "HTTP/1.1 503", 12) == 0, "got: %.300s", raw);
    ck_assert_ptr_nonnull(strstr(raw, "\"overloaded\""));
    char *ra = raw_header(raw, "Retry-After");
    ck_assert_ptr_nonnull(ra);
    free(ra);
}

#define BUDGET    102400
#define SLOW_BODY 60000

/* --max-inflight-bytes bounds the request bodies held at once. */
START_TEST(body_budget) {
    hs_server s;
    static const char *const args[] = {
        "--workers", "1", "--max-body-bytes", "64k", "--max-inflight-bytes", "100k", NULL};
    ck_assert_int_eq(hs_start(&s, args), 0);
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_body_bytes_capacity ", BUDGET, 1), BUDGET);
    char *body = padded_body(SLOW_BODY);

    /* A slow upload within the budget holds its declared length... */
    int a = hs_raw_open(s.port);
    ck_assert_int_ge(a, 0);
    char *head = post_head("slow-a", SLOW_BODY);
    ck_assert_int_eq(hs_raw_send(a, head, strlen(head)), 0);
    free(head);
    ck_assert_int_eq(hs_raw_send(a, body, 1000), 0);
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_body_bytes_reserved ", SLOW_BODY, 10),
                     SLOW_BODY);

    /* ...so that concurrent slow uploads beyond it are refused at once,
     * from their headers, without waiting for their bodies. */
    enum { B = 3 };
    int b[B];
    for (int i = 0; i < B; i++) {
        char id[32];
        snprintf(id, sizeof id, "slow-b%d", i);
        b[i] = hs_raw_open(s.port);
        ck_assert_int_ge(b[i], 0);
        head = post_head(id, SLOW_BODY);
        ck_assert_int_eq(hs_raw_send(b[i], head, strlen(head)), 0);
        free(head);
        ck_assert_int_eq(hs_raw_send(b[i], body, 1000), 0);
    }
    for (int i = 0; i < B; i++) {
        char *raw = hs_raw_recv(b[i], 5.0);
        assert_raw_overloaded(raw);
        free(raw);
        close(b[i]);
    }
    /* So is a chunked body (no Content-Length), whose first piece the
     * budget cannot hold. */
    int c = hs_raw_open(s.port);
    head = post_head("chunked-c", (size_t)-1);
    ck_assert_int_eq(hs_raw_send(c, head, strlen(head)), 0);
    free(head);
    char *raw = hs_raw_recv(c, 5.0);
    assert_raw_overloaded(raw);
    free(raw);
    close(c);
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_body_bytes_reserved ", SLOW_BODY, 5),
                     SLOW_BODY);

    /* The upload within the budget completes and is answered. */
    ck_assert_int_eq(hs_raw_send(a, body + 1000, SLOW_BODY - 1000), 0);
    raw = hs_raw_recv(a, 10.0);
    ck_assert_msg(strncmp(raw, "HTTP/1.1 200", 12) == 0, "got: %.300s", raw);
    ck_assert_ptr_nonnull(strstr(raw, "\"embeddings\""));
    free(raw);
    close(a);

    /* Afterwards the budget is whole again. */
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_body_bytes_reserved ", 0, 5), 0);
    for (int i = 0; i < 2; i++) {
        hs_response r = post(s.port, body);
        ck_assert_msg(r.status == 200, "status %ld: %s", r.status, r.body);
        hs_response_free(&r);
    }
    /* and a chunked body within it is taken too, once the posts' bodies
     * are given back (their completion may come just after the answer) */
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_body_bytes_reserved ", 0, 5), 0);
    c = hs_raw_open(s.port);
    head = post_head("chunked-d", (size_t)-1);
    static const char small[] = "{" E2 "," W2 "}";
    char piece[256];
    snprintf(piece, sizeof piece, "%zx\r\n%s\r\n0\r\n\r\n", sizeof small - 1, small);
    ck_assert_int_eq(hs_raw_send(c, head, strlen(head)), 0);
    ck_assert_int_eq(hs_raw_send(c, piece, strlen(piece)), 0);
    free(head);
    raw = hs_raw_recv(c, 5.0);
    ck_assert_msg(strncmp(raw, "HTTP/1.1 200", 12) == 0, "got: %.300s", raw);
    free(raw);
    close(c);
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_body_bytes_reserved ", 0, 5), 0);

    hs_response r;
    hs_request(NULL, s.port, "GET", "/metrics", NULL, NULL, 0, &r);
    ck_assert_ptr_nonnull(
        strstr(r.body, "attn_http_requests_total{route=\"attention\",code=\"503\"} 4\n"));
    hs_response_free(&r);
    free(body);
    finish(&s);
}
END_TEST

/* Bodies are reserved as they arrive: one that outgrows what the budget
 * has left is read to its end, discarded and refused 503; the one that
 * held its share is served. */
START_TEST(body_budget_outgrown) {
    hs_server s;
    static const char *const args[] = {
        "--workers", "1", "--max-body-bytes", "96k", "--max-inflight-bytes", "100k", NULL};
    ck_assert_int_eq(hs_start(&s, args), 0);
    enum { HELD = 30000 };
    char *body = padded_body(HELD);
    int a = hs_raw_open(s.port);
    char *head = post_head("held", HELD);
    ck_assert_int_eq(hs_raw_send(a, head, strlen(head)), 0);
    ck_assert_int_eq(hs_raw_send(a, body, 1000), 0);
    free(head);
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_body_bytes_reserved ", HELD, 10), HELD);
    /* 64 KiB fit beside it, 96 KiB do not */
    int c = hs_raw_open(s.port);
    head = post_head("outgrown", (size_t)-1);
    ck_assert_int_eq(hs_raw_send(c, head, strlen(head)), 0);
    free(head);
    char chunk[4200];
    snprintf(chunk, sizeof chunk, "1000\r\n%4096s\r\n", "");
    for (int i = 0; i < 20; i++)
        ck_assert_int_eq(hs_raw_send(c, chunk, strlen(chunk)), 0);
    ck_assert_int_eq(hs_raw_send(c, "0\r\n\r\n", 5), 0);
    char *raw = hs_raw_recv(c, 5.0);
    assert_raw_overloaded(raw);
    free(raw);
    close(c);
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_body_bytes_reserved ", HELD, 5), HELD);
    ck_assert_int_eq(hs_raw_send(a, body + 1000, HELD - 1000), 0);
    raw = hs_raw_recv(a, 10.0);
    ck_assert_msg(strncmp(raw, "HTTP/1.1 200", 12) == 0, "got: %.300s", raw);
    free(raw);
    close(a);
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_body_bytes_reserved ", 0, 5), 0);
    free(body);
    finish(&s);
}
END_TEST

/* --max-connections: connections past the limit are closed unanswered. */
START_TEST(connection_limit) {
    hs_server s;
    static const char *const args[] = {"--io-threads", "1", "--max-connections", "2", NULL};
    ck_assert_int_eq(hs_start(&s, args), 0);
    int idle[2];
    for (int i = 0; i < 2; i++) {
        idle[i] = hs_raw_open(s.port);
        ck_assert_int_ge(idle[i], 0);
    }
    const char *get = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    ck_assert_int_eq(hs_raw_send(idle[0], get, strlen(get)), 0);
    char *raw = hs_raw_recv(idle[0], 5.0);
    ck_assert_msg(strncmp(raw, "HTTP/1.1 200", 12) == 0, "got: %.200s", raw);
    free(raw);
    raw = hs_raw(s.port, get, strlen(get), 2.0);
    ck_assert_msg(raw == NULL || raw[0] == 0, "a third connection was served: %.200s", raw);
    free(raw);
    for (int i = 0; i < 2; i++)
        close(idle[i]);
    /* once they are gone, new ones are taken */
    ck_assert_msg(hs_wait_served(s.port, "/healthz", 2),
                  "no connection taken after the others closed");
    finish(&s);
}
END_TEST

/* Sends a heavy request with id on a raw connection; returns the socket. */
static int send_heavy(unsigned port, const char *body, const char *id) {
    int fd = hs_raw_open(port);
    ck_assert_int_ge(fd, 0);
    char *head = post_head(id, strlen(body));
    ck_assert_int_eq(hs_raw_send(fd, head, strlen(head)), 0);
    ck_assert_int_eq(hs_raw_send(fd, body, strlen(body)), 0);
    free(head);
    return fd;
}

/* A client that hangs up while its job runs or waits is logged and counted
 * as 499, not as the 200 it never got; the exchange is freed once (the
 * sanitizer build checks that) and the server goes on serving. */
START_TEST(client_gone) {
    hs_server s;
    static const char *const args[] = {"--workers", "1", "--queue-depth", "8", NULL};
    ck_assert_int_eq(hs_start(&s, args), 0);
    char *body = heavy_body(1024);

    /* one that gives up halfway through its upload (its half is in once
     * the budget holds as much: bodies are reserved as they arrive) */
    int half = hs_raw_open(s.port);
    char *head = post_head("gone-uploading", strlen(body));
    ck_assert_int_eq(hs_raw_send(half, head, strlen(head)), 0);
    ck_assert_int_eq(hs_raw_send(half, body, strlen(body) / 2), 0);
    free(head);
    ck_assert_int_ge(
        hs_wait_metric_at_least(s.port, "\nattn_body_bytes_reserved ", (long)strlen(body) / 2, 10),
        (long)strlen(body) / 2);
    hs_raw_reset(half);
    /* one whose job is running, one whose job is queued behind it (both
     * leave once both are in place: a running job whose client left stops,
     * and would not keep the other queued) */
    int running = send_heavy(s.port, body, "gone-running");
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_workers_busy ", 1, 10), 1);
    int queued = send_heavy(s.port, body, "gone-queued");
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_queue_depth ", 1, 10), 1);
    hs_raw_reset(running);
    hs_raw_reset(queued);

    poster ps = {.port = s.port, .body = body};
    post_thread(&ps);
    ck_assert_msg(ps.rc == CURLE_OK && ps.status == 200, "rc %d status %ld", ps.rc, ps.status);
    assert_healthy(s.port);

    static const char *const ids[] = {"gone-running", "gone-queued", "gone-uploading"};
    for (int i = 0; i < 3; i++) {
        char *line = hs_wait_access_line(&s, ids[i], 10);
        if (!line) {
            char *log = hs_log(&s);
            ck_abort_msg("no access line for %s; log:\n%s", ids[i], log);
        }
        ck_assert_msg(strstr(line, "access POST /v1/attention 499 0B "), "%s", line);
        free(line);
    }
    ck_assert_int_eq(
        hs_wait_metric(s.port, "attn_http_requests_total{route=\"attention\",code=\"499\"} ", 3, 5),
        3);
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_body_bytes_reserved ", 0, 5), 0);
    free(body);
    finish(&s);
}
END_TEST

/* The CPU seconds process pid has used (user and system), or -1. */
static double cpu_seconds(pid_t pid) {
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = 0;
    const char *p = strrchr(text, ')'); /* the name may hold spaces */
    unsigned long utime, stime;
    if (!p ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2)
        return -1;
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

/* A computation that is not split (one worker) still ends soon after its
 * client leaves: it asks between its tasks, not only between phases. The
 * one here would hold the worker for minutes; its worker must be free
 * again well within the wait (which only a failing run waits out). */
START_TEST(client_gone_unsplit) {
    hs_server s;
    static const char *const args[] = {"--workers", "1", "--max-tokens", "16384", "--max-flops",
                                       "1e15",      NULL};
    ck_assert_int_eq(hs_start(&s, args), 0);
    /* counted as little before pairs were charged, and minutes whole: the
     * exp, tanh and ALiBi of its 128 · n² pairs are nearly all of it */
    char *body = tf_narrow_heads_body(16384, "\"return\":[\"embeddings\"],",
                                      "\"softcap\":30,\"alibi\":true,");
    double cpu0 = cpu_seconds(s.pid);
    ck_assert(cpu0 >= 0);
    int fd = send_heavy(s.port, body, "gone-unsplit");
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_workers_busy ", 1, 20), 1);
    /* well into the attention (its decode and projection take
     * milliseconds): by the server's own CPU time, not the clock */
    for (int i = 0; i < 400 && cpu_seconds(s.pid) < cpu0 + 1.5; i++)
        usleep(50 * 1000);
    ck_assert(cpu_seconds(s.pid) >= cpu0 + 1.5);
    hs_raw_reset(fd);
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_workers_busy ", 0, 40), 0);
    char *line = hs_wait_access_line(&s, "gone-unsplit", 10);
    ck_assert_msg(line && strstr(line, "access POST /v1/attention 499 0B "), "%s",
                  line ? line : "(no access line)");
    free(line);
    assert_healthy(s.port);
    free(body);
    finish(&s);
}
END_TEST

/* Every limit on a request's size, just over it: 422 limit_exceeded,
 * naming the limit; just at it, the request goes on (to 200, or to
 * another error when the body is otherwise wrong). */
static char *limits_body(int n, int dm, int heads, const char *tokens_json) {
    char *b = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&b, &len);
    fputs("{", f);
    if (tokens_json) fprintf(f, "\"tokens\":%s,", tokens_json);
    fputs("\"embeddings\":[", f);
    for (int r = 0; r < n; r++) {
        fputs(r ? ",[" : "[", f);
        for (int c = 0; c < dm; c++)
            fprintf(f, "%s%g", c ? "," : "", (r + c) % 3 * 0.5 - 0.5);
        fputs("]", f);
    }
    fputs("],\"weights\":{\"heads\":[", f);
    int dh = 1;
    for (int h = 0; h < heads; h++) {
        fputs(h ? ",{" : "{", f);
        const char *m[] = {"w_q", "w_k", "w_v"};
        for (int k = 0; k < 3; k++) {
            fprintf(f, "%s\"%s\":[", k ? "," : "", m[k]);
            for (int r = 0; r < dm; r++)
                fprintf(f, "%s[%g]", r ? "," : "", (r + k + h) % 2 ? 0.5 : -0.25);
            fputs("]", f);
        }
        fputs("}", f);
    }
    fputs("],\"w_o\":[", f);
    for (int r = 0; r < heads * dh; r++) {
        fputs(r ? ",[" : "[", f);
        for (int c = 0; c < dm; c++)
            fprintf(f, "%s%g", c ? "," : "", r == c ? 1.0 : 0.0);
        fputs("]", f);
    }
    fputs("]}}", f);
    fclose(f);
    return b;
}

static void expect_limit(unsigned port, char *body, long status, const char *code,
                         const char *mentions) {
    hs_response r = post(port, body);
    if (status == 200) {
        ck_assert_msg(r.status == 200, "%ld: %s", r.status, r.body);
        hs_response_free(&r);
    } else {
        json_t *e = assert_error(&r, status, code);
        if (mentions) {
            const char *msg =
                json_string_value(json_object_get(json_object_get(e, "error"), "message"));
            ck_assert_msg(msg && strstr(msg, mentions), "message: %s", msg ? msg : "(none)");
        }
        json_decref(e);
        hs_response_free(&r);
    }
    free(body);
}

START_TEST(limits_just_over) {
    hs_server s;
    static const char *const args[] = {"--max-tokens",
                                       "4",
                                       "--max-heads",
                                       "2",
                                       "--max-d-model",
                                       "4",
                                       "--max-flops",
                                       "3000",
                                       "--max-json-depth",
                                       "8",
                                       "--max-string-bytes",
                                       "64",
                                       NULL};
    ck_assert_int_eq(hs_start(&s, args), 0);
    unsigned port = s.port;
    /* n = 2, d_model 4, 2 heads of 1: 1,920 flops (its pairs and rows
     * cost most: attn_input_flops); n = 4: 5,824 */
    expect_limit(port, limits_body(2, 4, 2, NULL), 200, NULL, NULL);
    expect_limit(port, limits_body(5, 4, 2, NULL), 422, "limit_exceeded", "max_tokens");
    expect_limit(port, limits_body(4, 4, 2, NULL), 422, "limit_exceeded", "max_flops");
    expect_limit(port, limits_body(2, 4, 3, NULL), 422, "limit_exceeded", "max_heads");
    expect_limit(port, limits_body(2, 5, 2, NULL), 422, "limit_exceeded", "max_d_model");
    /* strings: 64 bytes pass, 65 do not */
    char tokens[200];
    snprintf(tokens, sizeof tokens, "[\"%064d\",\"b\"]", 7);
    expect_limit(port, limits_body(2, 4, 2, tokens), 200, NULL, NULL);
    snprintf(tokens, sizeof tokens, "[\"%065d\",\"b\"]", 7);
    expect_limit(port, limits_body(2, 4, 2, tokens), 422, "limit_exceeded", "max_string_bytes");
    /* nesting: 8 levels are read (and found the wrong type), 9 are not */
    expect_limit(port, limits_body(2, 4, 2, "[[[[[[[\"a\"]]]]]]]"), 400, "wrong_type", NULL);
    expect_limit(port, limits_body(2, 4, 2, "[[[[[[[[\"a\"]]]]]]]]"), 422, "limit_exceeded",
                 "max_json_depth");
    assert_healthy(port);
    finish(&s);
}
END_TEST

/* Out of memory on one request: with the server's address space limited,
 * a request whose outputs and answer cannot be had gets 503
 * out_of_memory, and the server goes on serving the next. Not under a
 * sanitizer or valgrind, which reserve address space of their own. */
static long vm_size_kb(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmSize:", 7) == 0) kb = strtol(line + 7, NULL, 10);
    if (f) fclose(f);
    return kb;
}

/* n tokens of d_model 2, one head, its patterns asked for in base64:
 * n² floats of output and 4/3 of that in answer. */
static char *patterns_body(int n) {
    char *b = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&b, &len);
    fputs("{\"encoding\":\"base64\",\"return\":[\"patterns\"],\"embeddings\":[", f);
    for (int r = 0; r < n; r++)
        fprintf(f, "%s[%d,%d]", r ? "," : "", r % 3 - 1, r % 2);
    fputs("],\"weights\":{\"heads\":[{\"w_q\":[[1,0],[0,1]],\"w_k\":[[1,0],[0,1]],"
          "\"w_v\":[[1,0],[0,1]]}]}}",
          f);
    fclose(f);
    return b;
}

START_TEST(out_of_memory_one_request) {
#if defined(__SANITIZE_ADDRESS__)
    return;
#endif
    if (getenv("ATTN_SERVER_WRAPPER")) return;
    static const char *const args[] = {"--workers", "1", "--inline-max-flops", "0", NULL};
    char *small = patterns_body(64), *big = patterns_body(6000); /* 144 MB + 192 MB */
    /* the address space a served server takes, its threads' heaps made */
    hs_server s;
    ck_assert_int_eq(hs_start(&s, args), 0);
    for (int i = 0; i < 4; i++) {
        hs_response r = post(s.port, small);
        ck_assert_int_eq(r.status, 200);
        hs_response_free(&r);
    }
    long vsz = vm_size_kb(s.pid);
    ck_assert_int_gt(vsz, 0);
    finish(&s);

    ck_assert_int_eq(hs_start_limited(&s, args, (size_t)(vsz + 160 * 1024) * 1024), 0);
    for (int i = 0; i < 4; i++) {
        hs_response r = post(s.port, small);
        ck_assert_int_eq(r.status, 200);
        hs_response_free(&r);
    }
    hs_response r = post(s.port, big);
    json_decref(assert_error(&r, 503, "out_of_memory"));
    hs_response_free(&r);
    r = post(s.port, small);
    ck_assert_int_eq(r.status, 200);
    hs_response_free(&r);
    assert_healthy(s.port);
    free(small), free(big);
    finish(&s);
}
END_TEST

/* Slow clients: one that connects and sends nothing, and one that sends
 * its body a byte at a time (never idle long enough for libmicrohttpd's
 * idle timeout), are both dropped after --connection-timeout, without a
 * worker ever being taken; other clients are served meanwhile. */
typedef struct trickler {
    unsigned port;
    double seconds; /* until the server dropped it, or -1 */
    atomic_int done;
} trickler;

static void *trickle_thread(void *arg) {
    trickler *t = arg;
    t->seconds = -1;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0); /* not after the server's clock starts */
    int fd = hs_raw_open(t->port);
    int broke = fd < 0;
    char *head = post_head("slow-trickle", 1000);
    broke = broke || hs_raw_send(fd, head, strlen(head)) != 0;
    free(head);
    /* a byte every 0.25 s, for 20 s at most: ten times the deadline, which
     * only a server that never drops it waits out */
    for (int i = 0; i < 80 && !broke; i++) {
        usleep(250000);
        broke = hs_raw_send(fd, " ", 1) != 0;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (broke) t->seconds = (double)(now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9;
    if (fd >= 0) close(fd);
    atomic_store(&t->done, 1);
    return NULL;
}

START_TEST(slow_clients_dropped) {
    hs_server s;
    static const char *const args[] = {"--connection-timeout", "2", "--workers", "1", NULL};
    ck_assert_int_eq(hs_start(&s, args), 0);
    int silent = hs_raw_open(s.port);
    ck_assert_int_ge(silent, 0);
    trickler t = {.port = s.port};
    atomic_init(&t.done, 0);
    pthread_t th;
    pthread_create(&th, NULL, trickle_thread, &t);

    /* served meanwhile, until the trickling one is gone, and no worker held
     * by the slow ones */
    problem p = problem_random(4, 8, 2, 4, 1, 0, 1, 11);
    char *body = problem_json(&p, NULL);
    for (int i = 0; i < 10 || !atomic_load(&t.done); i++) {
        hs_response r = post(s.port, body);
        ck_assert_int_eq(r.status, 200);
        hs_response_free(&r);
        ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_workers_busy ", 0, 10), 0);
        usleep(100000); /* a client now and then, not a flood */
    }
    /* the silent one: closed by the server (after about 2 s) */
    char *got = hs_raw_recv(silent, 20.0);
    ck_assert_ptr_nonnull(got); /* "" once the server closed it */
    free(got);
    close(silent);
    pthread_join(th, NULL);
    /* dropped, and not before its deadline */
    ck_assert_msg(t.seconds > 1.5, "trickling client dropped after %.2f s (-1: never)", t.seconds);
    char *line = hs_wait_access_line(&s, "slow-trickle", 10);
    ck_assert_msg(line && strstr(line, " 408 "), "access line: %s", line ? line : "(none)");
    free(line);
    assert_healthy(s.port);
    free(body);
    problem_free(&p);
    finish(&s);
}
END_TEST

/* After a large body the worker gives the decoded request's heap back: one
 * 40 MB body once left ~130 MB resident for good. */
START_TEST(memory_returned_after_large_body) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return; /* the sanitizer's allocator keeps its own pages */
#endif
    hs_server s;
    static const char *const args[] = {"--workers", "1", NULL};
    ck_assert_int_eq(hs_start(&s, args), 0);
    problem p = problem_random(4, 1024, 8, 128, 0, 0, 0, 5);
    char *body = problem_json(&p, "\"return\":[\"delta\"]");
    problem_free(&p);
    hs_response r = post(s.port, "{" E2 "," W2 "}"); /* warm up */
    ck_assert_int_eq(r.status, 200);
    hs_response_free(&r);
    long before = hs_rss_kb(&s);
    r = post(s.port, body);
    ck_assert_msg(r.status == 200, "status %ld: %.300s", r.status, r.body);
    hs_response_free(&r);
    /* the completion callback, which frees the body copy, has run: nothing
     * is in flight but the metrics request asking */
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_http_requests_in_flight ", 1, 10), 1);
    long after = hs_rss_kb(&s);
    ck_assert_msg(before > 0 && after > 0, "no VmRSS");
    ck_assert_msg(after - before < 48 * 1024,
                  "resident %ld kB before, %ld kB after a %zu-byte body", before, after,
                  strlen(body));
    free(body);
    finish(&s);
}
END_TEST

/* --------------------------------------------------------------- main */

static Suite *http_suite(void) {
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("shared");
    tcase_add_unchecked_fixture(tc, shared_start, shared_stop);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, endpoints);
    tcase_add_test(tc, teaching_page);
    tcase_add_loop_test(tc, error_bodies, 0, sizeof bad_bodies / sizeof bad_bodies[0]);
    tcase_add_test(tc, error_model_names);
    tcase_add_test(tc, error_routes);
    tcase_add_test(tc, json_content_types_accepted);
    tcase_add_test(tc, body_too_large);
    tcase_add_test(tc, request_ids);
    tcase_add_test(tc, example_wo_ai_ni);
    tcase_add_test(tc, example_two_heads_causal);
    tcase_add_test(tc, example_stack_of_layers);
    tcase_add_test(tc, example_stack_hidden_states);
    tcase_add_test(tc, concurrent_clients);
    tcase_add_test(tc, inline_queue_time_excludes_decode);
    suite_add_tcase(s, tc);

    tc = tcase_create("lifecycle");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, overload_503);
    tcase_add_test(tc, tiny_requests_inline);
    tcase_add_test(tc, slow_clients_dropped);
    tcase_add_test(tc, limits_just_over);
    tcase_add_test(tc, out_of_memory_one_request);
    tcase_add_test(tc, sigterm_drains);
    tcase_add_test(tc, second_sigterm_during_drain);
    tcase_add_test(tc, body_budget);
    tcase_add_test(tc, body_budget_outgrown);
    tcase_add_test(tc, connection_limit);
    tcase_add_test(tc, client_gone);
    tcase_add_test(tc, client_gone_unsplit);
    tcase_add_test(tc, memory_returned_after_large_body);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    SRunner *sr = srunner_create(http_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr) + shared_unclean;
    srunner_free(sr);
    curl_global_cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
