/*
 * import.c — store_import_checkpoint (import.h): a Hugging Face checkpoint
 * layer in, one model file out.
 *
 * The steps, each failing with a message that names the checkpoint:
 *
 *   1. scan the tensor names once for each architecture's "anchor" tensor
 *      (the first one a layer needs, e.g. h.L.attn.c_attn.weight) under
 *      each accepted prefix: this detects the architecture, counts the
 *      layers (for "no layer 5: the checkpoint has layers 0 … 1") and fixes
 *      the prefix of the requested layer (both prefixes at once is refused
 *      as ambiguous rather than guessed);
 *   2. find every tensor of the layer, with the prefix of step 1;
 *   3. check every shape against d, taken from the anchor, and d against
 *      n_heads; then the dtypes;
 *   4. read each tensor into a float buffer (F16 / BF16 converted exactly,
 *      every value checked finite: tensor.h, which the loader reads its
 *      tensors with too, so a value it would refuse is refused here);
 *   5. assemble w_qkv, b_qkv, w_o, b_o (BERT's nn.Linear weights are
 *      transposed, GPT-2's Conv1D weights copied) and write them.
 *
 * Memory: the checkpoint stays mapped (read-only, STORE_READ_MAP) for the
 * call, since one layer is a small part of a file that may be larger than
 * memory; a checkpoint truncated during the import can fault only this
 * one-shot call's process, never a server. The layer's tensors are read
 * into heap buffers freed before returning. For GPT-2 small that is
 * 2 × 9.4 MB at most.
 */
#include "store/import.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store/model.h"
#include "store/safetensors.h"
#include "store/tensor.h"

/* ---- the architectures ---------------------------------------------------- */

/* Layer indices beyond this are not names we parse (no checkpoint has them). */
#define LAYER_MAX 1000000u

enum { PARTS_MAX = 8 };

/* One tensor of a layer: its name after "<prefix><head><L>", and its shape
 * as multiples of d (rank 1 or 2). */
typedef struct part_desc {
    const char *suffix;
    size_t rank;
    size_t mul[2];
    const char *rule; /* the shape in words, for messages */
} part_desc;

typedef struct arch_desc {
    store_import_arch arch;
    const char *label;       /* for people: "GPT-2" */
    const char *prefixes[2]; /* accepted name prefixes; "" first */
    const char *head;        /* before the layer index */
    attn_mask_kind mask;
    size_t n_parts;
    part_desc parts[PARTS_MAX]; /* parts[0] is the anchor; d = its shape[0] */
} arch_desc;

static const arch_desc archs[] = {
    {STORE_IMPORT_GPT2,
     "GPT-2",
     {"", "transformer."},
     "h.",
     ATTN_MASK_CAUSAL,
     4,
     {{".attn.c_attn.weight", 2, {1, 3}, "[d_model, 3·d_model] (Conv1D)"},
      {".attn.c_attn.bias", 1, {3, 0}, "[3·d_model]"},
      {".attn.c_proj.weight", 2, {1, 1}, "[d_model, d_model] (Conv1D)"},
      {".attn.c_proj.bias", 1, {1, 0}, "[d_model]"}}},
    {STORE_IMPORT_BERT,
     "BERT",
     {"", "bert."},
     "encoder.layer.",
     ATTN_MASK_NONE,
     8,
     {{".attention.self.query.weight", 2, {1, 1}, "[d_model, d_model] (nn.Linear)"},
      {".attention.self.query.bias", 1, {1, 0}, "[d_model]"},
      {".attention.self.key.weight", 2, {1, 1}, "[d_model, d_model] (nn.Linear)"},
      {".attention.self.key.bias", 1, {1, 0}, "[d_model]"},
      {".attention.self.value.weight", 2, {1, 1}, "[d_model, d_model] (nn.Linear)"},
      {".attention.self.value.bias", 1, {1, 0}, "[d_model]"},
      {".attention.output.dense.weight", 2, {1, 1}, "[d_model, d_model] (nn.Linear)"},
      {".attention.output.dense.bias", 1, {1, 0}, "[d_model]"}}},
};
enum { N_ARCHS = sizeof archs / sizeof archs[0] };

/* The parts' indices, per architecture. */
enum { GPT2_W_QKV, GPT2_B_QKV, GPT2_W_O, GPT2_B_O };
enum { BERT_W_Q, BERT_B_Q, BERT_W_K, BERT_B_K, BERT_W_V, BERT_B_V, BERT_W_O, BERT_B_O };

int store_import_arch_parse(const char *text, store_import_arch *out) {
    if (strcmp(text, "gpt2") == 0)
        *out = STORE_IMPORT_GPT2;
    else if (strcmp(text, "bert") == 0)
        *out = STORE_IMPORT_BERT;
    else if (strcmp(text, "auto") == 0)
        *out = STORE_IMPORT_AUTO;
    else
        return -1;
    return 0;
}

const char *store_import_arch_name(store_import_arch arch) {
    switch (arch) {
    case STORE_IMPORT_GPT2: return "gpt2";
    case STORE_IMPORT_BERT: return "bert";
    default: return "auto";
    }
}

/* ---- step 1: which architecture, which layers, which prefix ---------------- */

/* When name is prefix + head + <decimal> + tail, stores the decimal in
 * *layer and returns 1. Leading zeros do not name a layer ("h.01."). */
static int layer_match(const char *name, const char *prefix, const char *head, const char *tail,
                       size_t *layer) {
    size_t plen = strlen(prefix), hlen = strlen(head);
    if (strncmp(name, prefix, plen) != 0 || strncmp(name + plen, head, hlen) != 0) return 0;
    const char *p = name + plen + hlen;
    size_t v = 0, digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        v = v * 10 + (size_t)(*p - '0');
        if (v > LAYER_MAX) return 0;
    }
    if (digits == 0 || (digits > 1 && p[-(ptrdiff_t)digits] == '0')) return 0;
    if (strcmp(p, tail) != 0) return 0;
    *layer = v;
    return 1;
}

/* What the names say about one architecture. */
typedef struct arch_scan {
    size_t n_layers;   /* highest anchor layer + 1; 0 when none */
    unsigned prefixes; /* bit i: the requested layer's anchor is under prefixes[i] */
} arch_scan;

static void names_scan(const store_file *f, size_t layer, arch_scan scan[N_ARCHS]) {
    memset(scan, 0, N_ARCHS * sizeof scan[0]);
    for (size_t t = 0; t < store_file_count(f); t++) {
        const char *name = store_file_tensor(f, t)->name;
        for (size_t a = 0; a < N_ARCHS; a++)
            for (unsigned p = 0; p < 2; p++) {
                size_t l;
                if (!layer_match(name, archs[a].prefixes[p], archs[a].head,
                                 archs[a].parts[0].suffix, &l))
                    continue;
                if (l + 1 > scan[a].n_layers) scan[a].n_layers = l + 1;
                if (l == layer) scan[a].prefixes |= 1u << p;
            }
    }
}

/* Picks the architecture (opt's, or the only one present) and the prefix
 * of the layer; fills *arch and *prefix, or fails with err. */
static int layer_locate(const store_file *f, const char *path, const store_import_options *opt,
                        const arch_desc **arch, const char **prefix, size_t *n_layers,
                        attn_error *err) {
    arch_scan scan[N_ARCHS];
    names_scan(f, opt->layer, scan);

    const arch_desc *a = NULL;
    const arch_scan *s = NULL;
    if (opt->arch == STORE_IMPORT_AUTO) {
        for (size_t i = 0; i < N_ARCHS; i++) {
            if (scan[i].n_layers == 0) continue;
            if (a)
                return store_error_set(err, path,
                                       "holds both %s and %s attention tensors; pass --arch",
                                       a->label, archs[i].label);
            a = &archs[i];
            s = &scan[i];
        }
        if (!a)
            return store_error_set(err, path,
                                   "no GPT-2 ('[transformer.]h.N.attn.c_attn.weight') nor BERT "
                                   "('[bert.]encoder.layer.N.attention.self.query.weight') "
                                   "attention tensors: not a checkpoint this tool reads");
    } else {
        for (size_t i = 0; i < N_ARCHS; i++)
            if (archs[i].arch == opt->arch) {
                a = &archs[i];
                s = &scan[i];
            }
        if (!a) return store_error_set(err, NULL, "unknown architecture %d", (int)opt->arch);
    }

    char want[2][160];
    for (unsigned p = 0; p < 2; p++)
        snprintf(want[p], sizeof want[p], "%s%s%zu%s", a->prefixes[p], a->head, opt->layer,
                 a->parts[0].suffix);
    if (s->prefixes == 3)
        return store_error_set(err, path,
                               "holds both '%s' and '%s': ambiguous, which one is the model?",
                               want[0], want[1]);
    if (s->prefixes == 0) {
        if (s->n_layers == 0)
            return store_error_set(err, path,
                                   "no tensor '%s' (nor '%s'): no %s layer at all in this "
                                   "checkpoint (another architecture? see --arch)",
                                   want[0], want[1], a->label);
        return store_error_set(err, path,
                               "no layer %zu: no tensor '%s' (nor '%s'); the checkpoint has %s "
                               "layers 0 … %zu",
                               opt->layer, want[0], want[1], a->label, s->n_layers - 1);
    }
    *arch = a;
    *prefix = a->prefixes[s->prefixes == 1 ? 0 : 1];
    *n_layers = s->n_layers;
    return 0;
}

/* ---- steps 2–4: the layer's tensors ---------------------------------------- */

/* Checks t against part's shape for this d. */
static int part_shape_check(const store_tensor *t, const part_desc *part, size_t d,
                            const char *anchor, const char *path, attn_error *err) {
    size_t want[2] = {part->mul[0] * d, part->mul[1] * d};
    int ok = t->rank == part->rank;
    for (size_t i = 0; ok && i < part->rank; i++)
        ok = t->shape[i] == want[i];
    if (ok) return 0;
    char got[160], exp[64];
    if (part->rank == 1)
        snprintf(exp, sizeof exp, "[%zu]", want[0]);
    else
        snprintf(exp, sizeof exp, "[%zu, %zu]", want[0], want[1]);
    return store_error_set(
        err, path, "tensor '%s' has shape %s, expected %s = %s with d_model %zu from '%s'", t->name,
        store_tensor_shape_text(t, got, sizeof got), exp, part->rule, d, anchor);
}

/* t's values as floats, in a new buffer (the caller frees it); NULL with
 * err set when out of memory or a value is not finite. */
static float *tensor_read(const store_tensor *t, const char *path, attn_error *err) {
    size_t bytes;
    if (__builtin_mul_overflow(t->count, sizeof(float), &bytes)) bytes = SIZE_MAX;
    float *buf = bytes == SIZE_MAX ? NULL : malloc(bytes ? bytes : 1);
    if (!buf) {
        store_error_set(err, path, "out of memory for tensor '%s'", t->name);
        return NULL;
    }
    if (store_tensor_read_f32(buf, t, path, err) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* Finds, checks and reads the layer's tensors into vals[]; d_model in *d. */
static int layer_read(const store_file *f, const char *path, const arch_desc *a, const char *prefix,
                      const store_import_options *opt, float *vals[PARTS_MAX], size_t *d,
                      attn_error *err) {
    const store_tensor *t[PARTS_MAX];
    char names[PARTS_MAX][160];
    for (size_t i = 0; i < a->n_parts; i++) {
        snprintf(names[i], sizeof names[i], "%s%s%zu%s", prefix, a->head, opt->layer,
                 a->parts[i].suffix);
        t[i] = store_file_find(f, names[i]);
        if (!t[i])
            return store_error_set(err, path,
                                   "no tensor '%s': %s layer %zu is incomplete (its anchor "
                                   "'%s' is there)",
                                   names[i], a->label, opt->layer, names[0]);
    }

    const store_tensor *anchor = t[0];
    if (anchor->rank != 2 || anchor->shape[0] == 0)
        return store_error_set(err, path, "tensor '%s' has rank %zu, expected %s", names[0],
                               anchor->rank, a->parts[0].rule);
    *d = anchor->shape[0];
    for (size_t i = 0; i < a->n_parts; i++)
        if (part_shape_check(t[i], &a->parts[i], *d, names[0], path, err) != 0) return -1;
    if (*d % opt->n_heads != 0)
        return store_error_set(err, path,
                               "d_model %zu (from '%s') is not divisible by %zu heads (--heads)",
                               *d, names[0], opt->n_heads);

    for (size_t i = 0; i < a->n_parts; i++)
        if (t[i]->dtype != STORE_DTYPE_F32 && t[i]->dtype != STORE_DTYPE_F16 &&
            t[i]->dtype != STORE_DTYPE_BF16)
            return store_error_set(err, path,
                                   "tensor '%s' has dtype %s; the importer reads F32, F16 or BF16",
                                   names[i], store_dtype_name(t[i]->dtype));

    for (size_t i = 0; i < a->n_parts; i++)
        if (!(vals[i] = tensor_read(t[i], path, err))) return -1;
    return 0;
}

/* ---- step 5: our layout ----------------------------------------------------- */

/* The model's four tensors, row-major F32, owned (or borrowed from vals). */
typedef struct model_tensors {
    const float *w_qkv, *b_qkv, *w_o, *b_o;
    float *owned[3]; /* what to free */
} model_tensors;

/*
 * GPT-2: every tensor as it is. BERT (Linear weights W [out = d, in = d]):
 *   w_qkv[r, b·d + c] = W_b[c, r]    r, c < d; b = 0, 1, 2 for q, k, v
 *   b_qkv[b·d + c]    = bias_b[c]
 *   w_o[r, c]         = dense[c, r]
 */
static int layout_build(model_tensors *m, const arch_desc *a, float *const vals[PARTS_MAX],
                        size_t d, attn_error *err) {
    memset(m, 0, sizeof *m);
    if (a->arch == STORE_IMPORT_GPT2) {
        m->w_qkv = vals[GPT2_W_QKV];
        m->b_qkv = vals[GPT2_B_QKV];
        m->w_o = vals[GPT2_W_O];
        m->b_o = vals[GPT2_B_O];
        return 0;
    }
    /* d·d fitted in the file as a tensor, so 3·d·d floats cannot overflow
     * unless the file was near SIZE_MAX: check anyway. */
    size_t dd, n_qkv;
    if (__builtin_mul_overflow(d, d, &dd) || __builtin_mul_overflow(dd, 3 * sizeof(float), &n_qkv))
        return store_error_set(err, NULL, "d_model %zu too large", d);
    float *w_qkv = malloc(n_qkv), *b_qkv = malloc(3 * d * sizeof(float)),
          *w_o = malloc(dd * sizeof(float));
    m->owned[0] = w_qkv;
    m->owned[1] = b_qkv;
    m->owned[2] = w_o;
    if (!w_qkv || !b_qkv || !w_o) return store_error_set(err, NULL, "out of memory");

    const float *w[3] = {vals[BERT_W_Q], vals[BERT_W_K], vals[BERT_W_V]};
    const float *b[3] = {vals[BERT_B_Q], vals[BERT_B_K], vals[BERT_B_V]};
    for (size_t r = 0; r < d; r++)
        for (size_t blk = 0; blk < 3; blk++)
            for (size_t c = 0; c < d; c++)
                w_qkv[r * 3 * d + blk * d + c] = w[blk][c * d + r];
    for (size_t blk = 0; blk < 3; blk++)
        memcpy(b_qkv + blk * d, b[blk], d * sizeof(float));
    for (size_t r = 0; r < d; r++)
        for (size_t c = 0; c < d; c++)
            w_o[r * d + c] = vals[BERT_W_O][c * d + r];
    m->w_qkv = w_qkv;
    m->b_qkv = b_qkv;
    m->w_o = w_o;
    m->b_o = vals[BERT_B_O];
    return 0;
}

/* The input's base name when it is printable ASCII (metadata must be
 * UTF-8, and a file name need not be), else "the checkpoint". */
static const char *source_label(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (const char *p = base; *p; p++)
        if (*p < 0x20 || *p > 0x7e) return "the checkpoint";
    return *base ? base : "the checkpoint";
}

static int model_write(const char *out_path, const char *in_path, const arch_desc *a,
                       const store_import_options *opt, const model_tensors *m, size_t d,
                       const char *name, store_import_result *res, attn_error *err) {
    char heads[32], description[512], source[512];
    snprintf(heads, sizeof heads, "%zu", opt->n_heads);
    snprintf(description, sizeof description, "%s layer %zu attention, from %s", a->label,
             opt->layer, source_label(in_path));
    snprintf(source, sizeof source, "tools/import_checkpoint --arch %s --layer %zu from %s",
             store_import_arch_name(a->arch), opt->layer, source_label(in_path));
    store_metadata meta[] = {
        {"name", name},     {"description", opt->description ? opt->description : description},
        {"n_heads", heads}, {"mask", a->mask == ATTN_MASK_NONE ? "none" : "causal"},
        {"source", source},
    };
    size_t shape_qkv[2] = {d, 3 * d}, shape_bqkv[1] = {3 * d}, shape_o[2] = {d, d},
           shape_bo[1] = {d};
    store_write_tensor tensors[] = {
        {"w_qkv", STORE_DTYPE_F32, 2, shape_qkv, m->w_qkv, NULL, NULL},
        {"b_qkv", STORE_DTYPE_F32, 1, shape_bqkv, m->b_qkv, NULL, NULL},
        {"w_o", STORE_DTYPE_F32, 2, shape_o, m->w_o, NULL, NULL},
        {"b_o", STORE_DTYPE_F32, 1, shape_bo, m->b_o, NULL, NULL},
    };
    size_t file_bytes;
    if (store_file_write(out_path, meta, sizeof meta / sizeof meta[0], tensors,
                         sizeof tensors / sizeof tensors[0], &file_bytes, err) != 0)
        return -1;
    if (res) res->file_bytes = file_bytes;
    return 0;
}

/* ---- the whole -------------------------------------------------------------- */

int store_import_checkpoint(const char *in_path, const char *out_path,
                            const store_import_options *opt, store_import_result *res,
                            attn_error *err) {
    if (opt->n_heads == 0 || opt->n_heads > STORE_HEADS_MAX)
        return store_error_set(err, NULL, "the number of heads must be 1 … %d, not %zu",
                               STORE_HEADS_MAX, opt->n_heads);
    char name[65];
    int fits = 1;
    if (opt->name) {
        snprintf(name, sizeof name, "%s", opt->name);
        fits = strlen(opt->name) < sizeof name;
    } else {
        size_t n;
        const char *base = store_model_default_name(out_path, &n);
        /* too long to fit is too long to be a valid name anyway */
        fits = n < sizeof name;
        snprintf(name, sizeof name, "%.*s", (int)(fits ? n : sizeof name - 1), base);
    }
    if (!fits || !store_model_name_valid(name, strlen(name)))
        return store_error_set(err, NULL, "model name '%s' %s does not match [A-Za-z0-9._-]{1,64}",
                               opt->name ? opt->name : name,
                               opt->name ? "(--name)" : "(from the output file name; pass --name)");

    /* Writing over the input would replace the checkpoint by one layer. */
    struct stat in_st, out_st;
    if (stat(in_path, &in_st) == 0 && stat(out_path, &out_st) == 0 &&
        in_st.st_dev == out_st.st_dev && in_st.st_ino == out_st.st_ino)
        return store_error_set(err, out_path, "is the checkpoint itself; write to another file");

    store_file *f;
    if (store_file_open_mode(&f, in_path, STORE_READ_MAP, err) != 0) return -1;
    const arch_desc *a = NULL;
    const char *prefix = "";
    size_t n_layers = 0, d = 0;
    float *vals[PARTS_MAX] = {0};
    model_tensors m = {0};
    int rc = -1;
    if (layer_locate(f, in_path, opt, &a, &prefix, &n_layers, err) != 0 ||
        layer_read(f, in_path, a, prefix, opt, vals, &d, err) != 0 ||
        layout_build(&m, a, vals, d, err) != 0 ||
        model_write(out_path, in_path, a, opt, &m, d, name, res, err) != 0)
        goto done;
    if (res) {
        res->arch = a->arch;
        res->n_layers = n_layers;
        res->d_model = d;
        res->n_heads = opt->n_heads;
        res->d_head = d / opt->n_heads;
        snprintf(res->name, sizeof res->name, "%s", name);
    }
    rc = 0;
done:
    for (size_t i = 0; i < PARTS_MAX; i++)
        free(vals[i]);
    for (size_t i = 0; i < 3; i++)
        free(m.owned[i]);
    store_file_close(f);
    return rc;
}
