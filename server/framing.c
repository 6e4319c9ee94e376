/*
 * framing.c — one pass over the request's headers (framing.h).
 */
#include "server/framing.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct framing_scan {
    const char *block, *block_end; /* the header block in libmicrohttpd's buffer, or NULL */
    const char *value_end;         /* the end of the last value seen */
    const char *last_key;          /* its key */
    int authorization_cut;         /* a NUL in Authorization */
    unsigned hosts, lengths, codings, authorizations;
    int bad_name;       /* a header name that is not a token (a space before its colon) */
    const char *length; /* the first Content-Length value */
    int lengths_differ; /* a later one differs from it */
    int coding_not_chunked;
    int nul;
} framing_scan;

/* 1 when v, without surrounding blanks, is `word` (case-insensitive). */
static int is_word(const char *v, const char *word) {
    v += strspn(v, " \t");
    size_t n = strlen(v);
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    return n == strlen(word) && strncasecmp(v, word, n) == 0;
}

/* 1 when s is an RFC 9110 token (a field name): libmicrohttpd 0.9.75 keeps
 * a space before the colon in the name, so "Content-Length : 5" would be
 * an unknown header here and a length to a proxy. */
static int is_token(const char *s) {
    if (!*s) return 0;
    for (; *s; s++)
        if (!strchr("!#$%&'*+-.^_`|~", *s) && !(*s >= '0' && *s <= '9') &&
            !(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z'))
            return 0;
    return 1;
}

/* 1 when [from, to) is a line end as libmicrohttpd leaves it: `min` to
 * `max` zero bytes (its CR and LF, each overwritten with a NUL) and nothing
 * else. Anything else there is the rest of a value that a NUL cut short
 * (or an obs-fold continuation line, which RFC 9112 §5.2 allows refusing
 * too). */
static int is_line_end(const char *from, const char *to, size_t min, size_t max) {
    if (to < from || (size_t)(to - from) < min || (size_t)(to - from) > max) return 0;
    for (const char *p = from; p < to; p++)
        if (*p) return 0;
    return 1;
}

/* The last value seen was cut by a NUL. */
static void framing_cut(framing_scan *sc) {
    if (strcasecmp(sc->last_key, MHD_HTTP_HEADER_AUTHORIZATION) == 0)
        sc->authorization_cut = 1;
    else
        sc->nul = 1;
}

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      size_t key_size, const char *value, size_t value_size) {
    (void)kind, (void)key_size;
    framing_scan *sc = cls;
    if (!value) value = "", value_size = 0;
    if (sc->block) {
        /* libmicrohttpd parses the header block in place and ends each
         * line and value with NULs: between a value's end and the next
         * key there must be a line end and nothing else. */
        int inside = key >= sc->block && key < sc->block_end && value >= sc->block &&
                     value + value_size <= sc->block_end;
        if (!inside) sc->nul = 1;
        if (sc->value_end && !is_line_end(sc->value_end, key, 1, 2)) framing_cut(sc);
        sc->value_end = inside ? value + value_size : NULL;
        sc->last_key = key;
    }
    if (!is_token(key)) sc->bad_name = 1;
    if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0) sc->hosts++;
    if (strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION) == 0) sc->authorizations++;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (sc->lengths++ == 0)
            sc->length = value;
        else if (!is_word(value, sc->length))
            sc->lengths_differ = 1;
    }
    if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        sc->codings++;
        /* exactly as libmicrohttpd reads it: "chunked " is not chunked to
         * it, and it would wait for the connection's end */
        if (strcasecmp(value, "chunked") != 0) sc->coding_not_chunked = 1;
    }
    return MHD_YES;
}

srv_framing_fault srv_framing_check(struct MHD_Connection *conn, const char *method,
                                    const char *version, int *authorization_cut) {
    framing_scan sc = {0};
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    if (method && ci) {
        sc.block = method;
        sc.block_end = method + ci->header_size;
    }
    MHD_get_connection_values_n(conn, MHD_HEADER_KIND, framing_header, &sc);
    /* after the last value: its line end and the empty line's */
    if (sc.value_end && !is_line_end(sc.value_end, sc.block_end, 2, 4)) framing_cut(&sc);
    *authorization_cut = sc.authorization_cut;
    /* HTTP/1.x past 1.0 is read as 1.1 (RFC 9110 §2.5), Host and all */
    int http11 = version && strncmp(version, "HTTP/1.", 7) == 0 &&
                 strcmp(version, MHD_HTTP_VERSION_1_0) != 0;
    if (sc.nul) return SRV_FRAMING_NUL_IN_HEADER;
    if (sc.bad_name) return SRV_FRAMING_BAD_NAME;
    if (sc.authorizations > 1) return SRV_FRAMING_TWO_KEYS;
    if ((http11 && sc.hosts == 0) || sc.hosts > 1) return SRV_FRAMING_NO_HOST;
    if (sc.codings && !http11) return SRV_FRAMING_OLD_CODING;
    if (sc.codings && sc.lengths) return SRV_FRAMING_LENGTH_AND_CHUNKED;
    if (sc.codings > 1 || sc.coding_not_chunked) return SRV_FRAMING_CODING;
    if (sc.lengths_differ) return SRV_FRAMING_LENGTHS_DIFFER;
    return SRV_FRAMING_OK;
}

int srv_framing_supported(unsigned long built, const char *running, attn_error *err) {
    /* MHD_VERSION holds each part of the version as two decimal digits
     * in hex (0x00097500 is 0.9.75): %lx prints them back */
    char want[32];
    snprintf(want, sizeof want, "%lx.%lx.%lx", (unsigned long)SRV_FRAMING_MHD_VERSION >> 24,
             (unsigned long)SRV_FRAMING_MHD_VERSION >> 16 & 0xff,
             (unsigned long)SRV_FRAMING_MHD_VERSION >> 8 & 0xff);
    if (built == SRV_FRAMING_MHD_VERSION && running && strcmp(running, want) == 0) return 0;
    return attn_error_set(err, 0, "server_start_failed", NULL,
                          "libmicrohttpd %s (built against %lx.%lx.%lx): the framing checks "
                          "(server/framing.c) read libmicrohttpd %s's private header buffer and "
                          "would misread another version's; refusing to start",
                          running ? running : "of unknown version", built >> 24, built >> 16 & 0xff,
                          built >> 8 & 0xff, want);
}

int srv_framing_status(srv_framing_fault f) {
    return f == SRV_FRAMING_CODING ? 501 : 400;
}

const char *srv_framing_message(srv_framing_fault f) {
    switch (f) {
    case SRV_FRAMING_NO_HOST: return "an HTTP/1.1 request needs exactly one Host header";
    case SRV_FRAMING_LENGTHS_DIFFER:
        return "the request has Content-Length headers of different values";
    case SRV_FRAMING_LENGTH_AND_CHUNKED:
        return "the request has both Content-Length and Transfer-Encoding";
    case SRV_FRAMING_CODING: return "the only transfer coding this server reads is chunked, alone";
    case SRV_FRAMING_OLD_CODING: return "an HTTP/1.0 request cannot have a Transfer-Encoding";
    case SRV_FRAMING_NUL_IN_HEADER:
        return "a header holds a NUL byte, or is folded onto another line (obs-fold)";
    case SRV_FRAMING_BAD_NAME:
        return "a header name holds a character a field name cannot (a space before the colon?)";
    case SRV_FRAMING_TWO_KEYS: return "the request has more than one Authorization header";
    case SRV_FRAMING_NUL_IN_REQUEST_LINE: return "the request line holds a NUL byte";
    default: return "the request's framing is sound";
    }
}

int srv_framing_target_cut(const char *raw_target) {
    /* libmicrohttpd wrote a NUL over the space before the version: the
     * target's string must end there, with the version right after. */
    const char *end = raw_target + strlen(raw_target);
    return strncmp(end + 1, "HTTP/", 5) != 0;
}

int srv_framing_method_cut(const char *method, const char *raw_target) {
    /* the method ends at a NUL written over the first space; only spaces
     * may follow it before the target */
    const char *p = method + strlen(method) + 1;
    if (p > raw_target) return 1;
    for (; p < raw_target; p++)
        if (*p != ' ') return 1;
    return 0;
}
