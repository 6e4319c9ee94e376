/*
 * fixtures.c — see fixtures.h.
 */
#include "tests/fixtures.h"

#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/builtin.h"

void tf_temp_dir(char *dir, size_t size, const char *tag) {
    const char *base = getenv("TMPDIR");
    int n = snprintf(dir, size, "%s/attn-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    ck_assert_msg(n > 0 && (size_t)n < size, "no room for the path of a temporary directory");
    ck_assert_msg(mkdtemp(dir) != NULL, "cannot make %s", dir);
}

void tf_models_dir(char *dir, size_t size, const char *tag, const char *const *names) {
    tf_temp_dir(dir, size, tag);
    for (; names && *names; names++) {
        const store_builtin *b = store_builtin_find(*names);
        ck_assert_msg(b != NULL, "no built-in model %s", *names);
        attn_error err;
        ck_assert_msg(store_builtin_write(b, dir, NULL, &err) == 0, "%s", err.message);
    }
}

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
    (void)sb, (void)ftw;
    return (type == FTW_DP ? rmdir(path) : unlink(path)) == 0 ? 0 : -1;
}

int tf_remove_dir(const char *dir) {
    /* depth first (a directory after what it holds), never through a link */
    return nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

double tf_num(const json_t *v) {
    /* ck_ only on failure: a passing ck_assert records its location, a
     * write to check's runner, and this runs in the references' loops. */
    if (!json_is_number(v))
        ck_abort_msg("not a number (JSON type %d)", v ? (int)json_typeof(v) : -1);
    return json_number_value(v);
}

/* Writes n rows of 768 zeros, "[[0,...,0],...]", at b; returns its end. */
static char *zero_rows(char *b, int n) {
    *b++ = '[';
    for (int i = 0; i < n; i++) {
        *b++ = '[';
        for (int j = 0; j < 768; j++) {
            *b++ = '0';
            *b++ = j < 767 ? ',' : ']';
        }
        if (i < n - 1) *b++ = ',';
    }
    *b++ = ']';
    return b;
}

#define HEAVY_HEAD "{\"model\":\"gpt2-small-shape\",\"return\":[\"embeddings\"],"

char *tf_heavy_body(int n) {
    size_t cap = (size_t)n * (768 * 2 + 2) + 256; /* a row: "[" 768 × "0," "," */
    char *b = malloc(cap);
    ck_assert_ptr_nonnull(b);
    char *p = b + sprintf(b, HEAVY_HEAD "\"embeddings\":");
    p = zero_rows(p, n);
    strcpy(p, "}");
    return b;
}

char *tf_narrow_heads_body(int n, const char *fields, const char *weight_fields) {
    char *b = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&b, &len);
    ck_assert_ptr_nonnull(f);
    fprintf(f, "{%s\"mask\":\"none\",\"embeddings\":[", fields);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s[0.%d]", i ? "," : "", i % 97);
    fprintf(f, "],\"weights\":{%s\"heads\":[", weight_fields);
    for (int i = 0; i < 128; i++)
        fprintf(f, "%s{\"w_q\":[[1]],\"w_k\":[[1]],\"w_v\":[[1]]}", i ? "," : "");
    fputs("],\"w_o\":[", f);
    for (int i = 0; i < 128; i++)
        fprintf(f, "%s[1]", i ? "," : "");
    fputs("]}}", f);
    fclose(f);
    return b;
}

char *tf_heavy_batch(int seqs, int rows, size_t *len) {
    size_t cap = (size_t)seqs * ((size_t)rows * (768 * 2 + 2) + 32) + 256;
    char *b = malloc(cap);
    ck_assert_ptr_nonnull(b);
    char *p = b + sprintf(b, HEAVY_HEAD "\"sequences\":[");
    for (int q = 0; q < seqs; q++) {
        p += sprintf(p, "%s{\"embeddings\":", q ? "," : "");
        p = zero_rows(p, rows);
        *p++ = '}';
    }
    strcpy(p, "]}");
    *len = (size_t)(p + 2 - b);
    return b;
}
