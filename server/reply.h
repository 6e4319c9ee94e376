/*
 * reply.h — queuing an exchange's answer: the body, the headers every
 * answer carries (X-Request-Id, Cache-Control, CORS, Retry-After on 503,
 * Allow on 405, WWW-Authenticate on 401, Connection: close while draining
 * or after a framing fault) and those of its endpoint (endpoint.h).
 *
 * Each function queues one response, records its status and size for the
 * access log, moves the exchange to X_REPLIED and returns what
 * libmicrohttpd's handler should return.
 */
#ifndef SRV_REPLY_H
#define SRV_REPLY_H

#include <microhttpd.h>
#include <stddef.h>

#include "api/call.h"
#include "attention/error.h"
#include "server/http_state.h"

/* Answers with a malloc'd body, which the call takes (as jansson's _new
 * functions): libmicrohttpd frees it with the response, or this function
 * when the response cannot be made. content_type may be NULL. */
enum MHD_Result srv_reply_new(srv_exchange *x, unsigned status, char *body, size_t len,
                              const char *content_type);

/* Answers with an answer read as it is sent (api/call.h: binary tensors
 * read from the outputs they were computed into), which it takes:
 * libmicrohttpd destroys it with the response, or this function when the
 * response cannot be made. Counted in the unsent answers as a body is
 * (answer.h). */
enum MHD_Result srv_reply_answer(srv_exchange *x, unsigned status, api_answer *a,
                                 const char *content_type);

/* Answers with a body that outlives the response (a constant: the page,
 * the OpenAPI document, ""), never freed. content_type may be NULL (a
 * 304). */
enum MHD_Result srv_reply_static(srv_exchange *x, unsigned status, const char *body, size_t len,
                                 const char *content_type);

/* A constant JSON text. */
enum MHD_Result srv_reply_json(srv_exchange *x, unsigned status, const char *text);

/* The error body for err (srv_reply_error_body) (the static out_of_memory body when
 * even that cannot be allocated). */
enum MHD_Result srv_reply_error(srv_exchange *x, const attn_error *err);

/* The 503 shutting_down of a server draining, in *err (-1), or sent. */
int srv_error_shutting_down(attn_error *err);
enum MHD_Result srv_reply_shutting_down(srv_exchange *x);

/* The 503 overloaded of answers over --max-unsent-bytes (answer.h), in
 * *err (-1), or sent. */
int srv_error_unsent_full(const srv_http *h, attn_error *err);
enum MHD_Result srv_reply_unsent_full(srv_exchange *x);

/* The error body for err on x's route, malloc'd (NULL when out of
 * memory): the contract's, or on the /v2 paths the Open Inference
 * Protocol's {"error": "..."}. */
char *srv_reply_error_body(const srv_exchange *x, const attn_error *err, size_t *len);

/* An error of this status and code with a printf-style message, path "". */
enum MHD_Result srv_reply_fail(srv_exchange *x, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* 503 out_of_memory, from a constant body. */
enum MHD_Result srv_reply_oom(srv_exchange *x);

#endif
