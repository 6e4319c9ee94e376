/*
 * safetensors.c — the reader of safetensors.h, and the dtype table.
 *
 * Reading: open (a regular file only, never waiting on a FIFO: open.h),
 * then either read the whole file into one buffer (STORE_READ_COPY) or
 * mmap it (STORE_READ_MAP, PROT_READ, MAP_PRIVATE); close the descriptor.
 * The buffer is aligned so that a tensor keeps the alignment its offset
 * has in the file, as in a page-aligned mapping: 64 bytes (a cache line,
 * as the engine's workspace) for small files, 2 MiB for files of 2 MiB
 * and more, whose buffer is also advised to transparent
 * huge pages before it is first touched (the engine streams whole weight
 * matrices through sgemm; 4 KiB pages would cost a TLB miss every 1024
 * floats). The file is read straight into that buffer, so the peak memory
 * of a load is the file's size, never twice it. The header is parsed by
 * jansson with
 * JSON_REJECT_DUPLICATES and kept for the file's life: tensor names and
 * metadata values point into it. Each entry is checked on its own (dtype,
 * shape, data_offsets, size), then the entries are sorted by begin offset
 * and neighbours compared for overlap, and finally sorted by name for
 * lookups. The tensors' bytes are never touched here. (The writer is in
 * safetensors_write.c.)
 */
#include "store/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/open.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "store/ reads little-endian tensors in place: a big-endian host needs byte swaps"
#endif

struct store_file {
    char *path;
    store_read_mode mode;
    unsigned char *map; /* the file's bytes: the buffer or the mapping */
    size_t map_bytes;   /* the file's size */
    size_t alloc_bytes; /* of the buffer (copy), or map_bytes (map) */
    json_t *header;
    json_t *metadata; /* borrowed from header; NULL when absent */
    store_tensor *tensors;
    size_t n_tensors;
};

/* ---- dtypes ------------------------------------------------------------ */

static const struct {
    const char *name;
    size_t size;
} dtype_table[] = {
    [STORE_DTYPE_BOOL] = {"BOOL", 1},       [STORE_DTYPE_U8] = {"U8", 1},
    [STORE_DTYPE_I8] = {"I8", 1},           [STORE_DTYPE_F8_E4M3] = {"F8_E4M3", 1},
    [STORE_DTYPE_F8_E5M2] = {"F8_E5M2", 1}, [STORE_DTYPE_U16] = {"U16", 2},
    [STORE_DTYPE_I16] = {"I16", 2},         [STORE_DTYPE_F16] = {"F16", 2},
    [STORE_DTYPE_BF16] = {"BF16", 2},       [STORE_DTYPE_U32] = {"U32", 4},
    [STORE_DTYPE_I32] = {"I32", 4},         [STORE_DTYPE_F32] = {"F32", 4},
    [STORE_DTYPE_U64] = {"U64", 8},         [STORE_DTYPE_I64] = {"I64", 8},
    [STORE_DTYPE_F64] = {"F64", 8},
};

#define N_DTYPES (sizeof dtype_table / sizeof dtype_table[0])

const char *store_dtype_name(store_dtype dtype) {
    return (size_t)dtype < N_DTYPES ? dtype_table[dtype].name : "?";
}

size_t store_dtype_size(store_dtype dtype) {
    return (size_t)dtype < N_DTYPES ? dtype_table[dtype].size : 0;
}

static int dtype_parse(const char *s, store_dtype *out) {
    for (size_t i = 0; i < N_DTYPES; i++)
        if (strcmp(s, dtype_table[i].name) == 0) {
            *out = (store_dtype)i;
            return 0;
        }
    return -1;
}

/* ---- reading: one entry ------------------------------------------------ */

/* A tensor while the header is checked: its offsets are kept for the
 * overlap check. */
typedef struct entry {
    store_tensor t;
    size_t begin, end;
} entry;

/* A JSON integer in [0, SIZE_MAX], or -1. */
static int json_size(const json_t *v, size_t *out) {
    if (!json_is_integer(v)) return -1;
    json_int_t i = json_integer_value(v);
    if (i < 0) return -1;
    *out = (size_t)i;
    return 0;
}

/* Checks one "name": {...} entry against the data section of data_bytes and
 * fills *e. */
static int entry_parse(entry *e, const char *name, const json_t *v, size_t data_bytes,
                       const char *path, attn_error *err) {
    memset(e, 0, sizeof *e);
    e->t.name = name;
    if (!json_is_object(v))
        return store_error_set(err, path, "tensor '%s': the entry is not a JSON object", name);

    const json_t *dt = json_object_get(v, "dtype");
    if (!json_is_string(dt))
        return store_error_set(err, path, "tensor '%s': \"dtype\" is %s", name,
                               dt ? "not a string" : "missing");
    if (dtype_parse(json_string_value(dt), &e->t.dtype) != 0)
        return store_error_set(err, path, "tensor '%s': unsupported dtype '%s'", name,
                               json_string_value(dt));

    const json_t *shape = json_object_get(v, "shape");
    if (!json_is_array(shape))
        return store_error_set(err, path, "tensor '%s': \"shape\" is %s", name,
                               shape ? "not an array" : "missing");
    if (json_array_size(shape) > STORE_RANK_MAX)
        return store_error_set(err, path, "tensor '%s': \"shape\" has %zu dimensions, at most %d",
                               name, json_array_size(shape), STORE_RANK_MAX);
    e->t.rank = json_array_size(shape);
    size_t count = 1;
    int overflow = 0;
    for (size_t i = 0; i < e->t.rank; i++) {
        if (json_size(json_array_get(shape, i), &e->t.shape[i]) != 0)
            return store_error_set(
                err, path, "tensor '%s': \"shape\"[%zu] is not a non-negative integer", name, i);
        if (__builtin_mul_overflow(count, e->t.shape[i], &count)) overflow = 1;
    }
    /* A zero dimension makes any product of the others 0, overflowing or not. */
    for (size_t i = 0; i < e->t.rank; i++)
        if (e->t.shape[i] == 0) count = 0, overflow = 0;

    const json_t *off = json_object_get(v, "data_offsets");
    if (!json_is_array(off) || json_array_size(off) != 2 ||
        json_size(json_array_get(off, 0), &e->begin) != 0 ||
        json_size(json_array_get(off, 1), &e->end) != 0)
        return store_error_set(err, path, "tensor '%s': \"data_offsets\" is %s", name,
                               off ? "not [begin, end] of two non-negative integers" : "missing");
    if (e->begin > e->end)
        return store_error_set(err, path, "tensor '%s': data_offsets [%zu, %zu] are reversed", name,
                               e->begin, e->end);
    if (e->end > data_bytes)
        return store_error_set(err, path,
                               "tensor '%s': data_offsets [%zu, %zu] run past the end of the "
                               "data section (%zu bytes)",
                               name, e->begin, e->end, data_bytes);

    size_t bytes;
    if (overflow || __builtin_mul_overflow(count, store_dtype_size(e->t.dtype), &bytes))
        return store_error_set(err, path,
                               "tensor '%s': shape of %zu dimensions overflows a size; "
                               "data_offsets span %zu bytes",
                               name, e->t.rank, e->end - e->begin);
    if (bytes != e->end - e->begin)
        return store_error_set(err, path,
                               "tensor '%s': shape and dtype %s make %zu elements = %zu bytes, "
                               "but data_offsets [%zu, %zu] span %zu bytes",
                               name, store_dtype_name(e->t.dtype), count, bytes, e->begin, e->end,
                               e->end - e->begin);
    e->t.count = count;
    e->t.bytes = bytes;
    return 0;
}

static int entry_by_begin(const void *a, const void *b) {
    const entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int tensor_by_name(const void *a, const void *b) {
    return strcmp(((const store_tensor *)a)->name, ((const store_tensor *)b)->name);
}

/* ---- reading: the header ----------------------------------------------- */

static int metadata_check(const json_t *meta, const char *path, attn_error *err) {
    if (!json_is_object(meta))
        return store_error_set(err, path, "\"__metadata__\" is not a JSON object");
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)meta, key, v) {
        if (!json_is_string(v))
            return store_error_set(err, path, "\"__metadata__\" value of '%s' is not a string",
                                   key);
    }
    return 0;
}

/* Parses and validates the header of f (its bytes in hand), filling f's
 * tensors. */
static int header_parse(store_file *f, size_t header_bytes, attn_error *err) {
    const char *path = f->path;
    const unsigned char *data = f->map + 8 + header_bytes;
    size_t data_bytes = f->map_bytes - 8 - header_bytes;
    json_error_t jerr;

    f->header = json_loadb((const char *)f->map + 8, header_bytes, JSON_REJECT_DUPLICATES, &jerr);
    if (!f->header)
        return store_error_set(err, path, "header is not valid JSON: %s (line %d, column %d)",
                               jerr.text, jerr.line, jerr.column);
    if (!json_is_object(f->header))
        return store_error_set(err, path, "header is not a JSON object");

    size_t n = json_object_size(f->header);
    f->metadata = json_object_get(f->header, "__metadata__");
    if (f->metadata) {
        if (metadata_check(f->metadata, path, err) != 0) return -1;
        n--;
    }

    entry *entries = calloc(n ? n : 1, sizeof *entries);
    if (!entries) return store_error_set(err, path, "out of memory");
    size_t i = 0;
    for (void *it = json_object_iter(f->header); it; it = json_object_iter_next(f->header, it)) {
        const char *name = json_object_iter_key(it);
        if (strcmp(name, "__metadata__") == 0) continue;
        if (strlen(name) != json_object_iter_key_len(it)) {
            free(entries);
            return store_error_set(err, path, "a tensor name holds a NUL character");
        }
        if (entry_parse(&entries[i], name, json_object_iter_value(it), data_bytes, path, err)) {
            free(entries);
            return -1;
        }
        entries[i].t.data = data + entries[i].begin;
        i++;
    }

    /* Sorted by begin, a non-empty tensor overlaps another exactly when it
     * starts before the end of some earlier non-empty one; tracking the
     * furthest end seen is enough. Empty tensors own no bytes. */
    if (n) qsort(entries, n, sizeof *entries, entry_by_begin);
    const entry *last = NULL;
    for (i = 0; i < n; i++) {
        const entry *e = &entries[i];
        if (e->begin == e->end) continue;
        if (last && e->begin < last->end) {
            int rc =
                store_error_set(err, path, "tensors '%s' [%zu, %zu] and '%s' [%zu, %zu] overlap",
                                last->t.name, last->begin, last->end, e->t.name, e->begin, e->end);
            free(entries);
            return rc;
        }
        if (!last || e->end > last->end) last = e;
    }

    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    if (!f->tensors) {
        free(entries);
        return store_error_set(err, path, "out of memory");
    }
    for (i = 0; i < n; i++)
        f->tensors[i] = entries[i].t;
    f->n_tensors = n;
    free(entries);
    if (n) qsort(f->tensors, n, sizeof *f->tensors, tensor_by_name);
    return 0;
}

/* ---- reading: the bytes -------------------------------------------------- */

#define HUGE_PAGE_BYTES ((size_t)2 << 20)

/* A buffer of at least `bytes` (see the top comment for its alignment), its
 * allocated size in *alloc; NULL when out of memory. */
static unsigned char *buffer_alloc(size_t bytes, size_t *alloc) {
    size_t align = bytes >= HUGE_PAGE_BYTES ? HUGE_PAGE_BYTES : 64;
    if (bytes > SIZE_MAX - align) return NULL;
    size_t n = (bytes + align - 1) / align * align; /* aligned_alloc wants a multiple */
    unsigned char *p = aligned_alloc(align, n);
    if (!p) return NULL;
    /* Only advice: without THP (or "never") the pages are simply small. */
    if (align == HUGE_PAGE_BYTES) madvise(p, n, MADV_HUGEPAGE);
    *alloc = n;
    return p;
}

/* Reads the file of fd (whose fstat is *before) into f's buffer. A file
 * that ends early or whose size or modification time changed meanwhile
 * is refused: it was being rewritten in place. */
static int file_read(store_file *f, int fd, const struct stat *before, attn_error *err) {
    f->map = buffer_alloc(f->map_bytes, &f->alloc_bytes);
    if (!f->map)
        return store_error_set(err, f->path, "out of memory for the file's %zu bytes",
                               f->map_bytes);
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    size_t got = 0;
    while (got < f->map_bytes) {
        size_t chunk = f->map_bytes - got;
        if (chunk > ((size_t)1 << 30)) chunk = (size_t)1 << 30; /* read() caps a call anyway */
        ssize_t r = read(fd, f->map + got, chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return store_error_set(err, f->path, "cannot read: %s", strerror(errno));
        if (r == 0)
            return store_error_set(err, f->path,
                                   "the file ended after %zu of its %zu bytes while being read "
                                   "(was it rewritten in place?)",
                                   got, f->map_bytes);
        got += (size_t)r;
    }
    struct stat after;
    if (fstat(fd, &after) != 0)
        return store_error_set(err, f->path, "cannot stat: %s", strerror(errno));
    if (after.st_size != before->st_size || after.st_mtim.tv_sec != before->st_mtim.tv_sec ||
        after.st_mtim.tv_nsec != before->st_mtim.tv_nsec)
        return store_error_set(err, f->path,
                               "the file changed while being read (was it rewritten in place?)");
    return 0;
}

/* Maps the file of fd into f. */
static int file_map(store_file *f, int fd, attn_error *err) {
    void *map = mmap(NULL, f->map_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) return store_error_set(err, f->path, "cannot map: %s", strerror(errno));
    f->map = map;
    f->alloc_bytes = f->map_bytes;
    return 0;
}

int store_file_open(store_file **out, const char *path, attn_error *err) {
    return store_file_open_mode(out, path, STORE_READ_COPY, err);
}

int store_file_open_mode(store_file **out, const char *path, store_read_mode mode,
                         attn_error *err) {
    *out = NULL;
    store_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return store_error_set(err, path, "out of memory");
    }
    f->mode = mode;

    /* A FIFO named *.safetensors is refused, not waited on (open.h). */
    struct stat sb;
    int fd = store_open_regular(path, &sb, err);
    if (fd < 0) goto fail;
    if (sb.st_size < 8) {
        store_error_set(err, path, "file is %lld bytes, shorter than the 8-byte header length",
                        (long long)sb.st_size);
        close(fd);
        goto fail;
    }
    if ((unsigned long long)sb.st_size > SIZE_MAX) {
        store_error_set(err, path, "file too large for this machine's address space");
        close(fd);
        goto fail;
    }
    f->map_bytes = (size_t)sb.st_size;
    int rc = mode == STORE_READ_MAP ? file_map(f, fd, err) : file_read(f, fd, &sb, err);
    close(fd);
    if (rc != 0) goto fail;

    uint64_t header_bytes = 0;
    for (int i = 7; i >= 0; i--)
        header_bytes = header_bytes << 8 | f->map[i];
    if (header_bytes > STORE_HEADER_MAX) {
        store_error_set(err, path, "header length %llu is absurdly large (the limit is %llu bytes)",
                        (unsigned long long)header_bytes, (unsigned long long)STORE_HEADER_MAX);
        goto fail;
    }
    if (header_bytes > f->map_bytes - 8) {
        store_error_set(err, path, "header length %llu runs past the end of the file (%zu bytes)",
                        (unsigned long long)header_bytes, f->map_bytes);
        goto fail;
    }
    if (header_parse(f, (size_t)header_bytes, err) != 0) goto fail;
    *out = f;
    return 0;

fail:
    store_file_close(f);
    return -1;
}

void store_file_close(store_file *f) {
    if (!f) return;
    if (f->map && f->mode == STORE_READ_MAP)
        munmap(f->map, f->map_bytes);
    else
        free(f->map);
    json_decref(f->header);
    free(f->tensors);
    free(f->path);
    free(f);
}

const char *store_file_path(const store_file *f) {
    return f->path;
}

size_t store_file_count(const store_file *f) {
    return f->n_tensors;
}

const store_tensor *store_file_tensor(const store_file *f, size_t index) {
    return index < f->n_tensors ? &f->tensors[index] : NULL;
}

const store_tensor *store_file_find(const store_file *f, const char *name) {
    store_tensor key = {.name = name};
    if (f->n_tensors == 0) return NULL; /* bsearch wants a non-null base */
    return bsearch(&key, f->tensors, f->n_tensors, sizeof key, tensor_by_name);
}

const char *store_file_metadata(const store_file *f, const char *key) {
    return f->metadata ? json_string_value(json_object_get(f->metadata, key)) : NULL;
}

int store_file_metadata_each(const store_file *f,
                             int (*fn)(void *ctx, const char *key, const char *value), void *ctx) {
    const char *key;
    json_t *v;
    if (!f->metadata) return 0;
    json_object_foreach(f->metadata, key, v) {
        int rc = fn(ctx, key, json_string_value(v));
        if (rc) return rc;
    }
    return 0;
}

size_t store_file_bytes(const store_file *f) {
    return f->map_bytes;
}

size_t store_file_memory(const store_file *f) {
    return f->alloc_bytes;
}
