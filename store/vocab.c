/*
 * vocab.c — a metadata string list (vocab.h): jansson parses the JSON text
 * (JSON_ALLOW_NUL, so that a NUL inside a token is reported as one rather
 * than as a parse error), the strings are copied into one block, and the
 * index is sorted once; neighbours in it that compare equal are the
 * duplicates. A lookup is a binary search on that index, comparing by
 * memcmp over the shorter length and then by length, since a request's
 * string may hold NUL where a file's cannot.
 */
#include "store/vocab.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int bytes_cmp(const char *a, size_t alen, const char *b, size_t blen) {
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c) return c;
    return alen < blen ? -1 : alen > blen;
}

static int entry_cmp(const void *pa, const void *pb) {
    const store_vocab_entry *a = pa, *b = pb;
    int c = bytes_cmp(a->s, a->len, b->s, b->len);
    if (c) return c;
    return a->row < b->row ? -1 : a->row > b->row; /* duplicates in file order */
}

/* s for a message: at most 40 bytes (cut on a UTF-8 boundary), control
 * bytes as \xNN, into buf. */
static const char *quote(const char *s, size_t len, char *buf, size_t size) {
    size_t used = 0, i = 0;
    for (; i < len && used + 5 < size && i < 40; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            used += (size_t)snprintf(buf + used, size - used, "\\x%02x", c);
        else
            buf[used++] = (char)c;
    }
    if (i < len) {
        if (((unsigned char)s[i] & 0xC0) == 0x80) { /* the cut falls inside a character */
            while (used > 0 && ((unsigned char)buf[used - 1] & 0xC0) == 0x80)
                used--;
            if (used > 0 && ((unsigned char)buf[used - 1] & 0xC0) == 0xC0) used--;
        }
        if (used + 4 < size) {
            memcpy(buf + used, "…", 3);
            used += 3;
        }
    }
    buf[used] = '\0';
    return buf;
}

void store_strings_free(store_strings *s) {
    if (!s) return;
    free(s->strings);
    free(s->index);
    free(s->block);
    *s = (store_strings){0};
}

int store_strings_parse(store_strings *out, const char *text, const char *key, int keep_index,
                        const char *path, attn_error *err) {
    *out = (store_strings){0};
    json_error_t jerr;
    json_t *arr = json_loads(text, JSON_ALLOW_NUL | JSON_DECODE_ANY, &jerr);
    if (!arr)
        return store_error_set(err, path, "metadata '%s' is not a JSON array of strings (%s)", key,
                               jerr.text);
    int rc = -1;
    size_t n = json_is_array(arr) ? json_array_size(arr) : 0;
    if (!json_is_array(arr)) {
        store_error_set(err, path, "metadata '%s' is not a JSON array of strings", key);
        goto done;
    }
    if (n == 0) {
        store_error_set(err, path, "metadata '%s' is an empty array", key);
        goto done;
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(arr, i);
        if (!json_is_string(v)) {
            store_error_set(err, path, "metadata '%s' entry %zu is not a string", key, i);
            goto done;
        }
        size_t len = json_string_length(v);
        if (len == 0) {
            store_error_set(err, path, "metadata '%s' entry %zu is the empty string", key, i);
            goto done;
        }
        if (memchr(json_string_value(v), '\0', len)) {
            store_error_set(err, path, "metadata '%s' entry %zu holds a NUL character", key, i);
            goto done;
        }
        total += len + 1;
    }
    out->n = n;
    out->strings = malloc(n * sizeof *out->strings);
    out->index = malloc(n * sizeof *out->index);
    out->block = malloc(total);
    if (!out->strings || !out->index || !out->block) {
        store_error_set(err, path, "out of memory for metadata '%s'", key);
        goto done;
    }
    char *at = out->block;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(arr, i);
        size_t len = json_string_length(v);
        memcpy(at, json_string_value(v), len + 1);
        out->strings[i] = at;
        out->index[i] = (store_vocab_entry){at, len, i};
        at += len + 1;
    }
    qsort(out->index, n, sizeof *out->index, entry_cmp);
    for (size_t i = 1; i < n; i++) {
        const store_vocab_entry *a = &out->index[i - 1], *b = &out->index[i];
        if (bytes_cmp(a->s, a->len, b->s, b->len) == 0) {
            char q[200];
            store_error_set(err, path, "metadata '%s' holds '%s' twice (entries %zu and %zu)", key,
                            quote(a->s, a->len, q, sizeof q), a->row, b->row);
            goto done;
        }
    }
    out->bytes = n * sizeof *out->strings + total;
    if (keep_index) {
        out->bytes += n * sizeof *out->index;
    } else {
        free(out->index);
        out->index = NULL;
    }
    rc = 0;
done:
    json_decref(arr);
    if (rc != 0) store_strings_free(out);
    return rc;
}

long store_strings_find(const store_vocab_entry *index, size_t n, const char *s, size_t len) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = bytes_cmp(index[mid].s, index[mid].len, s, len);
        if (c == 0) return (long)index[mid].row;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}
