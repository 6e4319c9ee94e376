/*
 * exchange.h — one request's life on libmicrohttpd, as a state machine
 * (the states are in http_state.h; exchange.c holds the transitions).
 * http.c's callbacks call these three functions and nothing else of it.
 */
#ifndef SRV_EXCHANGE_H
#define SRV_EXCHANGE_H

#include <microhttpd.h>
#include <stddef.h>

#include "server/http_state.h"

/* The URI-log callback's work: a new exchange in X_NEW for the request
 * line `uri` (the raw target), counted in flight. NULL when out of
 * memory. */
srv_exchange *srv_exchange_create(srv_http *h, const char *uri, struct MHD_Connection *conn);

/* One call of the access handler: its arguments as libmicrohttpd gives
 * them. */
enum MHD_Result srv_exchange_step(srv_exchange *x, const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_data_size);

/* The completion callback's work: logs and counts the exchange, returns
 * what it holds and frees it. The one place an exchange is freed. */
void srv_exchange_complete(srv_exchange *x, struct MHD_Connection *conn,
                           enum MHD_RequestTerminationCode toe);

#endif
