/*
 * import_internal.h — what the importer's files share (store/import*.c);
 * not part of the store's interface (import.h is).
 *
 * The importer is one entry and one file per architecture family:
 *
 *   import.c           store_import_checkpoint: options, which family and
 *                      which layers (--layers), the layers read one by one
 *   import_source.c    the checkpoint's files: config.json, the safetensors
 *                      file or shards; config.json's fields by type
 *   import_tensors.c   a layer's tensors: found, shapes and dtypes checked,
 *                      read into floats, laid out as ours
 *   import_variants.c  heads' widths, RoPE, windows and soft-capping from the
 *                      options, else config.json
 *   import_config.c    config.json's per-layer keys of the newer families
 *                      (layer kinds, rope_parameters, no_rope_layers, …),
 *                      read and checked, not yet mapped
 *   import_norm.c      a layer's norms: input, post-attention, q/k
 *   import_rope.c      the newer families' RoPE (yarn, longrope) and window
 *   import_write.c     the model file written (one layer, or a stack)
 *   import_families.c  the table of families, in --arch's order
 *   import_<family>.c  one family: its config.json keys, its tensor names,
 *                      how its tensors map to our weights (import_family)
 *
 * Adding a layout is adding an import_<family>.c that defines one
 * import_family, its row in import_families.c and its value of
 * store_import_arch (import.h).
 *
 * Memory: a family's read fills an import_out, which owns every buffer it
 * points to (owned[]) from then on, on failure too; import.c frees them.
 */
#ifndef STORE_IMPORT_INTERNAL_H
#define STORE_IMPORT_INTERNAL_H

#include <jansson.h>
#include <stddef.h>

#include "attention/attention.h"
#include "store/error.h"
#include "store/import.h"
#include "store/safetensors.h"

/* ---- the checkpoint (import_source.c) -------------------------------------- */

/* The most shards read (the largest Hub checkpoints have a few hundred). */
#define IMPORT_SHARDS_MAX 1024

typedef struct import_src {
    store_file *files[IMPORT_SHARDS_MAX];
    size_t n_files;
    json_t *config; /* config.json, or NULL */
} import_src;

/* Opens a directory (config.json, then model.safetensors or the index's
 * shards) or one file into *s (which the caller closes, on failure too). */
int import_src_open(import_src *s, const char *path, attn_error *err);
void import_src_close(import_src *s);

/* The tensor of that name in any of the files, or NULL. */
const store_tensor *import_src_find(const import_src *s, const char *name);

/* A NULL-terminated list of config.json keys, the first present read. */
#define IMPORT_KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* config.json's keys for the number of heads. */
#define IMPORT_HEADS_KEYS                                                                          \
    IMPORT_KEYS("num_attention_heads", "n_head", "decoder_attention_heads",                        \
                "encoder_attention_heads")

/* The first of keys present and not null in cfg (NULL: none), its key in
 * *which. */
json_t *import_cfg_get(const json_t *cfg, const char *const *keys, const char **which);

/* A positive integer field; 0 absent, 1 read, -1 wrong type (err set,
 * naming path). */
int import_cfg_count(const json_t *cfg, const char *const *keys, size_t *out, const char *path,
                     attn_error *err);

/* A number field (integer or real) > 0; 0 absent, 1 read, -1 wrong type. */
int import_cfg_number(const json_t *cfg, const char *const *keys, double *out, const char *path,
                      attn_error *err);

/* ---- one layer's config.json (import_config.c) ------------------------------- */

/* config.json's text part: "text_config" when it is an object (Gemma 3's
 * and Llama 4's multimodal configs), else cfg itself (may be NULL). */
const json_t *import_cfg_text(const json_t *cfg);

/* What config.json says a layer's attention is. */
typedef enum import_layer_kind {
    IMPORT_LAYER_UNSAID, /* nothing per layer: the family's rule decides */
    IMPORT_LAYER_FULL,
    IMPORT_LAYER_SLIDING, /* within sliding_window */
    IMPORT_LAYER_CHUNKED  /* within blocks of attention_chunk_size (Llama 4) */
} import_layer_kind;

/* "full_attention", "sliding_attention", "chunked_attention", "unsaid". */
const char *import_layer_kind_name(import_layer_kind kind);

/* One layer's keys, as config.json has them; 0, −1 or NULL: not said. No
 * value is mapped: the family decides what it can write. */
typedef struct import_layer_config {
    import_layer_kind kind;
    const char *kind_from;     /* "layer_types", "sliding_window_pattern", "no_rope_layers" */
    size_t sliding_window;     /* sliding_window, whatever the kind */
    size_t chunk;              /* attention_chunk_size, whatever the kind */
    size_t window;             /* the layer's: sliding_window or chunk by kind, else 0 */
    int rope;                  /* 0: no RoPE on this layer (Llama 4's no_rope_layers[L] = 0) */
    double rope_theta;         /* of the layer's kind (Gemma 3: rope_local_base_freq) */
    const char *rope_type;     /* "default", "linear", "llama3", "yarn", "longrope", … */
    const json_t *rope_params; /* the object rope_type is in (factor, beta_fast, …) */
    double partial_rotary_factor, query_pre_attn_scalar, softcap; /* attn_logit_softcapping */
    double floor_scale, attn_scale; /* Llama 4's temperature tuning of NoPE layers */
    int qk_norm;                    /* use_qk_norm: −1 not said, 0, 1 */
    int temperature_tuning;         /* attn_temperature_tuning: −1, 0, 1 */
    int attention_bias;             /* −1, 0, 1 */
} import_layer_config;

/*
 * Layer L's keys from cfg (NULL: all unsaid) into *c (which points into
 * cfg). Returns 0, or -1 with err naming path and the key of the wrong
 * type, a layer_types or no_rope_layers without layer L or with a kind the
 * importer does not know, a sliding or chunked layer without its size, a
 * per-kind rope_parameters without the layer's kind.
 */
int import_layer_config_read(const json_t *cfg, size_t layer, import_layer_config *c,
                             const char *path, attn_error *err);

/* ---- one layer being read ---------------------------------------------------- */

typedef struct import_family import_family;

enum { IMPORT_PREFIXES_MAX = 4 };

/* What a family's read is given: the layer's place in the checkpoint and
 * the options. */
typedef struct import_layer {
    const import_src *src;
    const json_t *cfg; /* src->config's text part (import_cfg_text): NULL for a single file */
    const char *path;  /* the checkpoint, for messages */
    const import_family *family;
    const char *prefix; /* the name prefix found (import_family.prefixes) */
    size_t layer;
    size_t h; /* heads: the option's, else config.json's */
    const store_import_options *opt;
} import_layer;

enum { IMPORT_OWNED_MAX = 32 };

/* The model to write, one layer: its tensors, row-major F32 (in owned[]),
 * its shape and its variants. */
typedef struct import_out {
    size_t d, h, g, dh;
    size_t dc; /* > 0: cross-attention, w_qkv is w_q */
    const float *w_qkv, *b_qkv, *w_o, *b_o, *w_kv, *b_kv;
    float *owned[IMPORT_OWNED_MAX]; /* what to free: buffers made, and the parts read */
    size_t n_owned;
    attn_rope rope; /* short_factor, long_factor: in owned[] */
    int alibi;
    size_t window;
    double softcap, scale;
    attn_mask_kind mask;
    /* The 2025–26 fields (models/README.md, "Norms and temperature"); their
     * arrays in owned[]. type NONE, NULL or 0: not written. */
    attn_norm norm, post_norm;
    attn_qk_norm qk_norm;
    attn_temperature temperature;
    const float *sinks; /* h */
    size_t chunk;
} import_out;

/* ---- a family (import_<family>.c), and the table (import_families.c) ------- */

struct import_family {
    store_import_arch arch;
    const char *name;                          /* --arch's: "gpt2" */
    const char *label;                         /* for people: "GPT-2" */
    const char *prefixes[IMPORT_PREFIXES_MAX]; /* accepted name prefixes; "" first, then
                                                  others, NULL after the last */
    const char *head;                          /* before the layer index: "h." */
    const char *anchor;                        /* after it, the first tensor a layer needs */
    const char *anchor_rule;                   /* the anchor's shape in words, for messages */
    attn_mask_kind mask;                       /* of the model written */
    int by_name;                               /* detected from the names (gemma2 has llama's) */
    const char *model_types[6];                /* config.json's model_type values read as this */
    /* Reads L's layer into *m (which owns what it holds, on failure too). */
    int (*read)(const import_layer *L, import_out *m, attn_error *err);
};

extern const import_family import_family_gpt2, import_family_bert, import_family_llama,
    import_family_gemma2, import_family_gpt_neox, import_family_bloom, import_family_whisper,
    import_family_qwen3, import_family_olmo2, import_family_gemma3, import_family_gpt_oss,
    import_family_phi3, import_family_llama4;

enum { IMPORT_FAMILIES_MAX = 32 };

extern const import_family *const import_families[]; /* at most IMPORT_FAMILIES_MAX */
extern const size_t import_n_families;

/* The messages that list the families, in the order people read them. */
extern const char import_model_types_text[]; /* "llama, mistral, …, bert" */
extern const char import_no_family_text[];   /* "no GPT-2 (…) nor …: not a checkpoint …" */

/* ---- a layer's tensors (import_tensors.c) ----------------------------------- */

/* Every family's tensors are read by name "<prefix><head><L><suffix>". */

/* One tensor whose shape is multiples of d (GPT-2's, BERT's): its suffix,
 * rank 1 or 2 and shape mul·d. */
typedef struct import_part {
    const char *suffix;
    size_t rank;
    size_t mul[2];
    const char *rule; /* the shape in words, for messages */
} import_part;

enum { IMPORT_PARTS_MAX = 8 };

/* Finds parts[0 … n−1] (all required), checks their shapes against d (the
 * anchor parts[0]'s shape[0]) and h, their dtypes, and reads them into
 * vals[] (which the caller frees, on failure too); d in *d. */
int import_parts_read(const import_layer *L, const import_part *parts, size_t n,
                      float *vals[IMPORT_PARTS_MAX], size_t *d, attn_error *err);

/* Moves the buffers vals[0 … IMPORT_PARTS_MAX−1] that are not NULL into
 * m's owned[]. */
void import_out_adopt(import_out *m, float *const vals[IMPORT_PARTS_MAX]);

/* The rank-1 tensor "<prefix><head><L><suffix>" of len values (rule: its
 * shape in words), read into a buffer m owns, in *out; NULL when absent
 * and not required. 0, or -1 with err naming it. */
int import_vector_read(const import_layer *L, const char *suffix, size_t len, const char *rule,
                       int required, import_out *m, const float **out, attn_error *err);

/* A zeroed buffer of n floats that m owns, or NULL. */
float *import_out_alloc(import_out *m, size_t n);

/* nn.Linear W [out, in] (y = x·Wᵀ) into columns col0 … col0+out−1 of the
 * row-vector matrix dst [in, dst_cols]: dst[r, col0 + c] = W[c, r]. */
void import_linear_into(float *dst, size_t dst_cols, size_t col0, const float *w, size_t out,
                        size_t in);

/*
 * The attention tensors of a layer whose shapes depend on h, g and dh:
 * weights and biases of q, k, v, o (separate), or of the fused qkv and o
 * (then in the Q and O slots). Biases are optional.
 */
enum { IMPORT_SEPARATE, IMPORT_FUSED_HEADS, IMPORT_FUSED_BLOCKS };

enum { IMPORT_WQ, IMPORT_BQ, IMPORT_WK, IMPORT_BK, IMPORT_WV, IMPORT_BV, IMPORT_WO, IMPORT_BO };

typedef struct import_attn {
    const store_tensor *t[8];
    float *v[8];
    char names[8][256];
    int fused;               /* IMPORT_FUSED_HEADS: [3·h·dh, d] per head (q_i | k_i | v_i);
                                IMPORT_FUSED_BLOCKS: [(h+2g)·dh, d] as [Q | K | V] (Phi-3) */
    size_t d, g, dh, hd, gd; /* after import_attn_check; hd = h·dh, gd = g·dh */
} import_attn;

/* Finds "<att><proj>.weight" / ".bias" for proj = q_proj, k_proj, v_proj
 * and o (the weights required). */
int import_attn_find_separate(const import_layer *L, const char *att, const char *o, import_attn *p,
                              attn_error *err);

/* Finds "<att>.query_key_value" and "<att>.dense", weight and bias (the
 * weights required). */
int import_attn_find_fused(const import_layer *L, const char *att, import_attn *p, attn_error *err);

/* Finds "<att><qkv>.weight" / ".bias" and "<att><o>.weight" / ".bias",
 * q, k and v fused block-wise (the weights required). Without
 * config.json's head_dim, import_attn_check takes dh = d / h. */
int import_attn_find_blocks(const import_layer *L, const char *att, const char *qkv, const char *o,
                            import_attn *p, attn_error *err);

/*
 * d from the q (or fused) weight, checked against config.json's; then g
 * and dh: with `grouped`, the options', else config.json's
 * num_key_value_heads and head_dim, else h and q's rows / h; without,
 * g = h and dh = d / h. Then every shape and dtype. Fills p's sizes and m's
 * d, h, g, dh and mask.
 */
int import_attn_check(const import_layer *L, import_attn *p, int grouped, import_out *m,
                      attn_error *err);

/* Reads p's tensors into floats, then w_o, b_o of m. */
int import_attn_read(const import_layer *L, import_attn *p, import_out *m, attn_error *err);

/* Separate q, k, v into m's w_qkv, b_qkv (a bias the checkpoint lacks is
 * zero); fused per-head rows regrouped into them; block-wise rows taken as
 * they are. After import_attn_read. */
int import_attn_layout_separate(import_attn *p, import_out *m, attn_error *err);
int import_attn_layout_fused(import_attn *p, import_out *m, attn_error *err);
int import_attn_layout_blocks(import_attn *p, import_out *m, attn_error *err);

void import_attn_free(import_attn *p);

/* ---- variants from the options, else config.json (import_variants.c) ------ */

/* h·dh into *hd, refused when it, or 3·h·dh, overflows a size. */
int import_heads_width(const import_layer *L, size_t dh, int dh_from_config, size_t *hd,
                       attn_error *err);

/* Where a family's RoPE is in config.json. */
typedef struct import_rope_keys {
    const char *const *theta;    /* rope_theta, … */
    const char *const *fraction; /* partial_rotary_factor, … */
    double fraction_default;     /* without one: 1 (every coordinate) */
} import_rope_keys;

/* RoPE ("half") for head width dh: the options', else config.json's. */
int import_rope_resolve(const import_layer *L, const import_rope_keys *keys, size_t dh,
                        attn_rope *rope, attn_error *err);

/* Whether layer L has config.json's sliding window, when config.json
 * has no layer_types: 0 and *on, or -1 with err set. */
typedef int (*import_window_rule)(const import_layer *L, int *on, attn_error *err);

/* The rule of Mistral's, Qwen2's and Llama's configs, by model_type:
 * qwen2 from max_window_layers on when use_sliding_window, llama never,
 * any other every layer. */
int import_window_by_model_type(const import_layer *L, int *on, attn_error *err);

/* Layer L's sliding window: the option's, else config.json's
 * sliding_window where layer_types (else `rule`) puts it. */
int import_window_resolve(const import_layer *L, import_window_rule rule, size_t *window,
                          attn_error *err);

/* The option's softcap, else config.json's attn_logit_softcapping. */
int import_softcap_resolve(const import_layer *L, double *softcap, attn_error *err);

/* ---- the newer families' RoPE and window (import_rope.c) ------------------- */

/* Layer c's RoPE for head width dh into m->rope (its longrope lists owned
 * by m): the options', else c's theta (theta_default without one), part
 * (partial_rotary_factor) and scaling (linear, llama3, yarn, longrope; any
 * other refused by name). */
int import_rope_layer(const import_layer *L, const import_layer_config *c, size_t dh,
                      double theta_default, attn_rope_style style, import_out *m, attn_error *err);

/* Layer c's window or chunk into m: the option's window, else its kind's
 * (sliding_window, attention_chunk_size, none), else for an unsaid kind
 * sliding_window where `rule` (NULL: never) puts it. */
int import_layer_window(const import_layer *L, const import_layer_config *c,
                        import_window_rule rule, import_out *m, attn_error *err);

/* ---- norms (import_norm.c) ----------------------------------------------------- */

/* Where a family keeps one of a layer's norms. */
typedef struct import_norm_keys {
    const char *suffix;     /* after "<prefix><head><L>": ".input_layernorm" */
    attn_norm_type type;    /* LAYER: .weight and .bias; RMS: .weight */
    double offset;          /* RMS: 1 for Gemma's (1 + w) */
    const char *const *eps; /* config.json's keys (its text part), the first present; or NULL */
    double eps_default;     /* without one: the architecture's config class default */
} import_norm_keys;

/* The layer's input norm (norm; NULL: none) and the norm of its
 * attention's output (post; NULL: none) into m->norm and m->post_norm,
 * their weights required; nothing with --no-norm. After import_attn_check
 * (m->d). */
int import_norms_read(const import_layer *L, const import_norm_keys *norm,
                      const import_norm_keys *post, import_out *m, attn_error *err);

/* The q/k RMS norm "<att>q_norm.weight", "<att>k_norm.weight" (required):
 * per head ([d_head] each) or over the whole projection (all: [h·d_head],
 * [g·d_head]), with offset and eps; into m->qk_norm. */
int import_qk_norm_read(const import_layer *L, const char *att, int all, double offset,
                        const char *const *eps_keys, double eps_default, import_out *m,
                        attn_error *err);

/* ---- the model file (import_write.c) ----------------------------------------- */

/*
 * Writes the n layers ms[] (checkpoint layers `layers`) of family f at
 * out_path: one layer's file when !stacked, else the stack's form
 * (models/README.md, "Stacks"); file_bytes into res when not NULL.
 */
int import_model_write(const char *out_path, const char *in_path, const import_family *f,
                       const store_import_options *opt, const import_out *ms, const size_t *layers,
                       size_t n, int stacked, const char *name, store_import_result *res,
                       attn_error *err);

#endif
