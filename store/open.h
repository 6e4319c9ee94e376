/*
 * open.h — opening a file of store/ for reading: a regular file, or a
 * refusal that names it, never a wait.
 *
 * Every file store/ reads (a model, a checkpoint's config.json, its
 * index, its shards) is opened here. open(2) of a FIFO for reading waits
 * for a writer, which may never come: the server would hang at start or
 * at a reload, out of reach of SIGTERM, and so would an import. So the
 * file is opened O_NONBLOCK, which returns at once whatever it is, and
 * refused by fstat unless it is a regular file (a FIFO, a device, a
 * directory); the descriptor handed back reads as any other, with
 * O_NONBLOCK cleared.
 */
#ifndef STORE_OPEN_H
#define STORE_OPEN_H

#include <sys/stat.h>

#include "store/error.h"

/* Opens path read-only (O_CLOEXEC). Returns the descriptor (the caller
 * closes it) and, when st is not NULL, its fstat in *st; or -1 with err
 * set to "<path>: cannot open: …" or "<path>: not a regular file (a
 * FIFO)" and the like. */
int store_open_regular(const char *path, struct stat *st, attn_error *err);

#endif
