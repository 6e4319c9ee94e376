/*
 * error.h — the contract's error body, and the codes it carries.
 *
 * Every failure that reaches a client is an attn_error (attention/error.h:
 * an HTTP status, a stable code, a sentence, the JSON Pointer of the
 * offending value); only this module turns one into the JSON error body.
 *
 * The codes, stable words that clients match on (on the /v2 paths the
 * Open Inference Protocol's body carries the message alone, api/oip.h):
 *
 *   400 invalid_json            not JSON, invalid UTF-8, duplicate key, not an object
 *   400 missing_field           a required field is absent (embeddings, w_q, neither
 *                               model nor weights)
 *   400 unknown_field           a field the contract does not define
 *   400 wrong_type              a value of the wrong JSON type (a string for a number,
 *                               a non-integer head index, a mask cell other than 0/1/bool,
 *                               a tensor's shape not non-negative integers or of the
 *                               wrong rank for its field)
 *   400 invalid_value           a value outside its set: an unknown `return` name, an
 *                               unknown mask or encoding word, both model and weights
 *   400 bad_request             framing a proxy could read another way (server/framing.h):
 *                               two Content-Lengths, a length with chunked, no or two
 *                               Hosts, a NUL byte, a bad header name (connection closed)
 *   401 unauthorized            API key missing or wrong
 *   404 unknown_model           `model` names no loaded model
 *   404 not_found               no such path
 *   405 method_not_allowed      known path, wrong method (with Allow)
 *   408 request_timeout         headers or body not in within --connection-timeout
 *                               (connection closed)
 *   413 body_too_large          body over --max-body-bytes
 *   415 unsupported_media_type  POST whose Content-Type is not JSON
 *   422 dimension_mismatch      shapes disagree: ragged rows, no rows, d_model, d_context
 *                               or d_head mismatch, mask, tokens, positions,
 *                               context_tokens or alibi of the wrong size, kv_heads not
 *                               dividing the heads, no w_o while h·d_head != d_model, a
 *                               tensor's shape and data length
 *   422 non_finite_number       a number not finite as float32 (1e39, 1e999, a NaN or
 *                               ±inf in a tensor's data), or a returned result that
 *                               overflowed float32 (path "")
 *   422 out_of_range            scale <= 0, a select_heads index outside 0…h-1 or repeated,
 *                               a position, rope value, window, softcap or weights' scale
 *                               out of its range
 *   422 invalid_combination     fields that exclude each other: a context with a causal
 *                               mask, rope, alibi or window; context_tokens without a
 *                               context; a cross-attention model without a context
 *   422 limit_exceeded          tokens, heads, d_model, work or response size over its limit
 *   422 invalid_tensor          a tensor object whose dtype is not "float32", or whose
 *                               data is not valid base64 (path .../dtype or .../data)
 *   422 unknown_token           tokens sent without embeddings: one that is not in the
 *                               model's vocabulary (path .../tokens/i)
 *   422 position_out_of_range   tokens sent without embeddings: a position past the
 *                               model's position table (.../positions/i, else .../tokens/i)
 *   422 no_vocabulary           tokens sent without embeddings to a model that has no
 *                               vocabulary (path .../embeddings)
 *   500 internal_error          a broken invariant; never expected
 *   501 not_implemented         a transfer coding other than chunked alone (connection
 *                               closed)
 *   503 overloaded              the work queue is full, or too many request bodies are
 *                               held at once (with Retry-After)
 *   503 shutting_down           the server is draining (with Retry-After)
 *   503 out_of_memory           memory for this request could not be had
 */
#ifndef API_ERROR_H
#define API_ERROR_H

#include <stddef.h>

#include "attention/error.h"

/* The contract's body {"error": {"code", "message", "path"}}, NUL-terminated,
 * malloc'd: the caller frees it. *len gets its length without the NUL.
 * Returns NULL only when out of memory. */
char *api_error_to_json(const attn_error *err, size_t *len);

#endif
