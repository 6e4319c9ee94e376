/*
 * http_harness.h — run the real server binary and talk HTTP to it.
 *
 * For tests/test_http.c only. The server is started as a child process
 * with --bind 127.0.0.1 --port 0; its stderr goes to a temporary file, from
 * which the harness reads the port it logged ("port=N"). Requests go
 * through libcurl (curl_global_init is the caller's); raw requests through
 * a plain socket, for what libcurl will not send.
 */
#ifndef HTTP_HARNESS_H
#define HTTP_HARNESS_H

#include <curl/curl.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct hs_server {
    pid_t pid;
    unsigned port;
    char log_path[64]; /* the server's stderr */
} hs_server;

/* Starts $ATTN_SERVER_BIN (default build/attention-server) with the given
 * extra arguments (NULL-terminated, may be NULL). Returns 0 once the port
 * is known, -1 (server killed) when it did not start within 15 s. */
int hs_start(hs_server *s, const char *const *extra_args);

/* Sends a signal to the server. */
void hs_signal(const hs_server *s, int sig);

/* Waits up to timeout_s for the server to exit. Returns its exit status,
 * 128 + signal when killed by one, or -1 on timeout (it is then killed). */
int hs_wait(hs_server *s, double timeout_s);

/* SIGTERM and hs_wait; removes the log file. */
int hs_stop(hs_server *s);

/* The server's stderr so far, malloc'd (NULL if unreadable). */
char *hs_log(const hs_server *s);

typedef struct hs_response {
    CURLcode rc; /* CURLE_OK when an answer came */
    long status;
    char *body; /* NUL-terminated */
    size_t len;
    char *headers; /* the raw header block(s), NUL-terminated */
    size_t hlen;
} hs_response;

/*
 * One request to 127.0.0.1:port. `headers` is a NULL-terminated list of
 * "Name: value" lines (may be NULL); a body without a Content-Type line is
 * sent as application/json ("Content-Type:" alone sends none). `curl` may
 * be a handle to reuse (keeping its connection alive) or NULL for a fresh
 * one. Fills *r (free with hs_response_free); returns r->rc.
 */
CURLcode hs_request(CURL *curl, unsigned port, const char *method, const char *path,
                    const char *const *headers, const char *body, size_t len, hs_response *r);

/* The value of the last header `name` (case-insensitive), malloc'd, or NULL. */
char *hs_header(const hs_response *r, const char *name);

void hs_response_free(hs_response *r);

/* Writes `len` bytes to a new connection and returns what came back until
 * the server closed it or timeout_s passed (malloc'd, NUL-terminated; NULL
 * when the connection failed). */
char *hs_raw(unsigned port, const char *request, size_t len, double timeout_s);

#endif
