/*
 * http_harness.h — run the real server binary and talk HTTP to it.
 *
 * For the suites that start the server. It is started as a child process
 * with --bind 127.0.0.1 --port 0; its stderr goes to a temporary file, from
 * which the harness reads the port it logged ("port=N"). Requests go
 * through libcurl (curl_global_init is the caller's); raw requests through
 * a plain socket, for what libcurl will not send; hs_exchange through a
 * plain socket with a receive timeout, for suites that must tell a hang or
 * a dropped connection from an answer.
 *
 * Error bodies never leak. Every answer read here (hs_request, hs_raw,
 * hs_raw_recv, hs_exchange) with a status of 400 or more has its body checked by
 * hs_leak_find, and a leak fails the test on the spot (check's
 * ck_abort_msg), naming what leaked and the body. A body must hold:
 *
 *   - no file system path: no absolute path under a system or working
 *     directory (/tmp/, /work/, /home/, /etc/, ... at the start of a word),
 *     nor the current directory, $HOME, the server binary's directory, or
 *     the models directory or key file of any server hs_start started;
 *   - no API key of such a key file, as it read at start or reads at the
 *     check (so keys a SIGHUP brought in count too); a key shorter than 8
 *     characters counts only standing alone, with no letter or digit beside;
 *   - nothing like a pointer: "0x" and 6 or more hex digits, or a run of 12
 *     or more hex digits, letters and digits both, standing alone.
 *
 * hs_start takes the models directory and key file from its arguments
 * (--models-dir, --api-keys-file, either form) and from the environment
 * the server inherits (ATTN_MODELS_DIR, ATTN_API_KEYS_FILE).
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
    int exit_status;   /* as hs_wait returns it, once it has; -1 before */
} hs_server;

/* Starts $ATTN_SERVER_BIN (default build/attention-server) with the given
 * extra arguments (NULL-terminated, may be NULL), under the command in
 * $ATTN_SERVER_WRAPPER when set (words separated by spaces: make
 * test-valgrind's valgrind; start and stop may then take 10 times as
 * long). Returns 0 once the port is known, -1 (server killed) when it did
 * not start within 15 s (150 s wrapped). */
int hs_start(hs_server *s, const char *const *extra_args);

/* hs_start with the server's address space limited to `address_space`
 * bytes (RLIMIT_AS; 0: no limit), so that a large allocation fails. */
int hs_start_limited(hs_server *s, const char *const *extra_args, size_t address_space);

/* Sends a signal to the server. */
void hs_signal(const hs_server *s, int sig);

/* Waits up to timeout_s for the server to exit. Returns its exit status,
 * 128 + signal when killed by one, or -1 on timeout (it is then killed).
 * The result is kept in s->exit_status; once exited, returns it again. */
int hs_wait(hs_server *s, double timeout_s);

/* SIGTERM and hs_wait (unless it has exited already); removes the log
 * file. Returns the exit status. */
int hs_stop(hs_server *s);

/*
 * hs_stop, judged: returns 0 when the server exited with status 0 and its
 * log holds no sanitizer report ("runtime error", "Sanitizer"); else -1
 * with the reason and the log's tail in why. The log file is removed.
 */
int hs_finish(hs_server *s, char *why, size_t whylen);

/* The first sanitizer report in a log (UBSan "runtime error", ASan, TSan,
 * LSan "...Sanitizer"), or NULL. */
const char *hs_log_problem(const char *log);

/* 1 when `body` (len bytes) leaks by the rules above, with what leaked in
 * why; else 0. Thread-safe. */
int hs_leak_find(const char *body, size_t len, char *why, size_t whylen);

/* The server's resident memory (VmRSS) in kB, or -1. */
long hs_rss_kb(const hs_server *s);

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

/* The pieces of hs_raw, for a request sent slowly or abandoned. */

/* A connected socket to 127.0.0.1:port, or -1. */
int hs_raw_open(unsigned port);
/* The same, with SO_RCVBUF set to rcvbuf bytes first (0: the default): a
 * client that reads nothing then holds little of an answer in its socket. */
int hs_raw_open_rcvbuf(unsigned port, int rcvbuf);

/* Sends all of data; 0, or -1 when the connection broke. */
int hs_raw_send(int fd, const void *data, size_t len);

/* Reads until the server closes, one whole response has arrived (headers
 * and Content-Length bytes of body), or timeout_s passes; malloc'd,
 * NUL-terminated. Does not close fd. */
char *hs_raw_recv(int fd, double timeout_s);

/* Closes fd with a reset (SO_LINGER 0), as a client that gives up. */
void hs_raw_reset(int fd);

/*
 * One request on a connection of its own, through a plain socket whose
 * send and receive timeouts (SO_SNDTIMEO, SO_RCVTIMEO) end at timeout_s
 * after the call, so that a server that never answers fails the request
 * rather than blocking the test: a trickle of bytes does not extend it.
 * Sent with "Connection: close" and the body's Content-Length; `headers`
 * as hs_request's (a body without a Content-Type line goes as
 * application/json, "Content-Type:" alone sends none). A send the server
 * refuses (it answered early and closed) is not an error: the answer is
 * read all the same. Fills *r (free with hs_response_free; r->status 0
 * when no status line came) and returns r->rc:
 *
 *   CURLE_OK                  a whole answer: status line, headers and the
 *                             Content-Length bytes of body (without one,
 *                             every byte until the server closed)
 *   CURLE_COULDNT_CONNECT     no connection
 *   CURLE_GOT_NOTHING         closed or reset without a byte of answer
 *   CURLE_PARTIAL_FILE        closed or reset in the middle of one
 *   CURLE_OPERATION_TIMEDOUT  no whole answer within timeout_s
 */
CURLcode hs_exchange(unsigned port, const char *method, const char *path,
                     const char *const *headers, const void *body, size_t len, double timeout_s,
                     hs_response *r);

/* The value of the metric line starting with `name` in a /metrics text
 * (give the name with its trailing space, or a leading "\n" to skip
 * longer names), or -1. */
long hs_metric_value(const char *text, const char *name);

/* GET /metrics once: the value of `name` (as hs_metric_value), or -1. */
long hs_metric(unsigned port, const char *name);

/*
 * The waits below poll for a condition the server shows (a metric, an
 * answer, a log line) until it holds or timeout_s passes, and return as
 * soon as it holds: give them a generous timeout, which only a failing test
 * waits out. Under $ATTN_SERVER_WRAPPER the timeout is 10 times longer.
 */

/* Polls /metrics until `name` reads `want`; returns the last value read. */
long hs_wait_metric(unsigned port, const char *name, long want, double timeout_s);

/* Polls /metrics until `name` reads at least `floor`; returns the last
 * value read. */
long hs_wait_metric_at_least(unsigned port, const char *name, long floor, double timeout_s);

/* Polls GET path until it answers 200; returns 1 once it has, else 0. */
int hs_wait_served(unsigned port, const char *path, double timeout_s);

/* Reads the server's log until it holds `text`; returns 1 once it has,
 * else 0. */
int hs_wait_log(const hs_server *s, const char *text, double timeout_s);

/* The access-log line of request id in log, or NULL; malloc'd. */
char *hs_access_line(const char *log, const char *id);

/* Reads the server's log until it holds the access line of request id;
 * returns it (malloc'd), or NULL. */
char *hs_wait_access_line(const hs_server *s, const char *id, double timeout_s);

#endif
