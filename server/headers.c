/*
 * headers.c — Content-Type and Content-Length, read as RFC 9110 writes them.
 */
#include "server/headers.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>

int srv_headers_json_type(const char *ct) {
    if (!ct) return 1;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    size_t n = strcspn(ct, ";");
    while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
        n--;
    static const char app[] = "application/";
    size_t a = sizeof app - 1;
    if (n <= a || strncasecmp(ct, app, a) != 0) return 0;
    const char *sub = ct + a;
    size_t sn = n - a;
    if (memchr(sub, '/', sn) || memchr(sub, ' ', sn)) return 0;
    if (!(sn == 4 && strncasecmp(sub, "json", 4) == 0) &&
        !(sn > 5 && strncasecmp(sub + sn - 5, "+json", 5) == 0))
        return 0;
    /* The body is read as UTF-8, so a charset parameter naming another
     * encoding is refused rather than misread. */
    for (const char *p = strchr(ct, ';'); p; p = strchr(p + 1, ';')) {
        const char *v = p + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        if (strncasecmp(v, "charset=", 8) != 0) continue;
        v += 8;
        int quoted = *v == '"';
        v += quoted;
        size_t vn = strcspn(v, quoted ? "\"" : "; \t");
        if (!((vn == 5 && strncasecmp(v, "utf-8", 5) == 0) ||
              (vn == 4 && strncasecmp(v, "utf8", 4) == 0)))
            return 0;
    }
    return 1;
}

int srv_headers_parse_length(const char *v, size_t *out) {
    if (!v || *v < '0' || *v > '9') return -1;
    size_t n = 0;
    for (; *v >= '0' && *v <= '9'; v++) {
        size_t d = (size_t)(*v - '0');
        n = n > (SIZE_MAX - d) / 10 ? SIZE_MAX : n * 10 + d;
    }
    while (*v == ' ' || *v == '\t')
        v++;
    if (*v) return -1;
    *out = n;
    return 0;
}

size_t srv_headers_declared_length(struct MHD_Connection *conn) {
    const char *cl =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    size_t n = 0;
    return cl && srv_headers_parse_length(cl, &n) == 0 ? n : 0;
}

int srv_headers_body(struct MHD_Connection *conn) {
    const char *cl =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    size_t n = 0;
    return te != NULL || (cl && (srv_headers_parse_length(cl, &n) != 0 || n > 0));
}
