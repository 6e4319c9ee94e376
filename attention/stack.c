/*
 * stack.c — attn_compute_stack: L attention layers on the residual stream.
 *
 * Each layer is one batch of all the sequences through its weight set
 * (attn_batch_at, batch.c), so that a layer's numbers are what
 * attn_compute_batch gives for its inputs: both paths, the runner's split
 * and batch invariance hold layer by layer, and a one-layer stack is a
 * batch. The stack adds only where each layer's rows come from and go:
 *
 *   layer 0 reads the inputs' E; layer l > 0 reads E_l where layer l − 1
 *   wrote it, ping-pong between two buffers S[0] and S[1] whatever L:
 *   layer l < last writes S[(last − l) % 2], so that the last layer
 *   computed reads S[1] and writes S[0]. S[0] is the caller's final
 *   embeddings when asked for, the final delta (E_L − E_0, then computed
 *   in place) when only it is, else a residual stream; S[1] the final
 *   delta when both are asked for, else a stream. So a sequence takes two
 *   streams of its n × dm rows in the workspace, one fewer for each final
 *   output it borrows (which holds an earlier layer's E_l until the last
 *   layer writes it: on failure the final outputs hold nothing of use). The
 *   last layer computed writes its reported outputs as they are. A
 *   reported layer's embeddings are copied from S after its batch (n × dm,
 *   against the layer's O(n · dm · hd) of work). With hidden states there
 *   is no stream: each reported layer reads its own matrix and writes the
 *   caller's outputs, and the others are skipped.
 *
 * Memory: one block of the caller's workspace. Its first part is the
 * stack's (the layer's count attn_input and attn_output, then each
 * sequence's streams, n × dm rows 64-byte aligned each, then a rollout's
 * scratch, rollout.c, when the stack may compute one); the layers'
 * batches are carved after it, at an offset (attn_batch_at), and the block
 * is reserved once, before layer 0, for the largest layer's worst batch
 * (attn_batch_bytes_worst): a growth would drop the streams. So the
 * workspace grows with the largest layer and the batch's rows, never with
 * L, and attn_stack_workspace_need is what is reserved with no final
 * output to borrow (two streams a sequence), the most a call takes.
 *
 * Stop and errors: the runner's stop is asked before each layer, and by
 * the batch within it; a failing layer names itself (*failed_layer) and,
 * for ATTN_ERR_NONFINITE, its batch names the sequence.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attention/attention.h"
#include "attention/plan.h"

static int add_to(size_t *r, size_t b) {
    return __builtin_add_overflow(*r, b, r) ? -1 : 0;
}

static int mul_to(size_t *r, size_t a, size_t b) {
    return __builtin_mul_overflow(a, b, r) ? -1 : 0;
}

/* bytes rounded up to ATTN_WS_ALIGN; -1 on overflow */
static int round_to(size_t *r, size_t bytes) {
    if (bytes > SIZE_MAX - (ATTN_WS_ALIGN - 1)) return -1;
    *r = attn_slice_round(bytes);
    return 0;
}

float attn_weights_scale(const attn_weights *w) {
    return w->scale > 0.0f ? w->scale : (float)(1.0 / sqrt((double)w->d_head));
}

/* Whether two weight sets share dm, h, dh and g. */
static int same_shape(const attn_weights *a, const attn_weights *b) {
    const size_t ga = a->n_kv_heads ? a->n_kv_heads : a->n_heads;
    const size_t gb = b->n_kv_heads ? b->n_kv_heads : b->n_heads;
    return a->d_model == b->d_model && a->n_heads == b->n_heads && a->d_head == b->d_head &&
           ga == gb;
}

/* Whether the layers read a residual stream (rather than hidden states). */
static int streams(const attn_stack *st) {
    return !st->hidden_states && st->n_layers > 1;
}

/* Floats of one sequence's rows in a stream: n × dm, rounded to the alignment. */
static size_t stream_floats(const attn_input *in, size_t dm) {
    return attn_slice_round(in->n_tokens * dm * sizeof(float)) / sizeof(float);
}

/* The streams sequence i takes: two, less one for each final output whose
 * buffer it borrows (outs: the final outputs, or NULL). */
static size_t seq_streams(const attn_stack_output *outs, size_t i, const attn_stack *st) {
    if (!streams(st)) return 0;
    if (!outs) return 2;
    return 2 - (outs[i].embeddings != NULL) - (outs[i].delta != NULL);
}

/* Whether any final output asks for a rollout. */
static int rolls(const attn_stack_output *outs, size_t count) {
    for (size_t i = 0; outs && i < count; i++)
        if (outs[i].rollout) return 1;
    return 0;
}

/* The rollout's part of the block: its bookkeeping and each sequence's
 * scratch (rollout.c); -1 on overflow. */
static int rollout_bytes(size_t *bytes, const attn_input *ins, size_t count, const attn_stack *st) {
    size_t b = 0, seq_b, first_b, res_b;
    *bytes = 0;
    if (!st->rollout) return 0;
    if (mul_to(&seq_b, count, sizeof(attn_rollout_seq)) || round_to(&seq_b, seq_b) ||
        mul_to(&first_b, count + 1, sizeof(size_t)) || round_to(&first_b, first_b) ||
        mul_to(&res_b, count, sizeof(float *)) || round_to(&res_b, res_b) || add_to(&b, seq_b) ||
        add_to(&b, first_b) || add_to(&b, res_b))
        return -1;
    for (size_t i = 0; i < count; i++) {
        size_t floats, each;
        if (attn_rollout_floats(&floats, &ins[i], st->layers[0]) ||
            mul_to(&each, floats, sizeof(float)) || add_to(&b, each))
            return -1;
    }
    *bytes = b;
    return 0;
}

/* The stack's part of the block (*head: where the batches' part begins)
 * and the whole (*total), for the final outputs outs (NULL: none, the
 * most) and the worst layer outputs; -1 on overflow. */
static int stack_bytes(size_t *head, size_t *total, const attn_input *ins, size_t count,
                       const attn_stack_output *outs, const attn_stack *st) {
    size_t in_b, out_b, roll_b, res = 0;
    if (mul_to(&in_b, count, sizeof(attn_input)) || round_to(&in_b, in_b) ||
        mul_to(&out_b, count, sizeof(attn_output)) || round_to(&out_b, out_b) ||
        rollout_bytes(&roll_b, ins, count, st))
        return -1;
    const size_t dm = st->layers[0]->d_model;
    for (size_t i = 0; streams(st) && i < count; i++) {
        size_t rows;
        if (mul_to(&rows, ins[i].n_tokens, dm) || mul_to(&rows, rows, sizeof(float)) ||
            round_to(&rows, rows) || mul_to(&rows, rows, seq_streams(outs, i, st)) ||
            add_to(&res, rows))
            return -1;
    }
    *head = in_b;
    if (add_to(head, out_b) || add_to(head, res) || add_to(head, roll_b)) return -1;
    size_t most = 0;
    for (size_t l = 0; l < st->n_layers; l++) {
        size_t b;
        if (attn_batch_bytes_worst(&b, ins, count, st->layers[l])) return -1;
        if (b > most) most = b;
    }
    *total = *head;
    return add_to(total, most);
}

/* The rollout's part of the block, at `at` (rollout_bytes): each
 * sequence's record, the steps' room, the results, and the scratch. */
typedef struct rollout_part {
    attn_rollout_seq *seqs;
    size_t *first;
    float **results; /* count: the final outputs' rollout, or NULL */
} rollout_part;

static void rollout_carve(rollout_part *p, unsigned char *at, const attn_stack_output *outs,
                          const attn_input *ins, size_t count, const attn_stack *st) {
    p->seqs = (attn_rollout_seq *)(void *)at;
    at += attn_slice_round(count * sizeof *p->seqs);
    p->first = (size_t *)(void *)at;
    at += attn_slice_round((count + 1) * sizeof *p->first);
    p->results = (float **)(void *)at;
    at += attn_slice_round(count * sizeof *p->results);
    for (size_t i = 0; i < count; i++) {
        size_t floats = 0;
        p->results[i] = outs && outs[i].rollout ? outs[i].rollout : NULL;
        p->seqs[i].scratch = (float *)(void *)at;
        attn_rollout_floats(&floats, &ins[i], st->layers[0]);
        at += floats * sizeof(float);
    }
}

/* Sequence i's input to layer l, its embeddings E (the caller's) or its
 * hidden state. */
static void layer_input(attn_input *dst, const attn_input *in, const attn_stack *st, size_t l,
                        size_t i) {
    *dst = *in;
    dst->weights = st->layers[l];
    if (st->scales)
        dst->scale = st->scales[l] != 0.0f ? st->scales[l] : attn_weights_scale(st->layers[l]);
    if (st->hidden_states) dst->embeddings = st->hidden_states[i * st->n_layers + l];
}

/* The last layer computed: L − 1 when a final output is asked for, else
 * the last one reported; L when none is. */
static size_t last_layer(const attn_output *const *layer_outs, const attn_stack_output *outs,
                         size_t count, const attn_stack *st) {
    const size_t L = st->n_layers;
    if (rolls(outs, count)) return L - 1;
    for (size_t i = 0; outs && !st->hidden_states && i < count; i++)
        if (outs[i].delta || outs[i].embeddings) return L - 1;
    for (size_t l = L; l-- > 0;)
        if (layer_outs && layer_outs[l]) return l;
    return L;
}

/* Sequence i's two ping-pong buffers (top comment): its final outputs
 * (fin, or NULL) first, then its streams from *stream on, which moves past
 * those it takes (stream_floats each). */
static void seq_buffers(float *s[2], const attn_stack_output *fin, float **stream, size_t floats) {
    size_t k = 0;
    if (fin && fin->embeddings) s[k++] = fin->embeddings;
    if (fin && fin->delta) s[k++] = fin->delta;
    for (; k < 2; k++, *stream += floats)
        s[k] = *stream;
}

/* Where layer l's batch puts sequence i's results: its reported outputs
 * (rep, or none), ΔE and E_{l+1} redirected to the final outputs (fin, the
 * one-layer stack's) or to s (the ping-pong buffers; NULL without a
 * stream) when the stack needs them. */
static attn_output layer_output(const attn_output *rep, const attn_stack_output *fin,
                                float *const *s, size_t l, size_t last, const attn_stack *st) {
    attn_output o = {0};
    if (rep) o = *rep;
    if (st->hidden_states) return o;
    if (st->n_layers == 1) { /* the batch's own outputs: ΔE_0 is E_1 − E_0 */
        if (fin && fin->delta) o.delta = fin->delta;
        if (fin && fin->embeddings) o.embeddings = fin->embeddings;
    } else if (l < last) {
        o.embeddings = s[(last - l) % 2];
    } else if (fin && (fin->embeddings || fin->delta)) {
        o.embeddings = s[0]; /* the final embeddings, else the delta made in place */
    }
    return o;
}

/* After layer l's batch: the reported outputs the batch wrote elsewhere,
 * and on the last layer E_L − E_0. */
static void layer_finish(const attn_output *o, const attn_output *rep, const attn_stack_output *fin,
                         const attn_input *in, size_t dm, const attn_stack *st) {
    const size_t rows = in->n_tokens * dm;
    if (rep && rep->embeddings && rep->embeddings != o->embeddings)
        memcpy(rep->embeddings, o->embeddings, rows * sizeof(float));
    if (rep && rep->delta && rep->delta != o->delta)
        memcpy(rep->delta, o->delta, rows * sizeof(float));
    if (fin && fin->delta && st->n_layers > 1)
        for (size_t x = 0; x < rows; x++)
            fin->delta[x] = o->embeddings[x] - in->embeddings[x];
}

int attn_compute_stack(const attn_output *const *layer_outs, const attn_stack_output *outs,
                       attn_workspace *ws, const attn_input *ins, size_t count,
                       const attn_stack *st, const attn_runner *runner, attn_error *err,
                       size_t *failed, size_t *failed_layer) {
    const size_t L = st->n_layers;
    if (failed) *failed = count;
    if (failed_layer) *failed_layer = L;
    if (count == 0 || L == 0) return 0;
    for (size_t l = 1; l < L; l++)
        if (!same_shape(st->layers[l], st->layers[0])) {
            if (failed_layer) *failed_layer = l;
            return attn_error_set(err, 0, ATTN_ERR_NOMEM, "",
                                  "layer %zu's d_model, heads, d_head or K/V heads differ from "
                                  "layer 0's",
                                  l);
        }
    const int rolling = rolls(outs, count);
    for (size_t i = 0; rolling && i < count; i++)
        if (!st->rollout || ins[i].context)
            return attn_error_set(err, 0, ATTN_ERR_NOMEM, "",
                                  "a rollout needs stack.rollout set and self-attention");
    const size_t last = last_layer(layer_outs, outs, count, st);
    if (last == L) return 0;
    /* final outputs are borrowed only when the last layer is computed */
    const attn_stack_output *fins = outs && last == L - 1 && !st->hidden_states ? outs : NULL;
    size_t head, total;
    if (stack_bytes(&head, &total, ins, count, fins, st))
        return attn_fail_error(err, ATTN_FAIL_NOMEM);
    unsigned char *block = attn_workspace_reserve(ws, total);
    if (!block) return attn_fail_error(err, ATTN_FAIL_NOMEM);
    attn_input *lin = (attn_input *)(void *)block;
    attn_output *lout = (attn_output *)(void *)(block + attn_slice_round(count * sizeof *lin));
    float *stream =
        (float *)(void *)((unsigned char *)lout + attn_slice_round(count * sizeof *lout));
    /* the rollout's part ends the stack's */
    size_t roll_b = 0;
    rollout_part roll = {0};
    if (rolling && (rollout_bytes(&roll_b, ins, count, st) == 0))
        rollout_carve(&roll, block + head - roll_b, outs, ins, count, st);
    const size_t dm = st->layers[0]->d_model;
    for (size_t l = 0; l <= last; l++) {
        const attn_output *reps = layer_outs ? layer_outs[l] : NULL;
        if (st->hidden_states && !reps && !rolling) continue;
        if (runner && runner->stop && runner->stop(runner->ctx)) {
            if (failed_layer) *failed_layer = l;
            return attn_fail_error(err, ATTN_FAIL_STOPPED);
        }
        float *next = stream;
        for (size_t i = 0; i < count; i++) {
            const attn_stack_output *fin = fins ? &fins[i] : NULL;
            float *s[2] = {NULL, NULL};
            if (streams(st)) seq_buffers(s, fin, &next, stream_floats(&ins[i], dm));
            layer_input(&lin[i], &ins[i], st, l, i);
            if (streams(st) && l > 0) lin[i].embeddings = s[(last - l + 1) % 2];
            lout[i] = layer_output(reps ? &reps[i] : NULL, l == L - 1 ? fin : NULL, s, l, last, st);
            if (rolling && roll.results[i]) attn_rollout_widen(&roll.seqs[i], &lin[i], &lout[i]);
        }
        size_t f;
        int rc = attn_batch_at(lout, ws, head, lin, count, runner, &f);
        if (rc) {
            if (failed_layer) *failed_layer = l;
            if (failed && rc == ATTN_FAIL_NONFINITE) *failed = f;
            return attn_fail_error(err, rc);
        }
        for (size_t i = 0; i < count; i++) {
            const attn_stack_output *fin =
                outs && l == L - 1 && !st->hidden_states ? &outs[i] : NULL;
            layer_finish(&lout[i], reps ? &reps[i] : NULL, fin, &ins[i], dm, st);
            if (rolling && roll.results[i]) attn_rollout_pick(&roll.seqs[i], &lout[i]);
        }
        if (rolling &&
            (rc = attn_rollout_step(roll.seqs, count, l, L, roll.results, roll.first, runner))) {
            if (failed_layer) *failed_layer = l;
            return attn_fail_error(err, rc);
        }
    }
    return 0;
}

double attn_stack_flops(const attn_input *ins, size_t count, const attn_stack *st) {
    double sum = 0.0;
    for (size_t l = 0; l < st->n_layers; l++)
        for (size_t i = 0; i < count; i++) {
            attn_input in = ins[i];
            in.weights = st->layers[l];
            sum += attn_input_flops(&in);
        }
    for (size_t i = 0; st->rollout && i < count; i++)
        sum += attn_rollout_flops(ins[i].n_tokens, st->layers[0]->n_heads, st->n_layers);
    return sum;
}

size_t attn_stack_workspace_need(const attn_input *ins, size_t count, const attn_stack *st) {
    if (count == 0 || st->n_layers == 0) return 0;
    size_t head, total;
    return stack_bytes(&head, &total, ins, count, NULL, st) ? SIZE_MAX : total;
}
