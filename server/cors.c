/*
 * cors.c — the allow list and the headers it grants (cors.h).
 */
#include "server/cors.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

int srv_cors_allows(const char *list, const char *origin) {
    if (!*list) return 0;
    if (strcmp(list, "*") == 0) return 1;
    size_t len = strlen(origin);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && strncasecmp(p, origin, n) == 0) return 1;
        p += n + (end != NULL);
    }
    return 0;
}

void srv_cors_headers(struct MHD_Response *r, const char *list, const char *origin) {
    int any = strcmp(list, "*") == 0;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", any ? "*" : origin);
    if (!any) MHD_add_response_header(r, "Vary", "Origin");
    MHD_add_response_header(r, "Access-Control-Expose-Headers",
                            "X-Request-Id, Server-Timing, Retry-After");
}

void srv_cors_preflight_headers(struct MHD_Response *r, const char *allow) {
    char methods[64];
    snprintf(methods, sizeof methods, "%s, OPTIONS", allow);
    MHD_add_response_header(r, "Access-Control-Allow-Methods", methods);
    MHD_add_response_header(r, "Access-Control-Allow-Headers",
                            "Authorization, Content-Type, X-Request-Id");
    MHD_add_response_header(r, "Access-Control-Max-Age", "600");
}
