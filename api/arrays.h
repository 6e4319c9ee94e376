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
 * Paths are JSON Pointers (RFC 6901) as api/json_path.h builds them; an
 * array under a key written with escapes is never lifted.
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

/* The rank of the array wanted at `path` (1 or 2), or 0: not lifted. */
typedef int (*api_arrays_rank_fn)(const char *path);

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

/* What api_arrays_lift_within found over a limit. */
typedef enum api_arrays_limit {
    API_ARRAYS_WITHIN = 0,
    API_ARRAYS_TOO_DEEP,     /* a container opened deeper than max_depth */
    API_ARRAYS_STRING_LONG   /* a string longer than max_string */
} api_arrays_limit;

/* The limit the scan ran into, and the JSON Pointer of the value where it
 * did (its container's for a key; "" where the path is not known). */
api_arrays_limit api_arrays_violation(const api_arrays *a, const char **path);

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

/* Numbers lifted in all. */
size_t api_arrays_numbers(const api_arrays *a);

/* Moves the position, line and column of an error jansson reported on
 * api_arrays_text back onto the body they came from. */
void api_arrays_fix_error(const api_arrays *a, const char *body, size_t len, json_error_t *jerr);

void api_arrays_free(api_arrays *a);

#endif
