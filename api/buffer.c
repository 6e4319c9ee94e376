/*
 * buffer.c — a growable byte buffer (see buffer.h). Capacity doubles, so n
 * appends cost O(n) copies; sizes are checked before they grow.
 */
#include "api/buffer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void api_advise_huge_pages(void *p, size_t bytes) {
    if (p == NULL || bytes < API_HUGE_PAGE_MIN_BYTES) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = ((uintptr_t)p + page - 1) / page * page;
    uintptr_t end = ((uintptr_t)p + bytes) / page * page;
    if (end > start) madvise((void *)start, end - start, MADV_HUGEPAGE);
}

void api_buffer_init(api_buffer *b, size_t hint) {
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
    api_buffer_reserve(b, hint ? hint : 256);
}

int api_buffer_reserve(api_buffer *b, size_t more) {
    size_t need, cap;
    char *grown;

    if (b->failed) return -1;
    if (more > SIZE_MAX - b->len - 1) goto fail;
    need = b->len + more + 1;
    if (need <= b->cap) return 0;
    cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    grown = realloc(b->data, cap);
    if (grown == NULL) goto fail;
    api_advise_huge_pages(grown, cap);
    b->data = grown;
    b->cap = cap;
    b->data[b->len] = '\0';
    return 0;
fail:
    b->failed = 1;
    return -1;
}

void api_buffer_append(api_buffer *b, const char *s, size_t n) {
    if (api_buffer_reserve(b, n) < 0) return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void api_buffer_append_str(api_buffer *b, const char *s) {
    api_buffer_append(b, s, strlen(s));
}

char *api_buffer_finish(api_buffer *b, size_t *len) {
    char *text = b->data;

    if (b->failed) {
        free(b->data);
        text = NULL;
    } else if (len) {
        *len = b->len;
    }
    b->data = NULL;
    b->len = b->cap = 0;
    return text;
}
