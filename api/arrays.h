/*
 * arrays.h — the large arrays of numbers of a request body, read straight
 * from its text before jansson sees it.
 *
 * jansson would make one json_t per number (about 40 bytes of tree per
 * number, and a double read by strtod). Instead api_arrays_lift scans the
 * body once, and every array at a path the caller names (embeddings,
 * weight matrices, biases) that is, exactly as jansson reads JSON, a
 * non-empty rectangular array of numbers of the rank asked for, each
 * finite as a float32, is read into floats and replaced by `[]` in a copy
 * of the text, which jansson then parses as usual. Anything else — an
 * empty or ragged array, a string among the numbers, a number jansson
 * would refuse or that overflows float32, broken JSON — is left in the
 * text untouched, so jansson and the usual checks meet it and answer as
 * they always did. Lifting therefore never changes which bodies are
 * accepted, nor the error a refused one gets (api_arrays_fix_error puts
 * jansson's error position back on the original text), nor the numbers
 * read: each is strtod's double cast to float32, as jansson's path reads
 * it; only faster, and without a json_t per number.
 *
 * Paths are JSON Pointers (RFC 6901) as api/json_path.h builds them, of
 * keys as jansson reads them ("emb\u0065ddings" is /embeddings); under a
 * key jansson would refuse, nothing is lifted.
 *
 * The same scan also holds the body to limits before jansson builds its
 * tree (api_arrays_lift_within, api_arrays_lift_rules): nesting, string
 * length, the length of arrays at given paths and that their elements are
 * strings, and the number of values in all, so that what jansson is left
 * with stays small whatever the body's shape.
 */
#ifndef API_ARRAYS_H
#define API_ARRAYS_H

#include <jansson.h>
#include <stddef.h>

/* One lifted array: rank 1 (cols numbers, rows = 1) or 2 (rows × cols),
 * row-major. */
typedef struct api_array {
    const char *path;
    int rank;
    size_t rows, cols;
    const float *data;
} api_array;

typedef struct api_arrays api_arrays;

/* The rank of the array wanted at `path` (1 or 2, or API_ARRAYS_MASK),
 * or 0: not lifted. */
typedef int (*api_arrays_rank_fn)(const char *path);

/* A rank-2 array of mask cells: true, false, or a number whose double is 0
 * or 1 (mask_cell's rule in request.c), lifted as 1.0f and 0.0f; found as
 * an api_array of rank 2. Any other cell leaves it to jansson. */
#define API_ARRAYS_MASK 3

/*
 * Scans body[0, len) and lifts the arrays `rank` names (see the top).
 * Returns 0 and a table in *out (free with api_arrays_free), or -1 when
 * memory ran out (*out NULL).
 */
int api_arrays_lift(api_arrays **out, const char *body, size_t len, api_arrays_rank_fn rank);

/*
 * api_arrays_lift, checking two limits on the way, 0 for none: containers
 * nested deeper than max_depth, and strings (keys too) longer than
 * max_string bytes as written, but for the value of a "data" key (the
 * base64 of a tensor object, bounded by the body's size). The first one
 * over a limit ends the scan: api_arrays_violation says which, and where.
 * The depth is counted to API_ARRAYS_DEPTH_MAX at most.
 */
#define API_ARRAYS_DEPTH_MAX 256
int api_arrays_lift_within(api_arrays **out, const char *body, size_t len, api_arrays_rank_fn rank,
                           size_t max_depth, size_t max_string);

/*
 * What the scan holds a body to besides those two, so that jansson is
 * never handed more than a request within the limits can need (0 or NULL:
 * no limit):
 *   max_values    values in all, containers and scalars, anywhere the
 *                 scan reaches (a lifted array or string counts one: the
 *                 `[]` or `""` jansson still reads); the most jansson's
 *                 tree then holds is this many nodes and the strings'
 *                 bytes, whatever the body's shape;
 *   max_elements  for an array at a path (exact, as for lifting): the
 *                 most elements it may have, 0 for any, and in *strings
 *                 whether each of them must be a string.
 */
typedef struct api_arrays_rules {
    size_t max_depth, max_string; /* as for api_arrays_lift_within */
    size_t max_values;
    size_t (*max_elements)(const void *ctx, const char *path, int *strings);
    const void *ctx;
} api_arrays_rules;

int api_arrays_lift_rules(api_arrays **out, const char *body, size_t len, api_arrays_rank_fn rank,
                          const api_arrays_rules *rules);

/* What api_arrays_lift_within or _rules found over a limit. */
typedef enum api_arrays_limit {
    API_ARRAYS_WITHIN = 0,
    API_ARRAYS_TOO_DEEP,    /* a container opened deeper than max_depth */
    API_ARRAYS_STRING_LONG, /* a string longer than max_string */
    API_ARRAYS_TOO_LONG,    /* an array with more than its max_elements */
    API_ARRAYS_NOT_STRING,  /* an element that is not a string where all must be */
    API_ARRAYS_TOO_MANY     /* more than max_values values */
} api_arrays_limit;

/* The limit the scan ran into, and the JSON Pointer where it did: of the
 * value for TOO_DEEP, STRING_LONG (its container's for a key) and
 * NOT_STRING; of the array for TOO_LONG; of the container holding the
 * value one too many for TOO_MANY; "" where the path is not known. */
api_arrays_limit api_arrays_violation(const api_arrays *a, const char **path);

/* For API_ARRAYS_NOT_STRING: what the element is, in api_json_type_name's
 * words ("an object", "a number", "null", …), read from its first byte. */
const char *api_arrays_violation_value(const api_arrays *a);

/* The text to give jansson: the body with the lifted arrays replaced by
 * `[]`, or the body itself when nothing was lifted. */
const char *api_arrays_text(const api_arrays *a, size_t *len);

/* The array lifted at `path`, or NULL. `a` may be NULL (nothing lifted). */
const api_array *api_arrays_find(const api_arrays *a, const char *path);

/*
 * The string lifted at `path`, or NULL; its length in *len. Strings are
 * lifted too, by the same rule of changing nothing jansson decides: the
 * value of a "data" key (a tensor's base64) in an object at a path the
 * rank function wants, when it is at least 64 bytes of printable ASCII
 * without a backslash, so that its value is exactly its text. The text
 * then holds `""` in its place, and the string's bytes are the body's
 * (valid as long as the body is).
 */
const char *api_arrays_find_string(const api_arrays *a, const char *path, size_t *len);

/* Makes later lookups (api_arrays_find, _find_string) of a path under
 * `from` ("/weights") find what was lifted under `to` instead
 * ("/weights/layers/2"), so that code that knows one place reads another;
 * from NULL or "" ends it. Paths not under `from` are looked up as given. */
void api_arrays_alias(api_arrays *a, const char *from, const char *to);

/* Numbers lifted in all. */
size_t api_arrays_numbers(const api_arrays *a);

/* Moves the position, line and column of an error jansson reported on
 * api_arrays_text back onto the body they came from. */
void api_arrays_fix_error(const api_arrays *a, const char *body, size_t len, json_error_t *jerr);

void api_arrays_free(api_arrays *a);

#endif
