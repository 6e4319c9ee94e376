/*
 * log.h — the server's lines on stderr.
 *
 * One access-log line per request and a few operational lines. Each line is
 * written whole under stdio's stream lock, so lines from different threads
 * never interleave. Request bodies are never logged; a path is logged with
 * bytes outside printable ASCII escaped as %XX and cut at 256 characters.
 */
#ifndef SRV_LOG_H
#define SRV_LOG_H

#include <stddef.h>

/* "2024-11-30T00:58:00.123Z info <message>" */
void srv_log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "2024-11-30T00:58:00.123Z access POST /v1/attention 200 1234B 5.21ms id=...", and
 * " cut=timeout" or " cut=closed" when cut is not NULL: an answer that went
 * out with that status but not whole (its client read nothing for
 * --connection-timeout, or left), its bytes those that went. */
void srv_log_access(const char *method, const char *path, int status, size_t bytes, double ms,
                    const char *request_id, const char *cut);

#endif
