/*
 * test_arrays.c — the check suite of api/arrays.c: lifting arrays of
 * numbers out of the text must change nothing jansson decides.
 *
 * Differential, against jansson on the original text:
 *   - numbers: for millions of decimals (random floats written 6 to 17
 *     digits, random digit strings and exponents, subnormals, the overflow
 *     edge, the midpoints between floats, malformed ones), a one-number
 *     array is lifted exactly when jansson reads it as a number finite as a
 *     float32, and its value is jansson's double cast to float32, bit for
 *     bit, as matrix.c reads it, even where that double rounding differs
 *     from strtof's single one (those cases are counted: the fast path's
 *     shortcuts must not round them differently).
 *   - documents: valid request bodies and hundreds of thousands of random
 *     mutations of them (bytes deleted, inserted, replaced with JSON's own
 *     characters): jansson on the lifted text accepts exactly what it
 *     accepts on the original, with the same error text, line, column and
 *     position; and when it accepts, the trees are equal once each lifted
 *     array is put back, and the lifted numbers are the original ones.
 * And directly: which paths are lifted (under keys with escapes too, as
 * jansson reads them), which arrays are not (ragged, empty, mixed,
 * overflowing, a mask cell other than 0, 1, true, false); and the rules
 * the scan holds a body to before jansson (api_arrays_rules): what each
 * refuses, where, and that a body just within them passes.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/arrays.h"
#include "api/call.h"
#include "api/json_path.h"

#if defined(__SANITIZE_ADDRESS__)
#define SCALE 8
#else
#define SCALE 1
#endif

/* In the hot loops: check's ck_assert records every location it passes
 * (a write to a file each), which would be most of the run's time. */
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) ck_abort_msg(__VA_ARGS__);                                                    \
    } while (0)

#define FLAGS (JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL)

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* The paths of a request's matrices and vectors. */
static int rank_of(const char *path) {
    return api_call_array_rank(API_CALL_ATTENTION, path);
}

/* ---- numbers ---------------------------------------------------------------- */

typedef struct number_stats {
    size_t tried, lifted, double_rounded;
} number_stats;

/* One decimal text `x`, in {"embeddings":[[x]]}. */
static void check_number(const char *x, number_stats *st) {
    char body[512];
    snprintf(body, sizeof body, "{\"embeddings\":[[%s]]}", x);
    size_t len = strlen(body);

    /* What jansson makes of it, and what matrix.c then reads: the double
     * cast to float32, refused when not finite as a float32. */
    json_error_t jerr;
    json_t *root = json_loadb(body, len, FLAGS, &jerr);
    int is_number = 0;
    double d = 0;
    if (root) {
        json_t *cell = json_array_get(json_array_get(json_object_get(root, "embeddings"), 0), 0);
        is_number = json_is_number(cell);
        d = json_number_value(cell);
    }
    int expect = is_number && fabs(d) < 0x1.ffffffp+127;
    float f = (float)d;

    api_arrays *a;
    CHECK(api_arrays_lift(&a, body, len, rank_of) == 0, "lift failed");
    const api_array *got = api_arrays_find(a, "/embeddings");
    CHECK(!!got == expect, "%s: lifted %d, expected %d", x, !!got, expect);
    st->tried++;
    if (got) {
        st->lifted++;
        CHECK(got->rows == 1 && got->cols == 1, "%s: shape", x);
        uint32_t gb, fb;
        memcpy(&gb, got->data, 4), memcpy(&fb, &f, 4);
        CHECK(gb == fb, "%s: read %a, jansson's %a", x, (double)got->data[0], (double)f);
        /* Where strtof's single rounding differs (the double rounding of
         * jansson's path), the lifted number is jansson's all the same. */
        float once = strtof(x, NULL);
        if (memcmp(&once, &f, 4)) st->double_rounded++;
    }
    api_arrays_free(a);
    json_decref(root);
}

/* Random decimal strings of every kind. */
static void random_decimal(char *s, size_t cap) {
    uint64_t r = rng();
    switch (r % 8) {
    case 0: { /* a random float's bits, written with 6 … 17 digits */
        uint32_t bits = (uint32_t)(r >> 32);
        float f;
        memcpy(&f, &bits, 4);
        if (!isfinite(f)) f = 1.5f;
        snprintf(s, cap, "%.*g", 6 + (int)((r >> 8) % 12), (double)f);
        break;
    }
    case 1: { /* a uniform value, as a client's float32 would be */
        float f = (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        snprintf(s, cap, "%.9g", (double)f);
        break;
    }
    case 2: { /* a digit string with a point and an exponent */
        size_t n = 1 + (r >> 8) % 30, p = 0;
        if ((r >> 40) & 1) s[p++] = '-';
        s[p++] = (char)('1' + rng() % 9);
        for (size_t i = 1; i < n && p < cap - 16; i++) {
            if (i == 1 + (r >> 16) % n && (r >> 44) & 1) s[p++] = '.';
            s[p++] = (char)('0' + rng() % 10);
        }
        if ((r >> 45) & 1) p += (size_t)snprintf(s + p, cap - p, "e%d", (int)(rng() % 100) - 60);
        s[p] = '\0';
        break;
    }
    case 3: { /* near the float32 overflow edge */
        double base = 3.4028234663852886e38 + (double)(int64_t)(rng() % 2000000 - 1000000) * 1e25;
        snprintf(s, cap, "%.*e", 6 + (int)(rng() % 30), base);
        break;
    }
    case 4: { /* subnormal and underflowing */
        double v = ldexp((double)(rng() % 1000000), -150 - (int)(rng() % 30));
        snprintf(s, cap, "%.*e", 1 + (int)(rng() % 20), v);
        break;
    }
    case 5: { /* between two floats: exactly, a hair either side, or rounded */
        uint32_t bits = (uint32_t)(rng() % 0x7f000000u);
        float f, g;
        memcpy(&f, &bits, 4);
        g = nextafterf(f, INFINITY);
        double mid = ((double)f + (double)g) / 2;
        int k = (int)(rng() % 5);
        if (k == 1) mid = nextafter(mid, 0);
        if (k == 2) mid = nextafter(mid, INFINITY);
        /* k 3, 4: 16 or 15 digits, short enough for the fast path, and
         * often read as the midpoint's double though not the midpoint */
        snprintf(s, cap, "%.*e", k == 3 ? 15 : k == 4 ? 14 : 40, mid);
        break;
    }
    case 6: /* an integer */ snprintf(s, cap, "%lld", (long long)(rng() >> (rng() % 64))); break;
    default: { /* malformed, or almost */
        static const char *const bad[] = {
            "01",   "-",     "1.",       ".5",    "+1",     "1e",     "1e+", "-01.5",
            "0x10", "1.5.2", "Infinity", "NaN",   "1_0",    "00",     "-0",  "0e0",
            "1E+2", "1e-0",  "-0.0e-0",  "1e400", "-1e400", "2e-400", "1 2", "1,"};
        snprintf(s, cap, "%s", bad[rng() % (sizeof bad / sizeof bad[0])]);
        break;
    }
    }
}

START_TEST(numbers_as_jansson_reads_them) {
    /* packed as a table, as the formatter would not */
    // clang-format off
    static const char *const named[] = {
        "0", "-0", "1", "-1", "0.1", "1e-45", "7e-46", "1.4e-45", "1.17549435e-38",
        "3.4028235e38", "3.4028236e38", "-3.4028235e38", "340282356779733661637539395458142568447",
        "340282356779733661637539395458142568448", "1e38", "1e39", "123456789012345678901234567890",
        "0.000000000000000000000000000000000000000000001", "9007199254740993", "1e22", "1e23",
        "16777217", "0.30000001192092896", "2.5e-324", "1e-400", "1.00000005960464477539062500",
    };
    // clang-format on
    number_stats st = {0};
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        check_number(named[i], &st);
    char s[128];
    for (size_t i = 0; i < 2000000 / SCALE; i++) {
        random_decimal(s, sizeof s);
        check_number(s, &st);
    }
    printf("numbers: %zu tried, %zu lifted, %zu where rounding twice differs from once\n", st.tried,
           st.lifted, st.double_rounded);
    ck_assert_uint_gt(st.lifted, st.tried / 2);
    ck_assert_uint_gt(st.double_rounded, 0); /* the midpoint cases found some */
}
END_TEST

/* ---- documents ----------------------------------------------------------------- */

/* Sets the value at a JSON Pointer of plain keys and indices in root. */
static void put_at(json_t *root, const char *path, json_t *value) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *parent = root;
    char *seg = buf + 1, *next;
    for (;;) {
        next = strchr(seg, '/');
        if (next) *next = '\0';
        if (!next) break;
        parent = json_is_array(parent) ? json_array_get(parent, strtoul(seg, NULL, 10))
                                       : json_object_get(parent, seg);
        CHECK(parent != NULL, "no parent for %s", path);
        seg = next + 1;
    }
    if (json_is_array(parent))
        CHECK(json_array_set_new(parent, strtoul(seg, NULL, 10), value) == 0, "set %s", path);
    else
        CHECK(json_object_set_new(parent, seg, value) == 0, "set %s", path);
}

static json_t *get_at(json_t *root, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *v = root;
    for (char *seg = strtok(buf, "/"); seg && v; seg = strtok(NULL, "/"))
        v = json_is_array(v) ? json_array_get(v, strtoul(seg, NULL, 10)) : json_object_get(v, seg);
    return v;
}

typedef struct doc_stats {
    size_t docs, accepted, lifted_docs, arrays, strings;
} doc_stats;

/* jansson on the body, against jansson on the lifted text (see the top). */
static void check_document(const char *body, size_t len, doc_stats *st) {
    json_error_t e1, e2;
    json_t *orig = json_loadb(body, len, FLAGS, &e1);
    api_arrays *a;
    CHECK(api_arrays_lift(&a, body, len, rank_of) == 0, "lift failed");
    size_t tlen;
    const char *text = api_arrays_text(a, &tlen);
    json_t *lift = json_loadb(text, tlen, FLAGS, &e2);
    st->docs++;
    CHECK(!orig == !lift, "accepted %d vs %d: %.*s", !!orig, !!lift, (int)len, body);
    if (!orig) {
        api_arrays_fix_error(a, body, len, &e2);
        CHECK(!strcmp(e1.text, e2.text) && e1.line == e2.line && e1.column == e2.column &&
                  e1.position == e2.position,
              "error %s %d:%d@%d vs %s %d:%d@%d in %.*s", e1.text, e1.line, e1.column, e1.position,
              e2.text, e2.line, e2.column, e2.position, (int)len, body);
    } else {
        st->accepted++;
        st->lifted_docs += api_arrays_numbers(a) > 0;
        /* Put every lifted array back, from the original tree, into the
         * lifted one, checking its numbers on the way. */
        static const char *const paths[] = {
            "/embeddings",          "/weights/w_o",         "/weights/b_o",
            "/weights/heads/0/w_q", "/weights/heads/0/w_k", "/weights/heads/0/w_v",
            "/weights/heads/0/b_q", "/weights/heads/1/w_q", "/weights/heads/1/w_k",
            "/weights/heads/1/w_v", "/weights/heads/1/b_v", "/mask"};
        for (size_t k = 0; k < sizeof paths / sizeof paths[0]; k++) {
            const api_array *got = api_arrays_find(a, paths[k]);
            if (!got) continue;
            st->arrays++;
            json_t *o = get_at(orig, paths[k]);
            CHECK(o != NULL, "%s missing", paths[k]);
            CHECK(json_is_array(get_at(lift, paths[k])) &&
                      json_array_size(get_at(lift, paths[k])) == 0,
                  "%s is not [] in the lifted text", paths[k]);
            for (size_t r = 0; r < got->rows; r++)
                for (size_t c = 0; c < got->cols; c++) {
                    json_t *cell = got->rank == 2 ? json_array_get(json_array_get(o, r), c)
                                                  : json_array_get(o, c);
                    double v = json_is_boolean(cell) ? json_is_true(cell) : json_number_value(cell);
                    CHECK(json_is_number(cell) ||
                              (json_is_boolean(cell) && !strcmp(paths[k], "/mask")),
                          "%s: not a number", paths[k]);
                    CHECK((float)v == got->data[r * got->cols + c], "%s[%zu][%zu]", paths[k], r, c);
                }
            put_at(lift, paths[k], json_incref(o));
        }
        /* And every lifted string: jansson's value, to the byte, was its text. */
        for (size_t k = 0; k < sizeof paths / sizeof paths[0]; k++) {
            char data_path[128];
            snprintf(data_path, sizeof data_path, "%s/data", paths[k]);
            size_t slen;
            const char *got = api_arrays_find_string(a, data_path, &slen);
            if (!got) continue;
            st->strings++;
            json_t *o = get_at(orig, data_path), *l = get_at(lift, data_path);
            CHECK(json_is_string(o) && json_is_string(l) && json_string_length(l) == 0,
                  "%s: not a string, or not \"\" in the lifted text", data_path);
            CHECK(json_string_length(o) == slen && !memcmp(json_string_value(o), got, slen),
                  "%s: lifted %.*s, jansson read %s", data_path, (int)slen, got,
                  json_string_value(o));
            put_at(lift, data_path, json_incref(o));
        }
        CHECK(json_equal(orig, lift), "trees differ: %.*s", (int)len, body);
    }
    json_decref(orig);
    json_decref(lift);
    api_arrays_free(a);
}

/* A valid body with inline weights, numbers written in several styles. */
static char *valid_body(void) {
    char *buf;
    size_t size;
    FILE *f = open_memstream(&buf, &size);
    const char *sp[] = {"", " ", "\n", "\t", "\r\n  "};
#define SP sp[rng() % 5]
#define NUM()                                                                                      \
    do {                                                                                           \
        float v = (float)((double)(rng() >> 11) / 9007199254740992.0 * 4.0 - 2.0);                 \
        switch (rng() % 4) {                                                                       \
        case 0: fprintf(f, "%.9g", (double)v); break;                                              \
        case 1: fprintf(f, "%.3e", (double)v); break;                                              \
        case 2: fprintf(f, "%d", (int)(v * 3)); break;                                             \
        default: fprintf(f, "%.2f", (double)v); break;                                             \
        }                                                                                          \
    } while (0)
    fprintf(f, "{%s\"tokens\":%s[\"我\",\"爱\",\"你\"],%s\"embeddings\":%s[", SP, SP, SP, SP);
    for (int r = 0; r < 3; r++) {
        fprintf(f, "%s%s[", r ? "," : "", SP);
        for (int c = 0; c < 4; c++) {
            if (c) fprintf(f, "%s,%s", SP, SP);
            NUM();
        }
        fprintf(f, "]%s", SP);
    }
    fprintf(f, "],%s\"weights\":{\"heads\":[", SP);
    for (int h = 0; h < 2; h++) {
        fprintf(f, "%s{", h ? "," : "");
        const char *names[] = {"w_q", "w_k", "w_v"};
        for (int m = 0; m < 3; m++) {
            fprintf(f, "%s\"%s\":%s[", m ? "," : "", names[m], SP);
            for (int r = 0; r < 4; r++) {
                fprintf(f, "%s[", r ? "," : "");
                for (int c = 0; c < 2; c++) {
                    if (c) fprintf(f, ",%s", SP);
                    NUM();
                }
                fprintf(f, "]");
            }
            fprintf(f, "]");
        }
        fprintf(f, ",%s\"%s\":[", SP, h ? "b_v" : "b_q");
        NUM();
        fprintf(f, ",");
        NUM();
        fprintf(f, "]}");
    }
    fprintf(f, "],\"w_o\":[");
    for (int r = 0; r < 4; r++) {
        fprintf(f, "%s[", r ? "," : "");
        for (int c = 0; c < 4; c++) {
            if (c) fprintf(f, ",");
            NUM();
        }
        fprintf(f, "]");
    }
    fprintf(f, "],%s\"b_o\":%s[", SP, SP);
    for (int c = 0; c < 4; c++) {
        if (c) fprintf(f, ",");
        NUM();
    }
    fprintf(f, "]},\"mask\":[[1,0,0],[true,1.0,false],%s[1,1e0,1]],\"scale\":0.5%s}%s", SP, SP, SP);
#undef NUM
#undef SP
    fclose(f);
    return buf;
}

/* A valid body whose embeddings (6 × 4) and first head's w_q (16 × 4) are
 * tensor objects, members in any order, base64 of random bytes (128 and
 * 344 characters: long enough to be lifted), and a top-level "data" of the
 * same kind that is no tensor's (never lifted). */
static char *tensor_body(void) {
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *buf;
    size_t size;
    FILE *f = open_memstream(&buf, &size);
    const char *sp[] = {"", " ", "\n", "\t"};
#define SP sp[rng() % 4]
#define DATA(chars)                                                                                \
    do {                                                                                           \
        for (int i = 0; i < (chars); i++)                                                          \
            fputc(b64[rng() % 64], f);                                                             \
    } while (0)
#define TENSOR(rows, cols, chars)                                                                  \
    do {                                                                                           \
        const char *order[][3] = {{"d", "s", "t"}, {"t", "d", "s"}, {"s", "t", "d"}};              \
        int o = (int)(rng() % 3);                                                                  \
        fputc('{', f);                                                                             \
        for (int m = 0; m < 3; m++) {                                                              \
            if (m) fprintf(f, ",%s", SP);                                                          \
            if (*order[o][m] == 'd') {                                                             \
                fprintf(f, "\"data\"%s:%s\"", SP, SP);                                             \
                DATA(chars);                                                                       \
                fputc('"', f);                                                                     \
            } else if (*order[o][m] == 's') {                                                      \
                fprintf(f, "\"shape\":[%d,%s%d]", rows, SP, cols);                                 \
            } else {                                                                               \
                fprintf(f, "\"dtype\":%s\"float32\"", SP);                                         \
            }                                                                                      \
        }                                                                                          \
        fputc('}', f);                                                                             \
    } while (0)
    fprintf(f, "{%s\"model\":\"m\",%s\"embeddings\":%s", SP, SP, SP);
    TENSOR(6, 4, 128);
    fprintf(f, ",%s\"weights\":{\"heads\":[{\"w_q\":", SP);
    TENSOR(16, 4, 344);
    fprintf(f, "}]},%s\"data\":\"", SP);
    DATA(100);
    fprintf(f, "\"%s}", SP);
#undef TENSOR
#undef DATA
#undef SP
    fclose(f);
    return buf;
}

/* Mutates body (of *len bytes, room for 8 more) in place: delete, insert
 * or replace one byte, drawn from JSON's own characters mostly. */
static void mutate(char *body, size_t *len) {
    static const char chars[] = "[]{},:\" \n\t0123456789.eE+-\\/abtnrfu\x80\xc3\xa9";
    size_t at = rng() % (*len + 1);
    char c = (rng() % 16) ? chars[rng() % (sizeof chars - 1)] : (char)(rng() & 0xff);
    switch (rng() % 3) {
    case 0:
        if (at < *len) memmove(body + at, body + at + 1, *len - at - 1), (*len)--;
        break;
    case 1: memmove(body + at + 1, body + at, *len - at), body[at] = c, (*len)++; break;
    default:
        if (at < *len) body[at] = c;
        break;
    }
}

/* check_document on `bases` bodies made by `make`, each as it is and with
 * `mutations` mutated copies (one to three edits each). */
static void check_mutated(char *(*make)(void), int bases, int mutations, doc_stats *st) {
    for (int d = 0; d < bases; d++) {
        char *base = make();
        size_t base_len = strlen(base);
        check_document(base, base_len, st);
        char *body = malloc(base_len + 64);
        for (int m = 0; m < mutations; m++) {
            size_t len = base_len;
            memcpy(body, base, base_len);
            int edits = 1 + (int)(rng() % 3);
            for (int e = 0; e < edits; e++)
                mutate(body, &len);
            check_document(body, len, st);
        }
        free(body);
        free(base);
    }
}

START_TEST(documents_as_jansson_reads_them) {
    doc_stats st = {0};
    check_mutated(valid_body, 4000 / SCALE, 100, &st);
    printf("documents: %zu checked, %zu accepted by jansson, %zu with arrays lifted, %zu arrays\n",
           st.docs, st.accepted, st.lifted_docs, st.arrays);
    ck_assert_uint_gt(st.accepted, st.docs / 20);
    ck_assert_uint_gt(st.arrays, st.accepted * 5);
}
END_TEST

/* Tensors' base64 strings, lifted and mutated, against jansson. */
START_TEST(tensor_strings_as_jansson_reads_them) {
    doc_stats st = {0};
    check_mutated(tensor_body, 2000 / SCALE, 50, &st);
    printf("tensor documents: %zu checked, %zu accepted by jansson, %zu strings lifted\n", st.docs,
           st.accepted, st.strings);
    ck_assert_uint_gt(st.accepted, st.docs / 20);
    ck_assert_uint_gt(st.strings, st.accepted);
}
END_TEST

/* ---- what is lifted ---------------------------------------------------------------- */

static int lifted_n(const char *body, size_t len, const char *path) {
    api_arrays *a;
    ck_assert_int_eq(api_arrays_lift(&a, body, len, rank_of), 0);
    int found = api_arrays_find(a, path) != NULL;
    api_arrays_free(a);
    return found;
}

static int lifted(const char *body, const char *path) {
    return lifted_n(body, strlen(body), path);
}

static int string_lifted(const char *body, const char *path) {
    api_arrays *a;
    size_t len;
    ck_assert_int_eq(api_arrays_lift(&a, body, strlen(body), rank_of), 0);
    const char *s = api_arrays_find_string(a, path, &len);
    int found = s != NULL;
    if (s) { /* the body's own bytes, between the quotes */
        ck_assert(s > body && s[-1] == '"' && s[len] == '"');
        size_t tlen;
        const char *text = api_arrays_text(a, &tlen);
        ck_assert_uint_eq(tlen, strlen(body) - len); /* "" for the string */
        ck_assert_ptr_nonnull(strstr(text, "\"\""));
    }
    api_arrays_free(a);
    return found;
}

/* Which strings: a tensor's data at a wanted path, 64 bytes or more of
 * printable ASCII without a backslash; nothing else. */
START_TEST(which_strings) {
    char b64[80], body[256];
    memset(b64, 'A', 64), b64[64] = 0;
    snprintf(body, sizeof body,
             "{\"embeddings\":{\"dtype\":\"float32\",\"shape\":[1,12],\"data\":\"%s\"}}", b64);
    ck_assert(string_lifted(body, "/embeddings/data"));
    snprintf(body, sizeof body, "{\"weights\":{\"heads\":[{\"b_q\":{\"data\":\"%s\"}}]}}", b64);
    ck_assert(string_lifted(body, "/weights/heads/0/b_q/data"));
    snprintf(body, sizeof body, "{\"embeddings\":{\"data\" : \"%s\" }}", b64);
    ck_assert(string_lifted(body, "/embeddings/data"));
    /* too short, escaped, not ASCII, a control byte, unterminated */
    const char *bad[] = {"%.63s", "\\/%s", "%s\\u0041", "%s\xc3\xa9", "%s\x7f", "%s\t"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char data[96];
        snprintf(data, sizeof data, bad[i], b64);
        snprintf(body, sizeof body, "{\"embeddings\":{\"data\":\"%s\"}}", data);
        ck_assert_msg(!string_lifted(body, "/embeddings/data"), "lifted: %s", body);
    }
    snprintf(body, sizeof body, "{\"embeddings\":{\"data\":\"%s", b64);
    ck_assert(!string_lifted(body, "/embeddings/data"));
    /* not a tensor's: a data key where no matrix is wanted, a key with an escape */
    snprintf(body, sizeof body, "{\"data\":\"%s\"}", b64);
    ck_assert(!string_lifted(body, "/data"));
    snprintf(body, sizeof body, "{\"tokens\":{\"data\":\"%s\"}}", b64);
    ck_assert(!string_lifted(body, "/tokens/data"));
    snprintf(body, sizeof body, "{\"embeddings\":{\"d\\u0061ta\":\"%s\"}}", b64);
    ck_assert(string_lifted(body, "/embeddings/data")); /* the key jansson reads */
    snprintf(body, sizeof body, "{\"mask\":{\"data\":\"%s\"}}", b64);
    ck_assert(!string_lifted(body, "/mask/data")); /* a mask is no tensor */
    snprintf(body, sizeof body, "{\"embeddings\":{\"shape\":\"%s\"}}", b64);
    ck_assert(!string_lifted(body, "/embeddings/shape"));
}
END_TEST

START_TEST(which_arrays) {
    ck_assert(lifted("{\"embeddings\":[[1,2],[3,4]]}", "/embeddings"));
    ck_assert(lifted("{\"weights\":{\"heads\":[{},{\"w_k\":[[1]]}]}}", "/weights/heads/1/w_k"));
    ck_assert(lifted("{\"weights\":{\"b_o\":[1,2]}}", "/weights/b_o"));
    ck_assert(lifted(" { \"embeddings\" : [ [ 1 , 2 ] ] } ", "/embeddings"));
    /* not the rank asked for, not rectangular, not all numbers, empty */
    ck_assert(!lifted("{\"embeddings\":[1,2]}", "/embeddings"));
    ck_assert(!lifted("{\"weights\":{\"b_o\":[[1]]}}", "/weights/b_o"));
    ck_assert(!lifted("{\"embeddings\":[[1,2],[3]]}", "/embeddings"));
    ck_assert(!lifted("{\"embeddings\":[[1,\"2\"]]}", "/embeddings"));
    ck_assert(!lifted("{\"embeddings\":[[1,null]]}", "/embeddings"));
    ck_assert(!lifted("{\"embeddings\":[[]]}", "/embeddings"));
    ck_assert(!lifted("{\"embeddings\":[]}", "/embeddings"));
    ck_assert(!lifted("{\"embeddings\":[[1e39]]}", "/embeddings")); /* not finite as float32 */
    ck_assert(!lifted("{\"embeddings\":[[1,]]}", "/embeddings"));
    ck_assert(!lifted("{\"embeddings\":[[1]", "/embeddings")); /* cut short */
    /* not at a wanted path, or under a key spelled with escapes */
    ck_assert(!lifted("{\"scale\":[[1]]}", "/scale"));
    /* a key with escapes names what jansson reads; one jansson refuses, nothing */
    ck_assert(lifted("{\"emb\\u0065ddings\":[[1]]}", "/embeddings"));
    ck_assert(lifted("{\"w\\u0065ights\":{\"h\\u0065ads\":[{\"w\\u005fq\":[[1]]}]}}",
                     "/weights/heads/0/w_q"));
    ck_assert(
        lifted("{\"\\u00e9\\ud83d\\ude00\\n\\/\\\"\":1,\"embeddings\":[[1]]}", "/embeddings"));
    ck_assert(!lifted("{\"embeddings\\u0000\":[[1]]}", "/embeddings"));
    ck_assert(!lifted("{\"emb\\udc00eddings\":[[1]]}", "/embeddings"));
    ck_assert(!lifted("{\"emb\\x65ddings\":[[1]]}", "/embeddings"));
    ck_assert(!lifted("{\"emb\\u006\":[[1]]}", "/embeddings"));
    /* a mask: 0, 1 (as jansson's double), true, false; nothing else */
    ck_assert(lifted("{\"mask\":[[1,0],[true,false]]}", "/mask"));
    ck_assert(lifted("{\"mask\":[[1.0,0e5,-0,1E0,10e-1]]}", "/mask"));
    ck_assert(!lifted("{\"mask\":[[1,2]]}", "/mask"));
    ck_assert(lifted("{\"mask\":[[1.0000000000000001]]}", "/mask")); /* 1 as a double */
    ck_assert(!lifted("{\"mask\":[[1.00000001]]}", "/mask"));        /* 1 as a float32 only */
    ck_assert(!lifted("{\"mask\":[[truex]]}", "/mask"));
    ck_assert(!lifted("{\"mask\":[[null]]}", "/mask"));
    ck_assert(!lifted("{\"mask\":[[\"1\"]]}", "/mask"));
    ck_assert(!lifted("{\"mask\":[1,0]}", "/mask"));
    ck_assert(!lifted("{\"mask\":[[1],[1,0]]}", "/mask"));
    ck_assert(!lifted("{\"mask\":[[true]", "/mask"));
    ck_assert(!lifted("{\"mask\":[[tru", "/mask"));
    ck_assert(!lifted("{\"x\":{\"embeddings\":[[1]]}}", "/x/embeddings"));
    ck_assert(!lifted("[{\"embeddings\":[[1]]}]", "/0/embeddings"));
    /* broken before the array: the scan stops, jansson will refuse it */
    ck_assert(!lifted("{\"a\" 1, \"embeddings\":[[1]]}", "/embeddings"));
    /* a NUL byte anywhere (never valid JSON): jansson alone decides */
    static const char nul[] = "{\"embeddings\":[[1]],\"t\":\"\0\"}";
    ck_assert(lifted_n(nul, 19, "/embeddings"));
    ck_assert(!lifted_n(nul, sizeof nul - 1, "/embeddings"));
    /* ...but the text before the NUL, which jansson reads, is still held
     * to the limits */
    static const char long_then_nul[] = "{\"t\":\"0123456789abcdefghij\"}\0";
    api_arrays *a;
    ck_assert_int_eq(
        api_arrays_lift_within(&a, long_then_nul, sizeof long_then_nul - 1, rank_of, 0, 10), 0);
    const char *where;
    ck_assert_int_eq(api_arrays_violation(a, &where), API_ARRAYS_STRING_LONG);
    ck_assert_str_eq(where, "/t");
    api_arrays_free(a);
    /* strings with brackets and escaped quotes before it do not confuse the scan */
    ck_assert(lifted("{\"t\":[\"[\\\"]\",\"{\"],\"embeddings\":[[1]]}", "/embeddings"));
}
END_TEST

/* ---- the rules of api_arrays_lift_rules ------------------------------------------- */

static size_t rule_elements(const void *ctx, const char *path, int *strings) {
    (void)ctx;
    *strings = !strcmp(path, "/s");
    return !strcmp(path, "/a") || *strings ? 3 : 0;
}

/* The violation api_arrays_lift_rules finds in body, its path in *where. */
static api_arrays_limit rule_violation(const char *body, size_t max_values, char *where,
                                       const char **value) {
    api_arrays_rules rules = {.max_values = max_values, .max_elements = rule_elements};
    api_arrays *a;
    const char *path;
    ck_assert_int_eq(api_arrays_lift_rules(&a, body, strlen(body), rank_of, &rules), 0);
    api_arrays_limit v = api_arrays_violation(a, &path);
    snprintf(where, API_PATH_MAX, "%s", path);
    if (value) *value = api_arrays_violation_value(a);
    api_arrays_free(a);
    return v;
}

/* Each rule refuses one over its limit, at its path, and passes what is at
 * it: the values in all (a lifted array counts as the [] left for it), an
 * array's length, strings only. */
START_TEST(rules) {
    char where[API_PATH_MAX];
    const char *value;
    /* 1 object + a + 3 numbers = 5 values; the lifted embeddings 1 more */
    ck_assert_int_eq(rule_violation("{\"a\":[1,2,3]}", 5, where, NULL), API_ARRAYS_WITHIN);
    ck_assert_int_eq(rule_violation("{\"a\":[1,2,3]}", 4, where, NULL), API_ARRAYS_TOO_MANY);
    ck_assert_str_eq(where, "/a");
    ck_assert_int_eq(rule_violation("{\"x\":1,\"embeddings\":[[1,2],[3,4]]}", 3, where, NULL),
                     API_ARRAYS_WITHIN);
    ck_assert_int_eq(rule_violation("{\"x\":1,\"embeddings\":[[1,2],[3,4]]}", 2, where, NULL),
                     API_ARRAYS_TOO_MANY);
    ck_assert_str_eq(where, "");
    ck_assert_int_eq(rule_violation("[[{}],[{\"k\":[]}]]", 5, where, NULL), API_ARRAYS_TOO_MANY);
    ck_assert_str_eq(where, "/1/0");
    /* lengths */
    ck_assert_int_eq(rule_violation("{\"a\":[[1,2,3,4]]}", 0, where, NULL), API_ARRAYS_WITHIN);
    ck_assert_int_eq(rule_violation("{\"a\":[1,2,3,4]}", 0, where, NULL), API_ARRAYS_TOO_LONG);
    ck_assert_str_eq(where, "/a");
    ck_assert_int_eq(rule_violation("{\"\\u0061\":[[],[],[],[]]}", 0, where, NULL),
                     API_ARRAYS_TOO_LONG); /* the key jansson reads */
    ck_assert_int_eq(rule_violation("{\"b\":[1,2,3,4],\"x\":{\"a\":[1,2,3,4]}}", 0, where, NULL),
                     API_ARRAYS_WITHIN);
    /* strings only: the first element that is not one, and what it is */
    ck_assert_int_eq(rule_violation("{\"s\":[\"x\",\"\\\"]\",\"\"]}", 0, where, NULL),
                     API_ARRAYS_WITHIN);
    static const struct {
        const char *body, *path, *value;
    } bad[] = {
        {"{\"s\":[{}]}", "/s/0", "an object"},      {"{\"s\":[\"x\",[\"y\"]]}", "/s/1", "an array"},
        {"{\"s\":[\"x\",-1]}", "/s/1", "a number"}, {"{\"s\":[true]}", "/s/0", "true"},
        {"{\"s\":[null,\"x\"]}", "/s/0", "null"},   {"{\"s\" : [ false ]}", "/s/0", "false"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(rule_violation(bad[i].body, 0, where, &value), API_ARRAYS_NOT_STRING);
        ck_assert_str_eq(where, bad[i].path);
        ck_assert_str_eq(value, bad[i].value);
    }
    ck_assert_int_eq(rule_violation("{\"s\":[\"a\",\"b\",\"c\",\"d\"]}", 0, where, NULL),
                     API_ARRAYS_TOO_LONG);
    ck_assert_str_eq(where, "/s");
    /* past a non-string element nothing is counted (the body is refused):
     * not the values, not the lengths; nesting and string length still are */
    ck_assert_int_eq(
        rule_violation("{\"s\":[{},{},{},{},{},{},{}],\"a\":[1,2,3,4]}", 4, where, NULL),
        API_ARRAYS_NOT_STRING);
    ck_assert_str_eq(where, "/s/0");
    api_arrays_rules deep = {.max_depth = 3, .max_elements = rule_elements};
    api_arrays *a;
    const char *path;
    static const char nested[] = "{\"s\":[[[\"a\"]]]}";
    ck_assert_int_eq(api_arrays_lift_rules(&a, nested, strlen(nested), rank_of, &deep), 0);
    ck_assert_int_eq(api_arrays_violation(a, &path), API_ARRAYS_TOO_DEEP);
    ck_assert_str_eq(path, "/s/0/0");
    api_arrays_free(a);
}
END_TEST

/* A body cut anywhere is never read past its end (ASan watches). */
START_TEST(cut_bodies) {
    const char *full = "{\"embeddings\":[[1.5e30,2,3.25],[4,5,6e-20]],\"weights\":{\"b_o\":[1]}}";
    size_t n = strlen(full), complete = (size_t)(strstr(full, "]],") - full) + 2;
    for (size_t len = 0; len <= n; len++) {
        char *body = malloc(len ? len : 1);
        memcpy(body, full, len);
        api_arrays *a;
        ck_assert_int_eq(api_arrays_lift(&a, body, len, rank_of), 0);
        ck_assert(!!api_arrays_find(a, "/embeddings") == (len >= complete));
        api_arrays_free(a);
        free(body);
    }
}
END_TEST

static Suite *arrays_suite(void) {
    Suite *s = suite_create("arrays");
    TCase *tc = tcase_create("lift");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, which_arrays);
    tcase_add_test(tc, which_strings);
    tcase_add_test(tc, cut_bodies);
    tcase_add_test(tc, rules);
    tcase_add_test(tc, numbers_as_jansson_reads_them);
    tcase_add_test(tc, documents_as_jansson_reads_them);
    tcase_add_test(tc, tensor_strings_as_jansson_reads_them);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(arrays_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
