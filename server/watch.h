/*
 * watch.h — what the server watches on its connections that libmicrohttpd
 * does not: deadlines that hold whatever the client sends, and clients that
 * hang up while their connection is suspended.
 *
 * libmicrohttpd closes a connection only when it has been idle for its
 * timeout, so a client sending a byte a second is never closed: its
 * headers, or its body, could take forever and hold a connection (and a
 * share of the body budget) all that time. Each connection gets an entry
 * here when it is accepted, with a deadline for its first request's
 * headers; the HTTP layer moves the deadline as the exchange goes on (a
 * body due within the timeout of its headers, the next request's headers
 * within the timeout of the previous answer) or clears it (a request being
 * computed or answered). One thread shuts down (shutdown(2), never close:
 * the descriptor is libmicrohttpd's) the socket of every connection past
 * its deadline, after writing a 408 when the connection is between
 * requests or in the middle of a body; libmicrohttpd then finds the socket
 * closed and ends the connection as for any hang-up.
 *
 * A suspended connection is not read by libmicrohttpd, so a hang-up goes
 * unnoticed there: srv_watch_peer_gone looks at the socket itself.
 *
 * Ownership and lifetime: an entry is made by srv_watch_add in
 * libmicrohttpd's connection-started notification and freed by
 * srv_watch_remove in the connection-closed one, which libmicrohttpd makes
 * before it closes the descriptor. The thread touches entries only under
 * the watch's mutex, so it never shuts down a descriptor that has been
 * closed and reused.
 */
#ifndef SRV_WATCH_H
#define SRV_WATCH_H

#include <stddef.h>

typedef struct srv_watch srv_watch;
typedef struct srv_watched srv_watched; /* one connection */

/* Starts the watching thread; NULL when out of memory or threads. */
srv_watch *srv_watch_start(void);
/* Stops the thread and frees the watch; every entry must be removed. */
void srv_watch_stop(srv_watch *w);

/* Registers a connection's socket with a deadline `seconds` from now;
 * NULL when out of memory (the connection is then not watched). */
srv_watched *srv_watch_add(srv_watch *w, int fd, double seconds);
/* Unregisters and frees c (NULL is ignored). */
void srv_watch_remove(srv_watch *w, srv_watched *c);

/* Moves c's deadline to `seconds` from now; 0 clears it. */
void srv_watch_deadline(srv_watch *w, srv_watched *c, double seconds);

/* The body of c's 408 from now on (copied; the contract's when never set,
 * when the copy fails, or back to it with body NULL): the connection's
 * route speaks another error form. */
void srv_watch_timeout_body(srv_watch *w, srv_watched *c, const char *body, size_t len);

/* 1 once the thread has shut c's socket down for its deadline. */
int srv_watch_expired(srv_watch *w, const srv_watched *c);

/* Connections shut down for their deadline so far. */
size_t srv_watch_expired_total(srv_watch *w);

/*
 * 1 when the client of the connection on fd has closed it (or reset it),
 * as far as can be seen without reading: a pending end of stream or
 * error. A client that has sent more bytes (a pipelined request) is not
 * gone. Cheap: one non-blocking recv with MSG_PEEK.
 */
int srv_watch_peer_gone(int fd);

#endif
