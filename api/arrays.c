/*
 * arrays.c — lifting arrays of numbers out of a JSON text (see arrays.h).
 *
 * One pass over the text with a small stack of containers, tracking the
 * JSON Pointer of the value at hand, but checking only what it needs to
 * know where values start; the strict checking of the whole text stays
 * jansson's. Where an array starts at a wanted path, lift_array tries to
 * read it under the grammar jansson's lexer applies (RFC 8259 numbers,
 * whitespace of space, tab, CR, LF; commas, brackets); on any surprise it
 * gives up on that array, which then stays in the text. When the scan
 * itself meets something that is not JSON, it stops lifting: jansson will
 * refuse the body at or before that point anyway, and the text before it
 * is the same but for whole arrays.
 *
 * Strings are lifted too where they matter: the base64 `data` of a tensor
 * object at a wanted path, when it is plain printable ASCII without a
 * backslash (its value is then its text, byte for byte), and long enough
 * to be worth it. It becomes `""` in the text, two bytes like `[]`, so
 * error positions move back the same way.
 *
 * Numbers are read as jansson reads them, to the bit: the nearest double
 * (strtod's), then cast to float32, as matrix.c does with jansson's value.
 * A decimal of at most 19 significant digits whose value is m · 10^e with
 * m < 2^53 and |e| <= 22 is that double by one correctly rounded operation
 * (Clinger's fast path); everything else goes to strtod, under the C
 * locale whatever the process's.
 */
#include "api/arrays.h"

#include <float.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/buffer.h"
#include "api/float32.h"
#include "api/json_path.h"

/* Containers deeper than this end the scan (wanted paths are shallow). */
#define SCAN_MAX_DEPTH API_ARRAYS_DEPTH_MAX

/* Where a lifted array was, for moving error positions back. */
typedef struct span {
    size_t text_at; /* its `[]` in the text */
    size_t body_at; /* its first byte in the body */
    size_t body_len;
} span;

typedef struct item {
    char *path;
    int rank;          /* 1 or 2: an array of numbers; 0: a string */
    size_t rows, cols; /* an array's shape; a string's length in cols */
    size_t first;      /* an array: its first number's index in floats;
                          a string: its first byte's offset in the body */
} item;

typedef struct lifted_string {
    const char *path;
    const char *text; /* in the body */
    size_t len;
} lifted_string;

struct api_arrays {
    item *items;      /* in text order while scanning, by path after */
    span *spans;      /* in text order */
    api_array *found; /* the public view of the arrays, sorted by path */
    size_t n_found;
    lifted_string *strings; /* the lifted strings, sorted by path */
    size_t n_strings;
    size_t count, cap;
    float *floats; /* every lifted number */
    size_t n_floats, floats_cap;
    char *text; /* the body with spans replaced, or NULL: none */
    size_t text_len;
    const char *body;
    size_t body_len;
    api_arrays_limit violation;
    char violation_path[API_PATH_MAX];
    const char *violation_value; /* API_ARRAYS_NOT_STRING: what it is */
    /* api_arrays_alias: paths under alias_from are looked up under alias_to. */
    char alias_from[API_PATH_MAX], alias_to[API_PATH_MAX];
};

/* ---- numbers ------------------------------------------------------------ */

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void c_locale_make(void) {
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

static const double pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int is_digit(char c) {
    return c >= '0' && c <= '9';
}

static int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static const char *skip_space(const char *p, const char *end) {
    while (p < end && is_space(*p))
        p++;
    return p;
}

/* The double nearest to m · 10^e by Clinger's fast path (one correctly
 * rounded operation on exact operands, so strtod's own result), or 0 when
 * it does not apply. */
static int number_fast(uint64_t m, int e, int negative, double *out) {
    if (m >> 53 || e < -22 || e > 22) return 0;
    double d = e >= 0 ? (double)m * pow10_exact[e] : (double)m / pow10_exact[-e];
    *out = negative ? -d : d;
    return 1;
}

/*
 * Reads the number at s[0, end) as jansson's lexer would accept it, into
 * *out as jansson's double; returns the bytes it takes, or 0 when it is
 * not a JSON number.
 */
static size_t number_read_double(const char *s, const char *end, double *out) {
    const char *p = s;
    int negative = 0;
    uint64_t m = 0;
    int digits = 0, exp10 = 0, truncated = 0;

    if (p < end && *p == '-') negative = 1, p++;
    if (p >= end || !is_digit(*p)) return 0;
    if (*p == '0') {
        p++; /* a digit after a leading zero fails the delimiter check below */
    } else {
        for (; p < end && is_digit(*p); p++) {
            if (digits < 19)
                m = m * 10 + (uint64_t)(*p - '0'), digits += m != 0;
            else
                exp10++, truncated |= *p != '0';
        }
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || !is_digit(*p)) return 0;
        for (; p < end && is_digit(*p); p++) {
            if (digits < 19) {
                m = m * 10 + (uint64_t)(*p - '0'), exp10--;
                digits += m != 0;
            } else {
                truncated |= *p != '0';
            }
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        int sign = 1, e = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) sign = *p == '-' ? -1 : 1, p++;
        if (p >= end || !is_digit(*p)) return 0;
        for (; p < end && is_digit(*p); p++)
            if (e < 100000) e = e * 10 + (*p - '0');
        exp10 += sign * e;
    }
    /* A number ends at whitespace, a comma or a bracket, inside the text:
     * so strtod, which needs no terminator, stops where the grammar did. */
    if (p >= end || !(is_space(*p) || *p == ',' || *p == ']')) return 0;
    size_t taken = (size_t)(p - s);
    double d;
    if (truncated || !number_fast(m, exp10, negative, &d)) {
        pthread_once(&c_locale_once, c_locale_make);
        if (c_locale == (locale_t)0) return 0; /* leave it to jansson */
        d = strtod_l(s, NULL, c_locale);
    }
    *out = d;
    return taken;
}

/* number_read_double, for a number finite as a float32, cast to it; 0 for
 * one that is not (api_double_fits_float32, matrix.c's test too, on the
 * same double), which is left to jansson and the usual error. */
static size_t number_read(const char *s, const char *end, float *out) {
    double d;
    size_t taken = number_read_double(s, end, &d);
    if (!taken || !api_double_fits_float32(d)) return 0;
    *out = (float)d;
    return taken;
}

/* A mask cell: true, false, or a number whose double is 0 or 1, as
 * request.c's mask_cell accepts it from jansson; read as 1.0f or 0.0f. */
static size_t cell_read(const char *s, const char *end, float *out) {
    size_t taken = 0;
    double d = -1;
    if (end - s >= 4 && !memcmp(s, "true", 4)) {
        taken = 4, d = 1;
    } else if (end - s >= 5 && !memcmp(s, "false", 5)) {
        taken = 5, d = 0;
    } else {
        taken = number_read_double(s, end, &d);
        if (!taken) return 0;
    }
    const char *p = s + taken;
    if (p >= end || !(is_space(*p) || *p == ',' || *p == ']')) return 0;
    if (!(d == 0.0 || d == 1.0)) return 0;
    *out = d == 1.0 ? 1.0f : 0.0f;
    return taken;
}

/* ---- lifting one array ------------------------------------------------------ */

/* Room for `more` floats; -1 when memory ran out. */
static int floats_reserve(api_arrays *a, size_t more) {
    if (a->n_floats + more <= a->floats_cap) return 0;
    size_t cap = a->floats_cap ? a->floats_cap : 1024;
    while (cap < a->n_floats + more)
        cap *= 2;
    float *f = realloc(a->floats, cap * sizeof(float));
    if (!f) return -1;
    api_advise_huge_pages(f, cap * sizeof(float));
    a->floats = f, a->floats_cap = cap;
    return 0;
}

/* Numbers of one row `[n, n, …]` at *pp (mask cells with `cells`),
 * appended to the floats; their count, or 0 (the floats appended so far
 * are the caller's to drop); -1 when memory ran out. */
static long row_read(api_arrays *a, const char **pp, const char *end, int cells) {
    const char *p = *pp;
    long count = 0;
    if (p >= end || *p != '[') return 0;
    p = skip_space(p + 1, end);
    for (;;) {
        if (a->n_floats == a->floats_cap && floats_reserve(a, 1) < 0) return -1;
        float *at = &a->floats[a->n_floats];
        size_t taken = cells ? cell_read(p, end, at) : number_read(p, end, at);
        if (!taken) return 0;
        a->n_floats++, count++;
        p = skip_space(p + taken, end);
        if (p >= end) return 0;
        if (*p == ']') break;
        if (*p != ',') return 0;
        p = skip_space(p + 1, end);
    }
    *pp = p + 1;
    return count;
}

/* Appends `it` with a copy of `path`, for the body's bytes [from, to);
 * -1 when memory ran out. */
static int item_add(api_arrays *a, item it, const char *path, const char *from, const char *to) {
    if (a->count == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 16;
        item *items = realloc(a->items, cap * sizeof *items);
        if (items) a->items = items;
        span *sp = items ? realloc(a->spans, cap * sizeof *sp) : NULL;
        if (sp) a->spans = sp;
        if (!items || !sp) return -1;
        a->cap = cap;
    }
    if (!(it.path = strdup(path))) return -1;
    a->items[a->count] = it;
    a->spans[a->count] = (span){0, (size_t)(from - a->body), (size_t)(to - from)};
    a->count++;
    return 0;
}

/* The array of `rank` (1, 2 or API_ARRAYS_MASK) at *pp: when it is one to
 * lift, appends an item (with a copy of `path`) and sets *lifted, *pp past
 * it; else *lifted is 0 (the floats are as before). 0, or -1 when memory
 * ran out. */
static int lift_array(api_arrays *a, const char **pp, const char *end, int rank, const char *path,
                      int *lifted) {
    const char *p = *pp;
    *lifted = 0;
    size_t first = a->n_floats, rows = 1, cols;
    int cells = rank == API_ARRAYS_MASK;
    long got;
    if (rank == 1) {
        got = row_read(a, &p, end, 0);
        if (got <= 0) goto refuse;
        cols = (size_t)got;
    } else {
        p = skip_space(p + 1, end); /* past the outer '[' */
        got = row_read(a, &p, end, cells);
        if (got <= 0) goto refuse;
        cols = (size_t)got;
        for (;;) {
            p = skip_space(p, end);
            if (p >= end) goto refuse;
            if (*p == ']') break;
            if (*p != ',') goto refuse;
            p = skip_space(p + 1, end);
            got = row_read(a, &p, end, cells);
            if (got <= 0 || (size_t)got != cols) goto refuse;
            rows++;
        }
        p++;
    }
    if (item_add(a, (item){NULL, rank == 1 ? 1 : 2, rows, cols, first}, path, *pp, p) < 0)
        return -1;
    *pp = p;
    *lifted = 1;
    return 0;
refuse:
    a->n_floats = first;
    return got < 0 ? -1 : 0;
}

/* ---- lifting one string ----------------------------------------------------- */

/* Shorter strings are not worth an item. */
#define LIFT_STRING_MIN 64

/* The string at *pp (its opening quote), when it is at least
 * LIFT_STRING_MIN bytes of printable ASCII without a backslash: its value
 * is then exactly its text, as jansson would read it. When it is one to
 * lift, appends an item and sets *lifted, *pp past its closing quote; else
 * *lifted is 0. 0, or -1 when memory ran out. */
static int lift_string(api_arrays *a, const char **pp, const char *end, const char *path,
                       int *lifted) {
    const char *s = *pp + 1, *q = s;
    *lifted = 0;
    while (q < end && *q != '"') {
        unsigned char c = (unsigned char)*q;
        if (c < 0x20 || c > 0x7e || c == '\\') return 0;
        q++;
    }
    if (q >= end || (size_t)(q - s) < LIFT_STRING_MIN) return 0;
    item it = {NULL, 0, 1, (size_t)(q - s), (size_t)(s - a->body)};
    if (item_add(a, it, path, *pp, q + 1) < 0) return -1;
    *pp = q + 1;
    *lifted = 1;
    return 0;
}

/* ---- the scan ------------------------------------------------------------------ */

typedef struct frame {
    char kind;           /* '{' or '[' */
    int known;           /* the container's path is exact */
    int strings;         /* arrays: every element must be a string */
    size_t path_len;     /* its path's length */
    size_t index;        /* arrays: the element at hand */
    size_t max_elements; /* arrays: 0, or the most elements allowed */
} frame;

typedef struct scan {
    api_arrays *a;
    api_arrays_rank_fn rank;
    const char *end;
    char path[API_PATH_MAX];
    size_t path_len;
    int known; /* path is the exact pointer of the value at hand */
    frame stack[SCAN_MAX_DEPTH];
    size_t depth;
    api_arrays_rules rules; /* zeros: no limit */
    size_t values;          /* values met so far */
    /* The first element that is not a string where all must be: refused
     * at the end of the scan, unless nesting or a string's length, the
     * limits the scan held bodies to first, ends it before. */
    const char *not_string;
    char not_string_path[API_PATH_MAX];
} scan;

/* Records the first limit run into, at the path at hand; ends the scan. */
static void scan_violation(scan *sc, api_arrays_limit what) {
    sc->a->violation = what;
    snprintf(sc->a->violation_path, sizeof sc->a->violation_path, "%s", sc->known ? sc->path : "");
}

/* The same, at the path of the innermost container ("" at the top). */
static void scan_violation_container(scan *sc, api_arrays_limit what) {
    const frame *f = sc->depth ? &sc->stack[sc->depth - 1] : NULL;
    sc->a->violation = what;
    snprintf(sc->a->violation_path, sizeof sc->a->violation_path, "%.*s",
             f && f->known ? (int)f->path_len : 0, sc->path);
}

/* A value's type from its first byte, in api_json_type_name's words. */
static const char *type_word(char c) {
    switch (c) {
    case '{': return "an object";
    case '[': return "an array";
    case '"': return "a string";
    case 't': return "true";
    case 'f': return "false";
    case 'n': return "null";
    default: return "a number";
    }
}

/* Entering element f->index of the top array: past its allowed count?
 * Then it is recorded, and the scan ends. */
static int element_too_many(scan *sc) {
    const frame *f = &sc->stack[sc->depth - 1];
    if (sc->not_string || !f->max_elements || f->index < f->max_elements) return 0;
    scan_violation_container(sc, API_ARRAYS_TOO_LONG);
    return 1;
}

/* Is the value at hand that of a "data" key (a tensor's base64)? */
static int at_data(const scan *sc) {
    return sc->known && sc->path_len >= 5 && !strcmp(sc->path + sc->path_len - 5, "/data");
}

/* Is it the "data" of a tensor object standing at a wanted path? */
static int at_tensor_data(const scan *sc) {
    if (!at_data(sc)) return 0;
    char parent[API_PATH_MAX];
    memcpy(parent, sc->path, sc->path_len - 5);
    parent[sc->path_len - 5] = '\0';
    int rank = sc->rank(parent);
    return rank == 1 || rank == 2; /* a mask is never a tensor object */
}

/* The path of the next member: the top container's + "/" + index. */
/* The element's path: the array's (already the first path_len bytes of
 * sc->path) and "/index", cut as api_path_index cuts. Written in place
 * without snprintf: a refused body's scan goes on past a bad token through
 * every element (for the limits that answer first), and formatting each
 * index made that ~20× slower than the scan itself (60 MiB of `[1,1,…]`
 * tokens: 4.8 s). */
static void path_index(scan *sc) {
    frame *f = &sc->stack[sc->depth - 1];
    char num[24];
    size_t k = sizeof num, i = f->index;
    do
        num[--k] = (char)('0' + i % 10);
    while ((i /= 10) != 0);
    num[--k] = '/';
    size_t n = sizeof num - k, at = f->path_len;
    if (at < sizeof sc->path - 1) {
        if (n > sizeof sc->path - 1 - at) n = sizeof sc->path - 1 - at;
        memcpy(sc->path + at, num + k, n);
        at += n;
    }
    sc->path[at] = '\0';
    sc->path_len = at;
    sc->known = f->known && sc->path_len < sizeof sc->path - 1;
}

static int hex4(const char *s, const char *end, unsigned *out) {
    unsigned v = 0;
    if (end - s < 4) return -1;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

/*
 * The value of a key written with escapes, raw[0, len) between its
 * quotes, into out (cap bytes, a NUL left to the caller): its length, or
 * -1 when it does not fit or when jansson would refuse it (a bad escape, a
 * lone surrogate, a NUL, which jansson does not take in a key). So that
 * "emb\u0065ddings" is the path it names, as jansson reads it. The bytes
 * that are not escapes are copied as they are; their UTF-8 is jansson's to
 * check.
 */
static long key_unescape(char *out, size_t cap, const char *raw, size_t len) {
    const char *p = raw, *end = raw + len;
    size_t n = 0;
    while (p < end) {
        unsigned char c = (unsigned char)*p++;
        unsigned u;
        char buf[4];
        size_t k = 0;
        if (c != '\\') {
            buf[k++] = (char)c;
        } else {
            if (p >= end) return -1;
            switch (*p++) {
            case '"': buf[k++] = '"'; break;
            case '\\': buf[k++] = '\\'; break;
            case '/': buf[k++] = '/'; break;
            case 'b': buf[k++] = '\b'; break;
            case 'f': buf[k++] = '\f'; break;
            case 'n': buf[k++] = '\n'; break;
            case 'r': buf[k++] = '\r'; break;
            case 't': buf[k++] = '\t'; break;
            case 'u':
                if (hex4(p, end, &u) < 0) return -1;
                p += 4;
                if (u >= 0xdc00 && u <= 0xdfff) return -1;
                if (u >= 0xd800 && u <= 0xdbff) {
                    unsigned lo;
                    if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, end, &lo) < 0 ||
                        lo < 0xdc00 || lo > 0xdfff)
                        return -1;
                    p += 6;
                    u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
                }
                if (u == 0) return -1;
                if (u < 0x80) {
                    buf[k++] = (char)u;
                } else if (u < 0x800) {
                    buf[k++] = (char)(0xc0 | u >> 6), buf[k++] = (char)(0x80 | (u & 0x3f));
                } else if (u < 0x10000) {
                    buf[k++] = (char)(0xe0 | u >> 12), buf[k++] = (char)(0x80 | (u >> 6 & 0x3f));
                    buf[k++] = (char)(0x80 | (u & 0x3f));
                } else {
                    buf[k++] = (char)(0xf0 | u >> 18), buf[k++] = (char)(0x80 | (u >> 12 & 0x3f));
                    buf[k++] = (char)(0x80 | (u >> 6 & 0x3f)), buf[k++] = (char)(0x80 | (u & 0x3f));
                }
                break;
            default: return -1;
            }
        }
        if (n + k >= cap) return -1;
        memcpy(out + n, buf, k);
        n += k;
    }
    return (long)n;
}

/* The string at *pp (its opening quote): *pp past its closing one; a key
 * (NULL: not wanted) gets the path of its member. 0, or -1 if unterminated. */
static int string_skip(scan *sc, const char **pp, int key) {
    const char *p = *pp + 1, *start = p;
    int escaped = 0;
    for (;;) {
        const char *q = memchr(p, '"', (size_t)(sc->end - p));
        if (!q) return -1;
        const char *b = memchr(p, '\\', (size_t)(q - p));
        if (!b) {
            p = q;
            break;
        }
        escaped = 1;
        p = b + 2; /* the escaped byte is never the closing quote */
        if (p > sc->end) return -1;
    }
    *pp = p + 1;
    size_t raw = (size_t)(p - start);
    if (sc->rules.max_string && raw > sc->rules.max_string && (key || !at_data(sc))) {
        if (key) { /* the key's object is where it is */
            frame *f = &sc->stack[sc->depth - 1];
            sc->path_len = f->path_len;
            sc->path[sc->path_len] = '\0';
            sc->known = f->known;
        }
        scan_violation(sc, API_ARRAYS_STRING_LONG);
        return -1;
    }
    if (!key) return 0;
    frame *f = &sc->stack[sc->depth - 1];
    sc->known = f->known;
    if (!sc->known) return 0;
    char base[API_PATH_MAX], name[API_PATH_MAX];
    long klen = raw < sizeof name ? (long)raw : -1;
    if (klen >= 0 && escaped)
        klen = key_unescape(name, sizeof name, start, raw);
    else if (klen >= 0)
        memcpy(name, start, raw);
    if (klen < 0) { /* too long, or an escape jansson refuses: never a wanted name */
        sc->known = 0;
        return 0;
    }
    memcpy(base, sc->path, f->path_len);
    base[f->path_len] = '\0';
    name[klen] = '\0';
    api_path_key(sc->path, sizeof sc->path, base, name);
    sc->path_len = strlen(sc->path);
    sc->known = sc->path_len < sizeof sc->path - 1; /* else it may have been cut */
    return 0;
}

/* Copies body bytes before the span of item k into the text, then `[]`
 * (an array) or `""` (a string): two bytes either way. */
static void text_put(api_arrays *a, size_t k, size_t *copied) {
    span *s = &a->spans[k];
    size_t before = s->body_at - *copied;
    memcpy(a->text + a->text_len, a->body + *copied, before);
    a->text_len += before;
    s->text_at = a->text_len;
    memcpy(a->text + a->text_len, a->items[k].rank ? "[]" : "\"\"", 2);
    a->text_len += 2;
    *copied = s->body_at + s->body_len;
}

enum { S_VALUE, S_AFTER, S_KEY, S_FIRST_MEMBER, S_FIRST_ELEMENT };

/* The scan (see the top); -1 only when memory ran out. */
static int scan_run(scan *sc, const char *body) {
    const char *p = body, *end = sc->end;
    int state = S_VALUE;
    for (;;) {
        p = skip_space(p, end);
        if (p >= end) return 0;
        char c = *p;
        switch (state) {
        case S_VALUE: {
            const frame *top = sc->depth ? &sc->stack[sc->depth - 1] : NULL;
            if (top && top->strings && c != '"' && !sc->not_string) {
                /* the body is refused: from here on only the first limits
                 * are checked, none that counts */
                sc->not_string = type_word(c);
                snprintf(sc->not_string_path, sizeof sc->not_string_path, "%s",
                         sc->known ? sc->path : "");
            }
            if (!sc->not_string && sc->rules.max_values && ++sc->values > sc->rules.max_values) {
                scan_violation_container(sc, API_ARRAYS_TOO_MANY);
                return 0;
            }
            if (c == '[' && sc->known) {
                int rank = sc->rank(sc->path);
                if (rank) {
                    int lifted;
                    if (lift_array(sc->a, &p, end, rank, sc->path, &lifted) < 0) return -1;
                    if (lifted) {
                        state = S_AFTER;
                        break;
                    }
                }
            }
            if (c == '[' || c == '{') {
                if (sc->rules.max_depth && sc->depth >= sc->rules.max_depth) {
                    scan_violation(sc, API_ARRAYS_TOO_DEEP);
                    return 0;
                }
                if (sc->depth == SCAN_MAX_DEPTH) return 0;
                frame f = {c, sc->known, 0, sc->path_len, 0, 0};
                if (c == '[' && sc->known && sc->rules.max_elements)
                    f.max_elements = sc->rules.max_elements(sc->rules.ctx, sc->path, &f.strings);
                sc->stack[sc->depth++] = f;
                p++;
                state = c == '[' ? S_FIRST_ELEMENT : S_FIRST_MEMBER;
            } else if (c == '"') {
                int lifted = 0;
                if (at_tensor_data(sc) && lift_string(sc->a, &p, end, sc->path, &lifted) < 0)
                    return -1;
                if (!lifted && string_skip(sc, &p, 0) < 0) return 0;
                state = S_AFTER;
            } else { /* a number or a literal: up to the next delimiter */
                const char *q = p;
                while (q < end && !is_space(*q) && *q != ',' && *q != ']' && *q != '}')
                    q++;
                if (q == p) return 0;
                p = q;
                state = S_AFTER;
            }
            break;
        }
        case S_FIRST_ELEMENT:
            if (c == ']') {
                sc->depth--;
                p++;
                state = S_AFTER;
            } else {
                path_index(sc);
                if (element_too_many(sc)) return 0;
                state = S_VALUE;
            }
            break;
        case S_FIRST_MEMBER:
            if (c == '}') {
                sc->depth--;
                p++;
                state = S_AFTER;
                break;
            }
            /* fall through */
        case S_KEY:
            if (c != '"' || string_skip(sc, &p, 1) < 0) return 0;
            p = skip_space(p, end);
            if (p >= end || *p != ':') return 0;
            p++;
            state = S_VALUE;
            break;
        case S_AFTER: {
            if (sc->depth == 0) return 0;
            frame *f = &sc->stack[sc->depth - 1];
            if (c == ',') {
                p++;
                if (f->kind == '[') {
                    f->index++;
                    path_index(sc);
                    if (element_too_many(sc)) return 0;
                    state = S_VALUE;
                } else {
                    state = S_KEY;
                }
            } else if ((c == ']' && f->kind == '[') || (c == '}' && f->kind == '{')) {
                sc->depth--;
                p++;
                /* back to the path of the container itself */
                sc->path_len = f->path_len;
                sc->path[sc->path_len] = '\0';
            } else {
                return 0;
            }
            break;
        }
        }
    }
}

/* An api_arrays_rank_fn that lifts nothing. */
static int rank_none(const char *path) {
    (void)path;
    return 0;
}

static int item_by_path(const void *x, const void *y) {
    return strcmp(((const api_array *)x)->path, ((const api_array *)y)->path);
}

static int string_by_path(const void *x, const void *y) {
    return strcmp(((const lifted_string *)x)->path, ((const lifted_string *)y)->path);
}

int api_arrays_lift(api_arrays **out, const char *body, size_t len, api_arrays_rank_fn rank) {
    return api_arrays_lift_within(out, body, len, rank, 0, 0);
}

api_arrays_limit api_arrays_violation(const api_arrays *a, const char **path) {
    if (path) *path = a ? a->violation_path : "";
    return a ? a->violation : API_ARRAYS_WITHIN;
}

const char *api_arrays_violation_value(const api_arrays *a) {
    return a && a->violation_value ? a->violation_value : "";
}

int api_arrays_lift_within(api_arrays **out, const char *body, size_t len, api_arrays_rank_fn rank,
                           size_t max_depth, size_t max_string) {
    api_arrays_rules rules = {.max_depth = max_depth, .max_string = max_string};
    return api_arrays_lift_rules(out, body, len, rank, &rules);
}

int api_arrays_lift_rules(api_arrays **out, const char *body, size_t len, api_arrays_rank_fn rank,
                          const api_arrays_rules *rules) {
    *out = NULL;
    api_arrays *a = calloc(1, sizeof *a);
    if (!a) return -1;
    a->body = body, a->body_len = len;
    scan *sc = calloc(1, sizeof *sc);
    if (!sc) goto fail;
    sc->a = a, sc->rank = rank, sc->end = body + len, sc->known = 1;
    if (rules) sc->rules = *rules;
    /* A NUL byte is never valid JSON, and jansson's positions skip it in
     * places: such a body has nothing lifted, so that its error positions
     * map back exactly, but the text before the NUL, which jansson reads,
     * is still scanned for the limits. */
    const char *nul = memchr(body, '\0', len);
    if (nul) sc->end = nul, sc->rank = rank_none;
    int rc = scan_run(sc, body);
    if (a->violation == API_ARRAYS_WITHIN && sc->not_string) {
        a->violation = API_ARRAYS_NOT_STRING, a->violation_value = sc->not_string;
        memcpy(a->violation_path, sc->not_string_path, sizeof a->violation_path);
    }
    free(sc);
    if (rc < 0) goto fail;
    if (a->count) {
        a->text = malloc(len + 1); /* each span of >= 3 bytes becomes 2 */
        a->found = malloc(a->count * sizeof *a->found);
        a->strings = malloc(a->count * sizeof *a->strings);
        if (!a->text || !a->found || !a->strings) goto fail;
        size_t copied = 0;
        for (size_t k = 0; k < a->count; k++) {
            text_put(a, k, &copied);
            const item *it = &a->items[k];
            if (it->rank)
                a->found[a->n_found++] =
                    (api_array){it->path, it->rank, it->rows, it->cols, a->floats + it->first};
            else
                a->strings[a->n_strings++] = (lifted_string){it->path, body + it->first, it->cols};
        }
        memcpy(a->text + a->text_len, body + copied, len - copied);
        a->text_len += len - copied;
        a->text[a->text_len] = '\0';
        qsort(a->found, a->n_found, sizeof *a->found, item_by_path);
        qsort(a->strings, a->n_strings, sizeof *a->strings, string_by_path);
    }
    *out = a;
    return 0;
fail:
    api_arrays_free(a);
    return -1;
}

const char *api_arrays_text(const api_arrays *a, size_t *len) {
    if (!a->text) {
        *len = a->body_len;
        return a->body;
    }
    *len = a->text_len;
    return a->text;
}

void api_arrays_alias(api_arrays *a, const char *from, const char *to) {
    if (!a) return;
    snprintf(a->alias_from, sizeof a->alias_from, "%s", from ? from : "");
    snprintf(a->alias_to, sizeof a->alias_to, "%s", from && to ? to : "");
}

/* path, or its alias (api_arrays_alias) in buf. */
static const char *aliased(const api_arrays *a, const char *path, char *buf, size_t cap) {
    size_t n = strlen(a->alias_from);
    if (n == 0 || strncmp(path, a->alias_from, n) != 0 || (path[n] != '/' && path[n] != '\0'))
        return path;
    int w = snprintf(buf, cap, "%s%s", a->alias_to, path + n);
    return w >= 0 && (size_t)w < cap ? buf : path;
}

const api_array *api_arrays_find(const api_arrays *a, const char *path) {
    char buf[API_PATH_MAX];
    if (!a || !a->n_found) return NULL;
    api_array key = {.path = aliased(a, path, buf, sizeof buf)};
    return bsearch(&key, a->found, a->n_found, sizeof key, item_by_path);
}

const char *api_arrays_find_string(const api_arrays *a, const char *path, size_t *len) {
    char buf[API_PATH_MAX];
    if (!a || !a->n_strings) return NULL;
    lifted_string key = {.path = aliased(a, path, buf, sizeof buf)};
    const lifted_string *s = bsearch(&key, a->strings, a->n_strings, sizeof key, string_by_path);
    if (!s) return NULL;
    *len = s->len;
    return s->text;
}

size_t api_arrays_numbers(const api_arrays *a) {
    return a ? a->n_floats : 0;
}

/* Is c the first byte of a character, as jansson counts columns? */
static int utf8_first(unsigned char c) {
    return c < 0x80 || (c >= 0xc2 && c <= 0xf4);
}

void api_arrays_fix_error(const api_arrays *a, const char *body, size_t len, json_error_t *jerr) {
    if (!a || !a->text || jerr->position < 0) return;
    size_t pos = (size_t)jerr->position, shift = 0;
    for (size_t k = 0; k < a->count && a->spans[k].text_at < pos; k++)
        shift += a->spans[k].body_len - 2;
    pos += shift;
    if (pos > len) pos = len;
    int line = 1, column = 0;
    for (size_t i = 0; i < pos; i++) {
        unsigned char c = (unsigned char)body[i];
        if (c == '\n')
            line++, column = 0;
        else if (utf8_first(c))
            column++;
    }
    jerr->position = (int)pos;
    jerr->line = line;
    jerr->column = column;
}

void api_arrays_free(api_arrays *a) {
    if (!a) return;
    for (size_t k = 0; k < a->count; k++)
        free(a->items[k].path);
    free(a->items), free(a->spans), free(a->found), free(a->strings), free(a->floats),
        free(a->text);
    free(a);
}
