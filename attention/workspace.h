/*
 * workspace.h — internal to attention/: how attn_compute reaches the
 * workspace's memory. Not part of the module's public API (attention.h).
 */
#ifndef ATTENTION_WORKSPACE_H
#define ATTENTION_WORKSPACE_H

#include "attention/attention.h"
#include <stddef.h>

/* Alignment of the block and of every slice carved from it (a cache line,
 * and enough for any SIMD load OpenBLAS or a later kernel may use). */
#define ATTN_WS_ALIGN ((size_t)64)

/*
 * Returns the workspace's block, grown to at least `bytes` (contents not
 * kept across a growth), or NULL when the allocation fails; the workspace
 * is then unchanged. The block stays owned by the workspace.
 */
void *attn_workspace_reserve(attn_workspace *ws, size_t bytes);

#endif
