/*
 * import.h — one layer's attention from a Hugging Face checkpoint, or a
 * stack of several layers' (--layers), written as one of our models (models/README.md, which has
 * the table of every tensor read). tools/import_checkpoint is the command line around it; tests
 * call it directly.
 *
 * The checkpoint is a directory, as the Hub gives it: config.json (read
 * for the architecture, the heads, RoPE, windows and scales, so that no
 * option is needed), and model.safetensors or the shards that
 * model.safetensors.index.json's weight_map lists; or one .safetensors
 * file, whose configuration then comes from the options. Tensors in F32,
 * F16 or BF16. With d = d_model, h heads, g K/V heads of width dh and L
 * the layer:
 *
 *   gpt2      [transformer.]h.L.attn.c_attn, c_proj (Conv1D: x·W, taken as
 *             they are); causal
 *   bert      [bert.]encoder.layer.L.attention.self.{query,key,value},
 *             output.dense (nn.Linear [out, in]: transposed); mask none
 *   llama     [model.]layers.L.self_attn.{q,k,v,o}_proj.{weight,bias}
 *             (Llama 2/3/3.1, Mistral, Mixtral, Qwen2): q [h·dh, d], k, v
 *             [g·dh, d], o [d, h·dh], biases where present; RoPE "half"
 *             (rotate_half) on the weights as stored; causal; Mistral's
 *             and Qwen2's sliding window where config.json puts one
 *   gemma2    the same names; plus softcap (attn_logit_softcapping), scale
 *             query_pre_attn_scalar^(−1/2), and sliding_window on its even
 *             layers (Gemma 2 alternates local and global layers)
 *   gpt_neox  [gpt_neox.]layers.L.attention.query_key_value [3d, d], rows
 *             grouped per head as [q_i | k_i | v_i] (HF views it as
 *             (h, 3·dh)), and attention.dense; partial RoPE (rotary_pct),
 *             "half"; causal
 *   bloom     [transformer.]h.L.self_attention.query_key_value (fused per
 *             head as gpt_neox's: (h, 3, dh)), self_attention.dense; ALiBi
 *             with the standard slopes; causal
 *   whisper   [model.]decoder.layers.L.encoder_attn.{q,k,v,out}_proj (k
 *             has no bias): cross-attention, w_q and w_kv with d_context =
 *             d; mask none
 *   qwen3, olmo2, gemma3, gpt_oss
 *             llama's names, plus self_attn.q_norm / k_norm (qwen3, gemma3
 *             per head; olmo2 over the whole projection) or self_attn.sinks
 *             (gpt_oss); each layer's kind, RoPE (yarn, longrope) and
 *             window from config.json's newer keys (import_config.c,
 *             import_rope.c); gemma3 also under language_model prefixes
 *   phi3      [model.]layers.L.self_attn.qkv_proj [(h+2g)·dh, d], fused
 *             block-wise [Q | K | V], and o_proj; partial RoPE, longrope,
 *             sliding_window on every layer
 *   llama4    llama's names, also under language_model prefixes; RoPE
 *             layers interleaved (llama3 scaling), chunked, with a
 *             weightless q/k norm; NoPE layers (no_rope_layers) with the
 *             query temperature
 *
 * Heads are column blocks of dh in every layout but the fused ones, which
 * are regrouped into ours ([Q heads | K heads | V heads]). The layer's
 * input norm is written with it (norm_type, norm_eps, norm.weight, …:
 * gpt2 ln_1, llama input_layernorm, gemma2 input_layernorm and
 * post_attention_layernorm as post_norm, gpt_neox and bloom
 * input_layernorm, whisper encoder_attn_layer_norm; bert normalises after
 * its residual add and has none), unless no_norm. Every other tensor
 * (embeddings, MLPs and their norms, buffers) is ignored. GPT-2's and BERT's
 * biases are required (a missing bias is more likely a wrong file than a
 * bias-free model); the others' are read where present, as their configs'
 * attention_bias says.
 *
 * The output holds w_qkv (or w_q and w_kv), b_qkv (or b_q, b_kv), w_o, b_o
 * in F32, the metadata n_heads, n_kv_heads, rope_*, alibi, window,
 * softcap, scale as they apply, and name, description, mask and source; it
 * is written with store_file_write (atomically: a server reloading the
 * directory never sees half a file).
 */
#ifndef STORE_IMPORT_H
#define STORE_IMPORT_H

#include <stddef.h>

#include "attention/attention.h"
#include "store/error.h"

typedef enum store_import_arch {
    STORE_IMPORT_AUTO, /* from config.json's model_type, else the tensor names */
    STORE_IMPORT_GPT2,
    STORE_IMPORT_BERT,
    STORE_IMPORT_LLAMA,
    STORE_IMPORT_GEMMA2,
    STORE_IMPORT_GPT_NEOX,
    STORE_IMPORT_BLOOM,
    STORE_IMPORT_WHISPER,
    STORE_IMPORT_QWEN3,
    STORE_IMPORT_OLMO2,
    STORE_IMPORT_GEMMA3,
    STORE_IMPORT_GPT_OSS,
    STORE_IMPORT_PHI3,
    STORE_IMPORT_LLAMA4
} store_import_arch;

/* A family's name ("gpt2", "bert", "llama", …, "phi3", "llama4") or
 * "auto" into *out; 0, or -1 for anything else. */
int store_import_arch_parse(const char *text, store_import_arch *out);

/* The name above; never NULL. */
const char *store_import_arch_name(store_import_arch arch);

/* For people: "GPT-2", "Llama", …; "auto" for AUTO. */
const char *store_import_arch_label(store_import_arch arch);

/*
 * Everything a value of 0 (or NONE) leaves to config.json, and without it
 * to the architecture's default; any other value overrides config.json.
 */
typedef struct store_import_options {
    store_import_arch arch;         /* STORE_IMPORT_AUTO: detected */
    size_t layer;                   /* 0-based; read when layers is NULL and !all_layers */
    const size_t *layers;           /* non-NULL: these checkpoint layers, in this order, as
                                       one stacked file (models/README.md, "Stacks") */
    size_t n_layers;                /* of layers: 1 … STORE_LAYERS_MAX */
    int all_layers;                 /* 1: every layer, 0 … n − 1, as one stacked file */
    size_t n_heads;                 /* 0: config.json's (required without one) */
    const char *name;               /* NULL: the output's base name without ".safetensors" */
    const char *description;        /* NULL: "GPT-2 layer 1 attention, from <input file>";
                                       at most STORE_DESCRIPTION_MAX bytes */
    size_t n_kv_heads;              /* 0: config's num_key_value_heads, else n_heads */
    size_t d_head;                  /* 0: config's head_dim, else d_model / n_heads */
    double rope_theta;              /* 0: config's rope_theta / rotary_emb_base, else 10000 */
    size_t rope_dims;               /* 0: from config's partial_rotary_factor / rotary_pct */
    attn_rope_scaling rope_scaling; /* NONE: config's rope_scaling */
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor,
        rope_original_max_position; /* with rope_scaling */
    size_t window;                  /* 0: config's sliding window for each layer; else every
                                       layer's */
    double softcap;                 /* 0: config's attn_logit_softcapping */
    double scale;                   /* 0: config's (gemma2: query_pre_attn_scalar^(−1/2)) */
    int no_norm;                    /* 1: without the layer's input norm and post-attention
                                       norm (what the importer wrote before it read them);
                                       a q/k norm is read all the same */
} store_import_options;

/* What was imported, for the caller's report. */
typedef struct store_import_result {
    store_import_arch arch; /* never AUTO */
    size_t n_layers;        /* layers of that arch in the checkpoint (highest index + 1) */
    size_t n_imported;      /* layers written: 1, or the stack's */
    size_t d_model, n_heads, d_head;
    size_t n_kv_heads;
    size_t file_bytes; /* of the file written */
    char name[65];     /* the model name written */
} store_import_result;

/*
 * --layers SPEC: "all" (*all 1, *out NULL), or a comma-separated list of
 * layer numbers and ranges "a-b" (a ≤ b, both included), the stack's
 * order: "0,1,5", "0-3", "4,0-2". Each layer at most once, at most
 * STORE_LAYERS_MAX. Returns 0 and *out (malloc'd, *n entries; the caller
 * frees it), or -1 with err "--layers '<spec>': …".
 */
int store_import_layers_parse(const char *spec, size_t **out, size_t *n, int *all, attn_error *err);

/*
 * Reads layer opt->layer of the checkpoint (or the layers opt->layers, in
 * their order, or every layer with opt->all_layers: then the output is a
 * stack whose layer l is checkpoint layer layers[l], each exactly what
 * importing that layer alone writes, under "layers.<l>.") at in_path (a directory or a
 * .safetensors file) and writes the model at out_path (replacing it;
 * out_path must not be in_path). Returns 0 and, when res is not NULL,
 * *res; or -1 with err set: "<in_path>: <fault>" for a fault of the
 * checkpoint (a config.json that is not JSON or has a field of the wrong
 * type, a model_type this does not read, a RoPE scaling it does not know,
 * unknown or ambiguous architecture, no such layer, a missing tensor named
 * in full, shapes that disagree, d_model not divisible by n_heads, a dtype
 * other than F32/F16/BF16, a non-finite value), "<file>: …" for a file of
 * it that cannot be read (config.json, the index or a shard that is not a
 * regular file, "<dir>/config.json: not a regular file (a FIFO)", is
 * refused at once, never waited on), "<out_path>: …" when writing fails, a
 * bare sentence for a bad option (an invalid name, no heads from
 * anywhere). On failure out_path is left as it was.
 */
int store_import_checkpoint(const char *in_path, const char *out_path,
                            const store_import_options *opt, store_import_result *res,
                            attn_error *err);

#endif
