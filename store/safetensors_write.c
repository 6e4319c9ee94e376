/*
 * safetensors_write.c — store_file_write (safetensors.h).
 *
 * The header is built with jansson (compact, in the order given:
 * __metadata__ first, then the tensors, contiguous from offset 0), padded
 * with spaces to a multiple of 8 bytes, and written with the tensors'
 * bytes to a new temporary file beside the target, which is fsync'd and
 * renamed over the target: a reader sees the old file or the new one,
 * never a part. On failure the temporary file is removed and the target
 * left as it was.
 *
 * The temporary file is "<path>.tmp-" and 16 random hex digits, created
 * with O_CREAT | O_EXCL | O_NOFOLLOW: whatever already has the name (a
 * file, or a link planted there by whoever can write the directory,
 * pointing anywhere) is never opened, and a name taken is given up for
 * another. A fixed name such as "<path>.tmp-<pid>" would let anyone who
 * guesses it redirect the model's bytes through a link onto any file the
 * writer may write.
 */
#include "store/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* ---- writing ----------------------------------------------------------- */

/* Writes all of buf; 0 or -1 with errno. */
static int write_all(int fd, const void *buf, size_t bytes) {
    const unsigned char *p = buf;
    while (bytes > 0) {
        ssize_t n = write(fd, p, bytes > ((size_t)1 << 30) ? (size_t)1 << 30 : bytes);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += n;
        bytes -= (size_t)n;
    }
    return 0;
}

/* The header text (unpadded) for these tensors; *sizes gets each tensor's
 * byte count. NULL with err set on failure. */
static char *header_build(const store_metadata *meta, size_t n_meta,
                          const store_write_tensor *tensors, size_t n_tensors, size_t *sizes,
                          const char *path, attn_error *err) {
    json_t *root = json_object();
    char *text = NULL;
    if (!root) goto oom;
    if (n_meta > 0) {
        json_t *m = json_object();
        if (json_object_set_new(root, "__metadata__", m) != 0) goto oom;
        for (size_t i = 0; i < n_meta; i++)
            if (json_object_set_new(m, meta[i].key, json_string(meta[i].value)) != 0) {
                store_error_set(err, path, "metadata '%s' is not valid UTF-8", meta[i].key);
                goto fail;
            }
    }
    size_t offset = 0;
    for (size_t i = 0; i < n_tensors; i++) {
        const store_write_tensor *t = &tensors[i];
        if (t->rank > STORE_RANK_MAX || store_dtype_size(t->dtype) == 0 ||
            strcmp(t->name, "__metadata__") == 0 || json_object_get(root, t->name)) {
            store_error_set(err, path, "tensor '%s': bad rank, dtype or repeated name", t->name);
            goto fail;
        }
        size_t count = 1;
        json_t *shape = json_array();
        json_t *entry = json_object();
        json_t *offsets = json_array();
        if (json_object_set_new(root, t->name, entry) != 0) {
            json_decref(shape);
            json_decref(offsets);
            goto oom;
        }
        if (json_object_set_new(entry, "dtype", json_string(store_dtype_name(t->dtype))) != 0 ||
            json_object_set_new(entry, "shape", shape) != 0 ||
            json_object_set_new(entry, "data_offsets", offsets) != 0)
            goto oom;
        for (size_t d = 0; d < t->rank; d++) {
            if (__builtin_mul_overflow(count, t->shape[d], &count)) goto too_big;
            if (json_array_append_new(shape, json_integer((json_int_t)t->shape[d])) != 0) goto oom;
        }
        if (__builtin_mul_overflow(count, store_dtype_size(t->dtype), &sizes[i]) ||
            __builtin_add_overflow(offset, sizes[i], &offset) || offset > (size_t)INT64_MAX)
            goto too_big;
        if (json_array_append_new(offsets, json_integer((json_int_t)(offset - sizes[i]))) ||
            json_array_append_new(offsets, json_integer((json_int_t)offset)))
            goto oom;
    }
    text = json_dumps(root, JSON_COMPACT);
    if (!text) goto oom;
    json_decref(root);
    return text;

too_big:
    store_error_set(err, path, "tensors too large for a size");
    goto fail;
oom:
    store_error_set(err, path, "out of memory");
fail:
    json_decref(root);
    return NULL;
}

/* Streams one tensor's bytes through fill, a chunk at a time. */
static int tensor_stream(int fd, const store_write_tensor *t, size_t bytes) {
    enum { CHUNK = 1 << 20 };
    size_t esize = store_dtype_size(t->dtype);
    size_t count = bytes / esize, per = CHUNK / esize;
    unsigned char *buf = malloc(CHUNK);
    if (!buf) return -1;
    for (size_t first = 0; first < count; first += per) {
        size_t n = count - first < per ? count - first : per;
        if (t->fill(t->fill_ctx, buf, first, n) != 0 || write_all(fd, buf, n * esize) != 0) {
            free(buf);
            return -1;
        }
    }
    free(buf);
    return 0;
}

/* Room after the path for the temporary name's ".tmp-", 16 hex digits, NUL. */
#define TEMP_SUFFIX_MAX 32

/* Creates the temporary file beside path (see the top of this file), its
 * name in tmp (strlen(path) + TEMP_SUFFIX_MAX bytes). Mode 0644 less the
 * umask, as any new file; not mkstemp, which creates 0600: widening that
 * with fchmod would ignore the umask. The descriptor, or -1 with errno. */
static int temp_create(const char *path, char *tmp, size_t tmp_len) {
    for (unsigned attempt = 0; attempt < 100; attempt++) {
        uint64_t r;
        if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
            /* No entropy yet (early boot) or no getrandom: O_EXCL keeps
             * this safe, the name only has to differ from the last one. */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            r = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 40) ^
                attempt;
        }
        snprintf(tmp, tmp_len, "%s.tmp-%016llx", path, (unsigned long long)r);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1; /* errno is EEXIST */
}

int store_file_write(const char *path, const store_metadata *meta, size_t n_meta,
                     const store_write_tensor *tensors, size_t n_tensors, size_t *file_bytes,
                     attn_error *err) {
    size_t *sizes = calloc(n_tensors ? n_tensors : 1, sizeof *sizes);
    if (!sizes) return store_error_set(err, path, "out of memory");
    char *header = header_build(meta, n_meta, tensors, n_tensors, sizes, path, err);
    if (!header) {
        free(sizes);
        return -1;
    }
    size_t len = strlen(header), padded = (len + 7) / 8 * 8;

    size_t tmp_len = strlen(path) + TEMP_SUFFIX_MAX;
    char *tmp = malloc(tmp_len);
    int fd = -1;
    if (!tmp) {
        store_error_set(err, path, "out of memory");
        goto done;
    }
    fd = temp_create(path, tmp, tmp_len);
    if (fd < 0) {
        store_error_set(err, path, "cannot create a temporary file %s: %s", tmp, strerror(errno));
        /* not ours: nothing to remove */
        free(tmp);
        tmp = NULL;
        goto done;
    }

    unsigned char prefix[8];
    errno = 0;
    for (int i = 0; i < 8; i++)
        prefix[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    int rc = write_all(fd, prefix, 8) || write_all(fd, header, len) ||
             write_all(fd, "        ", padded - len);
    size_t total = 8 + padded;
    for (size_t i = 0; !rc && i < n_tensors; i++) {
        rc = tensors[i].data ? write_all(fd, tensors[i].data, sizes[i])
                             : tensor_stream(fd, &tensors[i], sizes[i]);
        total += sizes[i];
    }
    if (rc || fsync(fd) != 0) {
        store_error_set(err, path, "cannot write %s: %s", tmp,
                        errno ? strerror(errno) : "the tensor source failed");
        goto done;
    }
    if (close(fd) != 0) {
        fd = -1;
        store_error_set(err, path, "cannot write %s: %s", tmp, strerror(errno));
        goto done;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        store_error_set(err, path, "cannot rename %s to it: %s", tmp, strerror(errno));
        goto done;
    }
    free(tmp);
    free(header);
    free(sizes);
    if (file_bytes) *file_bytes = total;
    return 0;

done:
    if (fd >= 0) close(fd);
    if (tmp) unlink(tmp);
    free(tmp);
    free(header);
    free(sizes);
    return -1;
}
