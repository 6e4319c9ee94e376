/*
 * json_path.c — building JSON Pointers, and finding the one of a number
 * jansson could not read.
 *
 * When jansson fails on a number (1e999 overflows a double), there is no
 * tree to walk, only the text and the byte where the number ends. The
 * scanner below re-reads the text up to there, keeping a stack of open
 * containers: an array frame counts its elements, an object frame remembers
 * where its current key's string literal lies. Keys are decoded by jansson
 * itself (the literal as a JSON string) only when the path is written, so
 * escapes such as "\u00e9" or "\/" come out right. The stack grows on the
 * heap; jansson's own depth limit keeps it small.
 */
#include "api/json_path.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void path_append(char *dst, size_t cap, size_t *at, const char *s, size_t n) {
    if (*at >= cap) return;
    if (n > cap - 1 - *at) n = cap - 1 - *at;
    memcpy(dst + *at, s, n);
    *at += n;
    dst[*at] = '\0';
}

static void path_append_key(char *dst, size_t cap, size_t *at, const char *key, size_t klen) {
    path_append(dst, cap, at, "/", 1);
    for (size_t i = 0; i < klen; i++) {
        if (key[i] == '~')
            path_append(dst, cap, at, "~0", 2);
        else if (key[i] == '/')
            path_append(dst, cap, at, "~1", 2);
        else
            path_append(dst, cap, at, key + i, 1);
    }
}

void api_path_key(char *dst, size_t cap, const char *base, const char *key) {
    size_t at = 0;

    if (cap == 0) return;
    dst[0] = '\0';
    path_append(dst, cap, &at, base, strlen(base));
    path_append_key(dst, cap, &at, key, strlen(key));
}

void api_path_index(char *dst, size_t cap, const char *base, size_t i) {
    char num[32];
    size_t at = 0;

    if (cap == 0) return;
    dst[0] = '\0';
    path_append(dst, cap, &at, base, strlen(base));
    snprintf(num, sizeof num, "/%zu", i);
    path_append(dst, cap, &at, num, strlen(num));
}

typedef struct frame {
    int is_object;
    size_t index;           /* arrays: the current element */
    size_t key_at, key_len; /* objects: the current key's literal, quotes included */
} frame;

typedef struct scanner {
    const char *text;
    frame *stack;
    size_t depth, cap;
} scanner;

static int scanner_push(scanner *s, int is_object) {
    if (s->depth == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        frame *grown = realloc(s->stack, cap * sizeof *grown);
        if (grown == NULL) return -1;
        s->stack = grown;
        s->cap = cap;
    }
    s->stack[s->depth++] = (frame){is_object, 0, 0, 0};
    return 0;
}

static void scanner_write_path(const scanner *s, char *dst, size_t cap) {
    size_t at = 0;

    dst[0] = '\0';
    for (size_t i = 0; i < s->depth; i++) {
        const frame *f = &s->stack[i];
        if (!f->is_object) {
            char num[32];
            snprintf(num, sizeof num, "/%zu", f->index);
            path_append(dst, cap, &at, num, strlen(num));
        } else {
            json_t *key =
                json_loadb(s->text + f->key_at, f->key_len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
            if (json_is_string(key))
                path_append_key(dst, cap, &at, json_string_value(key), json_string_length(key));
            json_decref(key);
        }
    }
}

/* Index just past the string literal starting at text[i] == '"'. */
static size_t skip_string(const char *text, size_t i, size_t end) {
    for (i++; i < end; i++) {
        if (text[i] == '\\')
            i++;
        else if (text[i] == '"')
            return i + 1;
    }
    return end;
}

static int is_number_char(char c) {
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

int api_path_of_number_at(const char *text, size_t len, size_t end, char *dst, size_t cap) {
    scanner s = {text, NULL, 0, 0};
    int expect_key = 0, found = -1;
    size_t i = 0;

    if (cap) dst[0] = '\0';
    if (end > len) end = len;
    while (i < end) {
        char c = text[i];
        if (c == '{' || c == '[') {
            if (scanner_push(&s, c == '{') < 0) break;
            expect_key = c == '{';
            i++;
        } else if (c == '}' || c == ']') {
            if (s.depth) s.depth--;
            expect_key = 0;
            i++;
        } else if (c == ',') {
            if (s.depth && s.stack[s.depth - 1].is_object)
                expect_key = 1;
            else if (s.depth)
                s.stack[s.depth - 1].index++;
            i++;
        } else if (c == '"') {
            size_t after = skip_string(text, i, end);
            if (expect_key && s.depth) {
                s.stack[s.depth - 1].key_at = i;
                s.stack[s.depth - 1].key_len = after - i;
                expect_key = 0;
            }
            i = after;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t j = i;
            while (j < len && is_number_char(text[j]))
                j++;
            if (j == end) {
                if (cap) scanner_write_path(&s, dst, cap);
                found = 0;
                break;
            }
            i = j;
        } else {
            i++; /* blanks, ':', and the letters of true/false/null */
        }
    }
    free(s.stack);
    return found;
}
