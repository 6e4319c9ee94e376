/*
 * headers.h — reading the request headers the endpoints act on: whether a
 * Content-Type is JSON, a Content-Length's value, whether a body is
 * announced. Pure functions of the header text, except srv_headers_body.
 */
#ifndef SRV_HEADERS_H
#define SRV_HEADERS_H

#include <microhttpd.h>
#include <stddef.h>

/* 1 when a Content-Type value (NULL: header absent) is acceptable as JSON:
 * absent, application/json, or application/<anything>+json, with optional
 * parameters, case-insensitive; a charset parameter must be UTF-8. */
int srv_headers_json_type(const char *content_type);

/* Parses a Content-Length value: 0 and *out on success, -1 when it is not
 * a plain decimal number; a number too large for size_t reads as SIZE_MAX. */
int srv_headers_parse_length(const char *value, size_t *out);

/* The request's Content-Length when it is a number, else 0. */
size_t srv_headers_declared_length(struct MHD_Connection *conn);

/* 1 when the request announces a body (Transfer-Encoding, or a
 * Content-Length other than 0). */
int srv_headers_body(struct MHD_Connection *conn);

#endif
