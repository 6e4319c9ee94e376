/*
 * signals.c — the self-pipe and its flags (signals.h).
 */
#include "server/signals.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "server/log.h"

/* The self-pipe: [0] read by the main thread, [1] written by the handler. */
static int sig_pipe[2] = {-1, -1};
static volatile sig_atomic_t sig_stop;   /* the first SIGTERM or SIGINT */
static volatile sig_atomic_t sig_reload; /* a SIGHUP not yet acted on */

static void on_signal(int sig) {
    int saved = errno;
    if (sig == SIGHUP)
        sig_reload = 1;
    else if (!sig_stop)
        sig_stop = sig;
    unsigned char b = (unsigned char)sig;
    /* Non-blocking: with the pipe full, a wake-up is already pending. */
    ssize_t w = write(sig_pipe[1], &b, 1);
    (void)w;
    errno = saved;
}

int srv_signals_install(void) {
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigfillset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0 ||
        sigaction(SIGHUP, &sa, NULL) != 0)
        return -1;
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

/* The next byte from the pipe, waiting for one: a signal number, or 0
 * when the watcher should stop. */
static int sig_next(void) {
    for (;;) {
        unsigned char b;
        ssize_t r = read(sig_pipe[0], &b, 1);
        if (r == 1) return b;
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
            struct pollfd p = {.fd = sig_pipe[0], .events = POLLIN};
            poll(&p, 1, -1);
            continue;
        }
        return 0; /* cannot happen: we hold the write end */
    }
}

void srv_signals_wait(void) {
    sig_next();
    unsigned char b[256];
    while (read(sig_pipe[0], b, sizeof b) > 0) {
    }
}

/* Logs signals that arrive while draining; they change nothing. */
static void *sig_watch(void *arg) {
    (void)arg;
    int sig;
    while ((sig = sig_next()) != 0)
        srv_log_info("signal %d: already draining; ignored", sig);
    return NULL;
}

int srv_signals_stop(void) {
    return (int)sig_stop;
}

int srv_signals_take_reload(void) {
    if (!sig_reload) return 0;
    sig_reload = 0;
    return 1;
}

static pthread_t watcher;

int srv_signals_watch_start(void) {
    return pthread_create(&watcher, NULL, sig_watch, NULL) == 0;
}

void srv_signals_watch_stop(void) {
    unsigned char zero = 0;
    while (write(sig_pipe[1], &zero, 1) != 1 && (errno == EAGAIN || errno == EINTR))
        usleep(1000); /* a pipe full of signals: the watcher is emptying it */
    pthread_join(watcher, NULL);
}
