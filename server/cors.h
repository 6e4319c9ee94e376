/*
 * cors.h — Cross-Origin Resource Sharing for the browsers that call the
 * API from another origin (--cors-origin).
 */
#ifndef SRV_CORS_H
#define SRV_CORS_H

#include <microhttpd.h>

/* 1 when `origin` is allowed by the --cors-origin list: "*", or one of the
 * origins separated by commas (compared without regard to case, as
 * schemes and host names are). */
int srv_cors_allows(const char *list, const char *origin);

/* Adds the headers of any answer to an allowed `origin` (never NULL). */
void srv_cors_headers(struct MHD_Response *r, const char *list, const char *origin);

/* Adds, besides those, the headers of the answer to a preflight: the ones
 * that grant `allow` (the route's methods) and the request headers. */
void srv_cors_preflight_headers(struct MHD_Response *r, const char *allow);

#endif
