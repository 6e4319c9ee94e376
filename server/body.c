/*
 * body.c — a body's copy grows with what arrives, reserved from the budget
 * as it grows (body.h).
 */
#include "server/body.h"

#include <stdlib.h>
#include <string.h>

#include "api/buffer.h"

size_t srv_budget_room(srv_budget *b) {
    return b->max - atomic_load(&b->used);
}

/* Takes n more bytes of the budget: 0, or -1 (and nothing taken) when it
 * cannot hold them. A CAS loop, so that two connections can never both
 * take the last bytes. */
static int budget_take(srv_budget *b, size_t n) {
    size_t cur = atomic_load(&b->used);
    do {
        if (n > b->max - cur) return -1;
    } while (!atomic_compare_exchange_weak(&b->used, &cur, cur + n));
    return 0;
}

size_t srv_body_first_piece(size_t declared) {
    return declared && declared < SRV_BODY_FIRST_PIECE ? declared : SRV_BODY_FIRST_PIECE;
}

void srv_body_init(srv_body *b, srv_budget *budget, size_t max, size_t declared) {
    *b = (srv_body){.declared = declared, .max = max, .budget = budget};
}

void srv_body_free(srv_body *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    if (b->reserved) atomic_fetch_sub(&b->budget->used, b->reserved);
    b->reserved = 0;
}

static void body_drop(srv_body *b, srv_body_state why) {
    srv_body_free(b);
    b->state = why;
}

void srv_body_append(srv_body *b, const char *data, size_t n) {
    if (b->state != SRV_BODY_OK) return;
    if (n > b->max - b->len) {
        body_drop(b, SRV_BODY_TOO_LARGE);
        return;
    }
    if (b->len + n > b->cap) {
        /* Doubling from the first piece, never past the limit, nor past
         * the declared length: a client that announces a large body and
         * sends little costs little. */
        size_t need = b->len + n;
        size_t cap = b->cap ? b->cap : SRV_BODY_FIRST_PIECE;
        while (cap < need)
            cap = cap > b->max / 2 ? b->max : cap * 2;
        if (b->declared >= need && cap > b->declared) cap = b->declared;
        if (cap > b->reserved) {
            if (budget_take(b->budget, cap - b->reserved) != 0) {
                body_drop(b, SRV_BODY_OVERLOADED);
                return;
            }
            b->reserved = cap;
        }
        char *grown = realloc(b->data, cap);
        if (!grown) {
            body_drop(b, SRV_BODY_NO_MEMORY);
            return;
        }
        api_advise_huge_pages(grown, cap);
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
}
