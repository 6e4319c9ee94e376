/*
 * json_path.c — building JSON Pointers, finding the one of a number
 * jansson could not read, and the text of a number by its pointer.
 *
 * When jansson fails on a number (1e999 overflows a double), there is no
 * tree to walk, only the text and the byte where the number ends. The
 * scanner below re-reads the text up to there, keeping a stack of open
 * containers: an array frame counts its elements, an object frame remembers
 * where its current key's string literal lies. Keys are decoded by jansson
 * itself (the literal as a JSON string) only when the path is written, so
 * escapes such as "\u00e9" or "\/" come out right. The stack grows on the
 * heap; jansson's own depth limit keeps it small.
 *
 * The same scanner finds a number's text from its pointer: it counts how
 * many of the open containers, from the outermost, stand at the pointer's
 * key or index, and a number met where all of them do, as deep as the
 * pointer, is the one.
 */
#include "api/json_path.h"

#include <jansson.h>
#include <stdint.h>
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

/* One reference token of a pointer, unescaped ("~1" is '/', "~0" '~'). */
typedef struct token {
    char *s;
    size_t len;
    size_t index; /* as an array index; SIZE_MAX when it is none */
} token;

/* The tokens of `path` in one block (free it; tokens point into it), their
 * count in *n; NULL without memory or when path is not a pointer. */
static token *pointer_tokens(const char *path, size_t *n) {
    if (*path && *path != '/') return NULL;
    size_t count = 0, plen = strlen(path);
    for (const char *p = path; *p; p++)
        count += *p == '/';
    token *t = malloc(count * sizeof *t + plen + 1);
    if (!t) return NULL;
    char *out = (char *)(t + count);
    const char *p = path;
    for (size_t k = 0; k < count; k++) {
        p++; /* the '/' */
        t[k].s = out;
        for (; *p && *p != '/'; p++) {
            if (*p == '~' && (p[1] == '0' || p[1] == '1')) {
                *out++ = p[1] == '1' ? '/' : '~';
                p++;
            } else {
                *out++ = *p;
            }
        }
        t[k].len = (size_t)(out - t[k].s);
        *out++ = '\0';
        /* an index is "0" or digits without a leading zero (RFC 6901 §4) */
        t[k].index = SIZE_MAX;
        int digits = t[k].len > 0 && (t[k].s[0] != '0' || t[k].len == 1);
        for (size_t i = 0; digits && i < t[k].len; i++)
            digits = t[k].s[i] >= '0' && t[k].s[i] <= '9';
        if (digits && t[k].len < 20) t[k].index = (size_t)strtoull(t[k].s, NULL, 10);
    }
    *n = count;
    return t;
}

/* Is the key whose literal (quotes included) is at text[at, at + len) the
 * token? Decoded by jansson only when it holds an escape. */
static int key_is(const char *text, size_t at, size_t len, const token *t) {
    if (len < 2) return 0;
    if (!memchr(text + at, '\\', len))
        return len - 2 == t->len && memcmp(text + at + 1, t->s, t->len) == 0;
    json_t *key = json_loadb(text + at, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    int same = json_is_string(key) && json_string_length(key) == t->len &&
               memcmp(json_string_value(key), t->s, t->len) == 0;
    json_decref(key);
    return same;
}

const char *api_path_number_text(const char *text, size_t len, const char *path, size_t *n) {
    size_t nt;
    token *t = pointer_tokens(path, &nt);
    if (!t) return NULL;
    scanner s = {text, NULL, 0, 0};
    /* the open containers, from the outermost, whose current key or index
     * is the path's token at their depth; never more than s.depth */
    size_t matched = 0;
    int expect_key = 0;
    const char *found = NULL;
    size_t i = 0;
    while (i < len && !found) {
        char c = text[i];
        if (c == '{' || c == '[') {
            if (scanner_push(&s, c == '{') < 0) break;
            expect_key = c == '{';
            /* an array is at its element 0 from the start */
            if (c == '[' && matched == s.depth - 1 && s.depth <= nt && t[s.depth - 1].index == 0)
                matched = s.depth;
            i++;
        } else if (c == '}' || c == ']') {
            if (s.depth) s.depth--;
            if (matched > s.depth) matched = s.depth;
            expect_key = 0;
            i++;
        } else if (c == ',') {
            if (s.depth) {
                frame *f = &s.stack[s.depth - 1];
                if (matched == s.depth) matched--;
                if (f->is_object) {
                    expect_key = 1;
                } else {
                    f->index++;
                    if (matched == s.depth - 1 && s.depth <= nt && t[s.depth - 1].index == f->index)
                        matched = s.depth;
                }
            }
            i++;
        } else if (c == '"') {
            size_t after = skip_string(text, i, len);
            if (expect_key && s.depth) {
                if (matched == s.depth - 1 && s.depth <= nt &&
                    key_is(text, i, after - i, &t[s.depth - 1]))
                    matched = s.depth;
                expect_key = 0;
            }
            i = after;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t j = i;
            while (j < len && is_number_char(text[j]))
                j++;
            if (s.depth == nt && matched == nt) {
                found = text + i;
                *n = j - i;
            }
            i = j;
        } else {
            i++; /* blanks, ':', and the letters of true/false/null */
        }
    }
    free(s.stack);
    free(t);
    return found;
}
