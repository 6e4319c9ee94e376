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

/* Adds the headers of an answer to an allowed `origin` (never NULL), and
 * for a preflight those that grant `allow` (the route's methods). */
void srv_cors_headers(struct MHD_Response *r, const char *list, const char *origin, int preflight,
                      const char *allow);

#endif
