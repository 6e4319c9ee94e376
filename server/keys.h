/*
 * keys.h — the API keys of --api-keys-file.
 *
 * The file holds one key per line; blank lines and lines starting with '#'
 * are skipped, and trailing whitespace (a CR included) is not part of a
 * key. A key is 1 to 256 printable ASCII characters without spaces. The
 * set is loaded at start and replaced whole on SIGHUP; a file that cannot
 * be read or holds a bad line leaves the previous set in force, and the
 * message says which line, never what is on it. Keys are never logged.
 *
 * A request carries its key as `Authorization: Bearer KEY`; it is compared
 * with every key of the set, each comparison reading all of the key's
 * bytes whatever they hold, so the time taken does not tell how much of a
 * guess was right.
 */
#ifndef SRV_KEYS_H
#define SRV_KEYS_H

#include <stddef.h>

#include "attention/error.h"

typedef struct srv_keys srv_keys;

/* An empty set: every request is let through. NULL when out of memory. */
srv_keys *srv_keys_create(void);
void srv_keys_destroy(srv_keys *k);

/* Replaces the set with the keys in the file at `path`. Returns the number
 * of keys (>= 1), or -1 with a sentence in err and the set unchanged (a
 * file with no key is refused: it would lock every client out). */
long srv_keys_load(srv_keys *k, const char *path, attn_error *err);

/* 1 when a set has been loaded (requests must then carry a key). */
int srv_keys_required(srv_keys *k);

/* 1 when `authorization` (the header's value, or NULL) is "Bearer " and a
 * key of the set; the scheme is matched without regard to case. */
int srv_keys_allow(srv_keys *k, const char *authorization);

#endif
