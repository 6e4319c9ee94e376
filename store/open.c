/*
 * open.c — store_open_regular (open.h).
 */
#include "store/open.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* What a file that is not a regular one is, for the message. */
static const char *kind_name(mode_t mode) {
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
    if (S_ISSOCK(mode)) return "a socket";
    return "of another kind";
}

int store_open_regular(const char *path, struct stat *st, attn_error *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return store_error_set(err, path, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        store_error_set(err, path, "cannot stat: %s", strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return store_error_set(err, path, "not a regular file (%s)", kind_name(sb.st_mode));
    }
    /* Linux ignores O_NONBLOCK on a regular file, but POSIX lets a system
     * honour it (mandatory locks): cleared, so that reads wait as usual. */
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        store_error_set(err, path, "cannot clear O_NONBLOCK: %s", strerror(errno));
        close(fd);
        return -1;
    }
    if (st) *st = sb;
    return fd;
}
