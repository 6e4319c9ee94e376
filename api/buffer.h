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

/*
 * Asks the kernel to back the pages of [p, p + bytes) with transparent huge
 * pages, when the block is at least API_HUGE_PAGE_MIN_BYTES. The first
 * write to a fresh 4 KiB page costs about 3 ms per MB on the VMs this runs
 * on (bench/README.md): filling a 50 MB output took longer than computing
 * it. Call it on a fresh large block before writing to it. A hint: where
 * the kernel's policy says no, nothing changes.
 */
#define API_HUGE_PAGE_MIN_BYTES ((size_t)4 << 20)
void api_advise_huge_pages(void *p, size_t bytes);

/* Hands the text to the caller (who frees it) and its length in *len;
 * NULL, with everything freed, when an append failed. */
char *api_buffer_finish(api_buffer *b, size_t *len);

#endif
