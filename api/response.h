/*
 * response.h — the JSON answer of POST /v1/attention.
 */
#ifndef API_RESPONSE_H
#define API_RESPONSE_H

#include <stddef.h>
#include "api/request.h"

/*
 * Encodes the 200 body of a computed request: the fields of the contract's
 * response table, the outputs the request asked for, numbers with the
 * shortest text that reads back as the same float32 (at most 9 significant
 * digits), masked scores as null. Returns a malloc'd NUL-terminated buffer
 * the caller frees, its length in *len; NULL when out of memory.
 */
char *api_response_encode(const api_request *req, size_t *len);

#endif
