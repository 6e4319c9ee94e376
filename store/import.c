/*
 * import.c — store_import_checkpoint (import.h): a Hugging Face checkpoint
 * layer in, one model file out.
 *
 * The steps, each failing with a message that names the checkpoint:
 *
 *   0. open the checkpoint: a directory's config.json (jansson) and its
 *      safetensors (model.safetensors, or every shard that
 *      model.safetensors.index.json's weight_map names), or one file; the
 *      options override the configuration (import.h); each file is
 *      opened with store_open_regular (open.h), so that a FIFO or a
 *      directory in a file's place is refused by name, never waited on;
 *   1. the architecture: the option's, else config.json's model_type, else
 *      the tensor names, scanned once for each architecture's "anchor"
 *      tensor (the first one a layer needs) under each accepted prefix,
 *      which also counts the layers and fixes the prefix of the requested
 *      layer (two prefixes at once is refused as ambiguous, not guessed);
 *   2. find every tensor of the layer, with the prefix of step 1;
 *   3. check every shape against d (from the anchor), h, g and dh; then
 *      the dtypes;
 *   4. read each tensor into a float buffer (F16 / BF16 converted exactly,
 *      every value checked finite: tensor.h, which the loader reads its
 *      tensors with too, so a value it would refuse is refused here);
 *   5. assemble our layout (nn.Linear weights transposed, fused per-head
 *      rows regrouped, GPT-2's Conv1D weights copied) and write it with
 *      the layer's variants as metadata.
 *
 * Memory: the checkpoint's files stay mapped (read-only, STORE_READ_MAP)
 * for the call, since one layer is a small part of files that may be
 * larger than memory; a checkpoint truncated during the import can fault
 * only this one-shot call's process, never a server. The layer's tensors
 * are read into heap buffers freed before returning.
 */
#include "store/import.h"

#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/model.h"
#include "store/open.h"
#include "store/safetensors.h"
#include "store/tensor.h"

/* ---- the checkpoint's files ---------------------------------------------- */

/* The most shards read (the largest Hub checkpoints have a few hundred). */
#define SHARDS_MAX 1024

typedef struct ckpt_src {
    store_file *files[SHARDS_MAX];
    size_t n_files;
    json_t *config; /* config.json, or NULL */
} ckpt_src;

static void src_close(ckpt_src *s) {
    for (size_t i = 0; i < s->n_files; i++)
        store_file_close(s->files[i]);
    s->n_files = 0;
    json_decref(s->config);
    s->config = NULL;
}

static const store_tensor *src_find(const ckpt_src *s, const char *name) {
    for (size_t i = 0; i < s->n_files; i++) {
        const store_tensor *t = store_file_find(s->files[i], name);
        if (t) return t;
    }
    return NULL;
}

static int src_add(ckpt_src *s, const char *path, attn_error *err) {
    if (s->n_files == SHARDS_MAX)
        return store_error_set(err, path, "more than %d shards", SHARDS_MAX);
    if (store_file_open_mode(&s->files[s->n_files], path, STORE_READ_MAP, err) != 0) return -1;
    s->n_files++;
    return 0;
}

/* The JSON value of the file at path: a regular file (a FIFO named
 * config.json would otherwise block the import for good: open.h). NULL
 * with err set when it cannot be opened or is not JSON. */
static json_t *json_file_load(const char *path, attn_error *err) {
    int fd = store_open_regular(path, NULL, err);
    if (fd < 0) return NULL;
    json_error_t jerr;
    json_t *v = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
    close(fd);
    if (!v) store_error_set(err, path, "not JSON: %s (line %d)", jerr.text, jerr.line);
    return v;
}

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Opens a directory (config.json, then model.safetensors or the index's
 * shards) or one file. */
static int src_open(ckpt_src *s, const char *path, attn_error *err) {
    memset(s, 0, sizeof *s);
    if (!is_dir(path)) return src_add(s, path, err);
    char p[4096];
    snprintf(p, sizeof p, "%s/config.json", path);
    if (exists(p)) {
        if (!(s->config = json_file_load(p, err))) return -1;
        if (!json_is_object(s->config)) return store_error_set(err, p, "not a JSON object");
    }
    snprintf(p, sizeof p, "%s/model.safetensors", path);
    if (exists(p)) return src_add(s, p, err);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", path);
    if (!exists(p))
        return store_error_set(err, path,
                               "a checkpoint directory holds model.safetensors or "
                               "model.safetensors.index.json, and this one neither");
    json_t *index = json_file_load(p, err);
    if (!index) return -1;
    json_t *map = json_object_get(index, "weight_map");
    if (!json_is_object(map)) {
        json_decref(index);
        return store_error_set(err, p, "no \"weight_map\" object");
    }
    /* Each shard once, in the order first named. */
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach(map, key, v) {
        const char *file = json_string_value(v);
        if (!file || !*file || strchr(file, '/')) {
            rc = store_error_set(err, p, "weight_map's \"%s\" is not a file name of the directory",
                                 key);
            break;
        }
        char shard[4096];
        snprintf(shard, sizeof shard, "%s/%s", path, file);
        int seen = 0;
        for (size_t i = 0; i < s->n_files && !seen; i++)
            seen = strcmp(store_file_path(s->files[i]), shard) == 0;
        if (!seen && (rc = src_add(s, shard, err)) != 0) break;
    }
    json_decref(index);
    if (rc == 0 && s->n_files == 0) rc = store_error_set(err, p, "an empty weight_map");
    return rc;
}

/* ---- config.json ------------------------------------------------------------ */

/* The first of `keys` (NULL-terminated) present and not null in the
 * config, or NULL. */
static json_t *cfg_get(const json_t *cfg, const char *const *keys, const char **which) {
    for (; cfg && *keys; keys++) {
        json_t *v = json_object_get(cfg, *keys);
        if (v && !json_is_null(v)) {
            *which = *keys;
            return v;
        }
    }
    return NULL;
}

/* A positive integer field; 0 absent, 1 read, -1 wrong type. */
static int cfg_count(const json_t *cfg, const char *const *keys, size_t *out, const char *path,
                     attn_error *err) {
    const char *which;
    json_t *v = cfg_get(cfg, keys, &which);
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 1)
        return store_error_set(err, path, "config.json's \"%s\" is not a positive integer", which);
    *out = (size_t)json_integer_value(v);
    return 1;
}

/* A number field (integer or real), > 0 unless `any`; 0 absent, 1 read, -1. */
static int cfg_number(const json_t *cfg, const char *const *keys, double *out, const char *path,
                      attn_error *err) {
    const char *which;
    json_t *v = cfg_get(cfg, keys, &which);
    if (!v) return 0;
    if (!json_is_number(v) || !(json_number_value(v) > 0))
        return store_error_set(err, path, "config.json's \"%s\" is not a number > 0", which);
    *out = json_number_value(v);
    return 1;
}

#define KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---- the architectures ---------------------------------------------------- */

/* Layer indices beyond this are not names we parse (no checkpoint has them). */
#define LAYER_MAX 1000000u

enum { PARTS_MAX = 8 };

/* One tensor of a GPT-2 or BERT layer: its name after "<prefix><head><L>",
 * and its shape as multiples of d (rank 1 or 2). The other architectures
 * check their shapes in modern_read, against h, g and dh too. */
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
    int by_name;                /* detected from the names (gemma2 has llama's) */
    const char *model_types[6]; /* config.json's model_type values read as this */
    size_t n_parts;
    part_desc parts[PARTS_MAX]; /* parts[0] is the anchor; d = its shape[0] */
} arch_desc;

static const arch_desc archs[] = {
    {STORE_IMPORT_GPT2,
     "GPT-2",
     {"", "transformer."},
     "h.",
     ATTN_MASK_CAUSAL,
     1,
     {"gpt2"},
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
     1,
     {"bert"},
     8,
     {{".attention.self.query.weight", 2, {1, 1}, "[d_model, d_model] (nn.Linear)"},
      {".attention.self.query.bias", 1, {1, 0}, "[d_model]"},
      {".attention.self.key.weight", 2, {1, 1}, "[d_model, d_model] (nn.Linear)"},
      {".attention.self.key.bias", 1, {1, 0}, "[d_model]"},
      {".attention.self.value.weight", 2, {1, 1}, "[d_model, d_model] (nn.Linear)"},
      {".attention.self.value.bias", 1, {1, 0}, "[d_model]"},
      {".attention.output.dense.weight", 2, {1, 1}, "[d_model, d_model] (nn.Linear)"},
      {".attention.output.dense.bias", 1, {1, 0}, "[d_model]"}}},
    {STORE_IMPORT_LLAMA,
     "Llama",
     {"", "model."},
     "layers.",
     ATTN_MASK_CAUSAL,
     1,
     {"llama", "mistral", "mixtral", "qwen2"},
     1,
     {{".self_attn.q_proj.weight", 2, {0, 0}, "[n_heads·d_head, d_model] (nn.Linear)"}}},
    {STORE_IMPORT_GEMMA2,
     "Gemma 2",
     {"", "model."},
     "layers.",
     ATTN_MASK_CAUSAL,
     0,
     {"gemma2"},
     1,
     {{".self_attn.q_proj.weight", 2, {0, 0}, "[n_heads·d_head, d_model] (nn.Linear)"}}},
    {STORE_IMPORT_GPT_NEOX,
     "GPT-NeoX",
     {"", "gpt_neox."},
     "layers.",
     ATTN_MASK_CAUSAL,
     1,
     {"gpt_neox"},
     1,
     {{".attention.query_key_value.weight", 2, {0, 0}, "[3·d_model, d_model] (nn.Linear)"}}},
    {STORE_IMPORT_BLOOM,
     "BLOOM",
     {"", "transformer."},
     "h.",
     ATTN_MASK_CAUSAL,
     1,
     {"bloom"},
     1,
     {{".self_attention.query_key_value.weight", 2, {0, 0}, "[3·d_model, d_model] (nn.Linear)"}}},
    {STORE_IMPORT_WHISPER,
     "Whisper decoder cross-attention",
     {"", "model."},
     "decoder.layers.",
     ATTN_MASK_NONE,
     1,
     {"whisper"},
     1,
     {{".encoder_attn.q_proj.weight", 2, {0, 0}, "[d_model, d_model] (nn.Linear)"}}},
};
enum { N_ARCHS = sizeof archs / sizeof archs[0] };

/* The parts' indices, per architecture. */
enum { GPT2_W_QKV, GPT2_B_QKV, GPT2_W_O, GPT2_B_O };
enum { BERT_W_Q, BERT_B_Q, BERT_W_K, BERT_B_K, BERT_W_V, BERT_B_V, BERT_W_O, BERT_B_O };

int store_import_arch_parse(const char *text, store_import_arch *out) {
    if (strcmp(text, "auto") == 0) {
        *out = STORE_IMPORT_AUTO;
        return 0;
    }
    for (size_t i = 0; i < N_ARCHS; i++)
        if (strcmp(text, store_import_arch_name(archs[i].arch)) == 0) {
            *out = archs[i].arch;
            return 0;
        }
    return -1;
}

const char *store_import_arch_name(store_import_arch arch) {
    switch (arch) {
    case STORE_IMPORT_GPT2: return "gpt2";
    case STORE_IMPORT_BERT: return "bert";
    case STORE_IMPORT_LLAMA: return "llama";
    case STORE_IMPORT_GEMMA2: return "gemma2";
    case STORE_IMPORT_GPT_NEOX: return "gpt_neox";
    case STORE_IMPORT_BLOOM: return "bloom";
    case STORE_IMPORT_WHISPER: return "whisper";
    default: return "auto";
    }
}

const char *store_import_arch_label(store_import_arch arch) {
    for (size_t i = 0; i < N_ARCHS; i++)
        if (archs[i].arch == arch) return archs[i].label;
    return "auto";
}

/* config.json's model_type as an architecture: 0 and *out (AUTO when the
 * config has no model_type), or -1 for one this does not read. */
static int arch_from_config(const json_t *cfg, store_import_arch *out, const char *path,
                            attn_error *err) {
    *out = STORE_IMPORT_AUTO;
    json_t *mt = json_object_get(cfg, "model_type");
    if (!cfg || !mt) return 0;
    const char *type = json_string_value(mt);
    if (!type) return store_error_set(err, path, "config.json's \"model_type\" is not a string");
    for (size_t i = 0; i < N_ARCHS; i++)
        for (size_t k = 0; k < 6 && archs[i].model_types[k]; k++)
            if (strcmp(type, archs[i].model_types[k]) == 0) {
                *out = archs[i].arch;
                return 0;
            }
    return store_error_set(err, path,
                           "config.json's model_type '%s' is not one this tool reads (llama, "
                           "mistral, mixtral, qwen2, gemma2, gpt_neox, bloom, whisper, gpt2, "
                           "bert); --arch reads it as one of those, if its attention is",
                           type);
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

static void names_scan(const ckpt_src *src, size_t layer, arch_scan scan[N_ARCHS]) {
    memset(scan, 0, N_ARCHS * sizeof scan[0]);
    for (size_t fi = 0; fi < src->n_files; fi++)
        for (size_t t = 0; t < store_file_count(src->files[fi]); t++) {
            const char *name = store_file_tensor(src->files[fi], t)->name;
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

/* Picks the architecture (`arch`, or the only one the names show) and the
 * prefix of the layer; fills *out and *prefix, or fails with err. */
static int layer_locate(const ckpt_src *src, const char *path, store_import_arch arch, size_t layer,
                        const arch_desc **out, const char **prefix, size_t *n_layers,
                        attn_error *err) {
    arch_scan scan[N_ARCHS];
    names_scan(src, layer, scan);

    const arch_desc *a = NULL;
    const arch_scan *s = NULL;
    if (arch == STORE_IMPORT_AUTO) {
        for (size_t i = 0; i < N_ARCHS; i++) {
            if (scan[i].n_layers == 0 || !archs[i].by_name) continue;
            if (a)
                return store_error_set(err, path,
                                       "holds both %s and %s attention tensors; pass --arch",
                                       a->label, archs[i].label);
            a = &archs[i];
            s = &scan[i];
        }
        if (!a)
            return store_error_set(
                err, path,
                "no GPT-2 ('[transformer.]h.N.attn.c_attn.weight') nor BERT "
                "('[bert.]encoder.layer.N.attention.self.query.weight') nor Llama "
                "('[model.]layers.N.self_attn.q_proj.weight') nor GPT-NeoX, BLOOM or Whisper "
                "attention tensors: not a checkpoint this tool reads");
    } else {
        for (size_t i = 0; i < N_ARCHS; i++)
            if (archs[i].arch == arch) {
                a = &archs[i];
                s = &scan[i];
            }
        if (!a) return store_error_set(err, NULL, "unknown architecture %d", (int)arch);
    }

    char want[2][160];
    for (unsigned p = 0; p < 2; p++)
        snprintf(want[p], sizeof want[p], "%s%s%zu%s", a->prefixes[p], a->head, layer,
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
                               layer, want[0], want[1], a->label, s->n_layers - 1);
    }
    *out = a;
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
static int layer_read(const ckpt_src *src, const char *path, const arch_desc *a, const char *prefix,
                      size_t layer, size_t n_heads, float *vals[PARTS_MAX], size_t *d,
                      attn_error *err) {
    const store_tensor *t[PARTS_MAX];
    char names[PARTS_MAX][160];
    for (size_t i = 0; i < a->n_parts; i++) {
        snprintf(names[i], sizeof names[i], "%s%s%zu%s", prefix, a->head, layer,
                 a->parts[i].suffix);
        t[i] = src_find(src, names[i]);
        if (!t[i])
            return store_error_set(err, path,
                                   "no tensor '%s': %s layer %zu is incomplete (its anchor "
                                   "'%s' is there)",
                                   names[i], a->label, layer, names[0]);
    }

    const store_tensor *anchor = t[0];
    if (anchor->rank != 2 || anchor->shape[0] == 0)
        return store_error_set(err, path, "tensor '%s' has rank %zu, expected %s", names[0],
                               anchor->rank, a->parts[0].rule);
    *d = anchor->shape[0];
    for (size_t i = 0; i < a->n_parts; i++)
        if (part_shape_check(t[i], &a->parts[i], *d, names[0], path, err) != 0) return -1;
    if (*d % n_heads != 0)
        return store_error_set(err, path, "d_model %zu (from '%s') is not divisible by %zu heads",
                               *d, names[0], n_heads);

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

/* The model to write: its tensors, row-major F32 (owned, or borrowed from
 * the parts read), its shape and its variants. */
typedef struct model_out {
    size_t d, h, g, dh;
    size_t dc; /* > 0: cross-attention, w_qkv is w_q */
    const float *w_qkv, *b_qkv, *w_o, *b_o, *w_kv, *b_kv;
    float *owned[16]; /* what to free: buffers made, and the parts read */
    size_t n_owned;
    attn_rope rope;
    int alibi;
    size_t window;
    double softcap, scale;
    attn_mask_kind mask;
} model_out;

/* A zeroed owned buffer of n floats, or NULL. */
static float *owned_alloc(model_out *m, size_t n) {
    size_t bytes;
    if (m->n_owned == 16 || __builtin_mul_overflow(n, sizeof(float), &bytes)) return NULL;
    float *p = calloc(1, bytes ? bytes : 1);
    if (p) m->owned[m->n_owned++] = p;
    return p;
}

/* nn.Linear W [out, in] (y = x·Wᵀ) into columns col0 … col0+out−1 of the
 * row-vector matrix dst [in, dst_cols]: dst[r, col0 + c] = W[c, r]. */
static void linear_into(float *dst, size_t dst_cols, size_t col0, const float *w, size_t out,
                        size_t in) {
    for (size_t r = 0; r < in; r++)
        for (size_t c = 0; c < out; c++)
            dst[r * dst_cols + col0 + c] = w[c * in + r];
}

/*
 * GPT-2: every tensor as it is. BERT (Linear weights W [out = d, in = d]):
 *   w_qkv[r, b·d + c] = W_b[c, r]    r, c < d; b = 0, 1, 2 for q, k, v
 *   b_qkv[b·d + c]    = bias_b[c]
 *   w_o[r, c]         = dense[c, r]
 */
static int layout_build(model_out *m, const arch_desc *a, float *const vals[PARTS_MAX], size_t d,
                        attn_error *err) {
    if (a->arch == STORE_IMPORT_GPT2) {
        m->w_qkv = vals[GPT2_W_QKV];
        m->b_qkv = vals[GPT2_B_QKV];
        m->w_o = vals[GPT2_W_O];
        m->b_o = vals[GPT2_B_O];
        return 0;
    }
    /* d·d fitted in the file as a tensor, so 3·d·d floats cannot overflow
     * unless the file was near SIZE_MAX: check anyway. */
    size_t dd;
    if (__builtin_mul_overflow(d, d, &dd) || dd > SIZE_MAX / 3 / sizeof(float))
        return store_error_set(err, NULL, "d_model %zu too large", d);
    float *w_qkv = owned_alloc(m, 3 * dd), *b_qkv = owned_alloc(m, 3 * d),
          *w_o = owned_alloc(m, dd);
    if (!w_qkv || !b_qkv || !w_o) return store_error_set(err, NULL, "out of memory");
    const float *w[3] = {vals[BERT_W_Q], vals[BERT_W_K], vals[BERT_W_V]};
    const float *b[3] = {vals[BERT_B_Q], vals[BERT_B_K], vals[BERT_B_V]};
    for (size_t blk = 0; blk < 3; blk++) {
        linear_into(w_qkv, 3 * d, blk * d, w[blk], d, d);
        memcpy(b_qkv + blk * d, b[blk], d * sizeof(float));
    }
    linear_into(w_o, d, 0, vals[BERT_W_O], d, d);
    m->w_qkv = w_qkv;
    m->b_qkv = b_qkv;
    m->w_o = w_o;
    m->b_o = vals[BERT_B_O];
    return 0;
}

/* ---- the other architectures: shapes from h, g, dh; variants from config -- */

/* The tensors of one such layer, found and read. */
typedef struct modern_parts {
    const store_tensor *t[8];
    float *v[8];
    char names[8][256];
} modern_parts;

/* Slots: weights and biases of q, k, v, o — or of the fused qkv and o. */
enum { MP_WQ, MP_BQ, MP_WK, MP_BK, MP_WV, MP_BV, MP_WO, MP_BO };

static void parts_free(modern_parts *p) {
    for (size_t i = 0; i < 8; i++)
        free(p->v[i]);
}

/* t's values as floats, in a new buffer (the caller frees it); NULL with
 * err set when out of memory or a value is not finite. */
static float *tensor_read(const store_tensor *t, const char *path, attn_error *err);

/* Checks t's shape is [d0, d1] (d1 = 0: [d0]). */
static int shape_want(const store_tensor *t, size_t d0, size_t d1, const char *rule,
                      const char *path, attn_error *err) {
    size_t rank = d1 ? 2 : 1;
    if (t->rank == rank && t->shape[0] == d0 && (rank == 1 || t->shape[1] == d1)) return 0;
    char got[160], exp[64];
    if (rank == 1)
        snprintf(exp, sizeof exp, "[%zu]", d0);
    else
        snprintf(exp, sizeof exp, "[%zu, %zu]", d0, d1);
    return store_error_set(err, path, "tensor '%s' has shape %s, expected %s = %s", t->name,
                           store_tensor_shape_text(t, got, sizeof got), exp, rule);
}

/* config.json's keys for the number of heads, the first present read. */
#define HEADS_KEYS                                                                                 \
    KEYS("num_attention_heads", "n_head", "decoder_attention_heads", "encoder_attention_heads")

/* The number of heads: the option's, else config.json's. */
static int heads_resolve(const store_import_options *opt, const json_t *cfg, size_t *h,
                         const char *path, attn_error *err) {
    *h = opt->n_heads;
    if (*h) return 0;
    int got = cfg_count(cfg, HEADS_KEYS, h, path, err);
    if (got < 0) return -1;
    if (!got)
        return store_error_set(err, path, "the number of heads is unknown: %s (--heads)",
                               cfg ? "config.json does not say it" : "give it");
    if (*h > STORE_HEADS_MAX)
        return store_error_set(err, path, "config.json's %zu heads are more than %d", *h,
                               STORE_HEADS_MAX);
    return 0;
}

/* RoPE from the options, else config.json, for head width dh. */
static int rope_resolve(const store_import_options *opt, const json_t *cfg, const arch_desc *a,
                        size_t dh, attn_rope *rope, const char *path, attn_error *err) {
    *rope = (attn_rope){.theta = 10000, .style = ATTN_ROPE_HALF};
    int neox = a->arch == STORE_IMPORT_GPT_NEOX;
    if (opt->rope_theta > 0)
        rope->theta = opt->rope_theta;
    else if (cfg_number(cfg, neox ? KEYS("rotary_emb_base", "rope_theta") : KEYS("rope_theta"),
                        &rope->theta, path, err) < 0)
        return -1;
    /* GPT-NeoX's configuration defaults rotary_pct to 0.25 (Pythia's). */
    double fraction = neox ? 0.25 : 1;
    const char *const *fraction_keys =
        neox ? KEYS("rotary_pct", "partial_rotary_factor") : KEYS("partial_rotary_factor");
    if (cfg_number(cfg, fraction_keys, &fraction, path, err) < 0) return -1;
    /* dh · fraction becomes a count of coordinates: above 1 it is not a
     * part of d_head, and far above it would not even convert to a size. */
    const char *which;
    if (!opt->rope_dims && fraction > 1 && cfg_get(cfg, fraction_keys, &which))
        return store_error_set(err, path,
                               "config.json's \"%s\" %g is more than 1 (the part of d_head "
                               "that RoPE rotates)",
                               which, fraction);
    rope->dims = opt->rope_dims ? opt->rope_dims : (size_t)((double)dh * fraction);
    if (rope->dims % 2 || rope->dims > dh || rope->dims == 0)
        return store_error_set(err, path,
                               "RoPE on %zu of the %zu coordinates of a head: it must be even, "
                               "≥ 2 and at most d_head (--rope-dims)",
                               rope->dims, dh);
    if (opt->rope_scaling != ATTN_ROPE_SCALING_NONE) {
        rope->scaling = opt->rope_scaling;
        rope->factor = opt->rope_factor;
        rope->low_freq_factor = opt->rope_low_freq_factor;
        rope->high_freq_factor = opt->rope_high_freq_factor;
        rope->original_max_position = opt->rope_original_max_position;
        return 0;
    }
    json_t *rs = cfg ? json_object_get(cfg, "rope_scaling") : NULL;
    if (!rs || json_is_null(rs)) return 0;
    if (!json_is_object(rs))
        return store_error_set(err, path, "config.json's \"rope_scaling\" is not an object");
    json_t *type = cfg_get(rs, KEYS("rope_type", "type"), &which);
    const char *ty = type ? json_string_value(type) : NULL;
    if (!ty) return store_error_set(err, path, "config.json's \"rope_scaling\" has no type");
    if (strcmp(ty, "default") == 0) return 0;
    int llama3 = strcmp(ty, "llama3") == 0;
    if (!llama3 && strcmp(ty, "linear") != 0)
        return store_error_set(err, path,
                               "config.json's rope_scaling type '%s' is not one the engine has "
                               "(linear, llama3)",
                               ty);
    rope->scaling = llama3 ? ATTN_ROPE_SCALING_LLAMA3 : ATTN_ROPE_SCALING_LINEAR;
    const char *keys[4] = {"factor", "low_freq_factor", "high_freq_factor",
                           "original_max_position_embeddings"};
    double *dst[4] = {&rope->factor, &rope->low_freq_factor, &rope->high_freq_factor,
                      &rope->original_max_position};
    for (int i = 0; i < (llama3 ? 4 : 1); i++) {
        int got = cfg_number(rs, (const char *const[]){keys[i], NULL}, dst[i], path, err);
        if (got < 0) return -1;
        if (!got)
            return store_error_set(err, path, "config.json's rope_scaling '%s' has no \"%s\"", ty,
                                   keys[i]);
    }
    return 0;
}

/* The sliding window of layer L, from the options, else config.json. */
static int window_resolve(const store_import_options *opt, const json_t *cfg, const arch_desc *a,
                          size_t layer, size_t *window, const char *path, attn_error *err) {
    *window = opt->window;
    if (*window || !cfg) return 0;
    size_t w = 0;
    if (cfg_count(cfg, KEYS("sliding_window"), &w, path, err) < 0) return -1;
    if (!w) return 0;
    json_t *types = json_object_get(cfg, "layer_types");
    const char *mt = json_string_value(json_object_get(cfg, "model_type"));
    int on;
    if (json_is_array(types)) {
        /* transformers ≥ 4.54 names each layer's kind */
        const char *kind = json_string_value(json_array_get(types, layer));
        if (!kind)
            return store_error_set(err, path, "config.json's \"layer_types\" has no layer %zu",
                                   layer);
        on = strcmp(kind, "sliding_attention") == 0;
    } else if (a->arch == STORE_IMPORT_GEMMA2) {
        on = layer % 2 == 0; /* Gemma 2: local (sliding) layers are the even ones */
    } else if (mt && strncmp(mt, "qwen2", 5) == 0) {
        /* Qwen2: only with use_sliding_window, from layer max_window_layers on */
        json_t *use = json_object_get(cfg, "use_sliding_window");
        json_t *mwl = json_object_get(cfg, "max_window_layers");
        if (mwl && !(json_is_integer(mwl) && json_integer_value(mwl) >= 0))
            return store_error_set(err, path,
                                   "config.json's \"max_window_layers\" is not an integer ≥ 0");
        size_t from = mwl ? (size_t)json_integer_value(mwl) : 0;
        on = json_is_true(use) && layer >= from;
    } else if (mt && strcmp(mt, "llama") == 0) {
        /* Llama's attention has no window (transformers' modeling_llama.py
         * reads no sliding_window): a key left in its config is not one */
        on = 0;
    } else {
        on = 1; /* Mistral: every layer */
    }
    *window = on ? w : 0;
    return 0;
}

/* Finds `<base><suffix>` into p->t[slot] (required or not). */
static int part_get(const ckpt_src *src, modern_parts *p, int slot, const char *base,
                    const char *suffix, int required, const char *label, size_t layer,
                    const char *path, attn_error *err) {
    snprintf(p->names[slot], sizeof p->names[slot], "%s%s", base, suffix);
    p->t[slot] = src_find(src, p->names[slot]);
    if (!p->t[slot] && required)
        return store_error_set(err, path, "no tensor '%s': %s layer %zu is incomplete",
                               p->names[slot], label, layer);
    return 0;
}

/* For a message: where a value came from, the option when it was given,
 * else config.json's key (the first of keys present), else `otherwise`.
 * In buf when it is a key. */
static const char *value_source(char *buf, size_t len, int by_option, const char *option,
                                const json_t *cfg, const char *const *keys, const char *otherwise) {
    const char *which;
    if (by_option) return option;
    if (!keys || !cfg_get(cfg, keys, &which)) return otherwise;
    snprintf(buf, len, "config.json's \"%s\"", which);
    return buf;
}

/*
 * h·dh into *hd, refused when it, or 3·h·dh, overflows a size: h and dh
 * may come from config.json, whatever their size (head_dim 2^61 + 1 with
 * 8 heads would wrap h·dh to 8 and could then match a tensor's shape).
 * 3·h·dh bounds the rest: g divides h, so the columns of q, k and v, hd +
 * 2·gd or the fused 3·hd, are at most 3·hd; every other product of the
 * import has a tensor of the file as a factor, whose size the reader
 * checked.
 */
static int heads_width(const store_import_options *opt, const json_t *cfg, size_t h, size_t dh,
                       int dh_from_config, size_t *hd, const char *path, attn_error *err) {
    size_t three;
    int over = __builtin_mul_overflow(h, dh, hd);
    if (!over && !__builtin_mul_overflow(*hd, 3, &three)) return 0;
    char hb[64], db[64];
    const char *hs =
        value_source(hb, sizeof hb, opt->n_heads != 0, "--heads", cfg, HEADS_KEYS, "n_heads");
    const char *ds =
        value_source(db, sizeof db, opt->d_head != 0, "--head-dim", cfg,
                     dh_from_config ? KEYS("head_dim") : NULL, "d_head (from the tensors)");
    if (over)
        return store_error_set(err, path, "%s × %s (%zu × %zu) overflows a size", hs, ds, h, dh);
    return store_error_set(err, path,
                           "3 × %s × %s (3 × %zu × %zu, the columns of q, k and v) overflows a "
                           "size",
                           hs, ds, h, dh);
}

/*
 * Llama, Gemma 2, GPT-NeoX, BLOOM, Whisper: reads layer `layer` into *m.
 *   separate q, k, v (nn.Linear [out, in]):
 *     w_qkv[r, c]        = q[c, r]             c < hd
 *     w_qkv[r, hd + c]   = k[c, r]             c < gd
 *     w_qkv[r, hd+gd+c]  = v[c, r]
 *   (Whisper: w_q = qᵀ, w_kv = [kᵀ | vᵀ])
 *   fused per head (GPT-NeoX, BLOOM), W [3hd, d], row (3i + p)·dh + j for
 *   head i, part p (q, k, v), coordinate j:
 *     w_qkv[r, p·hd + i·dh + j] = W[(3i + p)·dh + j, r]
 *   w_o[r, c] = o[c, r]
 */
static int modern_read(const ckpt_src *src, const char *path, const arch_desc *a,
                       const char *prefix, size_t layer, const store_import_options *opt, size_t h,
                       model_out *m, attn_error *err) {
    const json_t *cfg = src->config;
    char base[160];
    snprintf(base, sizeof base, "%s%s%zu", prefix, a->head, layer);
    modern_parts p = {0};
    int fused = a->arch == STORE_IMPORT_GPT_NEOX || a->arch == STORE_IMPORT_BLOOM;
    int rc = -1;
    if (fused) {
        const char *att = a->arch == STORE_IMPORT_BLOOM ? ".self_attention" : ".attention";
        char s[64];
        static const char *const ends[4] = {".query_key_value.weight", ".query_key_value.bias",
                                            ".dense.weight", ".dense.bias"};
        static const int slots[4] = {MP_WQ, MP_BQ, MP_WO, MP_BO};
        for (int i = 0; i < 4; i++) {
            snprintf(s, sizeof s, "%s%s", att, ends[i]);
            if (part_get(src, &p, slots[i], base, s, i % 2 == 0, a->label, layer, path, err))
                goto done;
        }
    } else {
        const char *att = a->arch == STORE_IMPORT_WHISPER ? ".encoder_attn." : ".self_attn.";
        const char *o = a->arch == STORE_IMPORT_WHISPER ? "out_proj" : "o_proj";
        const char *projs[4] = {"q_proj", "k_proj", "v_proj", o};
        char s[64];
        for (int i = 0; i < 4; i++) {
            snprintf(s, sizeof s, "%s%s.weight", att, projs[i]);
            if (part_get(src, &p, 2 * i, base, s, 1, a->label, layer, path, err)) goto done;
            snprintf(s, sizeof s, "%s%s.bias", att, projs[i]);
            if (part_get(src, &p, 2 * i + 1, base, s, 0, a->label, layer, path, err)) goto done;
        }
    }

    /* Shapes: d from the anchor, then h, g, dh. */
    const store_tensor *q = p.t[MP_WQ];
    if (q->rank != 2 || q->shape[0] == 0 || q->shape[1] == 0) {
        char got[160];
        store_error_set(err, path, "tensor '%s' has shape %s, expected %s", q->name,
                        store_tensor_shape_text(q, got, sizeof got), a->parts[0].rule);
        goto done;
    }
    size_t d = q->shape[1], cfg_d = 0;
    if (cfg_count(cfg, KEYS("hidden_size", "d_model", "n_embed", "n_embd"), &cfg_d, path, err) < 0)
        goto done;
    if (cfg_d && cfg_d != d) {
        store_error_set(err, path, "config.json's d_model %zu disagrees with '%s' (d_model %zu)",
                        cfg_d, q->name, d);
        goto done;
    }
    size_t g = h, dh = opt->d_head;
    int dh_from_config = 0;
    int grouped = a->arch == STORE_IMPORT_LLAMA || a->arch == STORE_IMPORT_GEMMA2;
    if (grouped) {
        if (opt->n_kv_heads)
            g = opt->n_kv_heads;
        else if (cfg_count(cfg, KEYS("num_key_value_heads"), &g, path, err) < 0)
            goto done;
        if (!dh) {
            int got = cfg_count(cfg, KEYS("head_dim"), &dh, path, err);
            if (got < 0) goto done;
            dh_from_config = got;
        }
        if (!dh) {
            if (q->shape[0] % h) {
                store_error_set(err, path,
                                "'%s' has %zu rows, not a multiple of %zu heads (n_heads)", q->name,
                                q->shape[0], h);
                goto done;
            }
            dh = q->shape[0] / h;
        }
    } else if (!dh) {
        if (d % h) {
            store_error_set(err, path, "d_model %zu (from '%s') is not divisible by %zu heads", d,
                            q->name, h);
            goto done;
        }
        dh = d / h;
    }
    if (h % g) {
        store_error_set(err, path, "%zu K/V heads do not divide %zu heads", g, h);
        goto done;
    }
    size_t hd, gd;
    if (heads_width(opt, cfg, h, dh, dh_from_config, &hd, path, err) != 0) goto done;
    gd = g * dh; /* ≤ hd: g divides h */
    if (fused) {
        if (shape_want(p.t[MP_WQ], 3 * hd, d, "[3·n_heads·d_head, d_model]", path, err) ||
            (p.t[MP_BQ] && shape_want(p.t[MP_BQ], 3 * hd, 0, "[3·n_heads·d_head]", path, err)))
            goto done;
    } else {
        if (shape_want(p.t[MP_WQ], hd, d, "[n_heads·d_head, d_model]", path, err) ||
            shape_want(p.t[MP_WK], gd, d, "[n_kv_heads·d_head, d_model]", path, err) ||
            shape_want(p.t[MP_WV], gd, d, "[n_kv_heads·d_head, d_model]", path, err) ||
            (p.t[MP_BQ] && shape_want(p.t[MP_BQ], hd, 0, "[n_heads·d_head]", path, err)) ||
            (p.t[MP_BK] && shape_want(p.t[MP_BK], gd, 0, "[n_kv_heads·d_head]", path, err)) ||
            (p.t[MP_BV] && shape_want(p.t[MP_BV], gd, 0, "[n_kv_heads·d_head]", path, err)))
            goto done;
    }
    if (shape_want(p.t[MP_WO], d, hd, "[d_model, n_heads·d_head]", path, err) ||
        (p.t[MP_BO] && shape_want(p.t[MP_BO], d, 0, "[d_model]", path, err)))
        goto done;
    for (int i = 0; i < 8; i++)
        if (p.t[i] && p.t[i]->dtype != STORE_DTYPE_F32 && p.t[i]->dtype != STORE_DTYPE_F16 &&
            p.t[i]->dtype != STORE_DTYPE_BF16) {
            store_error_set(err, path,
                            "tensor '%s' has dtype %s; the importer reads F32, F16 or BF16",
                            p.names[i], store_dtype_name(p.t[i]->dtype));
            goto done;
        }

    /* Variants. */
    m->d = d;
    m->h = h;
    m->g = g;
    m->dh = dh;
    m->mask = a->mask;
    if (a->arch == STORE_IMPORT_LLAMA || a->arch == STORE_IMPORT_GEMMA2 ||
        a->arch == STORE_IMPORT_GPT_NEOX) {
        if (rope_resolve(opt, cfg, a, dh, &m->rope, path, err) != 0) goto done;
    }
    m->alibi = a->arch == STORE_IMPORT_BLOOM;
    if (a->arch != STORE_IMPORT_WHISPER) {
        if (window_resolve(opt, cfg, a, layer, &m->window, path, err) != 0) goto done;
        m->softcap = opt->softcap;
        if (!m->softcap &&
            cfg_number(cfg, KEYS("attn_logit_softcapping"), &m->softcap, path, err) < 0)
            goto done;
    }
    m->scale = opt->scale;
    double qpas = 0;
    if (!m->scale && a->arch == STORE_IMPORT_GEMMA2) {
        if (cfg_number(cfg, KEYS("query_pre_attn_scalar"), &qpas, path, err) < 0) goto done;
        if (qpas) m->scale = 1 / sqrt(qpas);
    }

    /* Values, then our layout. */
    for (int i = 0; i < 8; i++)
        if (p.t[i] && !(p.v[i] = tensor_read(p.t[i], path, err))) goto done;
    float *w_o = owned_alloc(m, hd * d);
    if (!w_o) {
        store_error_set(err, NULL, "out of memory");
        goto done;
    }
    linear_into(w_o, d, 0, p.v[MP_WO], d, hd);
    m->w_o = w_o;
    if (p.v[MP_BO]) {
        float *b = owned_alloc(m, d);
        if (!b) {
            store_error_set(err, NULL, "out of memory");
            goto done;
        }
        memcpy(b, p.v[MP_BO], d * sizeof(float));
        m->b_o = b;
    }
    if (fused) {
        float *w = owned_alloc(m, d * 3 * hd), *b = p.v[MP_BQ] ? owned_alloc(m, 3 * hd) : NULL;
        if (!w || (p.v[MP_BQ] && !b)) {
            store_error_set(err, NULL, "out of memory");
            goto done;
        }
        for (size_t i = 0; i < h; i++)
            for (size_t part = 0; part < 3; part++)
                for (size_t j = 0; j < dh; j++) {
                    size_t row = (3 * i + part) * dh + j, col = part * hd + i * dh + j;
                    for (size_t r = 0; r < d; r++)
                        w[r * 3 * hd + col] = p.v[MP_WQ][row * d + r];
                    if (b) b[col] = p.v[MP_BQ][row];
                }
        m->w_qkv = w;
        m->b_qkv = b;
    } else if (a->arch == STORE_IMPORT_WHISPER) {
        float *wq = owned_alloc(m, d * hd), *wkv = owned_alloc(m, d * 2 * gd);
        float *bq = p.v[MP_BQ] ? owned_alloc(m, hd) : NULL;
        float *bkv = p.v[MP_BK] || p.v[MP_BV] ? owned_alloc(m, 2 * gd) : NULL;
        if (!wq || !wkv || (p.v[MP_BQ] && !bq) || ((p.v[MP_BK] || p.v[MP_BV]) && !bkv)) {
            store_error_set(err, NULL, "out of memory");
            goto done;
        }
        linear_into(wq, hd, 0, p.v[MP_WQ], hd, d);
        linear_into(wkv, 2 * gd, 0, p.v[MP_WK], gd, d);
        linear_into(wkv, 2 * gd, gd, p.v[MP_WV], gd, d);
        if (bq) memcpy(bq, p.v[MP_BQ], hd * sizeof(float));
        if (bkv && p.v[MP_BK]) memcpy(bkv, p.v[MP_BK], gd * sizeof(float));
        if (bkv && p.v[MP_BV]) memcpy(bkv + gd, p.v[MP_BV], gd * sizeof(float));
        m->w_qkv = wq;
        m->b_qkv = bq;
        m->w_kv = wkv;
        m->b_kv = bkv;
        m->dc = d;
    } else {
        size_t cols = hd + 2 * gd;
        int biased = p.v[MP_BQ] || p.v[MP_BK] || p.v[MP_BV];
        float *w = owned_alloc(m, d * cols), *b = biased ? owned_alloc(m, cols) : NULL;
        if (!w || (biased && !b)) {
            store_error_set(err, NULL, "out of memory");
            goto done;
        }
        linear_into(w, cols, 0, p.v[MP_WQ], hd, d);
        linear_into(w, cols, hd, p.v[MP_WK], gd, d);
        linear_into(w, cols, hd + gd, p.v[MP_WV], gd, d);
        /* a bias the checkpoint lacks is zero (Qwen2 has q, k, v's alone) */
        if (b && p.v[MP_BQ]) memcpy(b, p.v[MP_BQ], hd * sizeof(float));
        if (b && p.v[MP_BK]) memcpy(b + hd, p.v[MP_BK], gd * sizeof(float));
        if (b && p.v[MP_BV]) memcpy(b + hd + gd, p.v[MP_BV], gd * sizeof(float));
        m->w_qkv = w;
        m->b_qkv = b;
    }
    rc = 0;
done:
    parts_free(&p);
    return rc;
}

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
static void layer_meta(store_metadata *meta, size_t *nm, const char *prefix, const model_out *m,
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
static void layer_tensors(store_write_tensor *t, size_t *nt, const char *prefix, const model_out *m,
                          layer_text *tx) {
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
 * Writes the n layers ms[] (checkpoint layers `layers`): one layer's file
 * as ever when !stacked, else the stack's form (models/README.md,
 * "Stacks"): n_layers, each layer's tensors and variant keys under
 * "layers.<l>.", l the stack's order.
 */
static int model_write(const char *out_path, const char *in_path, const arch_desc *a,
                       const store_import_options *opt, const model_out *ms, const size_t *layers,
                       size_t n, int stacked, const char *name, store_import_result *res,
                       attn_error *err) {
    const model_out *m = &ms[0];
    char heads[32], kv[32], count[32], description[512], source[512], list[256], flag[256];
    layers_text(list, sizeof list, layers, n, ", ");
    layers_text(flag, sizeof flag, layers, n, ",");
    snprintf(heads, sizeof heads, "%zu", m->h);
    snprintf(description, sizeof description, "%s layer%s %s attention, from %s", a->label,
             n > 1 ? "s" : "", list, source_label(in_path));
    snprintf(source, sizeof source, "tools/import_checkpoint --arch %s --layer%s %s from %s",
             store_import_arch_name(a->arch), stacked ? "s" : "", flag, source_label(in_path));
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

/* ---- the whole -------------------------------------------------------------- */

/* Reads checkpoint layer `layer` into *m (which then owns every buffer it
 * points to); the architecture in *a, its layer count in *n_layers. */
static int layer_import(const ckpt_src *src, const char *in_path, store_import_arch arch,
                        size_t layer, const store_import_options *opt, size_t h, model_out *m,
                        const arch_desc **a, size_t *n_layers, attn_error *err) {
    const char *prefix = "";
    if (layer_locate(src, in_path, arch, layer, a, &prefix, n_layers, err) != 0) return -1;
    if ((*a)->arch != STORE_IMPORT_GPT2 && (*a)->arch != STORE_IMPORT_BERT)
        return modern_read(src, in_path, *a, prefix, layer, opt, h, m, err);
    float *vals[PARTS_MAX] = {0};
    size_t d = 0;
    int rc = layer_read(src, in_path, *a, prefix, layer, h, vals, &d, err);
    if (rc == 0) rc = layout_build(m, *a, vals, d, err);
    /* the parts read become m's: GPT-2's are its tensors as they are */
    for (size_t i = 0; i < PARTS_MAX; i++)
        if (vals[i]) m->owned[m->n_owned++] = vals[i];
    m->d = d;
    m->h = m->g = h;
    m->dh = h ? d / h : 0;
    m->mask = (*a)->mask;
    return rc;
}

/* The layers of a stack share d_model, n_heads, d_head, n_kv_heads and
 * d_context (models/README.md, "Stacks"); a checkpoint whose layers differ
 * is refused here rather than written and refused at load. */
static int stack_check(const model_out *ms, const size_t *layers, size_t n, const char *path,
                       attn_error *err) {
    for (size_t i = 1; i < n; i++) {
        const model_out *m = &ms[i], *f = &ms[0];
        if (m->d != f->d || m->h != f->h || m->g != f->g || m->dh != f->dh || m->dc != f->dc)
            return store_error_set(err, path,
                                   "layer %zu has d_model %zu, %zu heads of %zu, %zu K/V heads, "
                                   "and layer %zu d_model %zu, %zu heads of %zu, %zu K/V heads: "
                                   "a stack's layers share them",
                                   layers[i], m->d, m->h, m->dh, m->g, layers[0], f->d, f->h, f->dh,
                                   f->g);
    }
    return 0;
}

int store_import_layers_parse(const char *spec, size_t **out, size_t *n, int *all,
                              attn_error *err) {
    *out = NULL;
    *n = 0;
    *all = strcmp(spec, "all") == 0;
    if (*all) return 0;
    size_t *list = malloc(STORE_LAYERS_MAX * sizeof *list), count = 0;
    if (!list) return store_error_set(err, NULL, "out of memory");
    const char *p = spec;
    for (;;) {
        size_t lo, hi;
        const char *end = p + strcspn(p, ",");
        const char *dash = memchr(p, '-', (size_t)(end - p));
        char a[16] = "", b[16] = "";
        size_t alen = (size_t)((dash ? dash : end) - p), blen = dash ? (size_t)(end - dash - 1) : 0;
        if (alen == 0 || alen >= sizeof a || (dash && (blen == 0 || blen >= sizeof b))) goto bad;
        memcpy(a, p, alen);
        if (dash) memcpy(b, dash + 1, blen);
        if (store_size_parse(a, LAYER_MAX, &lo) != 0 ||
            (dash && store_size_parse(b, LAYER_MAX, &hi) != 0))
            goto bad;
        if (!dash) hi = lo;
        if (hi < lo) {
            free(list);
            return store_error_set(err, NULL,
                                   "--layers '%s': the range %zu-%zu runs backwards (list the "
                                   "layers one by one for another order)",
                                   spec, lo, hi);
        }
        for (size_t l = lo; l <= hi; l++) {
            for (size_t k = 0; k < count; k++)
                if (list[k] == l) {
                    free(list);
                    return store_error_set(err, NULL, "--layers '%s': layer %zu is named twice",
                                           spec, l);
                }
            if (count == STORE_LAYERS_MAX) {
                free(list);
                return store_error_set(err, NULL, "--layers '%s': more than %d layers", spec,
                                       STORE_LAYERS_MAX);
            }
            list[count++] = l;
        }
        if (!*end) break;
        p = end + 1;
    }
    *out = list;
    *n = count;
    return 0;
bad:
    free(list);
    return store_error_set(err, NULL,
                           "--layers '%s' is not a list of layers: 'all', or numbers and "
                           "ranges from 0 separated by commas, as 0,1,5 or 0-3",
                           spec);
}

int store_import_checkpoint(const char *in_path, const char *out_path,
                            const store_import_options *opt, store_import_result *res,
                            attn_error *err) {
    if (opt->n_heads > STORE_HEADS_MAX)
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

    /* A description the store would refuse to load (model.h). */
    if (opt->description && strlen(opt->description) > STORE_DESCRIPTION_MAX)
        return store_error_set(err, NULL,
                               "the description (--description) is %zu bytes long, over %d",
                               strlen(opt->description), STORE_DESCRIPTION_MAX);

    /* Writing over the input would replace the checkpoint by one layer. */
    struct stat in_st, out_st;
    if (stat(in_path, &in_st) == 0 && stat(out_path, &out_st) == 0 &&
        in_st.st_dev == out_st.st_dev && in_st.st_ino == out_st.st_ino)
        return store_error_set(err, out_path, "is the checkpoint itself; write to another file");

    ckpt_src *src = calloc(1, sizeof *src);
    if (!src) return store_error_set(err, NULL, "out of memory");
    const arch_desc *a = NULL;
    size_t n_layers = 0, h = 0, n = 0, *all = NULL;
    const size_t *layers = opt->layers ? opt->layers : &opt->layer;
    int stacked = opt->layers != NULL || opt->all_layers;
    model_out *ms = NULL;
    store_import_arch arch = opt->arch;
    int rc = -1;
    if (opt->layers && (opt->n_layers == 0 || opt->n_layers > STORE_LAYERS_MAX)) {
        store_error_set(err, NULL, "%zu layers: a stack has 1 … %d", opt->n_layers,
                        STORE_LAYERS_MAX);
        goto done;
    }
    n = opt->layers ? opt->n_layers : 1;
    if (src_open(src, in_path, err) != 0) goto done;
    if (arch == STORE_IMPORT_AUTO && arch_from_config(src->config, &arch, in_path, err) != 0)
        goto done;
    if (heads_resolve(opt, src->config, &h, in_path, err) != 0) goto done;
    if (opt->all_layers) {
        /* every layer the names show, 0 … n−1 (a gap fails at its layer) */
        if (layer_locate(src, in_path, arch, 0, &a, &(const char *){""}, &n_layers, err) != 0)
            goto done;
        if (n_layers > STORE_LAYERS_MAX) {
            store_error_set(err, in_path, "has %zu %s layers; a stack holds at most %d", n_layers,
                            a->label, STORE_LAYERS_MAX);
            goto done;
        }
        if (!(all = malloc(n_layers * sizeof *all))) {
            store_error_set(err, NULL, "out of memory");
            goto done;
        }
        for (size_t l = 0; l < n_layers; l++)
            all[l] = l;
        layers = all;
        n = n_layers;
    }
    if (!(ms = calloc(n, sizeof *ms))) {
        store_error_set(err, NULL, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        if (layer_import(src, in_path, arch, layers[i], opt, h, &ms[i], &a, &n_layers, err) != 0)
            goto done;
    if (stack_check(ms, layers, n, in_path, err) != 0 ||
        model_write(out_path, in_path, a, opt, ms, layers, n, stacked, name, res, err) != 0)
        goto done;
    if (res) {
        res->arch = a->arch;
        res->n_layers = n_layers;
        res->n_imported = n;
        res->d_model = ms[0].d;
        res->n_heads = ms[0].h;
        res->n_kv_heads = ms[0].g;
        res->d_head = ms[0].dh;
        snprintf(res->name, sizeof res->name, "%s", name);
    }
    rc = 0;
done:
    for (size_t i = 0; ms && i < n; i++)
        for (size_t k = 0; k < ms[i].n_owned; k++)
            free(ms[i].owned[k]);
    free(ms);
    free(all);
    src_close(src);
    free(src);
    return rc;
}
