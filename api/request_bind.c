/*
 * request_bind.c — checking one sequence's record against its weights, its
 * outputs, and the record's destructor.
 *
 * api_request_bind is the one place for every rule of a sequence that
 * needs the weights, whether they came inline or from the model store
 * (call.c calls it for both): d_model agreement, the identity rule for a
 * missing w_o, a context and the variants it excludes (cross-attention
 * needs one; RoPE, ALiBi and windows need token positions a context does
 * not have), the default mask and scale, on the attn_input the engine
 * will read. The range of select_heads is checked once for the call, on
 * its head record (api_request_bind_heads). The limits over the call and
 * the output buffers are call.c's: the limits hold before anything they
 * bound is allocated.
 *
 * A record that sends tokens without embeddings has its tokens looked up
 * and their positions checked first, before anything else is: d_model is
 * then the model's. The rows found are kept, and its embeddings (token row
 * plus position row) are made from them once every limit has held.
 */
#include "api/request_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/buffer.h"
#include "api/json_path.h"

/* Numbers of output `bit` for hs heads, n tokens and m keys; -1 when it
 * overflows. */
static int output_count(unsigned bit, size_t hs, const attn_weights *w, size_t n, size_t m,
                        size_t *count) {
    size_t per_head;

    switch (bit) {
    case API_RETURN_Q:
    case API_RETURN_Q_RAW:
    case API_RETURN_HEAD_OUTPUTS:
        if (api_size_mul(n, w->d_head, &per_head) < 0) return -1;
        return api_size_mul(hs, per_head, count);
    case API_RETURN_K:
    case API_RETURN_V:
    case API_RETURN_K_RAW:
        if (api_size_mul(m, w->d_head, &per_head) < 0) return -1;
        return api_size_mul(hs, per_head, count);
    case API_RETURN_SCORES:
    case API_RETURN_PATTERNS:
        if (api_size_mul(n, m, &per_head) < 0) return -1;
        return api_size_mul(hs, per_head, count);
    case API_RETURN_ROLLOUT: return api_size_mul(n, n, count);
    case API_RETURN_NORMED: /* none for a layer without a norm */
        if (w->norm.type == ATTN_NORM_NONE) return *count = 0, 0;
        return api_size_mul(n, w->d_model, count);
    default: /* delta, embeddings */ return api_size_mul(n, w->d_model, count);
    }
}

int api_request_bind_heads(api_request *req, const attn_weights *weights, attn_error *err) {
    char path[API_PATH_MAX];
    unsigned char *seen;
    size_t h = weights->n_heads, hs = req->select_given ? req->n_select : h;

    if (h == 0 || weights->d_head == 0)
        return attn_error_set(err, 500, "internal_error", "", "the weights have no heads");
    /* Which heads are taken: on the stack for the models of these sizes. */
    unsigned char seen_here[256];
    req->heads_owned = malloc((hs ? hs : 1) * sizeof *req->heads_owned);
    req->heads = req->heads_owned;
    seen = h <= sizeof seen_here ? memset(seen_here, 0, h) : calloc(h, 1);
    if (req->heads_owned == NULL || seen == NULL) {
        if (seen != seen_here) free(seen);
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the request");
    }
    for (size_t i = 0; i < hs; i++) {
        double d = req->select_given ? req->select[i] : (double)i;
        api_path_index(path, sizeof path, "/select_heads", i);
        if (d < 0 || d >= (double)h) {
            if (seen != seen_here) free(seen);
            return attn_error_set(err, 422, "out_of_range", path,
                                  "select_heads[%zu] = %.17g is not a head index; the model has "
                                  "heads 0 to %zu",
                                  i, d, h - 1);
        }
        req->heads_owned[i] = (size_t)d;
        if (seen[req->heads_owned[i]]) {
            if (seen != seen_here) free(seen);
            return attn_error_set(err, 422, "out_of_range", path,
                                  "select_heads[%zu] = %zu repeats an earlier index", i,
                                  req->heads_owned[i]);
        }
        seen[req->heads_owned[i]] = 1;
    }
    if (seen != seen_here) free(seen);
    req->n_heads = hs;
    return 0;
}

/* Output buffers carved from req->out_ws start at multiples of this. */
#define OUT_ALIGN 64

/* The outputs a record writes itself: for a stack's head record only the
 * stack's own (delta, embeddings), the rest being the layers'. */
static unsigned own_returns(const api_request *req) {
    return api_request_is_stack(req) ? api_request_stack_returns(req) : req->returns;
}

/* The bytes of each output in `returns` (0 for the others) and of all of
 * them, each rounded up to OUT_ALIGN, for hs heads of w, n tokens and m
 * keys. */
static int outputs_sizes_of(unsigned returns, const attn_weights *w, size_t hs, size_t n, size_t m,
                            size_t bytes[API_OUTPUTS], size_t *total, attn_error *err) {
    *total = 0;
    for (unsigned i = 0; i < API_OUTPUTS; i++) {
        size_t count;
        bytes[i] = 0;
        if (!(returns & (1u << i))) continue;
        if (output_count(1u << i, hs, w, n, m, &count) < 0 ||
            count > (SIZE_MAX - OUT_ALIGN) / sizeof(float) / API_OUTPUTS)
            return attn_error_set(err, 503, "out_of_memory", "", "the outputs are too large");
        bytes[i] = count * sizeof(float); /* 0: no heads selected, nothing to compute */
        *total += (bytes[i] + OUT_ALIGN - 1) / OUT_ALIGN * OUT_ALIGN;
    }
    return 0;
}

static int outputs_sizes(const api_request *req, size_t bytes[API_OUTPUTS], size_t *total,
                         attn_error *err) {
    return outputs_sizes_of(own_returns(req), req->input.weights, req->input.n_heads_out,
                            req->n_tokens, api_request_kv_rows(req), bytes, total, err);
}

/* Points the outputs into `block` (zeroed, of outputs_sizes' total), or
 * callocs each when block is NULL. */
static int outputs_place(api_request *req, const size_t bytes[API_OUTPUTS], unsigned char *block,
                         attn_error *err) {
    float **slots[API_OUTPUTS] = {
        &req->output.q,      &req->output.k,          &req->output.v,
        &req->output.scores, &req->output.patterns,   &req->output.head_outputs,
        &req->output.delta,  &req->output.embeddings, &req->output.q_raw,
        &req->output.k_raw,  &req->rollout,           &req->output.normed};
    for (unsigned i = 0; i < API_OUTPUTS; i++) {
        if (bytes[i] == 0) continue;
        if (block) {
            req->out_buffers[i] = (float *)(void *)block;
            block += (bytes[i] + OUT_ALIGN - 1) / OUT_ALIGN * OUT_ALIGN;
        } else {
            req->out_buffers[i] = calloc(bytes[i] / sizeof(float), sizeof(float));
            if (req->out_buffers[i] == NULL)
                return attn_error_set(err, 503, "out_of_memory", "", "no memory for the outputs");
            api_advise_huge_pages(req->out_buffers[i], bytes[i]);
        }
        *slots[i] = req->out_buffers[i];
    }
    return 0;
}

/* The bytes of each output of a listed layer l of a stack's sequence. */
static int layer_sizes(const api_request *req, size_t l, size_t bytes[API_OUTPUTS], size_t *total,
                       attn_error *err) {
    return outputs_sizes_of(req->returns & API_RETURN_LAYER, req->layers->weights[l],
                            req->input.n_heads_out, req->n_tokens, api_request_kv_rows(req), bytes,
                            total, err);
}

/* Whether the sequence's listed layers have outputs of their own: in the
 * stack's form (else one layer's outputs are the record's). */
static int layers_own_outputs(const api_request *req) {
    return req->layers && req->layers->outs_rec && api_request_is_stack(req);
}

int api_request_outputs_bytes(const api_request *req, size_t *total, attn_error *err) {
    size_t bytes[API_OUTPUTS], each;
    if (outputs_sizes(req, bytes, total, err) < 0) return -1;
    for (size_t l = 0; layers_own_outputs(req) && l < req->layers->n; l++)
        if (req->layers->outs_rec[l] &&
            (layer_sizes(req, l, bytes, &each, err) < 0 || api_size_add(*total, each, total) < 0))
            return attn_error_set(err, 503, "out_of_memory", "", "the outputs are too large");
    return 0;
}

/* The listed layers' outputs, carved from `block` past the record's own
 * (or one calloc each), and the stack's view of them. */
static int layers_place(api_request *req, attn_workspace *owner, unsigned char *block,
                        attn_error *err) {
    api_layers *ly = req->layers;
    size_t bytes[API_OUTPUTS], total;
    if (!ly || !ly->outs_rec) return 0;
    if (!api_request_is_stack(req)) { /* one layer answered as before, for its rollout */
        ly->outs[0] = &req->output;
        return 0;
    }
    for (size_t l = 0; l < ly->n; l++) {
        api_request *r = ly->outs_rec[l];
        if (!r) continue;
        if (layer_sizes(req, l, bytes, &total, err) < 0) return -1;
        r->out_ws = owner;
        if (outputs_place(r, bytes, block && total ? block : NULL, err) < 0) return -1;
        if (block) block += total;
        ly->outs[l] = &r->output;
    }
    return 0;
}

int api_request_outputs_place(api_request *req, attn_workspace *owner, unsigned char *block,
                              attn_error *err) {
    size_t bytes[API_OUTPUTS], total;
    if (!req->bound || req->outputs_made)
        return attn_error_set(err, 500, "internal_error", "",
                              "outputs are made once, for a bound request");
    req->out_ws = owner;
    req->outputs_made = 1;
    if (outputs_sizes(req, bytes, &total, err) < 0 ||
        outputs_place(req, bytes, total ? block : NULL, err) < 0)
        return -1;
    return layers_place(req, owner, block ? block + total : NULL, err);
}

/* A context against the weights: its width, and what it excludes. The
 * variants are the weights', so a model's are named at /context (the
 * request cannot change them) and inline ones at their field. */
static int bind_context(const api_request *req, const attn_weights *w, attn_error *err) {
    char at[API_PATH_MAX];
    api_request_path(req, "context", at, sizeof at);
    if (req->context == NULL) {
        if (w->w_kv)
            return attn_error_set(err, 422, "invalid_combination", at,
                                  "the model is cross-attention: its keys and values come from "
                                  "context (n_context × d_context = %zu numbers a row), which the "
                                  "request does not give",
                                  w->d_context);
        return 0;
    }
    size_t dc = w->w_kv ? w->d_context : w->d_model;
    if (req->d_context != dc)
        return attn_error_set(err, 422, "dimension_mismatch", at,
                              "context rows have %zu numbers, expected %s = %zu", req->d_context,
                              w->w_kv ? "the weights' d_context"
                                      : "d_model (self-attention "
                                        "weights project a context "
                                        "as they do embeddings)",
                              dc);
    static const char *const names[] = {"rope", "alibi", "window", "chunk"};
    int has[] = {w->rope.dims != 0, w->alibi != NULL, w->window != 0, w->chunk != 0};
    for (size_t i = 0; i < 4; i++) {
        char path[API_PATH_MAX];
        if (!has[i]) continue;
        api_path_key(path, sizeof path, "/weights", names[i]);
        /* the contract names chunk's fault at the context, inline too */
        const int at_context = req->model || i == 3;
        return attn_error_set(err, 422, "invalid_combination", at_context ? at : path,
                              "%s%s needs the positions of keys, which context rows do not "
                              "have; cross-attention takes no %s",
                              req->model ? "the model's " : "weights.", names[i], names[i]);
    }
    return 0;
}

/* The JSON text of the `len` bytes at s for a message: escaped, at most
 * 32 bytes of it (cut on a UTF-8 boundary, then "…"). */
static const char *token_text(const char *s, size_t len, char *buf, size_t cap) {
    size_t used = 0, i = 0, most = len > 32 ? 32 : len;
    if (most < len)
        while (most > 0 && ((unsigned char)s[most] & 0xC0) == 0x80)
            most--; /* s[most] would continue a character */
    buf[used++] = '"';
    for (; i < most && used + 8 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            buf[used++] = '\\';
            buf[used++] = (char)c;
        } else if (c < 0x20) {
            used += (size_t)snprintf(buf + used, cap - used, "\\u%04x", c);
        } else {
            buf[used++] = (char)c;
        }
    }
    buf[used++] = '"';
    if (i < len && used + 4 < cap) {
        memcpy(buf + used, "…", 3);
        used += 3;
    }
    buf[used] = '\0';
    return buf;
}

/* The position of token i: positions[i], or i. */
static size_t token_position(const api_request *req, size_t i) {
    return req->positions ? req->positions[i] : i;
}

/* Checks that every token of a tokens_only request is in the vocabulary and
 * every position in its table, and keeps each token's row. */
static int bind_tokens(api_request *req, const api_vocabulary *vocab, attn_error *err) {
    char at[API_PATH_MAX], path[API_PATH_MAX], text[224]; /* 32 bytes, each up to \u00XX */
    const char *name = req->model ? json_string_value(req->model) : "";
    if (vocab == NULL || vocab->size == 0) {
        api_request_path(req, "embeddings", at, sizeof at);
        return attn_error_set(err, 422, "no_vocabulary", at,
                              "model %s has no vocabulary: send embeddings", name);
    }
    api_request_path(req, "tokens", at, sizeof at);
    req->token_rows = malloc((req->n_tokens ? req->n_tokens : 1) * sizeof *req->token_rows);
    if (req->token_rows == NULL)
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the request");
    for (size_t i = 0; i < req->n_tokens; i++) {
        const json_t *t = json_array_get(req->tokens, i);
        const char *s = json_string_value(t);
        size_t len = json_string_length(t);
        long row = vocab->lookup(vocab->lookup_ctx, s, len);
        req->token_rows[i] = row;
        if (row < 0 || (size_t)row >= vocab->size) {
            api_path_index(path, sizeof path, at, i);
            return attn_error_set(err, 422, "unknown_token", path,
                                  "tokens[%zu] = %s is not in the vocabulary of model %s", i,
                                  token_text(s, len, text, sizeof text), name);
        }
        size_t p = token_position(req, i);
        if (vocab->position_embeddings && p >= vocab->n_positions) {
            if (req->positions) {
                char pos[API_PATH_MAX];
                api_request_path(req, "positions", pos, sizeof pos);
                api_path_index(path, sizeof path, pos, i);
                return attn_error_set(err, 422, "position_out_of_range", path,
                                      "positions[%zu] = %zu is past the position table of model "
                                      "%s, which has %zu positions (0 to %zu)",
                                      i, p, name, vocab->n_positions, vocab->n_positions - 1);
            }
            api_path_index(path, sizeof path, at, i);
            return attn_error_set(err, 422, "position_out_of_range", path,
                                  "tokens[%zu] is at position %zu, past the position table of "
                                  "model %s, which has %zu positions: send at most %zu tokens, "
                                  "or positions",
                                  i, p, name, vocab->n_positions, vocab->n_positions);
        }
    }
    return 0;
}

size_t api_request_made_bytes(const api_request *req) {
    /* n ≤ max_tokens and d_model ≤ max_d_model when this is asked: no overflow. */
    return req->tokens_only && !req->embeddings ? req->n_tokens * req->d_model * sizeof(float) : 0;
}

int api_request_make_embeddings(api_request *req, const api_vocabulary *vocab, attn_error *err) {
    size_t n = req->n_tokens, dm = req->d_model, count;
    if (!req->tokens_only || req->embeddings) return 0;
    if (api_size_mul(n, dm, &count) < 0 ||
        (req->embeddings = malloc((count ? count : 1) * sizeof(float))) == NULL)
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the embeddings");
    api_advise_huge_pages(req->embeddings, count * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        const float *tok = vocab->token_embeddings + (size_t)req->token_rows[i] * dm;
        float *e = req->embeddings + i * dm;
        if (vocab->position_embeddings) {
            /* One float32 addition per element, as the contract says. */
            const float *pos = vocab->position_embeddings + token_position(req, i) * dm;
            for (size_t j = 0; j < dm; j++)
                e[j] = tok[j] + pos[j];
        } else {
            memcpy(e, tok, dm * sizeof(float));
        }
    }
    req->input.embeddings = req->embeddings;
    return 0;
}

int api_request_bind(api_request *req, const attn_weights *weights, attn_mask_kind default_mask,
                     const api_vocabulary *vocab, const api_request *head, const api_limits *limits,
                     attn_error *err) {
    size_t hs = head->n_heads, g;

    if (req->tokens_only) {
        if (bind_tokens(req, vocab, err) < 0) return -1;
        /* The rows the tokens stand for are held to the width limit as sent
         * rows are (decode checks those). */
        char at[API_PATH_MAX];
        api_request_path(req, "tokens", at, sizeof at);
        if (api_check_width(at, "the model's (which the tokens stand for)", "d_model",
                            weights->d_model, limits, err) < 0)
            return -1;
        req->d_model = weights->d_model;
    }
    if (weights->d_model != req->d_model) {
        char field[API_PATH_MAX], at[API_PATH_MAX];
        const char *what = !req->embeddings && req->n_hidden ? "hidden_states" : "embeddings";
        api_request_path(req, what, field, sizeof field);
        if (!req->embeddings && req->n_hidden)
            api_path_index(at, sizeof at, field, 0);
        else
            memcpy(at, field, sizeof at);
        return attn_error_set(err, 422, "dimension_mismatch", at,
                              "%s rows have %zu numbers, expected the model's d_model = %zu", what,
                              req->d_model, weights->d_model);
    }
    if (api_request_check_hidden_width(req, weights->d_model, err) < 0) return -1;
    if (weights->w_o == NULL && weights->n_heads * weights->d_head != weights->d_model)
        return attn_error_set(err, 422, "dimension_mismatch", req->model ? "/model" : "/weights",
                              "the weights have no w_o, which needs n_heads · d_head = d_model");
    g = weights->n_kv_heads ? weights->n_kv_heads : weights->n_heads;
    if (weights->n_heads % g != 0)
        return attn_error_set(err, 500, "internal_error", "",
                              "the weights' K/V heads do not divide their heads");
    if (bind_context(req, weights, err) < 0) return -1;
    req->heads = head->heads;
    if (!req->mask_given) {
        if (default_mask == ATTN_MASK_CUSTOM)
            return attn_error_set(err, 500, "internal_error", "",
                                  "a model's default mask cannot be custom");
        /* Context rows come in no order: causal has no meaning there. */
        req->mask_kind = req->context ? ATTN_MASK_NONE : default_mask;
    }
    /* The request's scale, else the weight set's, else 1/sqrt(d_head). */
    if (!req->scale_given)
        req->scale =
            weights->scale > 0.0f ? weights->scale : (float)(1.0 / sqrt((double)weights->d_head));

    req->input = (attn_input){
        .weights = weights,
        /* Without embeddings the stack reads only hidden states: E is
         * then a stand-in the engine does not read. */
        .embeddings = req->embeddings || !req->n_hidden ? req->embeddings : req->hidden[0],
        .n_tokens = req->n_tokens,
        .mask = {req->mask_kind, req->mask_kind == ATTN_MASK_CUSTOM ? req->mask_allowed : NULL},
        .scale = req->scale,
        .heads = hs ? req->heads : NULL,
        .n_heads_out = hs,
        .positions = req->positions,
        .context = req->context,
        .n_context = req->context ? req->n_context : 0,
    };
    req->bound = 1;
    return 0;
}

/* The sequences' hidden states: in every sequence or in none, L each. */
static int check_hidden(api_request *const *seqs, size_t count, size_t L, attn_error *err) {
    char at[API_PATH_MAX];
    size_t with = 0;
    for (size_t i = 0; i < count; i++) {
        const api_request *r = seqs[i];
        with += r->n_hidden != 0;
        api_request_path(r, "hidden_states", at, sizeof at);
        if (r->n_hidden && r->n_hidden != L)
            return attn_error_set(err, 422, "dimension_mismatch", at,
                                  "hidden_states has %zu matrices, expected one per layer: %zu",
                                  r->n_hidden, L);
    }
    for (size_t i = 0; with && i < count; i++)
        if (!seqs[i]->n_hidden) {
            api_request_path(seqs[i], "hidden_states", at, sizeof at);
            return attn_error_set(err, 422, "invalid_combination", at,
                                  "hidden_states is in %zu of the %zu sequences; send it in "
                                  "every sequence or in none",
                                  with, count);
        }
    return with != 0;
}

/* The `layers` list (default: all), checked against L, into ly->list. */
static int bind_list(api_layers *ly, const api_request *head, attn_error *err) {
    char path[API_PATH_MAX];
    const size_t L = ly->n, k = head->layers_given ? head->n_layers_sent : L;
    unsigned char *seen = calloc(L, 1);
    ly->list = malloc((k ? k : 1) * sizeof *ly->list);
    if (!seen || !ly->list) {
        free(seen);
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the request");
    }
    int rc = 0;
    for (size_t i = 0; i < k && rc == 0; i++) {
        double d = head->layers_given ? head->layers_sent[i] : (double)i;
        api_path_index(path, sizeof path, "/layers", i);
        if (d < 0 || d >= (double)L) {
            rc = attn_error_set(err, 422, "out_of_range", path,
                                "layers[%zu] = %.17g is not a layer index; the model has layers "
                                "0 to %zu",
                                i, d, L - 1);
        } else if (seen[(size_t)d]) {
            rc = attn_error_set(err, 422, "out_of_range", path,
                                "layers[%zu] = %zu repeats an earlier index", i, (size_t)d);
        } else {
            seen[(size_t)d] = 1;
            ly->list[i] = (size_t)d;
        }
    }
    free(seen);
    ly->n_list = k;
    return rc;
}

/* A record for each listed layer's outputs of sequence `seq`, in its own
 * view of the stack (the head's, for a call of one sequence). */
static int layers_view(api_request *seq, const api_request *head, attn_error *err) {
    const api_layers *hl = head->layers;
    api_layers *ly = seq->layers;
    if (!ly) {
        if (!(ly = seq->layers = calloc(1, sizeof *ly)))
            return attn_error_set(err, 503, "out_of_memory", "", "no memory for the request");
        *ly = (api_layers){.n = hl->n,
                           .weights = hl->weights,
                           .scales = hl->scales,
                           .list = hl->list,
                           .n_list = hl->n_list,
                           .borrowed = 1};
        seq->layers_given = head->layers_given;
    }
    ly->outs_rec = calloc(ly->n, sizeof *ly->outs_rec);
    ly->outs = calloc(ly->n, sizeof *ly->outs);
    if (!ly->outs_rec || !ly->outs)
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the request");
    for (size_t i = 0; i < ly->n_list; i++)
        if (!(ly->outs_rec[ly->list[i]] = calloc(1, sizeof(api_request))))
            return attn_error_set(err, 503, "out_of_memory", "", "no memory for the request");
    return 0;
}

int api_request_bind_layers(api_request *head, const api_model_ref *m, api_request *const *seqs,
                            size_t count, attn_error *err) {
    char path[API_PATH_MAX];
    api_layers *ly = head->layers;
    const size_t model_layers = m->layers && m->n_layers > 1 ? m->n_layers : 1;
    const size_t L = ly ? ly->n : model_layers;
    const int rollout = (head->returns & API_RETURN_ROLLOUT) != 0;
    const int hidden = check_hidden(seqs, count, L, err);
    if (hidden < 0) return -1;
    if (L == 1 && !head->layers_given && !hidden && !rollout) return 0; /* one layer, as before */
    for (size_t i = 0; rollout && i < count; i++)
        if (seqs[i]->context) {
            api_path_index(path, sizeof path, head->return_field ? head->return_field : "/return",
                           head->rollout_at);
            return attn_error_set(err, 422, "invalid_value", path,
                                  "rollout follows attention over the tokens themselves; a "
                                  "request with a context (cross-attention) has none");
        }
    if (!ly && !(ly = head->layers = calloc(1, sizeof *ly)))
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the request");
    ly->n = L;
    ly->weights = calloc(L, sizeof *ly->weights);
    ly->scales = calloc(L, sizeof *ly->scales);
    if (!ly->weights || !ly->scales)
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the request");
    for (size_t l = 0; l < L; l++) {
        const attn_weights *w = ly->recs           ? &ly->recs[l]->inline_weights
                                : model_layers > 1 ? m->layers[l]
                                                   : m->weights;
        ly->weights[l] = w;
        if (l == 0) continue; /* bound with the sequences */
        /* The rules of a sequence against a layer's weights, as for layer 0
         * (d_model, the heads and a missing w_o's identity: decode checked
         * them). */
        for (size_t i = 0; i < count; i++)
            if (bind_context(seqs[i], w, err) < 0) {
                api_error_in_layer(err, l);
                return -1;
            }
    }
    if (bind_list(ly, head, err) < 0) return -1;
    for (size_t i = 0; i < count; i++)
        if (layers_view(seqs[i], head, err) < 0) return -1;
    ly->computed = 1;
    ly->stack = (attn_stack){.layers = ly->weights,
                             .n_layers = L,
                             .scales = head->scale_given ? NULL : ly->scales,
                             .rollout = rollout};
    return 0;
}

void api_request_free(api_request *req) {
    if (req == NULL) return;
    json_decref(req->model);
    json_decref(req->tokens);
    json_decref(req->context_tokens);
    free(req->embeddings);
    free(req->positions);
    free(req->context);
    free(req->mask_allowed);
    free(req->select);
    free(req->w_qkv);
    free(req->b_qkv);
    free(req->w_o);
    free(req->b_o);
    free(req->w_kv);
    free(req->b_kv);
    free(req->alibi);
    free(req->rope_factors);
    free(req->norms);
    free(req->sinks);
    free(req->heads_owned);
    free(req->token_rows);
    free(req->layers_sent);
    for (size_t l = 0; l < req->n_hidden; l++)
        free(req->hidden[l]);
    free(req->hidden);
    if (req->layers) {
        api_layers *ly = req->layers;
        for (size_t l = 0; l < ly->n; l++) {
            if (ly->recs) api_request_free(ly->recs[l]);
            if (ly->outs_rec) api_request_free(ly->outs_rec[l]);
        }
        free(ly->recs);
        if (!ly->borrowed) {
            free(ly->weights);
            free(ly->scales);
            free(ly->list);
        }
        free(ly->outs_rec);
        free(ly->outs);
        free(ly);
    }
    if (!req->out_ws)
        for (size_t i = 0; i < API_OUTPUTS; i++)
            free(req->out_buffers[i]);
    free(req);
}
