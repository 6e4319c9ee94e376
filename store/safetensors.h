/*
 * safetensors.h — reading and writing safetensors files.
 *
 * The format (https://github.com/huggingface/safetensors):
 *
 *   8 bytes    N, the header length, unsigned little-endian
 *   N bytes    a JSON object, UTF-8, possibly padded with trailing spaces:
 *                "<tensor name>": {"dtype": "F32", "shape": [2, 3],
 *                                  "data_offsets": [begin, end]}, …
 *                "__metadata__": {"<key>": "<string>", …}     (optional)
 *   the rest   the data section; a tensor's bytes are [begin, end) of it,
 *              row-major, little-endian
 *
 * This module knows nothing of attention models (model.h gives the tensors
 * a meaning). Reading takes the file's bytes in one of two ways
 * (store_read_mode) and validates the whole header before anything is
 * handed out, so that every tensor's bytes lie inside them and no two
 * tensors overlap; the data itself is not looked at here (tensor.h reads
 * a tensor's values).
 *
 *   STORE_READ_COPY (the default) reads the whole file into a buffer the
 *   open file owns. Whatever happens to the file afterwards (rewritten in
 *   place, truncated, deleted) changes nothing the reader sees. A file that
 *   changes size or modification time while it is being read is refused,
 *   since its bytes may be half old, half new.
 *
 *   STORE_READ_MAP maps the file read-only (MAP_PRIVATE): no copy, and the
 *   page cache is shared with every process mapping the same file. But the
 *   mapping IS the file: bytes rewritten in place show through, and a file
 *   truncated below a page in use makes the next read of it fault (SIGBUS,
 *   which ends the process). A mapped file may only be replaced by rename.
 *
 * Refused, with a message "<path>: <fault>": a file shorter than 8 bytes, a
 * header length past the end of the file or above 100 MiB, a header that is
 * not JSON, not an object or has a duplicate key, a malformed tensor entry
 * or __metadata__, an unknown dtype, data_offsets that are reversed, run
 * past the data section or overlap another tensor's, and a shape whose size
 * (element count × dtype size, overflow-checked) is not end − begin.
 * Gaps between tensors and bytes after the last one are tolerated.
 *
 * The writer streams a file: tensors in the order given, contiguous, the
 * header padded with spaces so that the data section starts at a multiple
 * of 8 bytes. It writes a new file beside <path> ("<path>.tmp-" and random
 * hex digits, created exclusively: never a file or link already there) and
 * renames it over <path> at the end, so a reader never sees half a file.
 */
#ifndef STORE_SAFETENSORS_H
#define STORE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "store/error.h"

/* The largest header accepted, as the reference implementation. */
#define STORE_HEADER_MAX ((uint64_t)100 << 20)

/* The largest rank accepted. */
#define STORE_RANK_MAX 8

typedef enum store_dtype {
    STORE_DTYPE_BOOL,
    STORE_DTYPE_U8,
    STORE_DTYPE_I8,
    STORE_DTYPE_F8_E4M3,
    STORE_DTYPE_F8_E5M2,
    STORE_DTYPE_U16,
    STORE_DTYPE_I16,
    STORE_DTYPE_F16,
    STORE_DTYPE_BF16,
    STORE_DTYPE_U32,
    STORE_DTYPE_I32,
    STORE_DTYPE_F32,
    STORE_DTYPE_U64,
    STORE_DTYPE_I64,
    STORE_DTYPE_F64
} store_dtype;

/* "F32" etc.; never NULL. */
const char *store_dtype_name(store_dtype dtype);

/* Bytes per element. */
size_t store_dtype_size(store_dtype dtype);

/* ---- reading ----------------------------------------------------------- */

/* One tensor of an open file. Everything in it is owned by the file and
 * valid until store_file_close. */
typedef struct store_tensor {
    const char *name;
    store_dtype dtype;
    size_t rank;
    size_t shape[STORE_RANK_MAX];
    size_t count;     /* elements: the product of shape (1 for rank 0) */
    const void *data; /* into the file's bytes (buffer or mapping) */
    size_t bytes;     /* count · dtype size */
} store_tensor;

typedef struct store_file store_file;

/* How an open file holds its bytes (see the top of this header). */
typedef enum store_read_mode {
    STORE_READ_COPY = 0, /* read into an owned buffer: immune to later changes */
    STORE_READ_MAP = 1   /* mapped: no copy; replace the file by rename only */
} store_read_mode;

/* Opens, reads (mode) and validates `path`. On success *out is the file
 * (close it with store_file_close) and 0 is returned; on failure -1, *out
 * is NULL and err says why. */
int store_file_open_mode(store_file **out, const char *path, store_read_mode mode, attn_error *err);

/* store_file_open_mode with STORE_READ_COPY. */
int store_file_open(store_file **out, const char *path, attn_error *err);

/* Frees the buffer or unmaps the file, and frees the rest; every pointer
 * obtained from the file dies. NULL is a no-op. */
void store_file_close(store_file *f);

/* Bytes of memory holding the file's bytes: the buffer as allocated (the
 * file's size rounded up to its alignment) or the mapping (the file's
 * size). */
size_t store_file_memory(const store_file *f);

/* The path given to store_file_open (owned by the file). */
const char *store_file_path(const store_file *f);

/* The tensors, sorted by name (bytewise). */
size_t store_file_count(const store_file *f);
const store_tensor *store_file_tensor(const store_file *f, size_t index);

/* The tensor called `name`, or NULL. */
const store_tensor *store_file_find(const store_file *f, const char *name);

/* The __metadata__ value of `key`, or NULL when absent. Owned by the file. */
const char *store_file_metadata(const store_file *f, const char *key);

/* Calls fn with each __metadata__ key and value (the header's order) until
 * it returns non-zero; returns that, or 0. */
int store_file_metadata_each(const store_file *f,
                             int (*fn)(void *ctx, const char *key, const char *value), void *ctx);

/* Bytes of the whole file. */
size_t store_file_bytes(const store_file *f);

/* ---- writing ----------------------------------------------------------- */

typedef struct store_metadata {
    const char *key;
    const char *value;
} store_metadata;

/*
 * A tensor to write: its bytes come from `data` (count · dtype size bytes,
 * little-endian) or, when data is NULL, from `fill`, which is called in
 * order with consecutive chunks of the tensor — `first` is the index of the
 * first element of the chunk, `buf` holds `count` elements — and returns 0,
 * or -1 to abort the write. The generator uses fill to write a 2.4 GB model
 * without holding it in memory.
 */
typedef struct store_write_tensor {
    const char *name;
    store_dtype dtype;
    size_t rank;
    const size_t *shape;
    const void *data;
    int (*fill)(void *ctx, void *buf, size_t first, size_t count);
    void *fill_ctx;
} store_write_tensor;

/*
 * Writes a safetensors file at `path` (replacing it) with the given
 * metadata (may be NULL when n_meta is 0) and tensors. Returns 0 and, when
 * file_bytes is not NULL, the size of the file written; or -1 with err set,
 * and then no temporary file is left beside `path`. Names must be
 * distinct; keys and values are UTF-8.
 */
int store_file_write(const char *path, const store_metadata *meta, size_t n_meta,
                     const store_write_tensor *tensors, size_t n_tensors, size_t *file_bytes,
                     attn_error *err);

#endif
