/*
 * inline.h — the scheduling rule for tiny computations, whatever their
 * wire format (a single, a batch, a /v2 infer): run them on the polling
 * thread that read them.
 *
 * A body of at most SRV_INLINE_MAX_BODY bytes is decoded here, with a
 * srv_worker of this thread's own; when its cost (the decoded call's
 * floating-point operations) is at most --inline-max-flops — a teaching
 * example: microseconds to compute and encode — it is computed and
 * answered at once. Handing it to a worker would cost more than running
 * it: a suspend and a resume, a queue and two thread switches. A small
 * body with more work than that goes to the pool already decoded, so a
 * polling thread never spends more than about the cap's worth of
 * computation, and no body is decoded twice.
 */
#ifndef SRV_INLINE_H
#define SRV_INLINE_H

#include "server/http_state.h"

/* The largest body tried here: decoding it takes microseconds. */
#define SRV_INLINE_MAX_BODY 4096

/* The thread-specific key of the polling threads' workers: 0, or -1. */
int srv_inline_start(srv_http *h);

/* After the polling threads have ended (each freed its worker). */
void srv_inline_stop(srv_http *h);

/* What became of x's computation (its body in place). */
typedef enum srv_inline_outcome {
    SRV_INLINE_NO,     /* not tried: the pool decodes and runs it */
    SRV_INLINE_DONE,   /* answered (or refused) here: x->job holds the answer */
    SRV_INLINE_TO_POOL /* decoded here, too much work: queue it as it is */
} srv_inline_outcome;

srv_inline_outcome srv_inline_try(srv_exchange *x);

#endif
