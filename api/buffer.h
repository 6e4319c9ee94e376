/*
 * buffer.h — a growable byte buffer for building a response body.
 *
 * Appends never fail loudly: the first allocation failure marks the buffer
 * failed, later appends do nothing, and api_buffer_finish returns NULL.
 * The caller checks once at the end.
 */
#ifndef API_BUFFER_H
#define API_BUFFER_H

#include <stddef.h>

typedef struct api_buffer {
    char *data; /* owned; NUL-terminated whenever not failed */
    size_t len, cap;
    int failed;
} api_buffer;

/* Starts an empty buffer with room for about `hint` bytes (may be 0). */
void api_buffer_init(api_buffer *b, size_t hint);

/* Makes room for `more` bytes past len (plus the NUL); 0, or -1 (failed). */
int api_buffer_reserve(api_buffer *b, size_t more);

void api_buffer_append(api_buffer *b, const char *s, size_t n);
void api_buffer_append_str(api_buffer *b, const char *s);

/* Hands the text to the caller (who frees it) and its length in *len;
 * NULL, with everything freed, when an append failed. */
char *api_buffer_finish(api_buffer *b, size_t *len);

#endif
