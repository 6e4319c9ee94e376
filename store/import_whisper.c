/*
 * import_whisper.c — Whisper's decoder cross-attention (import_internal.h):
 * [model.]decoder.layers.L.encoder_attn.{q,k,v,out}_proj, nn.Linear [d, d]
 * (k has no bias). Queries come from the decoder, keys and values from the
 * encoder's output, of the same width: our w_q and w_kv with d_context = d.
 *
 *   w_q[r, c]       = q[c, r]
 *   w_kv[r, c]      = k[c, r]           c < g·dh
 *   w_kv[r, gd + c] = v[c, r]
 *
 * config.json: model_type "whisper"; decoder_attention_heads, d_model. No
 * RoPE, no window; mask none.
 *
 * The input norm: decoder.layers.L.encoder_attn_layer_norm.weight and
 * .bias, nn.LayerNorm's eps 1e-5 (WhisperDecoderLayer), on the queries'
 * rows only; the context is the encoder's output, already normalised by
 * its final layer_norm.
 */
#include <string.h>

#include "store/import_internal.h"

static int whisper_layout(import_attn *p, import_out *m, attn_error *err) {
    size_t d = p->d, hd = p->hd, gd = p->gd;
    float *const *v = p->v;
    float *wq = import_out_alloc(m, d * hd), *wkv = import_out_alloc(m, d * 2 * gd);
    float *bq = v[IMPORT_BQ] ? import_out_alloc(m, hd) : NULL;
    float *bkv = v[IMPORT_BK] || v[IMPORT_BV] ? import_out_alloc(m, 2 * gd) : NULL;
    if (!wq || !wkv || (v[IMPORT_BQ] && !bq) || ((v[IMPORT_BK] || v[IMPORT_BV]) && !bkv))
        return store_error_set(err, NULL, "out of memory");
    import_linear_into(wq, hd, 0, v[IMPORT_WQ], hd, d);
    import_linear_into(wkv, 2 * gd, 0, v[IMPORT_WK], gd, d);
    import_linear_into(wkv, 2 * gd, gd, v[IMPORT_WV], gd, d);
    if (bq) memcpy(bq, v[IMPORT_BQ], hd * sizeof(float));
    if (bkv && v[IMPORT_BK]) memcpy(bkv, v[IMPORT_BK], gd * sizeof(float));
    if (bkv && v[IMPORT_BV]) memcpy(bkv + gd, v[IMPORT_BV], gd * sizeof(float));
    m->w_qkv = wq;
    m->b_qkv = bq;
    m->w_kv = wkv;
    m->b_kv = bkv;
    m->dc = d;
    return 0;
}

static const import_norm_keys whisper_norm = {
    .suffix = ".encoder_attn_layer_norm",
    .type = ATTN_NORM_LAYER,
    .eps_default = 1e-5,
};

static int whisper_read(const import_layer *L, import_out *m, attn_error *err) {
    import_attn p = {0};
    int rc = -1;
    if (import_attn_find_separate(L, ".encoder_attn.", "out_proj", &p, err) == 0 &&
        import_attn_check(L, &p, 0, m, err) == 0) {
        m->scale = L->opt->scale;
        if (import_attn_read(L, &p, m, err) == 0 && whisper_layout(&p, m, err) == 0 &&
            import_norms_read(L, &whisper_norm, NULL, m, err) == 0)
            rc = 0;
    }
    import_attn_free(&p);
    return rc;
}

const import_family import_family_whisper = {
    .arch = STORE_IMPORT_WHISPER,
    .name = "whisper",
    .label = "Whisper decoder cross-attention",
    .prefixes = {"", "model."},
    .head = "decoder.layers.",
    .anchor = ".encoder_attn.q_proj.weight",
    .anchor_rule = "[d_model, d_model] (nn.Linear)",
    .mask = ATTN_MASK_NONE,
    .by_name = 1,
    .model_types = {"whisper"},
    .read = whisper_read,
};
