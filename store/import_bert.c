/*
 * import_bert.c — BERT (import_internal.h): [bert.]encoder.layer.L.
 * attention.self.{query,key,value} and attention.output.dense, weights and
 * biases, all required. nn.Linear stores W [out = d, in = d] for
 * y = x·Wᵀ + b, so the weights are transposed:
 *
 *   w_qkv[r, b·d + c] = W_b[c, r]    r, c < d; b = 0, 1, 2 for q, k, v
 *   b_qkv[b·d + c]    = bias_b[c]
 *   w_o[r, c]         = dense[c, r]
 *
 * config.json: model_type "bert", num_attention_heads. Mask none.
 *
 * No norm is written: BERT normalises after the attention, LayerNorm(E +
 * dense(Z)) (BertSelfOutput), so its attention reads the hidden state as it
 * is and our patterns are its patterns. That LayerNorm of the residual sum
 * is not the engine's E + post_norm(ΔE): `embeddings` are E + dense(Z), not
 * BERT's next hidden state.
 */
#include <stdint.h>
#include <string.h>

#include "store/import_internal.h"

#define BERT_ANCHOR ".attention.self.query.weight"
#define BERT_LINEAR "[d_model, d_model] (nn.Linear)"

enum { BERT_W_Q, BERT_B_Q, BERT_W_K, BERT_B_K, BERT_W_V, BERT_B_V, BERT_W_O, BERT_B_O };

static const import_part bert_parts[] = {
    [BERT_W_Q] = {BERT_ANCHOR, 2, {1, 1}, BERT_LINEAR},
    [BERT_B_Q] = {".attention.self.query.bias", 1, {1, 0}, "[d_model]"},
    [BERT_W_K] = {".attention.self.key.weight", 2, {1, 1}, BERT_LINEAR},
    [BERT_B_K] = {".attention.self.key.bias", 1, {1, 0}, "[d_model]"},
    [BERT_W_V] = {".attention.self.value.weight", 2, {1, 1}, BERT_LINEAR},
    [BERT_B_V] = {".attention.self.value.bias", 1, {1, 0}, "[d_model]"},
    [BERT_W_O] = {".attention.output.dense.weight", 2, {1, 1}, BERT_LINEAR},
    [BERT_B_O] = {".attention.output.dense.bias", 1, {1, 0}, "[d_model]"},
};

static int bert_layout(import_out *m, float *const vals[IMPORT_PARTS_MAX], size_t d,
                       attn_error *err) {
    /* d·d fitted in the file as a tensor, so 3·d·d floats cannot overflow
     * unless the file was near SIZE_MAX: check anyway. */
    size_t dd;
    if (__builtin_mul_overflow(d, d, &dd) || dd > SIZE_MAX / 3 / sizeof(float))
        return store_error_set(err, NULL, "d_model %zu too large", d);
    float *w_qkv = import_out_alloc(m, 3 * dd), *b_qkv = import_out_alloc(m, 3 * d),
          *w_o = import_out_alloc(m, dd);
    if (!w_qkv || !b_qkv || !w_o) return store_error_set(err, NULL, "out of memory");
    const float *w[3] = {vals[BERT_W_Q], vals[BERT_W_K], vals[BERT_W_V]};
    const float *b[3] = {vals[BERT_B_Q], vals[BERT_B_K], vals[BERT_B_V]};
    for (size_t blk = 0; blk < 3; blk++) {
        import_linear_into(w_qkv, 3 * d, blk * d, w[blk], d, d);
        memcpy(b_qkv + blk * d, b[blk], d * sizeof(float));
    }
    import_linear_into(w_o, d, 0, vals[BERT_W_O], d, d);
    m->w_qkv = w_qkv;
    m->b_qkv = b_qkv;
    m->w_o = w_o;
    m->b_o = vals[BERT_B_O];
    return 0;
}

static int bert_read(const import_layer *L, import_out *m, attn_error *err) {
    float *vals[IMPORT_PARTS_MAX] = {0};
    size_t d = 0;
    int rc = import_parts_read(L, bert_parts, 8, vals, &d, err);
    if (rc == 0) rc = bert_layout(m, vals, d, err);
    import_out_adopt(m, vals);
    m->d = d;
    m->h = m->g = L->h;
    m->dh = L->h ? d / L->h : 0;
    m->mask = L->family->mask;
    return rc;
}

const import_family import_family_bert = {
    .arch = STORE_IMPORT_BERT,
    .name = "bert",
    .label = "BERT",
    .prefixes = {"", "bert."},
    .head = "encoder.layer.",
    .anchor = BERT_ANCHOR,
    .anchor_rule = BERT_LINEAR,
    .mask = ATTN_MASK_NONE,
    .by_name = 1,
    .model_types = {"bert"},
    .read = bert_read,
};
