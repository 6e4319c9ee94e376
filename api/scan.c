/*
 * scan.c — the text scan's limits and the parse, for every wire format
 * (scan.h). Each limit's message is written here once.
 */
#include "api/scan.h"

#include <stdint.h>
#include <string.h>

#include "api/json_path.h"
#include "api/matrix.h"

/* As every wire format parses: every number a double (2^70 is a float32
 * like any other, 1e999 a non-finite number), NUL bytes in strings kept,
 * keys once. */
#define PARSE_FLAGS (JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL)

/* Does `path` match `pattern`, "#" standing for an index (digits)? */
static int path_matches(const char *pattern, const char *path) {
    while (*pattern) {
        if (*pattern == '#') {
            if (*path < '0' || *path > '9') return 0;
            while (*path >= '0' && *path <= '9')
                path++;
            pattern++;
        } else if (*pattern++ != *path++) {
            return 0;
        }
    }
    return *path == '\0';
}

static const api_scan_rule *rule_of(const api_scan_table *t, const char *path) {
    for (size_t i = 0; i < t->n_rules; i++)
        if (path_matches(t->rules[i].pattern, path)) return &t->rules[i];
    return NULL;
}

/* There are this many outputs to name in `return`, each once. */
#define RETURN_NAMES_MAX 11

static size_t limit_value(api_scan_limit limit, const api_limits *limits) {
    switch (limit) {
    case API_SCAN_TOKENS: return limits->max_tokens;
    case API_SCAN_HEADS: return limits->max_heads;
    case API_SCAN_RETURN: return RETURN_NAMES_MAX;
    case API_SCAN_SEQUENCES: return limits->max_batch;
    }
    return 0;
}

typedef struct scan_ctx {
    const api_scan_table *t;
    const api_limits *limits;
} scan_ctx;

/* An api_arrays_rules max_elements. */
static size_t max_elements(const void *ctx, const char *path, int *strings) {
    const scan_ctx *s = ctx;
    const api_scan_rule *r = rule_of(s->t, path);
    *strings = r ? r->strings : 0;
    return r ? limit_value(r->limit, s->limits) : 0;
}

/* The error for an array longer than its rule allows. */
static int too_long(const api_scan_rule *r, const char *where, const api_limits *limits,
                    attn_error *err) {
    size_t most = limit_value(r->limit, limits);
    switch (r->limit) {
    case API_SCAN_TOKENS:
        return attn_error_set(err, 422, "limit_exceeded", where,
                              "%s has more than %zu entries, over the limit max_tokens = %zu "
                              "(one per row)",
                              where + 1, most, limits->max_tokens);
    case API_SCAN_HEADS:
        return attn_error_set(err, 422, "limit_exceeded", where,
                              "%s has more than %zu heads, over the limit max_heads = %zu",
                              where + 1, most, limits->max_heads);
    case API_SCAN_RETURN:
        return attn_error_set(err, 422, "limit_exceeded", where,
                              "return has more than %zu names; there are %zu outputs, each named "
                              "once",
                              most, most);
    case API_SCAN_SEQUENCES:
        return attn_error_set(err, 422, "limit_exceeded", where,
                              "the batch has more than %zu sequences, over the limit max_batch = "
                              "%zu",
                              most, limits->max_batch);
    }
    return -1;
}

/* The error for what the scan refused before jansson ran; 0 when it
 * refused nothing. */
static int violation(const api_arrays *arrays, const api_scan_table *t, const api_limits *limits,
                     attn_error *err) {
    const char *where;
    switch (api_arrays_violation(arrays, &where)) {
    case API_ARRAYS_TOO_DEEP:
        return attn_error_set(err, 422, "limit_exceeded", where,
                              "the JSON nests arrays and objects deeper than the limit "
                              "max_json_depth = %zu",
                              limits->max_json_depth);
    case API_ARRAYS_STRING_LONG:
        return attn_error_set(err, 422, "limit_exceeded", where,
                              "a string is longer than the limit max_string_bytes = %zu",
                              limits->max_string_bytes);
    case API_ARRAYS_NOT_STRING: {
        /* where is an array of strings' path and the index: "/tokens/3" */
        const char *index = strrchr(where, '/');
        int field = index ? (int)(index - where - 1) : 0;
        return attn_error_set(err, 400, "wrong_type", where, "%.*s[%s] is %s, expected a string",
                              field, where + 1, index ? index + 1 : "?",
                              api_arrays_violation_value(arrays));
    }
    case API_ARRAYS_TOO_LONG: {
        const api_scan_rule *r = rule_of(t, where);
        if (r) return too_long(r, where, limits, err);
        return attn_error_set(err, 422, "limit_exceeded", where, "%s is too long", where + 1);
    }
    case API_ARRAYS_TOO_MANY:
        return attn_error_set(err, 422, "limit_exceeded", where,
                              "the %s holds more than %zu JSON values besides its number arrays, "
                              "more than a call within the limits max_batch = %zu, max_tokens = "
                              "%zu and max_heads = %zu can have",
                              t->what, t->values_max(limits), limits->max_batch, limits->max_tokens,
                              limits->max_heads);
    case API_ARRAYS_WITHIN: break;
    }
    return 0;
}

/* jansson's error on a text (after api_arrays_fix_error) as the
 * contract's: 503, 422 non_finite_number at the number's path, or 400. */
static int parse_error(const char *body, size_t len, const api_scan_table *t,
                       const json_error_t *jerr, attn_error *err) {
    enum json_error_code code = json_error_code(jerr);

    if (code == json_error_out_of_memory)
        return attn_error_set(err, 503, "out_of_memory", "", "no memory to parse the %s", t->what);
    if (code == json_error_numeric_overflow) {
        char path[API_PATH_MAX];
        api_path_of_number_at(body, len, (size_t)jerr->position, path, sizeof path);
        return attn_error_set(err, 422, "non_finite_number", path,
                              "the number ending at line %d, column %d is not finite as a "
                              "float32 (%s)",
                              jerr->line, jerr->column, jerr->text);
    }
    return attn_error_set(err, 400, "invalid_json", "",
                          "the %s is not valid JSON: %s at line %d, column %d", t->what, jerr->text,
                          jerr->line, jerr->column);
}

int api_scan_parse(const char *body, size_t len, const api_scan_table *t, const api_limits *limits,
                   json_t **root, api_arrays **arrays, attn_error *err) {
    json_error_t jerr;
    size_t text_len;
    scan_ctx ctx = {t, limits};
    api_arrays_rules rules = {0};

    *root = NULL;
    if (limits)
        rules = (api_arrays_rules){limits->max_json_depth, limits->max_string_bytes,
                                   t->values_max(limits), t->n_rules ? max_elements : NULL, &ctx};
    if (api_arrays_lift_rules(arrays, body, len, t->rank, &rules) < 0)
        return attn_error_set(err, 503, "out_of_memory", "", "no memory to parse the %s", t->what);
    /* Checked on the text, before jansson allocates a node. */
    if (limits && violation(*arrays, t, limits, err) < 0) {
        api_arrays_free(*arrays);
        *arrays = NULL;
        return -1;
    }
    const char *text = api_arrays_text(*arrays, &text_len);
    *root = json_loadb(text, text_len, PARSE_FLAGS, &jerr);
    if (*root) return 0;
    api_arrays_fix_error(*arrays, body, len, &jerr);
    api_arrays_free(*arrays);
    *arrays = NULL;
    return parse_error(body, len, t, &jerr, err);
}

int api_scan_parse_object(const char *body, size_t len, const api_scan_table *t,
                          const api_limits *limits, json_t **root, api_arrays **arrays,
                          attn_error *err) {
    if (api_scan_parse(body, len, t, limits, root, arrays, err) < 0) return -1;
    if (json_is_object(*root)) return 0;
    attn_error_set(err, 400, "invalid_json", "", "the %s must be a JSON object, not %s", t->what,
                   api_json_type_name(*root));
    json_decref(*root);
    *root = NULL;
    api_arrays_free(*arrays);
    *arrays = NULL;
    return -1;
}
