/*
 * signals.h — SIGTERM, SIGINT and SIGHUP as events the main thread waits
 * for, and a watcher that logs the signals that come during the drain.
 *
 * The handlers only write() a byte to a self-pipe (async-signal-safe,
 * errno kept) and set a flag; the main thread reads the pipe. A mask alone
 * is not enough: OpenBLAS starts its thread pool when the library is
 * loaded, before main() runs, so those threads never inherit a mask set
 * there, and a signal the main thread was not waiting for in sigwait()
 * would be delivered to one of them with its default action — ending the
 * process in the middle of a drain. With a handler installed for the whole
 * process, whichever thread the kernel picks only writes a byte. SIGPIPE
 * is ignored: a client that hangs up is an error return, not death.
 *
 * The byte only wakes the reader; what happened is in the flags, so that a
 * burst of SIGHUPs is one reload and a full pipe loses no SIGTERM.
 */
#ifndef SRV_SIGNALS_H
#define SRV_SIGNALS_H

/* Installs the handlers. 0, or -1 with errno set. */
int srv_signals_install(void);

/* Waits for the next wake-up, then empties the pipe. */
void srv_signals_wait(void);

/* The first SIGTERM or SIGINT received, or 0. */
int srv_signals_stop(void);

/* 1 (and forgotten) when a SIGHUP came since the last call. */
int srv_signals_take_reload(void);

/* Starts the thread that logs each further signal and otherwise ignores
 * it (a second SIGTERM during the drain must not cut requests short).
 * 1 when it runs, 0 when it could not start. */
int srv_signals_watch_start(void);

/* Stops and joins the watcher. */
void srv_signals_watch_stop(void);

#endif
