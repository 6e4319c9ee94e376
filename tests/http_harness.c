/*
 * http_harness.c — see http_harness.h.
 *
 * The server's stderr goes to a file rather than a pipe so that nobody has
 * to keep reading it: a full pipe would block the server's access log.
 */
#include "tests/http_harness.h"

#include <arpa/inet.h>
#include <check.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double hs_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

char *hs_log(const hs_server *s) {
    FILE *f = fopen(s->log_path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (cap - len < 4097) {
            cap = cap ? cap * 2 : 8192;
            char *b = realloc(buf, cap);
            if (!b) break;
            buf = b;
        }
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        if (n == 0) break;
        len += n;
    }
    fclose(f);
    if (buf) buf[len] = 0;
    return buf;
}

/* ATTN_SERVER_WRAPPER: a command the server runs under (valgrind's, for
 * make test-valgrind), words separated by spaces; NULL when unset. */
static const char *hs_wrapper(void) {
    const char *w = getenv("ATTN_SERVER_WRAPPER");
    return w && *w ? w : NULL;
}

/* How much longer than natively the server may take to start and stop. */
static double hs_slowness(void) {
    return hs_wrapper() ? 10.0 : 1.0;
}

/* ---- what an error body must not hold (see http_harness.h) ---- */

#define HS_SECRETS_MAX 64

/* What the servers started so far were given: paths, key files, keys.
 * Only ever added to; under hs_secrets_mu (requests come from threads). */
static pthread_mutex_t hs_secrets_mu = PTHREAD_MUTEX_INITIALIZER;
static char *hs_paths[HS_SECRETS_MAX], *hs_key_files[HS_SECRETS_MAX], *hs_keys[HS_SECRETS_MAX];
static size_t hs_n_paths, hs_n_key_files, hs_n_keys;

/* Adds a copy of s to list unless it holds it already. Under the mutex. */
static void hs_secret_add(char **list, size_t *n, const char *s, size_t len) {
    for (size_t i = 0; i < *n; i++)
        if (strlen(list[i]) == len && memcmp(list[i], s, len) == 0) return;
    if (*n < HS_SECRETS_MAX && (list[*n] = strndup(s, len))) (*n)++;
}

/* A path as given when absolute, and as resolved when it exists. */
static void hs_path_add(const char *path) {
    if (!path || !*path) return;
    if (path[0] == '/' && path[1]) hs_secret_add(hs_paths, &hs_n_paths, path, strlen(path));
    char real[PATH_MAX];
    if (realpath(path, real) && real[1]) hs_secret_add(hs_paths, &hs_n_paths, real, strlen(real));
}

/* The keys of a key file as keys.c reads them (blank and '#' lines
 * skipped, trailing white space cut). `whole_lines`: only lines ending in
 * a newline, for a file a test may be writing at this moment. Under the
 * mutex. */
static void hs_keys_read(const char *path, int whole_lines) {
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        size_t len = strlen(line);
        if (whole_lines && (len == 0 || line[len - 1] != '\n')) continue;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' ' ||
                           line[len - 1] == '\t'))
            len--;
        if (len > 0 && line[0] != '#') hs_secret_add(hs_keys, &hs_n_keys, line, len);
    }
    fclose(f);
}

/* The value of option `name` in a server's arguments ("--name value" or
 * "--name=value"), else the environment variable `env`; or NULL. */
static const char *hs_option(const char *const *args, const char *name, const char *env) {
    size_t n = strlen(name);
    const char *found = NULL;
    for (int i = 0; args && args[i]; i++) {
        if (strcmp(args[i], name) == 0 && args[i + 1]) found = args[i + 1];
        if (strncmp(args[i], name, n) == 0 && args[i][n] == '=') found = args[i] + n + 1;
    }
    if (!found) found = getenv(env);
    return found && *found ? found : NULL;
}

/* What a server about to start with `args` must never show in an error. */
static void hs_secrets_note(const char *const *args) {
    pthread_mutex_lock(&hs_secrets_mu);
    hs_path_add(hs_option(args, "--models-dir", "ATTN_MODELS_DIR"));
    const char *keys = hs_option(args, "--api-keys-file", "ATTN_API_KEYS_FILE");
    if (keys) {
        hs_path_add(keys);
        hs_secret_add(hs_key_files, &hs_n_key_files, keys, strlen(keys));
        hs_keys_read(keys, 0);
    }
    pthread_mutex_unlock(&hs_secrets_mu);
}

static int hs_word_char(char c) {
    return isalnum((unsigned char)c) || c == '_';
}

/* A character a path's name may hold: before "/tmp/", it makes the
 * match the inside of another path ("/weights/tmp/...") or word. */
static int hs_path_char(char c) {
    return isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.' || c == '~' || c == '/';
}

/* The first place `s` (n bytes) is in body, at or after `from`; or NULL. */
static const char *hs_find(const char *body, size_t len, size_t from, const char *s, size_t n) {
    if (n == 0 || from > len) return NULL;
    return memmem(body + from, len - from, s, n);
}

/* 1 when s is in body with nothing of `word` right before (and, when
 * `after` is set, right after) it. */
static int hs_holds_alone(const char *body, size_t len, const char *s, int (*word)(char),
                          int after) {
    size_t n = strlen(s);
    for (const char *p = hs_find(body, len, 0, s, n); p;
         p = hs_find(body, len, (size_t)(p - body) + 1, s, n)) {
        size_t end = (size_t)(p - body) + n;
        if ((p == body || !word(p[-1])) && (!after || end == len || !word(body[end]))) return 1;
    }
    return 0;
}

static int hs_leak(char *why, size_t whylen, const char *what, const char *s) {
    snprintf(why, whylen, "%s \"%s\"", what, s);
    return 1;
}

/* A pointer's look: "0x" and 6+ hex digits, or a lone run of 12+ hex
 * digits with letters and digits both (a run of digits is a number). */
static int hs_pointer_like(const char *text, size_t len, char *why, size_t whylen) {
    char run[48];
    for (size_t i = 0; i < len;) {
        size_t j = i, letters = 0, digits = 0;
        while (j < len && isxdigit((unsigned char)text[j])) {
            letters += isalpha((unsigned char)text[j]) != 0;
            j++;
        }
        digits = j - i - letters;
        if (j == i) {
            i++;
            continue;
        }
        if (j - i == 1 && text[i] == '0' && (text[j] == 'x' || text[j] == 'X')) {
            size_t k = j + 1;
            while (k < len && isxdigit((unsigned char)text[k]))
                k++;
            if (k - j - 1 >= 6) {
                snprintf(run, sizeof run, "%.*s", (int)(k - i < 40 ? k - i : 40), text + i);
                return hs_leak(why, whylen, "a pointer-like", run);
            }
        }
        int alone = (i == 0 || !hs_word_char(text[i - 1])) && (j == len || !hs_word_char(text[j]));
        if (alone && j - i >= 12 && letters && digits) {
            snprintf(run, sizeof run, "%.*s", (int)(j - i < 40 ? j - i : 40), text + i);
            return hs_leak(why, whylen, "a run of hex digits", run);
        }
        i = j;
    }
    return 0;
}

int hs_leak_find(const char *body, size_t len, char *why, size_t whylen) {
    static const char *const roots[] = {"/tmp/", "/var/", "/work/", "/home/", "/root/",
                                        "/etc/", "/usr/", "/opt/",  "/srv/",  "/proc/",
                                        "/dev/", "/mnt/", "/run/",  "/build/"};
    /* the body as a string, a NUL in it made a space, for the searches
     * that stop at a NUL */
    char *text = malloc(len + 1);
    if (!text) return 0;
    for (size_t i = 0; i < len; i++)
        text[i] = body[i] ? body[i] : ' ';
    text[len] = 0;
    int found = 0;
    for (size_t i = 0; !found && i < sizeof roots / sizeof roots[0]; i++)
        if (hs_holds_alone(text, len, roots[i], hs_path_char, 0))
            found = hs_leak(why, whylen, "an absolute path under", roots[i]);

    char cwd[PATH_MAX], bin[PATH_MAX];
    const char *home = getenv("HOME");
    const char *server = getenv("ATTN_SERVER_BIN");
    if (!found && getcwd(cwd, sizeof cwd) && cwd[1] && strstr(text, cwd))
        found = hs_leak(why, whylen, "the working directory", cwd);
    if (!found && home && home[0] == '/' && home[1] &&
        hs_holds_alone(text, len, home, hs_path_char, 1))
        found = hs_leak(why, whylen, "$HOME", home);
    if (!found && server && realpath(server, bin)) {
        char *slash = strrchr(bin, '/');
        if (slash && slash != bin) *slash = 0;
        if (bin[1] && strstr(text, bin))
            found = hs_leak(why, whylen, "the server binary's directory", bin);
    }

    pthread_mutex_lock(&hs_secrets_mu);
    for (size_t i = 0; i < hs_n_key_files; i++)
        hs_keys_read(hs_key_files[i], 1);
    for (size_t i = 0; !found && i < hs_n_paths; i++)
        if (strstr(text, hs_paths[i]))
            found = hs_leak(why, whylen, "a path the server was given", hs_paths[i]);
    for (size_t i = 0; !found && i < hs_n_keys; i++) {
        int hit = strlen(hs_keys[i]) >= 8 ? strstr(text, hs_keys[i]) != NULL
                                          : hs_holds_alone(text, len, hs_keys[i], hs_word_char, 1);
        if (hit) found = hs_leak(why, whylen, "the API key", hs_keys[i]);
    }
    pthread_mutex_unlock(&hs_secrets_mu);

    if (!found) found = hs_pointer_like(text, len, why, whylen);
    free(text);
    return found;
}

/* Fails the test when an error body leaks. */
static void hs_leak_assert(long status, const char *body, size_t len) {
    char why[256];
    if (status >= 400 && body && hs_leak_find(body, len, why, sizeof why))
        ck_abort_msg("the body of a %ld answer holds %s: %.*s", status, why,
                     (int)(len < 2000 ? len : 2000), body);
}

/* hs_leak_assert on each answer of a raw stream, one after another as they
 * came: a status line, headers, and Content-Length bytes of body (or the
 * rest, without one; none for 1xx). */
static void hs_leak_assert_raw(const char *raw, size_t len) {
    size_t at = 0;
    while (len - at >= 12 && strncmp(raw + at, "HTTP/1.", 7) == 0) {
        long status = strtol(raw + at + 9, NULL, 10);
        const char *end = memmem(raw + at, len - at, "\r\n\r\n", 4);
        if (!end) return;
        size_t head = (size_t)(end + 4 - (raw + at)), left = len - at - head, body = left;
        char *block = strndup(raw + at, head);
        hs_response h = {.headers = block};
        char *cl = block ? hs_header(&h, "Content-Length") : NULL;
        if (cl && strtoul(cl, NULL, 10) < left) body = strtoul(cl, NULL, 10);
        if (status < 200) body = 0;
        free(cl);
        free(block);
        hs_leak_assert(status, raw + at + head, body);
        at += head + body;
    }
}

int hs_start(hs_server *s, const char *const *extra) {
    return hs_start_limited(s, extra, 0);
}

int hs_start_limited(hs_server *s, const char *const *extra, size_t address_space) {
    const char *bin = getenv("ATTN_SERVER_BIN");
    if (!bin || !*bin) bin = "build/attention-server";
    memset(s, 0, sizeof *s);
    s->exit_status = -1;
    hs_secrets_note(extra);
    strcpy(s->log_path, "/tmp/attn-test-XXXXXX");
    int fd = mkstemp(s->log_path);
    if (fd < 0) return -1;

    const char *argv[96];
    int argc = 0;
    char wrapper[512] = "";
    if (hs_wrapper()) {
        snprintf(wrapper, sizeof wrapper, "%s", hs_wrapper());
        for (char *w = strtok(wrapper, " "); w && argc < 24; w = strtok(NULL, " "))
            argv[argc++] = w;
    }
    argv[argc++] = bin;
    argv[argc++] = "--bind";
    argv[argc++] = "127.0.0.1";
    argv[argc++] = "--port";
    argv[argc++] = "0";
    for (int i = 0; extra && extra[i] && argc < 95; i++)
        argv[argc++] = extra[i];
    argv[argc] = NULL;

    pid_t pid = fork();
    if (pid < 0) {
        close(fd);
        return -1;
    }
    if (pid == 0) {
        dup2(fd, 2);
        close(fd);
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) dup2(devnull, 0);
        if (address_space) {
            struct rlimit lim = {address_space, address_space};
            if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(126);
        }
        execvp(argv[0], (char *const *)argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fd);
    s->pid = pid;

    double deadline = hs_now() + 15 * hs_slowness();
    while (hs_now() < deadline) {
        char *log = hs_log(s);
        const char *p = log ? strstr(log, " port=") : NULL;
        if (p && strchr(p, '\n')) { /* the whole line is there */
            s->port = (unsigned)strtoul(p + 6, NULL, 10);
            free(log);
            if (s->port) return 0;
        }
        free(log);
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            s->pid = 0;
            return -1;
        }
        usleep(20000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    s->pid = 0;
    return -1;
}

long hs_rss_kb(const hs_server *s) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)s->pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) kb = strtol(line + 6, NULL, 10);
    fclose(f);
    return kb;
}

void hs_signal(const hs_server *s, int sig) {
    if (s->pid > 0) kill(s->pid, sig);
}

int hs_wait(hs_server *s, double timeout_s) {
    if (s->pid <= 0) return s->exit_status;
    double deadline = hs_now() + timeout_s;
    int status;
    for (;;) {
        pid_t r = waitpid(s->pid, &status, WNOHANG);
        if (r == s->pid) break;
        if (hs_now() > deadline) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, NULL, 0);
            s->pid = 0;
            return -1;
        }
        usleep(10000);
    }
    s->pid = 0;
    s->exit_status = -1;
    if (WIFEXITED(status)) s->exit_status = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) s->exit_status = 128 + WTERMSIG(status);
    return s->exit_status;
}

int hs_stop(hs_server *s) {
    if (s->pid > 0) hs_signal(s, SIGTERM);
    int rc = hs_wait(s, 20 * hs_slowness());
    if (s->log_path[0]) unlink(s->log_path);
    s->log_path[0] = 0;
    return rc;
}

const char *hs_log_problem(const char *log) {
    static const char *const marks[] = {"runtime error", "Sanitizer"};
    const char *first = NULL;
    for (size_t i = 0; log && i < sizeof marks / sizeof marks[0]; i++) {
        const char *p = strstr(log, marks[i]);
        if (p && (!first || p < first)) first = p;
    }
    return first;
}

int hs_finish(hs_server *s, char *why, size_t whylen) {
    if (s->pid > 0) hs_signal(s, SIGTERM);
    int rc = hs_wait(s, 20 * hs_slowness());
    char *log = hs_log(s);
    const char *bad = hs_log_problem(log);
    int ok = rc == 0 && !bad;
    if (!ok) {
        size_t n = log ? strlen(log) : 0;
        const char *tail = bad ? bad : n > 1500 ? log + n - 1500 : log ? log : "";
        snprintf(why, whylen, "server exit status %d%s; log%s:\n%.1500s", rc,
                 bad ? ", sanitizer report" : "", bad ? " from the report" : " tail", tail);
    }
    free(log);
    if (s->log_path[0]) unlink(s->log_path);
    s->log_path[0] = 0;
    return ok ? 0 : -1;
}

/* ---- libcurl ---- */

typedef struct hs_buf {
    char *p;
    size_t len, cap;
} hs_buf;

/* Appends a piece of the answer; the buffer doubles, so a large answer
 * costs linear time (a realloc per piece is quadratic under ASan). */
static size_t hs_collect(char *data, size_t size, size_t n, void *arg) {
    hs_buf *b = arg;
    size_t add = size * n;
    if (b->len + add + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 16384;
        while (cap < b->len + add + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return 0;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, add);
    b->len += add;
    b->p[b->len] = 0;
    return add;
}

CURLcode hs_request(CURL *reuse, unsigned port, const char *method, const char *path,
                    const char *const *headers, const char *body, size_t len, hs_response *r) {
    memset(r, 0, sizeof *r);
    CURL *c = reuse ? reuse : curl_easy_init();
    if (!c) return r->rc = CURLE_FAILED_INIT;
    curl_easy_reset(c);

    char url[512];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", port, path);
    struct curl_slist *list = NULL;
    int has_ct = 0;
    for (int i = 0; headers && headers[i]; i++) {
        if (strncasecmp(headers[i], "Content-Type:", 13) == 0) has_ct = 1;
        list = curl_slist_append(list, headers[i]);
    }
    if (body && !has_ct) list = curl_slist_append(list, "Content-Type: application/json");
    /* no "Expect: 100-continue" round trip unless a test asks for it */
    list = curl_slist_append(list, "Expect:");

    hs_buf bbuf = {0}, hbuf = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, hs_collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &bbuf);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, hs_collect);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &hbuf);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 5L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    } else if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    }
    r->rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    r->body = bbuf.p ? bbuf.p : calloc(1, 1);
    r->len = bbuf.len;
    r->headers = hbuf.p ? hbuf.p : calloc(1, 1);
    r->hlen = hbuf.len;
    curl_slist_free_all(list);
    if (!reuse) curl_easy_cleanup(c);
    hs_leak_assert(r->status, r->body, r->len);
    return r->rc;
}

char *hs_header(const hs_response *r, const char *name) {
    size_t n = strlen(name);
    char *found = NULL;
    const char *line = r->headers;
    while (line && *line) {
        const char *end = strstr(line, "\r\n");
        size_t ll = end ? (size_t)(end - line) : strlen(line);
        if (ll > n && strncasecmp(line, name, n) == 0 && line[n] == ':') {
            const char *v = line + n + 1;
            while (*v == ' ')
                v++;
            free(found);
            found = strndup(v, ll - (size_t)(v - line));
        }
        line = end ? end + 2 : NULL;
    }
    return found;
}

void hs_response_free(hs_response *r) {
    free(r->body);
    free(r->headers);
    memset(r, 0, sizeof *r);
}

/* ---- raw socket ---- */

int hs_raw_open(unsigned port) {
    return hs_raw_open_rcvbuf(port, 0);
}

int hs_raw_open_rcvbuf(unsigned port, int rcvbuf) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    /* before connect, so that the window offered is small from the start */
    if (rcvbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf) != 0) {
        close(fd);
        return -1;
    }
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int hs_raw_send(int fd, const void *data, size_t len) {
    size_t off = 0;
    while (off < len) {
        ssize_t w = send(fd, (const char *)data + off, len - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        off += (size_t)w;
    }
    return 0;
}

/* 1 when b holds a whole response with a Content-Length. */
static int hs_complete(const hs_buf *b) {
    if (!b->p) return 0;
    const char *end = strstr(b->p, "\r\n\r\n");
    if (!end) return 0;
    /* the header block alone: hs_header reads to the string's end, and
     * this runs on every piece of a body of megabytes */
    char *head = strndup(b->p, (size_t)(end + 2 - b->p));
    hs_response r = {.headers = head};
    char *cl = head ? hs_header(&r, "Content-Length") : NULL;
    free(head);
    if (!cl) return 0;
    size_t want = strtoul(cl, NULL, 10);
    free(cl);
    return b->len - (size_t)(end + 4 - b->p) >= want;
}

/* Reads from fd into a new buffer until `done` says so (NULL: until the
 * peer closes), the peer closes, or timeout_s passes. */
static char *hs_recv_until(int fd, double timeout_s, int (*done)(const hs_buf *)) {
    hs_buf b = {0};
    double deadline = hs_now() + timeout_s;
    while (!done || !done(&b)) {
        double left = deadline - hs_now();
        if (left <= 0) break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) break;
        char chunk[65536];
        ssize_t n = recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) break;
        hs_collect(chunk, 1, (size_t)n, &b);
    }
    if (b.p) hs_leak_assert_raw(b.p, b.len);
    return b.p ? b.p : calloc(1, 1);
}

char *hs_raw_recv(int fd, double timeout_s) {
    return hs_recv_until(fd, timeout_s, hs_complete);
}

void hs_raw_reset(int fd) {
    struct linger l = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close(fd);
}

/* Sets fd's send and receive timeouts to what is left until deadline (at
 * least a millisecond); 0 once it has passed. */
static int hs_timeouts_until(int fd, double deadline) {
    double left = deadline - hs_now();
    if (left <= 0) return 0;
    struct timeval tv = {(time_t)left, (suseconds_t)((left - (double)(time_t)left) * 1e6)};
    if (tv.tv_sec == 0 && tv.tv_usec < 1000) tv.tv_usec = 1000;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return 1;
}

/* The status line's code, or 0 when b does not start with one. */
static long hs_status_of(const char *b) {
    if (!b || strncmp(b, "HTTP/1.", 7) != 0 || !b[7] || b[8] != ' ') return 0;
    long st = strtol(b + 9, NULL, 10);
    return st >= 100 && st <= 999 ? st : 0;
}

CURLcode hs_exchange(unsigned port, const char *method, const char *path,
                     const char *const *headers, const void *body, size_t len, double timeout_s,
                     hs_response *r) {
    memset(r, 0, sizeof *r);
    double deadline = hs_now() + timeout_s;
    int fd = hs_raw_open(port);
    if (fd < 0) {
        r->rc = CURLE_COULDNT_CONNECT;
        r->body = calloc(1, 1);
        r->headers = calloc(1, 1);
        return r->rc;
    }
    hs_buf head = {0};
    char line[512];
    snprintf(line, sizeof line, "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nConnection: close\r\n",
             method, path, port);
    hs_collect(line, 1, strlen(line), &head);
    int has_ct = 0;
    for (int i = 0; headers && headers[i]; i++) {
        if (strncasecmp(headers[i], "Content-Type:", 13) == 0) {
            has_ct = 1;
            if (!headers[i][13]) continue; /* "Content-Type:" alone: none */
        }
        hs_collect((char *)headers[i], 1, strlen(headers[i]), &head);
        hs_collect("\r\n", 1, 2, &head);
    }
    if (body && !has_ct) hs_collect("Content-Type: application/json\r\n", 1, 32, &head);
    if (body || strcmp(method, "POST") == 0) {
        snprintf(line, sizeof line, "Content-Length: %zu\r\n", body ? len : 0);
        hs_collect(line, 1, strlen(line), &head);
    }
    hs_collect("\r\n", 1, 2, &head);
    /* A refused send is the server's early answer (413, 503): read it. */
    if (hs_timeouts_until(fd, deadline) && hs_raw_send(fd, head.p, head.len) == 0 && body)
        hs_raw_send(fd, body, len);
    free(head.p);

    hs_buf b = {0};
    int closed = 0, complete = 0;
    while (!complete && hs_timeouts_until(fd, deadline)) {
        char chunk[65536];
        ssize_t n = recv(fd, chunk, sizeof chunk, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break; /* timed out */
        if (n <= 0) {
            closed = 1; /* an orderly close, or a reset */
            break;
        }
        hs_collect(chunk, 1, (size_t)n, &b);
        complete = hs_complete(&b);
    }
    close(fd);

    const char *end = b.p ? strstr(b.p, "\r\n\r\n") : NULL;
    r->status = hs_status_of(b.p);
    if (end) {
        r->headers = strndup(b.p, (size_t)(end + 2 - b.p));
        r->len = b.len - (size_t)(end + 4 - b.p);
        r->body = malloc(r->len + 1);
        if (r->body) {
            memcpy(r->body, end + 4, r->len);
            r->body[r->len] = 0;
        }
    }
    if (!r->headers) r->headers = calloc(1, 1);
    if (!r->body) {
        r->body = calloc(1, 1);
        r->len = 0;
    }
    if (complete) {
        r->rc = CURLE_OK;
    } else if (closed) {
        char *cl = hs_header(r, "Content-Length");
        r->rc = !b.len                    ? CURLE_GOT_NOTHING
                : end && !cl && r->status ? CURLE_OK /* the body ends with the connection */
                                          : CURLE_PARTIAL_FILE;
        free(cl);
    } else {
        r->rc = CURLE_OPERATION_TIMEDOUT;
    }
    r->hlen = strlen(r->headers);
    free(b.p);
    hs_leak_assert(r->status, r->body, r->len);
    return r->rc;
}

char *hs_raw(unsigned port, const char *request, size_t len, double timeout_s) {
    int fd = hs_raw_open(port);
    if (fd < 0) return NULL;
    hs_raw_send(fd, request, len);
    /* until the server closes: a raw caller may expect it to */
    char *answer = hs_recv_until(fd, timeout_s, NULL);
    close(fd);
    return answer;
}

long hs_metric_value(const char *text, const char *name) {
    const char *p = strstr(text, name);
    return p ? strtol(p + strlen(name), NULL, 10) : -1;
}

long hs_metric(unsigned port, const char *name) {
    hs_response r;
    hs_request(NULL, port, "GET", "/metrics", NULL, NULL, 0, &r);
    long v = r.body ? hs_metric_value(r.body, name) : -1;
    hs_response_free(&r);
    return v;
}

long hs_wait_metric(unsigned port, const char *name, long want, double timeout_s) {
    double deadline = hs_now() + timeout_s * hs_slowness();
    long v;
    while ((v = hs_metric(port, name)) != want && hs_now() < deadline)
        usleep(10000);
    return v;
}

long hs_wait_metric_at_least(unsigned port, const char *name, long floor, double timeout_s) {
    double deadline = hs_now() + timeout_s * hs_slowness();
    long v;
    while ((v = hs_metric(port, name)) < floor && hs_now() < deadline)
        usleep(10000);
    return v;
}

int hs_wait_log(const hs_server *s, const char *text, double timeout_s) {
    double deadline = hs_now() + timeout_s * hs_slowness();
    for (;;) {
        char *log = hs_log(s);
        int found = log && strstr(log, text);
        free(log);
        if (found) return 1;
        if (hs_now() >= deadline) return 0;
        usleep(10000);
    }
}

char *hs_wait_access_line(const hs_server *s, const char *id, double timeout_s) {
    double deadline = hs_now() + timeout_s * hs_slowness();
    for (;;) {
        char *log = hs_log(s);
        char *line = hs_access_line(log, id);
        free(log);
        if (line || hs_now() >= deadline) return line;
        usleep(10000);
    }
}

char *hs_access_line(const char *log, const char *id) {
    char want[80];
    snprintf(want, sizeof want, " id=%s", id);
    const size_t n = strlen(want);
    /* the id ends the line, or a field follows it (" cut=...") */
    const char *p = log;
    while (p && (p = strstr(p, want)) && p[n] != '\n' && p[n] != ' ')
        p += n;
    if (!p || !strchr(p, '\n')) return NULL; /* none, or its line not yet whole */
    const char *start = p;
    while (start > log && start[-1] != '\n')
        start--;
    return strndup(start, (size_t)(strchr(p, '\n') - start));
}

int hs_wait_served(unsigned port, const char *path, double timeout_s) {
    double deadline = hs_now() + timeout_s * hs_slowness();
    for (;;) {
        hs_response r;
        hs_request(NULL, port, "GET", path, NULL, NULL, 0, &r);
        long st = r.status;
        hs_response_free(&r);
        if (st == 200) return 1;
        if (hs_now() >= deadline) return 0;
        usleep(20000);
    }
}
