/*
 * batch.c — attn_compute_batch: many sequences through one weight set.
 *
 * This first form computes the sequences one after the other, each by
 * attn_compute_with: invariant by construction, and the reference the
 * stacked form is tested against.
 */
#include <stdint.h>

#include "attention/attention.h"

int attn_compute_batch(const attn_output *outs, attn_workspace *ws, const attn_input *ins,
                       size_t count, const attn_runner *runner, attn_error *err, size_t *failed) {
    if (failed) *failed = count;
    for (size_t i = 0; i < count; i++) {
        if (attn_compute_with(&outs[i], ws, &ins[i], runner, err) < 0) {
            if (failed && err && err->code == ATTN_ERR_NONFINITE) *failed = i;
            return -1;
        }
    }
    return 0;
}

double attn_batch_flops(const attn_input *ins, size_t count) {
    double sum = 0;
    for (size_t i = 0; i < count; i++)
        sum += attn_input_flops(&ins[i]);
    return sum;
}

size_t attn_batch_workspace_need(const attn_input *ins, size_t count) {
    size_t most = 0;
    for (size_t i = 0; i < count; i++) {
        size_t need = attn_input_workspace_need(&ins[i]);
        if (need > most) most = need;
    }
    return most;
}
