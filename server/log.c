/*
 * log.c — timestamped lines on stderr.
 *
 * Lines are assembled directly on the stream between flockfile and
 * funlockfile instead of in a fixed buffer, so a long client path can never
 * overflow anything; client text is escaped on the way (see log.h).
 */
#include "server/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#define LOG_PATH_MAX 256

static void log_stamp(FILE *f) {
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    fprintf(f, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ ", tm.tm_year + 1900, tm.tm_mon + 1,
            tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
}

/* Writes client text with anything but printable ASCII (and '%') as %XX. */
static void log_escaped(FILE *f, const char *s, size_t max) {
    static const char hex[] = "0123456789ABCDEF";
    if (!s || !*s) {
        fputc_unlocked('-', f);
        return;
    }
    size_t i = 0;
    for (; s[i] && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c > 0x20 && c < 0x7f && c != '%') {
            fputc_unlocked(c, f);
        } else {
            fputc_unlocked('%', f);
            fputc_unlocked(hex[c >> 4], f);
            fputc_unlocked(hex[c & 15], f);
        }
    }
    if (s[i]) fputs_unlocked("...", f);
}

void srv_log_info(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    flockfile(stderr);
    log_stamp(stderr);
    fputs_unlocked("info ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc_unlocked('\n', stderr);
    funlockfile(stderr);
    va_end(ap);
}

void srv_log_access(const char *method, const char *path, int status, size_t bytes, double ms,
                    const char *request_id, const char *cut) {
    flockfile(stderr);
    log_stamp(stderr);
    fputs_unlocked("access ", stderr);
    log_escaped(stderr, method, 16);
    fputc_unlocked(' ', stderr);
    log_escaped(stderr, path, LOG_PATH_MAX);
    fprintf(stderr, " %d %zuB %.2fms id=", status, bytes, ms);
    log_escaped(stderr, request_id, 128);
    if (cut) fprintf(stderr, " cut=%s", cut);
    fputc_unlocked('\n', stderr);
    funlockfile(stderr);
}
