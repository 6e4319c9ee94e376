/*
 * ep_static.c — the constants of the binary: GET / (the teaching page:
 * web/index.html with its styles and scripts copied in at build time by
 * tools/inline_page.sh, one document) and GET /v1/openapi.yaml
 * (api/openapi.yaml).
 *
 * The page may be cached but must be revalidated (no-cache), so a new
 * server version is seen at once; its ETag, a hash of its bytes made once,
 * turns that into a 304. Its policy lets it run its own inline script and
 * style and talk to this origin only: no other script, frame, form target
 * or connection.
 */
#include "server/endpoint.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "server/openapi.h"
#include "server/page.h"
#include "server/reply.h"

static char page_etag[24]; /* "<FNV-1a 64 of the page>", quotes included */
static pthread_once_t page_etag_once = PTHREAD_ONCE_INIT;

static void page_etag_make(void) {
    uint64_t hash = 0xcbf29ce484222325u; /* FNV-1a 64: a validator, not a defence */
    for (size_t i = 0; i < web_index_html_len; i++)
        hash = (hash ^ (unsigned char)web_index_html[i]) * 0x100000001b3u;
    snprintf(page_etag, sizeof page_etag, "\"%016" PRIx64 "\"", hash);
}

/* 1 when an If-None-Match value names `etag`: "*", or a list of tags,
 * compared weakly (a W/ prefix ignored), as RFC 9110 asks for GET. */
static int etag_matches(const char *list, const char *etag) {
    size_t len = strlen(etag);
    for (const char *p = list; *p;) {
        p += strspn(p, " \t,");
        if (*p == '*') return 1;
        if (strncmp(p, "W/", 2) == 0) p += 2;
        size_t n = strcspn(p, ",");
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (n == len && memcmp(p, etag, n) == 0) return 1;
        p += strcspn(p, ",");
    }
    return 0;
}

static enum MHD_Result page_answer(srv_exchange *x) {
    pthread_once(&page_etag_once, page_etag_make);
    const char *tags =
        MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);
    if (tags && etag_matches(tags, page_etag)) return srv_reply_static(x, 304, "", 0, NULL);
    return srv_reply_static(x, 200, web_index_html, web_index_html_len, "text/html; charset=utf-8");
}

static int page_headers(const srv_exchange *x, struct MHD_Response *r, unsigned status) {
    (void)x;
    if (status != 200 && status != 304) return 0;
    pthread_once(&page_etag_once, page_etag_make);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, page_etag);
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'none'; script-src 'unsafe-inline'; "
                            "style-src 'unsafe-inline'; connect-src 'self'; img-src data:; "
                            "base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    return 1;
}

static enum MHD_Result openapi_answer(srv_exchange *x) {
    return srv_reply_static(x, 200, api_openapi_yaml, api_openapi_yaml_len, "application/yaml");
}

const srv_endpoint srv_ep_page = {NULL, page_answer, page_headers};
const srv_endpoint srv_ep_openapi = {NULL, openapi_answer, NULL};
