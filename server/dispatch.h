/*
 * dispatch.h — an exchange's job on the worker pool: the connection is
 * suspended FIRST and the job queued SECOND, so the worker's resume
 * always follows the suspend.
 *
 * The worker runs the job (job.h), marks the exchange X_DONE and resumes
 * the connection; it touches the exchange no more after that call, and
 * the handler's next call sends the answer (srv_dispatch_reply). A job
 * whose client has left (a peek at its socket, before it runs and between
 * the phases of a split computation) is dropped: the exchange goes to
 * X_GONE, resumed to be closed unanswered (logged 499). A full queue first
 * gives up the places of such jobs (pool_evict); a queue that still
 * refuses is answered 503 at once.
 */
#ifndef SRV_DISPATCH_H
#define SRV_DISPATCH_H

#include <microhttpd.h>

#include "server/http_state.h"

/* Queues x->job and suspends the connection. An exchange that began after
 * the drain counted the ones in flight is answered 503 shutting_down
 * instead: it must never be suspended when the daemon stops. */
enum MHD_Result srv_dispatch(srv_exchange *x);

/* An endpoint's computation, its body read: x->job becomes a call of the
 * wire format `kind` on x->body (the model and header length the
 * endpoint set stay), answered at once on this thread when tiny
 * (inline.h), else queued (srv_dispatch). */
enum MHD_Result srv_dispatch_call(srv_exchange *x, api_call_kind kind);

/* Sends a finished job's answer (X_DONE), giving the body's budget back
 * first, so that a client's next request never finds it still held. */
enum MHD_Result srv_dispatch_reply(srv_exchange *x);

/* Adds a job's phase durations to the metrics. */
void srv_dispatch_count_phases(const srv_exchange *x);

#endif
