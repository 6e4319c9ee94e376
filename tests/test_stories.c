/*
 * test_stories.c — demo-stories tells its stories, through the API.
 *
 * The built server serves the built-in demo-stories (written here with the
 * generator's function); every request sends tokens alone. The test reads
 * the model back as a client would (GET /v1/models/demo-stories with
 * ?weights=true&vocabulary=true) and, from those numbers only, computes
 * each sentence in float64: E = token row + position row, Q, K, V per
 * head, scores, mask, softmax, Z, ΔE. The server's answers must equal that
 * reference, and the reference's numbers must say what each story claims
 * (models/README.md, "demo-stories"):
 *
 *   1 adjective → noun   creature's row of head 0: fluffy + blue ≥ 0.8, each
 *                        ≥ 0.3; forest's: verdant ≥ 0.6; creature's E + ΔE
 *                        positive on colour and texture, where its E is 0
 *   2 context → meaning  mask none: mole's E + ΔE largest on animal,
 *                        chemistry, medicine in the three sentences, its
 *                        token row the same in all three
 *   3 refinement         tower's paris grows with eiffel, its small with
 *                        miniature, paris kept; each gain mostly from that
 *                        word's key (weight × value, summed over heads)
 *   4 two readings       harry: head 2's part fiction > royalty after wizard,
 *                        head 3's part royalty > fiction after queen sussex
 *                        william; E + ΔE follows
 *   5 previous token     head 4: ≥ 0.9 on the token before (the first on
 *                        itself), every sentence up to the position table's
 *                        16 tokens, both masks
 *
 * The claims are checked on the server's numbers.
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/fixtures.h"
#include "tests/http_harness.h"

#define MAX_N  20
#define MAX_DM 16
#define MAX_H  5
#define MAX_DH 4

/* The model as a client reads it. */
typedef struct model {
    size_t dm, h, dh, vocab, positions;
    char names[MAX_DM][16];
    double w_q[MAX_H][MAX_DM][MAX_DH], w_k[MAX_H][MAX_DM][MAX_DH], w_v[MAX_H][MAX_DM][MAX_DH];
    double b_q[MAX_H][MAX_DH], b_k[MAX_H][MAX_DH], b_v[MAX_H][MAX_DH];
    double w_o[MAX_H * MAX_DH][MAX_DM];
    json_t *tokens; /* the vocabulary's strings */
    double (*token_rows)[MAX_DM];
    double position_rows[MAX_N][MAX_DM];
} model;

/* One sentence: the server's answer beside the float64 reference. */
typedef struct run {
    size_t n;
    char words[MAX_N][16];
    double e[MAX_N][MAX_DM];                         /* the reference's E */
    double p[MAX_H][MAX_N][MAX_N];                   /* the server's patterns */
    double v[MAX_H][MAX_N][MAX_DH];                  /* the server's V */
    double part[MAX_H][MAX_N][MAX_DM];               /* the server's Z_i · W_o, per head */
    double from_key[MAX_N][MAX_N][MAX_DM];           /* [q][k]: Σ_i P_i[q][k] · V_i[k] · W_o,i */
    double delta[MAX_N][MAX_DM], out[MAX_N][MAX_DM]; /* the server's ΔE and E + ΔE */
} run;

static hs_server server;
static char models[256];
static model m;

static json_t *call(const char *method, const char *path, const char *body, long want) {
    hs_response r;
    ck_assert_int_eq(
        hs_request(NULL, server.port, method, path, NULL, body, body ? strlen(body) : 0, &r),
        CURLE_OK);
    ck_assert_msg(r.status == want, "%s %s: status %ld, want %ld: %.400s", method, path, r.status,
                  want, r.body);
    json_error_t jerr;
    json_t *j = json_loadb(r.body, r.len, 0, &jerr);
    ck_assert_msg(j != NULL, "%s %s: not JSON: %s", method, path, jerr.text);
    hs_response_free(&r);
    return j;
}

/* rows × cols of a JSON matrix into dst (row stride `stride` doubles). */
static void read_matrix(const json_t *a, size_t rows, size_t cols, double *dst, size_t stride) {
    ck_assert_msg(json_is_array(a) && json_array_size(a) == rows, "want %zu rows", rows);
    for (size_t r = 0; r < rows; r++) {
        const json_t *row = json_array_get(a, r);
        ck_assert_msg(json_array_size(row) == cols, "row %zu: want %zu columns", r, cols);
        for (size_t c = 0; c < cols; c++)
            dst[r * stride + c] = tf_num(json_array_get(row, c));
    }
}

static void read_vector(const json_t *a, size_t n, double *dst) {
    if (!a) {
        for (size_t i = 0; i < n; i++)
            dst[i] = 0;
        return;
    }
    ck_assert_uint_eq(json_array_size(a), n);
    for (size_t i = 0; i < n; i++)
        dst[i] = tf_num(json_array_get(a, i));
}

static void load_model(void) {
    json_t *j = call("GET", "/v1/models/demo-stories?weights=true&vocabulary=true", NULL, 200);
    memset(&m, 0, sizeof m);
    m.dm = (size_t)json_integer_value(json_object_get(j, "d_model"));
    m.h = (size_t)json_integer_value(json_object_get(j, "n_heads"));
    m.dh = (size_t)json_integer_value(json_object_get(j, "d_head"));
    ck_assert(m.dm == MAX_DM && m.h == MAX_H && m.dh == MAX_DH);
    ck_assert_str_eq(json_string_value(json_object_get(j, "mask")), "causal");

    const json_t *names = json_object_get(j, "dimensions");
    ck_assert_uint_eq(json_array_size(names), m.dm);
    for (size_t d = 0; d < m.dm; d++)
        snprintf(m.names[d], sizeof m.names[d], "%s", json_string_value(json_array_get(names, d)));

    const json_t *w = json_object_get(j, "weights");
    const json_t *heads = json_object_get(w, "heads");
    ck_assert_uint_eq(json_array_size(heads), m.h);
    for (size_t i = 0; i < m.h; i++) {
        const json_t *hd = json_array_get(heads, i);
        read_matrix(json_object_get(hd, "w_q"), m.dm, m.dh, &m.w_q[i][0][0], MAX_DH);
        read_matrix(json_object_get(hd, "w_k"), m.dm, m.dh, &m.w_k[i][0][0], MAX_DH);
        read_matrix(json_object_get(hd, "w_v"), m.dm, m.dh, &m.w_v[i][0][0], MAX_DH);
        read_vector(json_object_get(hd, "b_q"), m.dh, m.b_q[i]);
        read_vector(json_object_get(hd, "b_k"), m.dh, m.b_k[i]);
        read_vector(json_object_get(hd, "b_v"), m.dh, m.b_v[i]);
    }
    read_matrix(json_object_get(w, "w_o"), m.h * m.dh, m.dm, &m.w_o[0][0], MAX_DM);
    ck_assert_ptr_null(json_object_get(w, "b_o"));

    const json_t *voc = json_object_get(j, "vocabulary");
    m.tokens = json_incref(json_object_get(voc, "tokens"));
    m.vocab = json_array_size(m.tokens);
    ck_assert_uint_eq((size_t)json_integer_value(json_object_get(j, "vocabulary_size")), m.vocab);
    ck_assert_uint_ge(m.vocab, 30);
    m.token_rows = calloc(m.vocab, sizeof *m.token_rows);
    read_matrix(json_object_get(voc, "embeddings"), m.vocab, m.dm, &m.token_rows[0][0], MAX_DM);
    const json_t *pos = json_object_get(voc, "position_embeddings");
    m.positions = json_array_size(pos);
    ck_assert_uint_eq(m.positions, 16);
    read_matrix(pos, m.positions, m.dm, &m.position_rows[0][0], MAX_DM);
    json_decref(j);
}

static size_t dim(const char *name) {
    for (size_t d = 0; d < m.dm; d++)
        if (strcmp(m.names[d], name) == 0) return d;
    ck_abort_msg("no dimension '%s'", name);
    return 0;
}

static size_t token_row(const char *word) {
    for (size_t t = 0; t < m.vocab; t++)
        if (strcmp(json_string_value(json_array_get(m.tokens, t)), word) == 0) return t;
    ck_abort_msg("'%s' is not in the vocabulary", word);
    return 0;
}

/* Index of `word` in the run's sentence (its first occurrence). */
static size_t at(const run *r, const char *word) {
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->words[i], word) == 0) return i;
    ck_abort_msg("'%s' is not in the sentence", word);
    return 0;
}

/* The float64 reference of one sentence, checked against the server's
 * patterns, ΔE and E + ΔE. */
static void check_reference(const run *r, int causal) {
    size_t n = r->n;
    double ref_delta[MAX_N][MAX_DM] = {{0}};
    for (size_t i = 0; i < m.h; i++) {
        double q[MAX_N][MAX_DH], k[MAX_N][MAX_DH], v[MAX_N][MAX_DH];
        for (size_t t = 0; t < n; t++)
            for (size_t c = 0; c < m.dh; c++) {
                q[t][c] = m.b_q[i][c];
                k[t][c] = m.b_k[i][c];
                v[t][c] = m.b_v[i][c];
                for (size_t d = 0; d < m.dm; d++) {
                    q[t][c] += r->e[t][d] * m.w_q[i][d][c];
                    k[t][c] += r->e[t][d] * m.w_k[i][d][c];
                    v[t][c] += r->e[t][d] * m.w_v[i][d][c];
                }
            }
        for (size_t a = 0; a < n; a++) {
            double s[MAX_N], top = -INFINITY, sum = 0;
            size_t keys = causal ? a + 1 : n;
            for (size_t b = 0; b < keys; b++) {
                s[b] = 0;
                for (size_t c = 0; c < m.dh; c++)
                    s[b] += q[a][c] * k[b][c];
                s[b] /= sqrt((double)m.dh);
                if (s[b] > top) top = s[b];
            }
            for (size_t b = 0; b < keys; b++)
                sum += exp(s[b] - top);
            double z[MAX_DH] = {0};
            for (size_t b = 0; b < n; b++) {
                double p = b < keys ? exp(s[b] - top) / sum : 0;
                if (!(fabs(r->p[i][a][b] - p) <= 1e-5))
                    ck_abort_msg("head %zu, %s → %s: P %.7g, float64 %.7g", i, r->words[a],
                                 r->words[b], r->p[i][a][b], p);
                for (size_t c = 0; c < m.dh; c++)
                    z[c] += p * v[b][c];
            }
            for (size_t d = 0; d < m.dm; d++)
                for (size_t c = 0; c < m.dh; c++)
                    ref_delta[a][d] += z[c] * m.w_o[i * m.dh + c][d];
        }
    }
    for (size_t a = 0; a < n; a++)
        for (size_t d = 0; d < m.dm; d++) {
            double tol = 1e-5 * (1 + fabs(r->e[a][d]));
            ck_assert_msg(fabs(r->delta[a][d] - ref_delta[a][d]) <= tol &&
                              fabs(r->out[a][d] - (r->e[a][d] + ref_delta[a][d])) <= tol,
                          "%s on %s: ΔE %.7g, E + ΔE %.7g; float64 %.7g, %.7g", r->words[a],
                          m.names[d], r->delta[a][d], r->out[a][d], ref_delta[a][d],
                          r->e[a][d] + ref_delta[a][d]);
        }
}

/* Sends `sentence` (words split at spaces) as tokens alone, under `mask`
 * ("causal", "none"), and fills *r from the answer. */
static void tell(run *r, const char *sentence, const char *mask) {
    memset(r, 0, sizeof *r);
    json_t *tokens = json_array();
    char copy[256];
    snprintf(copy, sizeof copy, "%s", sentence);
    for (char *save, *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        ck_assert_uint_lt(r->n, MAX_N);
        snprintf(r->words[r->n], sizeof r->words[0], "%s", w);
        size_t row = token_row(w);
        for (size_t d = 0; d < m.dm; d++)
            r->e[r->n][d] = m.token_rows[row][d] + m.position_rows[r->n][d];
        r->n++;
        json_array_append_new(tokens, json_string(w));
    }
    json_t *req =
        json_pack("{s:s, s:o, s:s, s:[sssss]}", "model", "demo-stories", "tokens", tokens, "mask",
                  mask, "return", "patterns", "v", "head_outputs", "delta", "embeddings");
    char *body = json_dumps(req, JSON_COMPACT);
    json_t *j = call("POST", "/v1/attention", body, 200);
    free(body);
    json_decref(req);

    size_t n = r->n;
    ck_assert_uint_eq((size_t)json_integer_value(json_object_get(j, "n_tokens")), n);
    const json_t *p = json_object_get(j, "patterns"), *v = json_object_get(j, "v");
    const json_t *z = json_object_get(j, "head_outputs");
    ck_assert_uint_eq(json_array_size(p), m.h);
    for (size_t i = 0; i < m.h; i++) {
        read_matrix(json_array_get(p, i), n, n, &r->p[i][0][0], MAX_N);
        read_matrix(json_array_get(v, i), n, m.dh, &r->v[i][0][0], MAX_DH);
        double zi[MAX_N][MAX_DH];
        read_matrix(json_array_get(z, i), n, m.dh, &zi[0][0], MAX_DH);
        for (size_t a = 0; a < n; a++)
            for (size_t d = 0; d < m.dm; d++)
                for (size_t c = 0; c < m.dh; c++) {
                    double o = m.w_o[i * m.dh + c][d];
                    r->part[i][a][d] += zi[a][c] * o;
                    for (size_t b = 0; b < n; b++)
                        r->from_key[a][b][d] += r->p[i][a][b] * r->v[i][b][c] * o;
                }
    }
    read_matrix(json_object_get(j, "delta"), n, m.dm, &r->delta[0][0], MAX_DM);
    read_matrix(json_object_get(j, "embeddings"), n, m.dm, &r->out[0][0], MAX_DM);
    json_decref(j);
    check_reference(r, strcmp(mask, "causal") == 0);
}

static void setup(void) {
    static const char *const names[] = {"demo-stories", NULL};
    tf_models_dir(models, sizeof models, "stories", names);
    const char *args[] = {"--models-dir", models, NULL};
    ck_assert_int_eq(hs_start(&server, args), 0);
    load_model();
}

static void teardown(void) {
    char why[2048];
    int ok = hs_finish(&server, why, sizeof why);
    ck_assert_int_eq(tf_remove_dir(models), 0);
    json_decref(m.tokens);
    free(m.token_rows);
    ck_assert_msg(ok == 0, "%s", why);
}

START_TEST(adjective_to_noun) {
    run r;
    tell(&r, "a fluffy blue creature roamed the verdant forest", "causal");
    size_t creature = at(&r, "creature"), forest = at(&r, "forest");
    double fluffy = r.p[0][creature][at(&r, "fluffy")], blue = r.p[0][creature][at(&r, "blue")];
    ck_assert_msg(fluffy + blue >= 0.8 && fluffy >= 0.3 && blue >= 0.3,
                  "creature: fluffy %.3f, blue %.3f", fluffy, blue);
    double verdant = r.p[0][forest][at(&r, "verdant")];
    ck_assert_msg(verdant >= 0.6, "forest: verdant %.3f", verdant);
    size_t colour = dim("colour"), texture = dim("texture");
    ck_assert(r.e[creature][colour] == 0 && r.e[creature][texture] == 0);
    ck_assert_msg(r.out[creature][colour] > 0.3 && r.out[creature][texture] > 0.3,
                  "creature's E + ΔE: colour %.3f, texture %.3f", r.out[creature][colour],
                  r.out[creature][texture]);
    /* It is head 0's doing: its part carries them. */
    ck_assert(r.part[0][creature][colour] > 0.3 && r.part[0][creature][texture] > 0.3);
}
END_TEST

START_TEST(context_gives_meaning) {
    static const struct {
        const char *sentence, *meaning;
    } moles[] = {
        {"american shrew mole", "animal"},
        {"one mole of carbon dioxide", "chemistry"},
        {"take a biopsy of the mole", "medicine"},
    };
    const char *meanings[] = {"animal", "chemistry", "medicine"};
    size_t row = token_row("mole");
    for (size_t s = 0; s < 3; s++) {
        run r;
        tell(&r, moles[s].sentence, "none");
        size_t mole = at(&r, "mole");
        /* The same word: its E is its token row plus its position's row,
         * which is 0 outside pos and pos_sq. */
        for (size_t d = 0; d < m.dm; d++)
            if (d != dim("pos") && d != dim("pos_sq"))
                ck_assert(r.e[mole][d] == m.token_rows[row][d]);
        size_t want = dim(moles[s].meaning);
        for (size_t k = 0; k < 3; k++) {
            size_t other = dim(meanings[k]);
            if (other == want) continue;
            ck_assert_msg(r.out[mole][want] > r.out[mole][other] + 0.5, "%s: mole %s %.3f, %s %.3f",
                          moles[s].sentence, moles[s].meaning, r.out[mole][want], meanings[k],
                          r.out[mole][other]);
        }
    }
}
END_TEST

START_TEST(refinement) {
    run plain, eiffel, miniature;
    tell(&plain, "tower", "causal");
    tell(&eiffel, "eiffel tower", "causal");
    tell(&miniature, "miniature eiffel tower", "causal");
    size_t paris = dim("paris"), small = dim("small");
    size_t t0 = at(&plain, "tower"), t1 = at(&eiffel, "tower"), t2 = at(&miniature, "tower");
    ck_assert_msg(eiffel.out[t1][paris] > plain.out[t0][paris] + 0.5, "paris: %.3f, then %.3f",
                  plain.out[t0][paris], eiffel.out[t1][paris]);
    ck_assert_msg(miniature.out[t2][small] > eiffel.out[t1][small] + 0.5, "small: %.3f, then %.3f",
                  eiffel.out[t1][small], miniature.out[t2][small]);
    ck_assert_msg(miniature.out[t2][paris] > 0.9 * eiffel.out[t1][paris],
                  "paris kept: %.3f of %.3f", miniature.out[t2][paris], eiffel.out[t1][paris]);
    /* Each gain comes from that word's key. */
    ck_assert(eiffel.from_key[t1][at(&eiffel, "eiffel")][paris] > 0.9 * eiffel.delta[t1][paris]);
    ck_assert(miniature.from_key[t2][at(&miniature, "miniature")][small] >
              0.9 * miniature.delta[t2][small]);
    /* And the per-key parts add up to the server's ΔE (no b_o). */
    for (size_t d = 0; d < m.dm; d++) {
        double sum = 0;
        for (size_t k = 0; k < miniature.n; k++)
            sum += miniature.from_key[t2][k][d];
        ck_assert(fabs(sum - miniature.delta[t2][d]) <= 1e-5);
    }
}
END_TEST

START_TEST(two_heads_two_readings) {
    run wizard, royal;
    tell(&wizard, "wizard harry", "causal");
    tell(&royal, "queen sussex william harry", "causal");
    size_t fiction = dim("fiction"), royalty = dim("royalty");
    size_t h1 = at(&wizard, "harry"), h2 = at(&royal, "harry");
    ck_assert(wizard.e[h1][fiction] == 0 && wizard.e[h1][royalty] == 0);
    ck_assert_msg(wizard.part[2][h1][fiction] > 0.5 &&
                      wizard.part[2][h1][fiction] > wizard.part[2][h1][royalty],
                  "head 2's part after wizard: fiction %.3f, royalty %.3f",
                  wizard.part[2][h1][fiction], wizard.part[2][h1][royalty]);
    ck_assert_msg(royal.part[3][h2][royalty] > 0.5 &&
                      royal.part[3][h2][royalty] > royal.part[3][h2][fiction],
                  "head 3's part after the royals: royalty %.3f, fiction %.3f",
                  royal.part[3][h2][royalty], royal.part[3][h2][fiction]);
    ck_assert(wizard.out[h1][fiction] > wizard.out[h1][royalty] + 0.5);
    ck_assert(royal.out[h2][royalty] > royal.out[h2][fiction] + 0.5);
}
END_TEST

/* Head 4 in `r`: every row at least 0.9 on the token before. */
static void check_previous(const run *r, const char *what) {
    for (size_t a = 0; a < r->n; a++) {
        size_t before = a ? a - 1 : 0;
        ck_assert_msg(r->p[4][a][before] >= 0.9, "%s: row %zu (%s) puts %.3f on %zu", what, a,
                      r->words[a], r->p[4][a][before], before);
    }
}

START_TEST(previous_token) {
    static const char *const sentences[] = {
        "a fluffy blue creature roamed the verdant forest",
        "american shrew mole",
        "one mole of carbon dioxide",
        "take a biopsy of the mole",
        "tower",
        "eiffel tower",
        "miniature eiffel tower",
        "wizard harry",
        "queen sussex william harry",
    };
    run r;
    for (size_t s = 0; s < sizeof sentences / sizeof sentences[0]; s++) {
        tell(&r, sentences[s], "causal");
        check_previous(&r, sentences[s]);
        tell(&r, sentences[s], "none");
        check_previous(&r, sentences[s]);
    }
    /* Any sentence up to the position table: words drawn in a fixed
     * order, repeats included, every length 1 … 16, both masks. */
    unsigned seed = 12345;
    for (size_t n = 1; n <= m.positions; n++) {
        char sentence[256] = "";
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            const char *w = json_string_value(json_array_get(m.tokens, (seed >> 16) % m.vocab));
            strcat(sentence, i ? " " : "");
            strcat(sentence, w);
        }
        tell(&r, sentence, n % 2 ? "causal" : "none");
        check_previous(&r, sentence);
    }
}
END_TEST

START_TEST(past_the_position_table) {
    json_t *tokens = json_array();
    for (size_t i = 0; i <= m.positions; i++)
        json_array_append_new(tokens, json_string("the"));
    json_t *req = json_pack("{s:s, s:o}", "model", "demo-stories", "tokens", tokens);
    char *body = json_dumps(req, JSON_COMPACT);
    json_t *j = call("POST", "/v1/attention", body, 422);
    free(body);
    json_decref(req);
    const json_t *e = json_object_get(j, "error");
    ck_assert_str_eq(json_string_value(json_object_get(e, "code")), "position_out_of_range");
    ck_assert_str_eq(json_string_value(json_object_get(e, "path")), "/tokens/16");
    json_decref(j);

    j = call("POST", "/v1/attention",
             "{\"model\":\"demo-stories\",\"tokens\":[\"a\",\"gruffalo\"]}", 422);
    e = json_object_get(j, "error");
    ck_assert_str_eq(json_string_value(json_object_get(e, "code")), "unknown_token");
    ck_assert_str_eq(json_string_value(json_object_get(e, "path")), "/tokens/1");
    json_decref(j);
}
END_TEST

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    Suite *s = suite_create("stories");
    TCase *tc = tcase_create("demo-stories");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, adjective_to_noun);
    tcase_add_test(tc, context_gives_meaning);
    tcase_add_test(tc, refinement);
    tcase_add_test(tc, two_heads_two_readings);
    tcase_add_test(tc, previous_token);
    tcase_add_test(tc, past_the_position_table);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    curl_global_cleanup();
    return failed ? 1 : 0;
}
