/*
 * workspace.h — internal to attention/: the alignment attn_compute's
 * slices rely on. Not part of the module's public API (attention.h).
 */
#ifndef ATTENTION_WORKSPACE_H
#define ATTENTION_WORKSPACE_H

#include "attention/attention.h"
#include <stddef.h>

/* Alignment of the block and of every slice carved from it (a cache line,
 * and enough for any SIMD load OpenBLAS or a later kernel may use). */
#define ATTN_WS_ALIGN ((size_t)64)

/* attn_workspace_reserve (attention.h) returns blocks of this alignment. */

#endif
