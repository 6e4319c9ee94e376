/*
 * import_write.c — the model file an import writes (import_internal.h):
 * the layers' tensors (w_qkv or w_q and w_kv, their biases, w_o, b_o, in
 * F32) and metadata (name, description, n_heads, mask, source, n_kv_heads
 * when it differs, each layer's variants: rope_*, alibi, window, chunk,
 * softcap, scale, the norms and temperature, with their tensors and the
 * sinks), one layer as it is or a stack's layers under "layers.<l>.",
 * written with store_file_write (atomically: a server reloading the
 * directory never sees half a file).
 *
 * Numbers are written with %.17g, so that they read back exactly; the
 * metadata's text lives in one layer_text per layer until the write.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/import_internal.h"
#include "store/model.h"

/* The input's base name when it is printable ASCII (metadata must be
 * UTF-8, and a file name need not be), else "the checkpoint". */
static const char *source_label(const char *path) {
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') /* a directory given as "dir/" */
        len--;
    const char *base = path;
    for (size_t i = 0; i < len; i++)
        if (path[i] == '/') base = path + i + 1;
    static _Thread_local char buf[256];
    size_t n = (size_t)(path + len - base);
    if (n == 0 || n >= sizeof buf) return "the checkpoint";
    memcpy(buf, base, n);
    buf[n] = '\0';
    for (const char *p = buf; *p; p++)
        if (*p < 0x20 || *p > 0x7e) return "the checkpoint";
    return buf;
}

/* %.17g: a double that reads back exactly. */
static void num_text(char *buf, size_t len, double v) {
    snprintf(buf, len, "%.17g", v);
}

/* The text one layer's metadata and tensors are written with: the
 * numbers, and in a stack the prefixed keys and names. */
enum { LAYER_KEYS_MAX = 48, LAYER_TENSORS_MAX = 16 };

typedef struct layer_text {
    char nums[LAYER_KEYS_MAX][32];
    char keys[LAYER_KEYS_MAX][64], names[LAYER_TENSORS_MAX][64];
    size_t shapes[LAYER_TENSORS_MAX][2];
    size_t n_nums, n_keys, n_names, n_shapes;
} layer_text;

/* prefix + s, kept in one of tx's slots (keys or names). */
static const char *with_prefix(layer_text *tx, int name, const char *prefix, const char *s) {
    char *buf = name ? tx->names[tx->n_names++] : tx->keys[tx->n_keys++];
    snprintf(buf, 64, "%s%s", prefix, s);
    return buf;
}

/* v as text kept in tx: %.17g, a double that reads back exactly. */
static const char *num(layer_text *tx, double v) {
    char *buf = tx->nums[tx->n_nums++];
    num_text(buf, sizeof tx->nums[0], v);
    return buf;
}

/* A norm's keys "<name>_type", "_eps", "_offset" (rms, when 1). */
static void norm_meta(store_metadata *meta, size_t *nm, const char *prefix, const char *name,
                      const attn_norm *n, layer_text *tx) {
    char key[32];
#define KEY(k, v) (meta[(*nm)++] = (store_metadata){with_prefix(tx, 0, prefix, k), v})
    snprintf(key, sizeof key, "%s_type", name);
    KEY(key, n->type == ATTN_NORM_LAYER ? "layer" : "rms");
    snprintf(key, sizeof key, "%s_eps", name);
    KEY(key, num(tx, n->eps));
    if (n->type == ATTN_NORM_RMS && n->offset != 0) {
        snprintf(key, sizeof key, "%s_offset", name);
        KEY(key, "1");
    }
#undef KEY
}

/* m's RoPE as metadata. */
static void rope_meta(store_metadata *meta, size_t *nm, const char *prefix, const attn_rope *r,
                      layer_text *tx) {
#define KEY(k, v) (meta[(*nm)++] = (store_metadata){with_prefix(tx, 0, prefix, k), v})
    KEY("rope_theta", num(tx, r->theta));
    snprintf(tx->nums[tx->n_nums], sizeof tx->nums[0], "%zu", r->dims);
    KEY("rope_dims", tx->nums[tx->n_nums++]);
    KEY("rope_style", r->style == ATTN_ROPE_INTERLEAVED ? "interleaved" : "half");
    static const char *const names[] = {
        [ATTN_ROPE_SCALING_LINEAR] = "linear",
        [ATTN_ROPE_SCALING_LLAMA3] = "llama3",
        [ATTN_ROPE_SCALING_YARN] = "yarn",
        [ATTN_ROPE_SCALING_LONGROPE] = "longrope",
    };
    if (r->scaling == ATTN_ROPE_SCALING_NONE) return;
    KEY("rope_scaling", names[r->scaling]);
    if (r->factor > 0) KEY("rope_factor", num(tx, r->factor));
    if (r->scaling == ATTN_ROPE_SCALING_LLAMA3) {
        KEY("rope_low_freq_factor", num(tx, r->low_freq_factor));
        KEY("rope_high_freq_factor", num(tx, r->high_freq_factor));
    }
    if (r->scaling != ATTN_ROPE_SCALING_LINEAR)
        KEY("rope_original_max_position", num(tx, r->original_max_position));
    if (r->scaling == ATTN_ROPE_SCALING_YARN) {
        if (r->beta_fast > 0) KEY("rope_beta_fast", num(tx, r->beta_fast));
        if (r->beta_slow > 0) KEY("rope_beta_slow", num(tx, r->beta_slow));
        if (r->mscale != 0) KEY("rope_mscale", num(tx, r->mscale));
        if (r->mscale_all_dim != 0) KEY("rope_mscale_all_dim", num(tx, r->mscale_all_dim));
        if (r->untruncated) KEY("rope_truncate", "false");
    }
    if (r->attention_factor > 0) KEY("rope_attention_factor", num(tx, r->attention_factor));
#undef KEY
}

/* m's variants as metadata, their keys under prefix. */
static void layer_meta(store_metadata *meta, size_t *nm, const char *prefix, const import_out *m,
                       layer_text *tx) {
#define KEY(k, v) (meta[(*nm)++] = (store_metadata){with_prefix(tx, 0, prefix, k), v})
    if (m->rope.dims) rope_meta(meta, nm, prefix, &m->rope, tx);
    if (m->alibi) KEY("alibi", "true");
    if (m->window) {
        snprintf(tx->nums[tx->n_nums], sizeof tx->nums[0], "%zu", m->window);
        KEY("window", tx->nums[tx->n_nums++]);
    }
    if (m->chunk) {
        snprintf(tx->nums[tx->n_nums], sizeof tx->nums[0], "%zu", m->chunk);
        KEY("chunk", tx->nums[tx->n_nums++]);
    }
    if (m->softcap > 0) KEY("softcap", num(tx, m->softcap));
    if (m->scale > 0) KEY("scale", num(tx, m->scale));
    if (m->norm.type != ATTN_NORM_NONE) norm_meta(meta, nm, prefix, "norm", &m->norm, tx);
    if (m->post_norm.type != ATTN_NORM_NONE)
        norm_meta(meta, nm, prefix, "post_norm", &m->post_norm, tx);
    if (m->qk_norm.q.type != ATTN_NORM_NONE) {
        KEY("qk_norm_scope", m->qk_norm.all ? "all" : "head");
        KEY("qk_norm_eps", num(tx, m->qk_norm.q.eps));
        if (m->qk_norm.q.offset != 0) KEY("qk_norm_offset", "1");
    }
    if (m->temperature.floor_scale > 0) {
        KEY("temperature_floor_scale", num(tx, m->temperature.floor_scale));
        KEY("temperature_attn_scale", num(tx, m->temperature.attn_scale));
    }
#undef KEY
}

/* One F32 tensor [d0, d1] (d1 0: [d0]) named prefix + name. */
static void tensor_add(store_write_tensor *t, size_t *nt, layer_text *tx, const char *prefix,
                       const char *name, size_t d0, size_t d1, const float *data) {
    size_t *shape = tx->shapes[tx->n_shapes++];
    shape[0] = d0, shape[1] = d1;
    t[(*nt)++] = (store_write_tensor){
        with_prefix(tx, 1, prefix, name), STORE_DTYPE_F32, d1 ? 2 : 1, shape, data, NULL, NULL};
}

/* m's tensors, named under prefix. */
static void layer_tensors(store_write_tensor *t, size_t *nt, const char *prefix,
                          const import_out *m, layer_text *tx) {
    size_t hd = m->h * m->dh, gd = m->g * m->dh;
    size_t qcols = m->dc ? hd : hd + 2 * gd;
#define TENSOR(n, d0, d1, data) tensor_add(t, nt, tx, prefix, n, d0, d1, data)
    TENSOR(m->dc ? "w_q" : "w_qkv", m->d, qcols, m->w_qkv);
    if (m->b_qkv) TENSOR(m->dc ? "b_q" : "b_qkv", qcols, 0, m->b_qkv);
    if (m->w_kv) TENSOR("w_kv", m->dc, 2 * gd, m->w_kv);
    if (m->b_kv) TENSOR("b_kv", 2 * gd, 0, m->b_kv);
    TENSOR("w_o", hd, m->d, m->w_o);
    if (m->b_o) TENSOR("b_o", m->d, 0, m->b_o);
    if (m->norm.weight) TENSOR("norm.weight", m->d, 0, m->norm.weight);
    if (m->norm.bias) TENSOR("norm.bias", m->d, 0, m->norm.bias);
    if (m->post_norm.weight) TENSOR("post_norm.weight", m->d, 0, m->post_norm.weight);
    if (m->post_norm.bias) TENSOR("post_norm.bias", m->d, 0, m->post_norm.bias);
    if (m->qk_norm.q.weight)
        TENSOR("q_norm.weight", m->qk_norm.all ? hd : m->dh, 0, m->qk_norm.q.weight);
    if (m->qk_norm.k.weight)
        TENSOR("k_norm.weight", m->qk_norm.all ? gd : m->dh, 0, m->qk_norm.k.weight);
    if (m->sinks) TENSOR("sinks", m->h, 0, m->sinks);
    if (m->rope.short_factor)
        TENSOR("rope_short_factor", m->rope.dims / 2, 0, m->rope.short_factor);
    if (m->rope.long_factor) TENSOR("rope_long_factor", m->rope.dims / 2, 0, m->rope.long_factor);
#undef TENSOR
}

/* "0, 1, 5" (cut with "…" when long) into buf: the layers for people. */
static void layers_text(char *buf, size_t len, const size_t *layers, size_t n, const char *sep) {
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        char one[32];
        snprintf(one, sizeof one, "%s%zu", i ? sep : "", layers[i]);
        if (at + strlen(one) + 8 >= len) {
            snprintf(buf + at, len - at, "%s…", sep);
            return;
        }
        at += (size_t)snprintf(buf + at, len - at, "%s", one);
    }
}

/*
 * A stack's form (models/README.md, "Stacks"): n_layers, each layer's
 * tensors and variant keys under "layers.<l>.", l the stack's order.
 */
int import_model_write(const char *out_path, const char *in_path, const import_family *a,
                       const store_import_options *opt, const import_out *ms, const size_t *layers,
                       size_t n, int stacked, const char *name, store_import_result *res,
                       attn_error *err) {
    const import_out *m = &ms[0];
    char heads[32], kv[32], count[32], description[512], source[512], list[256], flag[256];
    layers_text(list, sizeof list, layers, n, ", ");
    layers_text(flag, sizeof flag, layers, n, ",");
    snprintf(heads, sizeof heads, "%zu", m->h);
    snprintf(description, sizeof description, "%s layer%s %s attention, from %s", a->label,
             n > 1 ? "s" : "", list, source_label(in_path));
    snprintf(source, sizeof source, "tools/import_checkpoint --arch %s --layer%s %s from %s",
             a->name, stacked ? "s" : "", flag, source_label(in_path));
    layer_text *tx = calloc(n, sizeof *tx);
    store_metadata *meta = calloc(8 + LAYER_KEYS_MAX * n, sizeof *meta);
    store_write_tensor *tensors = calloc(LAYER_TENSORS_MAX * n, sizeof *tensors);
    if (!tx || !meta || !tensors) {
        free(tx), free(meta), free(tensors);
        return store_error_set(err, NULL, "out of memory");
    }
    meta[0] = (store_metadata){"name", name};
    meta[1] = (store_metadata){"description", opt->description ? opt->description : description};
    meta[2] = (store_metadata){"n_heads", heads};
    meta[3] = (store_metadata){"mask", m->mask == ATTN_MASK_NONE ? "none" : "causal"};
    meta[4] = (store_metadata){"source", source};
    size_t nm = 5, nt = 0;
    if (m->g != m->h) {
        snprintf(kv, sizeof kv, "%zu", m->g);
        meta[nm++] = (store_metadata){"n_kv_heads", kv};
    }
    if (stacked) {
        snprintf(count, sizeof count, "%zu", n);
        meta[nm++] = (store_metadata){"n_layers", count};
    }
    for (size_t l = 0; l < n; l++) {
        char prefix[32] = "";
        if (stacked) snprintf(prefix, sizeof prefix, "layers.%zu.", l);
        layer_meta(meta, &nm, prefix, &ms[l], &tx[l]);
        layer_tensors(tensors, &nt, prefix, &ms[l], &tx[l]);
    }
    size_t file_bytes;
    int rc = store_file_write(out_path, meta, nm, tensors, nt, &file_bytes, err);
    if (rc == 0 && res) res->file_bytes = file_bytes;
    free(tx), free(meta), free(tensors);
    return rc;
}
