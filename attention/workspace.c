/*
 * workspace.c — the scratch memory of one worker.
 *
 * A workspace is one aligned block and its capacity. It only grows (until
 * attn_workspace_trim lets a huge one go): a call
 * that needs more than the block holds frees it and allocates a larger one
 * (the old contents are scratch, nothing is copied); a call that needs less
 * reuses it as it is. The block is carved into slices by attn_compute from
 * a table of sizes (compute.c), so a worker that serves requests of similar
 * size allocates once and then never again.
 *
 * A workspace belongs to one thread at a time; nothing here is locked.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "attention/plan.h"
#include "attention/workspace.h"

struct attn_workspace {
    void *block;     /* ATTN_WS_ALIGN-aligned, `capacity` bytes, or NULL */
    size_t capacity; /* bytes */
};

attn_workspace *attn_workspace_create(void) {
    return calloc(1, sizeof(attn_workspace));
}

void attn_workspace_destroy(attn_workspace *ws) {
    if (!ws) return;
    free(ws->block);
    free(ws);
}

size_t attn_workspace_bytes(const attn_workspace *ws) {
    return ws ? ws->capacity : 0;
}

void attn_workspace_trim(attn_workspace *ws, size_t keep_bytes) {
    if (!ws || ws->capacity <= keep_bytes) return;
    free(ws->block);
    ws->block = NULL;
    ws->capacity = 0;
}

/* Out of line on purpose (plan.h): the size is not known where it is called. */
void attn_zero(void *p, size_t bytes) {
    memset(p, 0, bytes);
}

void *attn_workspace_reserve(attn_workspace *ws, size_t bytes) {
    if (!ws) return NULL; /* as a failed growth: the caller's error path, not a fault */
    if (bytes <= ws->capacity) return ws->block;
    /* Round up to the alignment: posix_memalign wants nothing of it, but a
     * capacity that is a multiple keeps the slice arithmetic simple. */
    if (bytes > SIZE_MAX - (ATTN_WS_ALIGN - 1)) return NULL;
    size_t rounded = (bytes + ATTN_WS_ALIGN - 1) / ATTN_WS_ALIGN * ATTN_WS_ALIGN;
    void *block = NULL;
    if (posix_memalign(&block, ATTN_WS_ALIGN, rounded) != 0) return NULL;
    free(ws->block);
    ws->block = block;
    ws->capacity = rounded;
    return block;
}
