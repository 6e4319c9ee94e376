/*
 * json_path.h — JSON Pointers (RFC 6901) for error values.
 *
 * Paths are built in caller-owned buffers (API_PATH_MAX bytes, the size of
 * attn_error.path); a path too long for its buffer is cut, never overrun.
 */
#ifndef API_JSON_PATH_H
#define API_JSON_PATH_H

#include <stddef.h>

#define API_PATH_MAX 256

/* dst = base + "/" + key, with '~' and '/' of key escaped as "~0", "~1".
 * dst may not alias base. */
void api_path_key(char *dst, size_t cap, const char *base, const char *key);

/* dst = base + "/" + i. dst may not alias base. */
void api_path_index(char *dst, size_t cap, const char *base, size_t i);

/*
 * The pointer of the number that ends at byte `end` of `text`, where jansson
 * stopped with a numeric overflow (json_error_t.position). Scans text[0, end)
 * — valid JSON up to there, since jansson got that far — with a small
 * container stack. Writes "" and returns -1 when no number ends there.
 */
int api_path_of_number_at(const char *text, size_t len, size_t end, char *dst, size_t cap);

/*
 * The text of the number at the JSON Pointer `path` in `text` (valid JSON,
 * as jansson read it): its first byte, and its length in *n; NULL when no
 * number is there (or without memory). For a message that must show a
 * number as it was sent, not as the double jansson read (2^63 − 1 reads as
 * 2^63). Scans the text from its start, for an error's sake only.
 */
const char *api_path_number_text(const char *text, size_t len, const char *path, size_t *n);

#endif
