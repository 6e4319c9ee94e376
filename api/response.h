/*
 * response.h — the JSON answer of POST /v1/attention.
 */
#ifndef API_RESPONSE_H
#define API_RESPONSE_H

#include "api/request.h"
#include <stddef.h>

/*
 * Encodes the 200 body of a computed request: the fields of the contract's
 * response table, the outputs the request asked for, numbers with the
 * shortest text that reads back as the same float32 (at most 9 significant
 * digits), masked scores as null. Returns a malloc'd NUL-terminated buffer
 * the caller frees, its length in *len. Returns NULL with *err filled when
 * out of memory (503 out_of_memory) or when a returned value overflowed
 * float32 during the computation (422 non_finite_number), which JSON
 * cannot carry.
 */
char *api_response_encode(const api_request *req, size_t *len, attn_error *err);

#endif
