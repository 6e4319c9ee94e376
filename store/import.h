/*
 * import.h — one layer's attention from a Hugging Face checkpoint, written
 * as one of our models (models/README.md). tools/import_checkpoint is the
 * command line around it; tests call it directly.
 *
 * The checkpoint is one .safetensors file, tensors in F32, F16 or BF16.
 * With d = d_model and L the layer, the tensors read are:
 *
 *   GPT-2 ("h.L.attn." — or "transformer.h.L.attn." from GPT2LMHeadModel)
 *     c_attn.weight  d × 3d   Conv1D, already y = x·W: it IS w_qkv
 *     c_attn.bias    3d       b_qkv
 *     c_proj.weight  d × d    Conv1D: w_o as is
 *     c_proj.bias    d        b_o
 *     mask causal
 *
 *   BERT ("encoder.layer.L.attention." — or "bert.encoder.layer.L.…")
 *     self.query.weight, self.key.weight, self.value.weight   d × d each,
 *                            nn.Linear [out, in], y = x·Wᵀ + b
 *     self.query.bias, self.key.bias, self.value.bias         d each
 *     output.dense.weight    d × d    [out, in]
 *     output.dense.bias      d
 *     → w_qkv = [Wqᵀ | Wkᵀ | Wvᵀ], b_qkv = [bq | bk | bv],
 *       w_o = denseᵀ, b_o = dense.bias; mask none
 *
 * Both split heads by columns (head i is columns i·dh … of each block, as
 * GPT-2's split_heads and BERT's transpose_for_scores), which is our
 * layout, so no column is permuted. Every other tensor of the checkpoint
 * (embeddings, layer norms, MLPs, GPT-2's old "attn.bias" mask buffer) is
 * ignored. All the tensors above are required: a missing bias is more
 * likely a wrong file than a bias-free model.
 *
 * The output holds w_qkv, b_qkv, w_o, b_o in F32 and the metadata n_heads,
 * name, description, mask and source; it is written with store_file_write
 * (atomically: a server reloading the directory never sees half a file).
 */
#ifndef STORE_IMPORT_H
#define STORE_IMPORT_H

#include <stddef.h>

#include "store/error.h"

typedef enum store_import_arch {
    STORE_IMPORT_AUTO, /* detect from the tensor names */
    STORE_IMPORT_GPT2,
    STORE_IMPORT_BERT
} store_import_arch;

/* "gpt2" or "bert" (also "auto") into *out; 0, or -1 for anything else. */
int store_import_arch_parse(const char *text, store_import_arch *out);

/* "gpt2", "bert" or "auto"; never NULL. */
const char *store_import_arch_name(store_import_arch arch);

typedef struct store_import_options {
    store_import_arch arch;  /* STORE_IMPORT_AUTO: from the tensor names */
    size_t layer;            /* 0-based */
    size_t n_heads;          /* required: a checkpoint file does not say it */
    const char *name;        /* NULL: the output's base name without ".safetensors" */
    const char *description; /* NULL: "GPT-2 layer 1 attention, from <input file>" */
} store_import_options;

/* What was imported, for the caller's report. */
typedef struct store_import_result {
    store_import_arch arch; /* never AUTO */
    size_t n_layers;        /* layers of that arch in the checkpoint (highest index + 1) */
    size_t d_model, n_heads, d_head;
    size_t file_bytes; /* of the file written */
    char name[65];     /* the model name written */
} store_import_result;

/*
 * Reads layer opt->layer of the checkpoint at in_path and writes the model
 * at out_path (replacing it; out_path must not be in_path). Returns 0 and,
 * when res is not NULL, *res; or -1 with err set: "<in_path>: <fault>" for
 * a fault of the checkpoint (unknown or ambiguous architecture, no such
 * layer, a missing tensor named in full, shapes that disagree, d_model not
 * divisible by n_heads, a dtype other than F32/F16/BF16, a non-finite
 * value), "<out_path>: …" when writing fails, a bare sentence for a bad
 * option (n_heads 0, an invalid name). On failure out_path is left as it
 * was (absent, or the previous file).
 */
int store_import_checkpoint(const char *in_path, const char *out_path,
                            const store_import_options *opt, store_import_result *res,
                            attn_error *err);

#endif
