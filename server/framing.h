/*
 * framing.h — the rules of RFC 9112 on how a request says where its body
 * ends, where libmicrohttpd 0.9.75 is lax.
 *
 * libmicrohttpd takes the first of two different Content-Length headers,
 * reads a chunked body that also has a Content-Length (and keeps the
 * connection), waits for the end of a body in a transfer coding it does not
 * know (gzip, "identity, chunked") until the timeout, serves HTTP/1.1
 * without Host, and keeps header values whole only up to a NUL byte. Behind
 * a proxy that reads the same bytes another way, the first two are request
 * smuggling. srv_framing_check reads the headers once they are all in and
 * names the first fault; the HTTP layer answers it and closes the
 * connection, since where the next request begins is then not known.
 *
 * libmicrohttpd's MHD_OPTION_STRICT_FOR_CLIENT is not passed. In 0.9.75, at
 * 1 it refuses an HTTP/1.1 request without Host (not one with two) and a
 * space in the target, at -1 a space or tab before a header's colon (and no
 * longer the former); libmicrohttpd answers those itself, in HTML, without
 * X-Request-Id, where the checks here give the contract's JSON error
 * (tests/test_hostile.c holds them to it). It sees none of the NUL bytes
 * below, the checks that need libmicrohttpd's private buffer layout.
 *
 * That layout is 0.9.75's: srv_framing_supported refuses any other
 * version, built against or loaded, and srv_http_start with it, rather
 * than let these functions misread another version's buffer.
 */
#ifndef SRV_FRAMING_H
#define SRV_FRAMING_H

#include <microhttpd.h>

#include "attention/error.h"

typedef enum srv_framing_fault {
    SRV_FRAMING_OK,
    SRV_FRAMING_NO_HOST,            /* HTTP/1.1 without Host, or more than one (400) */
    SRV_FRAMING_LENGTHS_DIFFER,     /* Content-Length headers of different values (400) */
    SRV_FRAMING_LENGTH_AND_CHUNKED, /* Content-Length and Transfer-Encoding both (400) */
    SRV_FRAMING_CODING,             /* a transfer coding other than chunked alone (501) */
    SRV_FRAMING_OLD_CODING,         /* Transfer-Encoding in an HTTP/1.0 request (400) */
    SRV_FRAMING_NUL_IN_HEADER,      /* a header holding a NUL byte, or folded (400) */
    SRV_FRAMING_BAD_NAME,           /* a header name that is not a token (400) */
    SRV_FRAMING_TWO_KEYS,           /* more than one Authorization header (400) */
    SRV_FRAMING_NUL_IN_REQUEST_LINE /* a NUL byte in the method or the target (400) */
} srv_framing_fault;

/*
 * The first framing fault of the request on conn, whose headers are all in;
 * `method` and `version` are the strings libmicrohttpd gave the handler.
 * A NUL in Authorization is not a fault here but sets *authorization_cut:
 * the value libmicrohttpd gives is then not the one sent, and the HTTP
 * layer takes it for a wrong key (401).
 *
 * A NUL byte in a header value is invisible through libmicrohttpd's API,
 * whose values are C strings. It is found from the header block itself,
 * which libmicrohttpd parses in place starting at `method`, over
 * MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE bytes: each value must be
 * followed by its line end (the CR and LF it overwrote with NULs) and then
 * the next key, and nothing else. That holds for libmicrohttpd 0.9.75's
 * parser; tests/test_hostile.c checks it, and every other test sends
 * ordinary headers through it.
 */
srv_framing_fault srv_framing_check(struct MHD_Connection *conn, const char *method,
                                    const char *version, int *authorization_cut);

/*
 * A NUL byte in the request line, which libmicrohttpd's strings end at
 * ("GET /v1/models/demo-4d\0zz" read as demo-4d). Both read the line as
 * libmicrohttpd 0.9.75 leaves it, parsed in place:
 * srv_framing_target_cut takes the raw target the URI-log callback is
 * given (before it is unescaped), srv_framing_method_cut the method the
 * handler is given and that same raw target. 1 when cut.
 */
int srv_framing_target_cut(const char *raw_target);
int srv_framing_method_cut(const char *method, const char *raw_target);

/* The version, in MHD_VERSION's form, whose private header-buffer layout
 * the functions above read: libmicrohttpd 0.9.75 (Debian 12's). */
#define SRV_FRAMING_MHD_VERSION 0x00097500

/*
 * 0 when `built` (the MHD_VERSION compiled against) and `running`
 * (MHD_get_version() of the library loaded, "0.9.75") are both
 * SRV_FRAMING_MHD_VERSION; else -1 with err (code "server_start_failed")
 * naming the versions. Porting to another version means reading its
 * parser again, and tests/test_hostile.c on it.
 */
int srv_framing_supported(unsigned long built, const char *running, attn_error *err);

/* The status and the message of a fault other than SRV_FRAMING_OK. */
int srv_framing_status(srv_framing_fault f);
const char *srv_framing_message(srv_framing_fault f);

#endif
