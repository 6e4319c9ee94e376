/*
 * import_write.c — the model file an import writes (import_internal.h):
 * the layers' tensors (w_qkv or w_q and w_kv, their biases, w_o, b_o, in
 * F32) and metadata (name, description, n_heads, mask, source, n_kv_heads
 * when it differs, each layer's variants: rope_*, alibi, window, softcap,
 * scale), one layer as it is or a stack's layers under "layers.<l>.",
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
typedef struct layer_text {
    char theta[32], dims[32], factor[32], low[32], high[32], orig[32], window[32], softcap[32],
        scale[32];
    char keys[12][64], names[6][64];
    size_t shape_qkv[2], shape_bqkv[1], shape_kv[2], shape_bkv[1], shape_o[2], shape_bo[1];
    size_t n_keys, n_names;
} layer_text;

/* prefix + s, kept in one of tx's slots (keys or names). */
static const char *with_prefix(layer_text *tx, int name, const char *prefix, const char *s) {
    char *buf = name ? tx->names[tx->n_names++] : tx->keys[tx->n_keys++];
    snprintf(buf, 64, "%s%s", prefix, s);
    return buf;
}

/* m's variants as metadata, their keys under prefix. */
static void layer_meta(store_metadata *meta, size_t *nm, const char *prefix, const import_out *m,
                       layer_text *tx) {
#define KEY(k, v) (meta[(*nm)++] = (store_metadata){with_prefix(tx, 0, prefix, k), v})
    if (m->rope.dims) {
        num_text(tx->theta, sizeof tx->theta, m->rope.theta);
        snprintf(tx->dims, sizeof tx->dims, "%zu", m->rope.dims);
        KEY("rope_theta", tx->theta);
        KEY("rope_dims", tx->dims);
        KEY("rope_style", "half");
        if (m->rope.scaling != ATTN_ROPE_SCALING_NONE) {
            int llama3 = m->rope.scaling == ATTN_ROPE_SCALING_LLAMA3;
            num_text(tx->factor, sizeof tx->factor, m->rope.factor);
            KEY("rope_scaling", llama3 ? "llama3" : "linear");
            KEY("rope_factor", tx->factor);
            if (llama3) {
                num_text(tx->low, sizeof tx->low, m->rope.low_freq_factor);
                num_text(tx->high, sizeof tx->high, m->rope.high_freq_factor);
                num_text(tx->orig, sizeof tx->orig, m->rope.original_max_position);
                KEY("rope_low_freq_factor", tx->low);
                KEY("rope_high_freq_factor", tx->high);
                KEY("rope_original_max_position", tx->orig);
            }
        }
    }
    if (m->alibi) KEY("alibi", "true");
    if (m->window) {
        snprintf(tx->window, sizeof tx->window, "%zu", m->window);
        KEY("window", tx->window);
    }
    if (m->softcap > 0) {
        num_text(tx->softcap, sizeof tx->softcap, m->softcap);
        KEY("softcap", tx->softcap);
    }
    if (m->scale > 0) {
        num_text(tx->scale, sizeof tx->scale, m->scale);
        KEY("scale", tx->scale);
    }
#undef KEY
}

/* m's tensors, named under prefix. */
static void layer_tensors(store_write_tensor *t, size_t *nt, const char *prefix,
                          const import_out *m, layer_text *tx) {
    size_t hd = m->h * m->dh, gd = m->g * m->dh;
    size_t qcols = m->dc ? hd : hd + 2 * gd;
    tx->shape_qkv[0] = m->d, tx->shape_qkv[1] = qcols, tx->shape_bqkv[0] = qcols;
    tx->shape_kv[0] = m->dc, tx->shape_kv[1] = 2 * gd, tx->shape_bkv[0] = 2 * gd;
    tx->shape_o[0] = hd, tx->shape_o[1] = m->d, tx->shape_bo[0] = m->d;
#define TENSOR(n, rank, shape, data)                                                               \
    (t[(*nt)++] = (store_write_tensor){with_prefix(tx, 1, prefix, n), STORE_DTYPE_F32, rank,       \
                                       shape, data, NULL, NULL})
    TENSOR(m->dc ? "w_q" : "w_qkv", 2, tx->shape_qkv, m->w_qkv);
    if (m->b_qkv) TENSOR(m->dc ? "b_q" : "b_qkv", 1, tx->shape_bqkv, m->b_qkv);
    if (m->w_kv) TENSOR("w_kv", 2, tx->shape_kv, m->w_kv);
    if (m->b_kv) TENSOR("b_kv", 1, tx->shape_bkv, m->b_kv);
    TENSOR("w_o", 2, tx->shape_o, m->w_o);
    if (m->b_o) TENSOR("b_o", 1, tx->shape_bo, m->b_o);
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
    store_metadata *meta = calloc(8 + 12 * n, sizeof *meta);
    store_write_tensor *tensors = calloc(6 * n, sizeof *tensors);
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
