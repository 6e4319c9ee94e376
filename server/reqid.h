/*
 * reqid.h — request ids, the X-Request-Id header.
 *
 * A client's id is reflected into our headers and log lines only when it is
 * sane: 1 to 128 characters from [A-Za-z0-9._:-]. Anything else is replaced
 * by a new id, so no client bytes outside that set ever reach a header.
 */
#ifndef SRV_REQID_H
#define SRV_REQID_H

#include <stddef.h>

#define SRV_REQID_MAX 128

/* 1 when `id` (NULL allowed) may be echoed back, else 0. */
int srv_reqid_is_sane(const char *id);

/* Writes a new process-unique id (NUL-terminated, sane) into buf, which
 * must hold at least 40 bytes; returns its length. Thread-safe. */
size_t srv_reqid_new(char *buf, size_t cap);

/* The id to use for a request whose X-Request-Id header is `client` (NULL
 * when absent): a malloc'd copy of it when sane, else a new id. NULL only
 * when out of memory. The caller frees it. */
char *srv_reqid_choose(const char *client);

#endif
