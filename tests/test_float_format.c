/*
 * test_float_format.c — the check suite of api/float_format.c.
 *
 * Every float tested must come out as a text that
 *   - is a JSON number (json_number_ok, the grammar of RFC 8259 §6),
 *   - strtof reads back as exactly the same bits,
 *   - has at most 9 significant digits,
 *   - is laid out as promised: an exponent only outside [1e-5, 1e15), and an
 *     integer-valued float below 1e15 written as a plain integer,
 *   - is SHORTEST: no decimal with fewer significant digits reads back as f.
 *
 * Shortness, exactly and cheaply (shortest_ok): let the text be D × 10^E
 * with D of p digits and no trailing zero. Any decimal of fewer digits that
 * reads back as f lies, like D × 10^E, in f's rounding interval, and the
 * interval is convex; so one exists iff one of the two multiples of
 * 10^(E+1) around D × 10^E, ⌊D/10⌋·10^(E+1) and (⌊D/10⌋+1)·10^(E+1), reads
 * back as f. (A shorter decimal of the same decade is such a multiple; one
 * of a lower decade leaves the power of ten between it and D × 10^E in the
 * interval.) Each of the two is compared in double against the interval's
 * midpoints, which double holds exactly; when the double error margin
 * (1e-12 relative, against an error of ~3e-16) does not decide, strtof does.
 *
 * Sets (tens of millions of floats in all, split over one thread a core):
 * every subnormal; every exponent × a stride of mantissas, plus each
 * exponent's edge mantissas; 20M random bit patterns; integers 0 … 2^24;
 * powers of ten 1e-45 … 1e38 and their neighbours; named edge values and
 * exact expected strings. On a 1M sample, shortness is checked again the
 * independent way (snprintf "%.*e" of each shorter precision + strtof) and
 * against api_float_format_naive, the previous implementation, which may
 * be a digit longer but never shorter. Under AddressSanitizer the large
 * sets are cut 16 times.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/float_format.h"

#if defined(__SANITIZE_ADDRESS__)
#define SCALE 16
#else
#define SCALE 1
#endif

/* ---- checking one float ---------------------------------------------------- */

static float float_of(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static uint32_t bits_of(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and nothing else */
static int json_number_ok(const char *s) {
    if (*s == '-') s++;
    if (*s == '0') {
        s++;
    } else if (*s >= '1' && *s <= '9') {
        while (*s >= '0' && *s <= '9')
            s++;
    } else {
        return 0;
    }
    if (*s == '.') {
        s++;
        if (!(*s >= '0' && *s <= '9')) return 0;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        if (!(*s >= '0' && *s <= '9')) return 0;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    return *s == '\0';
}

/* A JSON number text read as ±D × 10^E, D without trailing zeros. */
typedef struct decimal {
    uint64_t d;
    int e, p;    /* exponent, significant digits (0 for zero) */
    int has_exp; /* an exponent part was written */
    int has_dot;
} decimal;

static decimal decimal_parse(const char *s) {
    decimal r = {0, 0, 0, 0, 0};
    int frac = 0;
    if (*s == '-') s++;
    for (; (*s >= '0' && *s <= '9') || *s == '.'; s++) {
        if (*s == '.') {
            frac = r.has_dot = 1;
            continue;
        }
        if (r.d == 0 && *s == '0') { /* a leading zero */
            if (frac) r.e--;
            continue;
        }
        if (r.p < 19) {
            r.d = r.d * 10 + (uint64_t)(*s - '0');
            r.p++;
            if (frac) r.e--;
        } else if (!frac) {
            r.e++; /* more digits than we keep: only for the failure message */
        }
    }
    if (*s == 'e' || *s == 'E') {
        r.has_exp = 1;
        r.e += atoi(s + 1);
    }
    while (r.d != 0 && r.d % 10 == 0) {
        r.d /= 10;
        r.e++;
        r.p--;
    }
    return r;
}

/* Decimal powers of ten as doubles, correctly rounded by strtod. */
static double pow10_table[100]; /* 10^(i - 50) */

static void pow10_init(void) {
    for (int i = 0; i < 100; i++) {
        char t[16];
        snprintf(t, sizeof t, "1e%d", i - 50);
        pow10_table[i] = strtod(t, NULL);
    }
}

/* Does a × 10^k read back as the positive finite float f? */
static int reads_back_as(uint64_t a, int k, float f) {
    uint32_t b = bits_of(f);
    double lo = ((double)nextafterf(f, 0.0f) + f) / 2; /* exact: 26 bits */
    /* above FLT_MAX, the midpoint to the next binade's first value, 2^128 */
    double hi = b == 0x7f7fffffu ? (double)f + 0x1p103 : ((double)nextafterf(f, INFINITY) + f) / 2;
    double c;
    char t[48];

    if (a == 0) return 0;
    if (k >= -50 && k < 50) {
        c = (double)a * pow10_table[k + 50];
        if (c < lo * (1 - 1e-12) || c > hi * (1 + 1e-12)) return 0;
        if (c > lo * (1 + 1e-12) && c < hi * (1 - 1e-12)) return 1;
    }
    snprintf(t, sizeof t, "%llue%d", (unsigned long long)a, k);
    return bits_of(strtof(t, NULL)) == b;
}

/* No decimal of fewer digits than x reads back as |f| (see the top). */
static int shortest_ok(decimal x, float f) {
    f = fabsf(f);
    if (x.p <= 1) return 1;
    return !reads_back_as(x.d / 10, x.e + 1, f) && !reads_back_as(x.d / 10 + 1, x.e + 1, f);
}

/* NULL when api_float_format(f) passes every check, else why not. */
static const char *check_one(float f, char *buf) {
    size_t len;
    decimal x;
    int sci;

    memset(buf, 'x', API_FLOAT_TEXT_MAX);
    len = api_float_format(buf, f);
    if (len > API_FLOAT_TEXT_WIDEST || len != strlen(buf)) return "length";
    if (!json_number_ok(buf)) return "not a JSON number";
    if (bits_of(strtof(buf, NULL)) != bits_of(f)) return "does not read back";
    x = decimal_parse(buf);
    if (x.p > 9) return "more than 9 digits";
    if (x.p == 0) return f == 0.0f && (buf[0] == '-') == (signbit(f) != 0) ? NULL : "zero";
    sci = x.e + x.p - 1; /* the value is d.ddd × 10^sci */
    if (x.has_exp != (sci < -5 || sci >= 15)) return "exponent where none belongs, or none";
    if (fabsf(f) < 1e15f && f == truncf(f) && x.has_dot) return "an integer not written plainly";
    if (!shortest_ok(x, f)) return "not shortest";
    return NULL;
}

/* ---- running a set over the cores --------------------------------------------- */

/* Bits of the i-th float of a set; non-finite ones are skipped. */
typedef uint32_t (*set_fn)(uint64_t i);

typedef struct job {
    set_fn bits;
    uint64_t count, start, step;
    uint64_t checked, failed;
    uint32_t first_bad;
    const char *why;
    char text[API_FLOAT_TEXT_MAX];
} job;

static void *job_run(void *arg) {
    job *j = arg;
    char buf[API_FLOAT_TEXT_MAX];
    for (uint64_t i = j->start; i < j->count; i += j->step) {
        uint32_t b = j->bits(i);
        const char *why;
        if ((b & 0x7f800000u) == 0x7f800000u) continue;
        j->checked++;
        why = check_one(float_of(b), buf);
        if (why && j->failed++ == 0) {
            j->first_bad = b;
            j->why = why;
            memcpy(j->text, buf, sizeof buf);
            j->text[API_FLOAT_TEXT_MAX - 1] = '\0';
        }
    }
    return NULL;
}

/* Checks floats bits(0 … count−1) on every core; returns how many. */
static uint64_t run_set(const char *name, set_fn bits, uint64_t count) {
    enum { MAX_THREADS = 8 };
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int n = cores < 1 ? 1 : cores > MAX_THREADS ? MAX_THREADS : (int)cores;
    pthread_t th[MAX_THREADS];
    job jobs[MAX_THREADS];
    uint64_t checked = 0;

    pow10_init();
    for (int t = 0; t < n; t++) {
        jobs[t] = (job){.bits = bits, .count = count, .start = (uint64_t)t, .step = (uint64_t)n};
        ck_assert_int_eq(pthread_create(&th[t], NULL, job_run, &jobs[t]), 0);
    }
    for (int t = 0; t < n; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < n; t++) {
        checked += jobs[t].checked;
        ck_assert_msg(jobs[t].failed == 0, "%s: %llu failures, first %08x (%a) → \"%s\": %s", name,
                      (unsigned long long)jobs[t].failed, jobs[t].first_bad,
                      float_of(jobs[t].first_bad), jobs[t].text, jobs[t].why);
    }
    return checked;
}

static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* ---- the sets ------------------------------------------------------------------ */

/* Every subnormal, the sign alternating in blocks. */
static uint32_t set_subnormal(uint64_t i) {
    uint32_t m = (uint32_t)(i % 0x7fffffu) + 1;
    return m | (uint32_t)((i >> 4) & 1) << 31;
}

/* Each normal exponent × mantissas a stride apart, with an offset per exponent. */
#define SWEEP_PER_EXP (66052 / SCALE)
static uint32_t set_sweep(uint64_t i) {
    uint32_t e = (uint32_t)(i / SWEEP_PER_EXP) + 1, j = (uint32_t)(i % SWEEP_PER_EXP);
    uint32_t m = (j * 127u * SCALE + e * 31u) & 0x7fffffu;
    return (j & 1) << 31 | e << 23 | m;
}

/* Each exponent (subnormal included) × its edge mantissas, both signs. */
static const uint32_t edge_mant[] = {0,        1,        2,        3,        4,
                                     5,        0x400000, 0x3fffff, 0x7ffffa, 0x7ffffb,
                                     0x7ffffc, 0x7ffffd, 0x7ffffe, 0x7fffff};
#define N_EDGE_MANT (sizeof edge_mant / sizeof edge_mant[0])
static uint32_t set_edge(uint64_t i) {
    uint32_t s = (uint32_t)(i & 1), k = (uint32_t)(i >> 1);
    return s << 31 | (k / N_EDGE_MANT) << 23 | edge_mant[k % N_EDGE_MANT];
}

static uint32_t set_random(uint64_t i) {
    return (uint32_t)(splitmix64(i ^ 0x5EEDull) >> 32);
}

/* Integers: every one up to 2^16, then a stride of 5 up to 2^24, ± */
static uint32_t set_integer(uint64_t i) {
    uint64_t n = i < 65536 ? i : 65536 + (i - 65536) * 5 * SCALE;
    float f = (float)(n > 16777216 ? 16777216 : n);
    return bits_of((i & 2) ? -f : f);
}

/* ---- tests ----------------------------------------------------------------------- */

static const char *fmt(float f) {
    static char buf[API_FLOAT_TEXT_MAX];
    api_float_format(buf, f);
    return buf;
}

START_TEST(test_exact_strings) {
    static const struct {
        float f;
        const char *text;
    } exact[] = {
        {0.1f, "0.1"},
        {1.0f, "1"},
        {-1.0f, "-1"},
        {100.0f, "100"},
        {0.5f, "0.5"},
        {0.25f, "0.25"},
        {-2.5f, "-2.5"},
        {1e-7f, "1e-7"},
        {3.4028235e38f, "3.4028235e38"},
        {-3.4028235e38f, "-3.4028235e38"},
        {1e-45f, "1e-45"},
        {0.0f, "0"},
        {-0.0f, "-0"},
        {123456789.0f, "123456790"},
        {16777216.0f, "16777216"},
        {16777218.0f, "16777218"},
        {1.17549435e-38f, "1.1754944e-38"},
        {1e-5f, "0.00001"},
        {1.5e-5f, "0.000015"},
        {9.999999e-6f, "9.999999e-6"},
        {1e-6f, "1e-6"},
        {1e14f, "100000000000000"},
        {1e15f, "1e15"},
        {1e10f, "10000000000"},
        {123.456f, "123.456"},
        {-0.0025f, "-0.0025"},
        {0.3f, "0.3"},
        {2.0f / 3.0f, "0.6666667"},
        {(float)M_PI, "3.1415927"},
        {1.0f + FLT_EPSILON, "1.0000001"},
        {FLT_EPSILON, "1.1920929e-7"},
        {0x1p-126f, "1.1754944e-38"},
        {0x1.fffffcp-127f, "1.1754942e-38"},
        {33554432.0f, "33554432"},
        {1.5e38f, "1.5e38"},
        {7e22f, "7e22"},
    };
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
        char buf[API_FLOAT_TEXT_MAX];
        size_t len = api_float_format(buf, exact[i].f);
        ck_assert_str_eq(buf, exact[i].text);
        ck_assert_uint_eq(len, strlen(exact[i].text));
    }
    ck_assert_str_eq(fmt(NAN), "null");
    ck_assert_str_eq(fmt(-NAN), "null");
    ck_assert_str_eq(fmt(INFINITY), "null");
    ck_assert_str_eq(fmt(-INFINITY), "null");
    ck_assert_str_eq(fmt(float_of(0x7f800001u)), "null"); /* a signalling NaN */
    ck_assert_uint_eq(api_float_format((char[API_FLOAT_TEXT_MAX]){0}, NAN), 4);
}
END_TEST

START_TEST(test_edge_values) {
    static const float edge[] = {
        0.0f,      FLT_MIN,     FLT_MAX,         FLT_TRUE_MIN, 2 * FLT_TRUE_MIN, FLT_EPSILON,
        1.0f,      16777216.0f, 16777217.0f,     1e7f,         9999999.0f,       123456789.0f,
        1e15f,     1e16f,       1e-5f,           1e-6f,        0x1.fffffcp-127f, 0x1p-126f,
        0x1p-149f, 0x1p127f,    0x1.fffffep126f, 0x1p-125f};
    char buf[API_FLOAT_TEXT_MAX];
    pow10_init();
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        for (int s = 0; s < 2; s++) {
            float f = s ? -edge[i] : edge[i];
            float near[] = {f, nextafterf(f, INFINITY), nextafterf(f, -INFINITY)};
            for (size_t k = 0; k < 3; k++) {
                const char *why;
                if (!isfinite(near[k])) continue; /* beyond ±FLT_MAX */
                why = check_one(near[k], buf);
                ck_assert_msg(why == NULL, "%a → \"%s\": %s", near[k], buf, why);
            }
        }
    }
    /* max 256 exponents × edge mantissas × 2 signs; the all-ones exponent is skipped */
    ck_assert_uint_eq(run_set("edge mantissas", set_edge, 2 * 256 * N_EDGE_MANT),
                      2 * 255 * N_EDGE_MANT);
}
END_TEST

START_TEST(test_powers_of_ten) {
    char buf[API_FLOAT_TEXT_MAX], want[API_FLOAT_TEXT_MAX], t[16];
    pow10_init();
    for (int e = -45; e <= 38; e++) {
        float p;
        snprintf(t, sizeof t, "1e%d", e);
        p = strtof(t, NULL);
        /* "1e<e>" reads back as p, so it is the shortest; it is also the nearest */
        if (e >= 0 && e < 15)
            snprintf(want, sizeof want, "1%0*d", e, 0);
        else if (e < 0 && e >= -5)
            snprintf(want, sizeof want, "0.%0*d1", -e - 1, 0);
        else
            snprintf(want, sizeof want, "1e%d", e);
        if (e == 0) strcpy(want, "1");
        if (e == -1) strcpy(want, "0.1");
        ck_assert_str_eq(fmt(p), want);
        for (int s = 0; s < 2; s++) {
            float q = s ? -p : p;
            float down = nextafterf(q, 0.0f), up = nextafterf(q, 2 * q);
            float near[] = {q, down, up, nextafterf(down, 0.0f), nextafterf(up, 2 * q)};
            for (size_t k = 0; k < sizeof near / sizeof near[0]; k++) {
                const char *why = check_one(near[k], buf);
                ck_assert_msg(why == NULL, "near 1e%d: %a → \"%s\": %s", e, near[k], buf, why);
            }
        }
    }
}
END_TEST

START_TEST(test_integers) {
    uint64_t count = 65536 + (16777216 - 65536) / (5 * SCALE) + 1;
    char buf[API_FLOAT_TEXT_MAX], want[32];
    /* written exactly as the integer, every one from -2^16 to 2^16 (ck_
     * only on failure: a passing ck_assert records its location, a write
     * to check's runner) */
    for (int n = -65536; n <= 65536; n++) {
        snprintf(want, sizeof want, "%d", n);
        api_float_format(buf, (float)n);
        if (strcmp(buf, want)) ck_abort_msg("%d written \"%s\"", n, buf);
    }
    for (int n = 16777216 - 1000; n <= 16777216; n++) {
        snprintf(want, sizeof want, "%d", n);
        api_float_format(buf, (float)n);
        ck_assert_str_eq(buf, want);
    }
    run_set("integers", set_integer, count);
}
END_TEST

START_TEST(test_all_subnormals) {
    ck_assert_uint_eq(run_set("subnormals", set_subnormal, 0x7fffffu / SCALE), 0x7fffffu / SCALE);
}
END_TEST

START_TEST(test_exponent_sweep) {
    ck_assert_uint_eq(run_set("exponent sweep", set_sweep, 254ull * SWEEP_PER_EXP),
                      254ull * SWEEP_PER_EXP);
}
END_TEST

START_TEST(test_random_bits) {
    uint64_t n = 20000000 / SCALE;
    /* about 1 in 256 patterns is a NaN or an infinity, skipped */
    ck_assert_uint_ge(run_set("random bits", set_random, n), n - n / 200);
}
END_TEST

/*
 * API_FLOAT_TEXT_WIDEST, by brute force where the widest texts are: every
 * negative float of the binades holding 1e14 … 1e15 (the longest plain
 * integers) and 1e-5 … 1e-4 (the longest 0.0000ddd), every subnormal, and
 * the lowest and highest binades (two-digit exponents, 9 digits); all
 * within the constant, and the constant reached in the first two.
 */
typedef struct widest_job {
    uint32_t from, to, step; /* bits */
    size_t longest;
    uint32_t at;
} widest_job;

static void *widest_run(void *arg) {
    widest_job *j = arg;
    char buf[API_FLOAT_TEXT_MAX];
    for (uint64_t b = j->from; b < j->to; b += j->step) {
        size_t len = api_float_format(buf, float_of((uint32_t)b));
        if (len > j->longest) j->longest = len, j->at = (uint32_t)b;
    }
    return NULL;
}

START_TEST(test_widest_text) {
    const uint32_t neg = 0x80000000u;
    /* [2^46, 2^50) and [2^-17, 2^-13): biased exponents 173–176, 110–113 */
    widest_job jobs[] = {
        {neg | 173u << 23, neg | 177u << 23, SCALE, 0, 0},
        {neg | 110u << 23, neg | 114u << 23, SCALE, 0, 0},
        {neg | 1u, neg | 1u << 23, SCALE, 0, 0},
        {neg | 1u << 23, neg | 8u << 23, 7 * SCALE, 0, 0},
        {neg | 247u << 23, neg | 255u << 23, 7 * SCALE, 0, 0},
    };
    enum { N = sizeof jobs / sizeof jobs[0] };
    pthread_t th[N];
    for (int t = 0; t < N; t++)
        ck_assert_int_eq(pthread_create(&th[t], NULL, widest_run, &jobs[t]), 0);
    for (int t = 0; t < N; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < N; t++)
        ck_assert_msg(jobs[t].longest <= API_FLOAT_TEXT_WIDEST, "%a is written in %zu characters",
                      float_of(jobs[t].at), jobs[t].longest);
    ck_assert_uint_eq(jobs[0].longest, API_FLOAT_TEXT_WIDEST);
    ck_assert_uint_eq(jobs[1].longest, API_FLOAT_TEXT_WIDEST);
    ck_assert_str_eq(fmt(-123456790000000.0f), "-123456790000000");
    ck_assert_msg(!strncmp(fmt(float_of(jobs[1].at)), "-0.0000", 7), "%s",
                  fmt(float_of(jobs[1].at)));
    ck_assert(!strpbrk(fmt(float_of(jobs[0].at)), ".e"));
}
END_TEST

/* The independent way: no snprintf("%.*e") of fewer digits reads back. */
static void *sample_run(void *arg) {
    job *j = arg;
    char buf[API_FLOAT_TEXT_MAX], old[API_FLOAT_TEXT_MAX], t[48];
    for (uint64_t i = j->start; i < j->count; i += j->step) {
        uint32_t b = (uint32_t)(splitmix64(i ^ 0xC0FFEEull) >> 32);
        float f = float_of(b);
        const char *why = NULL;
        int p, p_old;
        if (!isfinite(f)) continue;
        j->checked++;
        api_float_format(buf, f);
        api_float_format_naive(old, f);
        p = decimal_parse(buf).p;
        p_old = decimal_parse(old).p;
        if (bits_of(strtof(old, NULL)) != b)
            why = "the reference does not read back";
        else if (p > p_old)
            why = "longer than the reference";
        for (int q = 1; q < p && !why; q++) {
            snprintf(t, sizeof t, "%.*e", q - 1, (double)f);
            if (bits_of(strtof(t, NULL)) == b) why = "a %.*e of fewer digits reads back";
        }
        if (why && j->failed++ == 0) {
            j->first_bad = b;
            j->why = why;
            memcpy(j->text, buf, sizeof buf);
        }
    }
    return NULL;
}

START_TEST(test_shortest_sample) {
    enum { T = 2 };
    pthread_t th[T];
    job jobs[T];
    for (int t = 0; t < T; t++) {
        jobs[t] = (job){.count = 1000000 / SCALE, .start = (uint64_t)t, .step = T};
        ck_assert_int_eq(pthread_create(&th[t], NULL, sample_run, &jobs[t]), 0);
    }
    for (int t = 0; t < T; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < T; t++)
        ck_assert_msg(jobs[t].failed == 0, "%llu failures, first %08x (%a) → \"%s\": %s",
                      (unsigned long long)jobs[t].failed, jobs[t].first_bad,
                      float_of(jobs[t].first_bad), jobs[t].text, jobs[t].why);
}
END_TEST

/* The checker itself must catch what it is there to catch. */
START_TEST(test_checker) {
    pow10_init();
    ck_assert(json_number_ok("0") && json_number_ok("-0") && json_number_ok("1.5e-7"));
    ck_assert(json_number_ok("3.4028235e38") && json_number_ok("0.00001"));
    ck_assert(!json_number_ok("01") && !json_number_ok("1.") && !json_number_ok(".5"));
    ck_assert(!json_number_ok("1e") && !json_number_ok("+1") && !json_number_ok("nan"));
    ck_assert(!json_number_ok("") && !json_number_ok("1 ") && !json_number_ok("-"));
    /* 0.10000000149 (the float 0.1f to 11 digits) reads back, but "0.1" is shorter */
    ck_assert(!shortest_ok(decimal_parse("0.10000000149"), 0.1f));
    ck_assert(!shortest_ok(decimal_parse("1.00000001e-7"), 1e-7f));
    ck_assert(shortest_ok(decimal_parse("1e-7"), 1e-7f));
    ck_assert(shortest_ok(decimal_parse("3.4028235e38"), FLT_MAX));
    ck_assert(!shortest_ok(decimal_parse("3.40282347e38"), FLT_MAX));
    ck_assert(!shortest_ok(decimal_parse("123456792"), 123456792.0f));
    ck_assert(shortest_ok(decimal_parse("123456790"), 123456792.0f));
    ck_assert(!shortest_ok(decimal_parse("1.4e-45"), FLT_TRUE_MIN));
    ck_assert(shortest_ok(decimal_parse("1e-45"), FLT_TRUE_MIN));
    ck_assert_int_eq(decimal_parse("0.000015").p, 2);
    ck_assert_int_eq(decimal_parse("0.000015").e, -6);
    ck_assert_int_eq(decimal_parse("123456790").p, 8);
    ck_assert_int_eq(decimal_parse("-1.25e-7").e, -9);
}
END_TEST

static Suite *float_format_suite(void) {
    Suite *s = suite_create("float_format");
    TCase *exact = tcase_create("exact");
    TCase *bulk = tcase_create("bulk");

    tcase_add_test(exact, test_checker);
    tcase_add_test(exact, test_exact_strings);
    tcase_add_test(exact, test_edge_values);
    tcase_add_test(exact, test_powers_of_ten);
    tcase_add_test(bulk, test_integers);
    tcase_add_test(bulk, test_all_subnormals);
    tcase_add_test(bulk, test_exponent_sweep);
    tcase_add_test(bulk, test_random_bits);
    tcase_add_test(bulk, test_shortest_sample);
    tcase_add_test(bulk, test_widest_text);
    tcase_set_timeout(exact, 30);
    tcase_set_timeout(bulk, 120);
    suite_add_tcase(s, exact);
    suite_add_tcase(s, bulk);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(float_format_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
