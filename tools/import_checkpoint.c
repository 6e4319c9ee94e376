/*
 * import_checkpoint.c — extracts one layer's attention from a Hugging Face
 * checkpoint (a directory with config.json, or one .safetensors file) into
 * one of our model files, then loads it back with the server's loader to
 * prove it valid.
 *
 *   import_checkpoint [--arch A] [--layer L] [--heads H] [--kv-heads G] …
 *                     [--name NAME] [--description TEXT] INPUT OUTPUT
 *
 * The work is store_import_checkpoint (store/import.h, which documents the
 * tensor names and layouts); this file is the command line around it.
 *
 * Exit codes: 0 done, 1 the checkpoint could not be read or imported or
 * the model not written, 2 usage.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/import.h"
#include "store/model.h"

static void usage(FILE *to) {
    fprintf(to,
            "usage: import_checkpoint [--arch A] [--layer L] [--heads H] [options]\n"
            "                         [--name NAME] [--description TEXT] INPUT OUTPUT\n"
            "\n"
            "Extracts the attention of one layer of a Hugging Face checkpoint INPUT into the\n"
            "model file OUTPUT (F32), ready for a models directory (models/README.md).\n"
            "INPUT is a checkpoint directory (config.json, and model.safetensors or the\n"
            "shards of model.safetensors.index.json): its config gives the architecture,\n"
            "the heads, RoPE, windows and scales; or one .safetensors file (F32, F16 or\n"
            "BF16), whose configuration the options give. Architectures (--arch):\n"
            "  gpt2      [transformer.]h.L.attn.c_attn, c_proj (Conv1D, as they are); causal\n"
            "  bert      [bert.]encoder.layer.L.attention.self.{query,key,value},\n"
            "            attention.output.dense (nn.Linear, transposed); mask none\n"
            "  llama     [model.]layers.L.self_attn.{q,k,v,o}_proj (Llama 2/3/3.1, Mistral,\n"
            "            Qwen2): grouped K/V heads, RoPE (half), sliding window; causal\n"
            "  gemma2    as llama, plus softcap, query_pre_attn_scalar, windows on even layers\n"
            "  gpt_neox  [gpt_neox.]layers.L.attention.query_key_value (fused per head),\n"
            "            attention.dense; partial RoPE (rotary_pct); causal\n"
            "  bloom     [transformer.]h.L.self_attention.query_key_value (fused per head),\n"
            "            self_attention.dense; ALiBi; causal\n"
            "  whisper   [model.]decoder.layers.L.encoder_attn.{q,k,v,out}_proj:\n"
            "            cross-attention (w_q, w_kv); mask none\n"
            "  qwen3     llama's names (qwen3, qwen3_moe), plus self_attn.{q,k}_norm per head\n"
            "  olmo2     llama's names, plus self_attn.{q,k}_norm over the whole projection\n"
            "            and post_attention_layernorm on the output; no input norm\n"
            "  gemma3    llama's names (also under [model.]language_model[.model].), (1 + w)\n"
            "            norms before and after, per-head q/k norms, local and global layers\n"
            "            (layer_types or sliding_window_pattern), each kind its own RoPE\n"
            "  gpt_oss   llama's names with biases, plus self_attn.sinks; sliding layers by\n"
            "            layer_types; YaRN\n"
            "  phi3      [model.]layers.L.self_attn.qkv_proj (fused block-wise [Q | K | V]),\n"
            "            o_proj; partial RoPE, LongRoPE, sliding_window on every layer\n"
            "  llama4    llama's names (also under [model.]language_model[.model].); RoPE\n"
            "            layers (no_rope_layers): interleaved, llama3, chunks of\n"
            "            attention_chunk_size, weightless q/k norm (use_qk_norm); NoPE layers:\n"
            "            temperature (attn_temperature_tuning, floor_scale, attn_scale)\n"
            "qwen3, olmo2, gemma3, gpt_oss, phi3 and llama4 read config.json per layer:\n"
            "text_config when present; layer_types, else sliding_window_pattern, else\n"
            "no_rope_layers; rope_parameters, else rope_theta and rope_scaling (default,\n"
            "linear, llama3, yarn, longrope); partial_rotary_factor, query_pre_attn_scalar,\n"
            "attn_logit_softcapping, rms_norm_eps. All but phi3 share llama's names:\n"
            "config.json's model_type or --arch.\n"
            "Other tensors of the checkpoint are ignored, but for the layer's norms:\n"
            "\n"
            "Norms. The model carries the layer's input norm, so that a request sends the\n"
            "hidden state BEFORE the norm (Hugging Face's output_hidden_states[L]) and gets\n"
            "that layer's output_attentions back: gpt2 ln_1 (layer), llama input_layernorm\n"
            "(rms, eps rms_norm_eps), gemma2 input_layernorm and post_attention_layernorm\n"
            "(rms, 1 + w, as post_norm), gpt_neox and bloom input_layernorm (layer,\n"
            "layer_norm_eps / layer_norm_epsilon), whisper encoder_attn_layer_norm on the\n"
            "queries (layer); qwen3, gpt_oss, phi3 and llama4 input_layernorm (rms), olmo2\n"
            "post_attention_layernorm only, gemma3 both (1 + w). bert normalises after\n"
            "the residual add: no norm. Before\n"
            "this, the importer wrote the attention alone, for hidden states already\n"
            "normed; --no-norm still does.\n"
            "\n"
            "  --arch A          one of the above (default: config.json's model_type, else\n"
            "                    the tensor names; gemma2, qwen3, olmo2, gemma3, gpt_oss and\n"
            "                    llama4 need one of the two)\n"
            "  --layer L         the layer, from 0 (default 0)\n"
            "  --layers SPEC     several layers as one stacked model: 'all', or layer\n"
            "                    numbers and ranges separated by commas ('0,1,5', '0-3',\n"
            "                    '4,0-2'); the stack applies them in the order given,\n"
            "                    each once; layer l of the stack is exactly the file\n"
            "                    --layer SPEC[l] writes (models/README.md, \"Stacks\")\n"
            "  --heads H         the number of (query) heads (default: config.json's; one\n"
            "                    .safetensors file needs it: GPT-2 small 12, BERT-base 12)\n"
            "  --kv-heads G      K/V heads (default: config.json's num_key_value_heads, else H)\n"
            "  --head-dim D      d_head (default: config.json's head_dim, else d_model / H)\n"
            "  --rope-theta T    RoPE's theta (default: config.json's, else 10000)\n"
            "  --rope-dims N     coordinates rotated (default: d_head × partial_rotary_factor\n"
            "                    or rotary_pct)\n"
            "  --rope-scaling S  linear:FACTOR or llama3:FACTOR:LOW:HIGH:ORIGINAL_MAX_POSITION\n"
            "                    (default: config.json's rope_scaling)\n"
            "  --window W        sliding window of the layer, or of every layer of\n"
            "                    --layers (default: config.json's, layer by layer)\n"
            "  --softcap C       logit soft-capping (default: attn_logit_softcapping)\n"
            "  --scale S         the default scale (default: gemma2's\n"
            "                    query_pre_attn_scalar^-0.5, else 1/sqrt(d_head))\n"
            "  --no-norm         leave out the input and post-attention norms (the model\n"
            "                    then reads hidden states already normed, as before)\n"
            "  --name NAME       the model name, [A-Za-z0-9._-]{1,64} (default: OUTPUT's\n"
            "                    file name without .safetensors)\n"
            "  --description T   shown by GET /v1/models, at most 4096 bytes (default:\n"
            "                    \"GPT-2 layer L attention, from INPUT\")\n"
            "  --help            print this and exit\n"
            "\n"
            "For example:\n"
            "  import_checkpoint --layer 0 Meta-Llama-3.1-8B llama31-l0.safetensors\n"
            "  import_checkpoint --layer 1 gemma-2-9b gemma2-l1.safetensors\n"
            "  import_checkpoint --layer 3 pythia-160m pythia-l3.safetensors\n"
            "  import_checkpoint --layer 0 bloom-560m bloom-l0.safetensors\n"
            "  import_checkpoint --layer 0 whisper-small whisper-cross0.safetensors\n"
            "  import_checkpoint --layer 0 Qwen3-8B qwen3-l0.safetensors\n"
            "  import_checkpoint --layer 0 OLMo-2-1124-7B olmo2-l0.safetensors\n"
            "  import_checkpoint --layers 0-5 gemma-3-4b-it gemma3-l0-5.safetensors\n"
            "  import_checkpoint --layers 0,1 gpt-oss-20b gpt-oss-l0-1.safetensors\n"
            "  import_checkpoint --layer 0 Phi-4-mini-instruct phi4-mini-l0.safetensors\n"
            "  import_checkpoint --layers 2,3 Llama-4-Scout-17B-16E llama4-l2-3.safetensors\n"
            "  import_checkpoint --layers 0-3 pythia-160m pythia-l0-3.safetensors\n"
            "  import_checkpoint --layers all gpt2 gpt2-all.safetensors\n"
            "  import_checkpoint --arch gpt2 --heads 12 gpt2/model.safetensors g0.safetensors\n"
            "\n"
            "OUTPUT is replaced atomically, then loaded back with the server's loader.\n"
            "Name it NAME.safetensors: the server loads only *.safetensors files.\n"
            "\n"
            "Exit status: 0 done, 1 the checkpoint could not be imported or the model\n"
            "written, 2 usage.\n");
}

/* "linear:F" or "llama3:F:LOW:HIGH:ORIG" into opt; 0 or -1. */
static int scaling_parse(const char *s, store_import_options *opt) {
    char buf[256];
    if (strlen(s) >= sizeof buf) return -1;
    snprintf(buf, sizeof buf, "%s", s);
    char *parts[6];
    size_t n = 0;
    for (char *tok = strtok(buf, ":"); tok && n < 6; tok = strtok(NULL, ":"))
        parts[n++] = tok;
    double *dst[4] = {&opt->rope_factor, &opt->rope_low_freq_factor, &opt->rope_high_freq_factor,
                      &opt->rope_original_max_position};
    if (n == 2 && strcmp(parts[0], "linear") == 0)
        opt->rope_scaling = ATTN_ROPE_SCALING_LINEAR;
    else if (n == 5 && strcmp(parts[0], "llama3") == 0)
        opt->rope_scaling = ATTN_ROPE_SCALING_LLAMA3;
    else
        return -1;
    for (size_t i = 1; i < n; i++)
        if (store_positive_parse(parts[i], dst[i - 1]) != 0) return -1;
    return 0;
}

/* The value of option argv[*i] ("--opt value" or "--opt=value"), or NULL
 * when it is not `opt`. A missing value is reported and *missing set. */
static const char *option_value(int argc, char **argv, int *i, const char *opt, int *missing) {
    size_t len = strlen(opt);
    if (strncmp(argv[*i], opt, len) != 0) return NULL;
    if (argv[*i][len] == '=') return argv[*i] + len + 1;
    if (argv[*i][len] != '\0') return NULL;
    if (*i + 1 >= argc) {
        fprintf(stderr, "import_checkpoint: %s needs a value (see --help)\n", opt);
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

/* --layers' list, freed at exit whichever way main returns. */
static size_t *layers;

static void layers_free(void) {
    free(layers);
}

int main(int argc, char **argv) {
    store_import_options opt = {.arch = STORE_IMPORT_AUTO};
    atexit(layers_free);
    const char *paths[2] = {NULL, NULL};
    int n_paths = 0, only_paths = 0;

    for (int i = 1; i < argc; i++) {
        const char *v;
        int missing = 0;
        if (only_paths || argv[i][0] != '-' || strcmp(argv[i], "-") == 0) {
            if (n_paths == 2) {
                fprintf(stderr, "import_checkpoint: unexpected argument '%s' (see --help)\n",
                        argv[i]);
                return 2;
            }
            paths[n_paths++] = argv[i];
        } else if (strcmp(argv[i], "--") == 0) {
            only_paths = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--no-norm") == 0) {
            opt.no_norm = 1;
        } else if ((v = option_value(argc, argv, &i, "--arch", &missing))) {
            if (store_import_arch_parse(v, &opt.arch) != 0) {
                fprintf(
                    stderr,
                    "import_checkpoint: unknown arch '%s' (gpt2, bert, llama, gemma2, "
                    "gpt_neox, bloom, whisper, qwen3, olmo2, gemma3, gpt_oss, phi3 or llama4)\n",
                    v);
                return 2;
            }
        } else if ((v = option_value(argc, argv, &i, "--layer", &missing))) {
            if (store_size_parse(v, 1000000, &opt.layer) != 0) {
                fprintf(stderr, "import_checkpoint: --layer '%s' is not a layer number\n", v);
                return 2;
            }
        } else if ((v = option_value(argc, argv, &i, "--layers", &missing))) {
            attn_error lerr;
            free(layers);
            if (store_import_layers_parse(v, &layers, &opt.n_layers, &opt.all_layers, &lerr) != 0) {
                fprintf(stderr, "import_checkpoint: %s\n", lerr.message);
                return 2;
            }
            opt.layers = layers;
        } else if ((v = option_value(argc, argv, &i, "--heads", &missing))) {
            if (store_size_parse(v, STORE_HEADS_MAX, &opt.n_heads) != 0 || opt.n_heads == 0) {
                fprintf(stderr, "import_checkpoint: --heads '%s' is not a number in 1 … %d\n", v,
                        STORE_HEADS_MAX);
                return 2;
            }
        } else if ((v = option_value(argc, argv, &i, "--kv-heads", &missing))) {
            if (store_size_parse(v, STORE_HEADS_MAX, &opt.n_kv_heads) != 0 || opt.n_kv_heads == 0) {
                fprintf(stderr, "import_checkpoint: --kv-heads '%s' is not a number in 1 … %d\n", v,
                        STORE_HEADS_MAX);
                return 2;
            }
        } else if ((v = option_value(argc, argv, &i, "--head-dim", &missing))) {
            if (store_size_parse(v, 1u << 20, &opt.d_head) != 0 || opt.d_head == 0) {
                fprintf(stderr, "import_checkpoint: --head-dim '%s' is not a positive number\n", v);
                return 2;
            }
        } else if ((v = option_value(argc, argv, &i, "--rope-dims", &missing))) {
            if (store_size_parse(v, 1u << 20, &opt.rope_dims) != 0 || opt.rope_dims == 0) {
                fprintf(stderr, "import_checkpoint: --rope-dims '%s' is not a positive number\n",
                        v);
                return 2;
            }
        } else if ((v = option_value(argc, argv, &i, "--window", &missing))) {
            if (store_size_parse(v, (size_t)1 << 31, &opt.window) != 0 || opt.window == 0) {
                fprintf(stderr, "import_checkpoint: --window '%s' is not a number ≥ 1\n", v);
                return 2;
            }
        } else if ((v = option_value(argc, argv, &i, "--rope-theta", &missing))) {
            if (store_positive_parse(v, &opt.rope_theta) != 0) {
                fprintf(stderr, "import_checkpoint: --rope-theta '%s' is not a number > 0\n", v);
                return 2;
            }
        } else if ((v = option_value(argc, argv, &i, "--softcap", &missing))) {
            if (store_positive_parse(v, &opt.softcap) != 0) {
                fprintf(stderr, "import_checkpoint: --softcap '%s' is not a number > 0\n", v);
                return 2;
            }
        } else if ((v = option_value(argc, argv, &i, "--scale", &missing))) {
            if (store_positive_parse(v, &opt.scale) != 0) {
                fprintf(stderr, "import_checkpoint: --scale '%s' is not a number > 0\n", v);
                return 2;
            }
        } else if ((v = option_value(argc, argv, &i, "--rope-scaling", &missing))) {
            if (scaling_parse(v, &opt) != 0) {
                fprintf(stderr,
                        "import_checkpoint: --rope-scaling '%s' is not linear:FACTOR nor "
                        "llama3:FACTOR:LOW:HIGH:ORIGINAL (numbers > 0)\n",
                        v);
                return 2;
            }
        } else if ((v = option_value(argc, argv, &i, "--name", &missing))) {
            if (!store_model_name_valid(v, strlen(v))) {
                fprintf(stderr,
                        "import_checkpoint: --name '%s' does not match [A-Za-z0-9._-]{1,64}\n", v);
                return 2;
            }
            opt.name = v;
        } else if ((v = option_value(argc, argv, &i, "--description", &missing))) {
            opt.description = v;
        } else {
            if (!missing)
                fprintf(stderr, "import_checkpoint: unknown option '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    if (n_paths != 2) {
        fprintf(stderr, "import_checkpoint: %s is missing (see --help)\n",
                n_paths == 0 ? "INPUT" : "OUTPUT");
        return 2;
    }

    attn_error err;
    store_import_result res;
    if (store_import_checkpoint(paths[0], paths[1], &opt, &res, &err) != 0) {
        fprintf(stderr, "import_checkpoint: %s\n", err.message);
        return 1;
    }
    store_model *m;
    if (store_model_load(&m, paths[1], &err) != 0) {
        /* Would break the next load of a models directory: take it away. */
        unlink(paths[1]);
        fprintf(stderr, "import_checkpoint: written but not loadable, removed: %s\n", err.message);
        return 1;
    }
    if (opt.layers || opt.all_layers)
        printf("%s: model '%s', a stack of %zu %s layers (of %zu)", paths[1], m->name, m->n_layers,
               store_import_arch_label(res.arch), res.n_layers);
    else
        printf("%s: model '%s' from %s layer %zu (of %zu)", paths[1], m->name,
               store_import_arch_label(res.arch), opt.layer, res.n_layers);
    printf(": d_model %zu, %zu heads of %zu, mask %s", m->weights.d_model, m->weights.n_heads,
           m->weights.d_head, m->mask == ATTN_MASK_NONE ? "none" : "causal");
    if (m->weights.n_kv_heads != m->weights.n_heads)
        printf(", %zu K/V heads", m->weights.n_kv_heads);
    if (m->n_layers > 1) printf("; layer 0");
    if (m->weights.rope.dims)
        printf(", RoPE on %zu dims (theta %g)", m->weights.rope.dims, m->weights.rope.theta);
    if (m->weights.alibi) printf(", ALiBi");
    if (m->weights.window) printf(", window %zu", m->weights.window);
    if (m->weights.softcap > 0) printf(", softcap %g", (double)m->weights.softcap);
    if (m->weights.scale > 0) printf(", scale %g", (double)m->weights.scale);
    if (m->weights.w_kv) printf(", cross-attention from d_context %zu", m->weights.d_context);
    static const char *const norm_names[] = {"", "layer", "rms"};
    const attn_norm *norms[2] = {&m->weights.norm, &m->weights.post_norm};
    for (int k = 0; k < 2; k++)
        if (norms[k]->type != ATTN_NORM_NONE)
            printf(", %s %s (eps %g%s)", k ? "post_norm" : "norm", norm_names[norms[k]->type],
                   norms[k]->eps, norms[k]->offset != 0 ? ", 1 + w" : "");
    printf("; %zu bytes\n", res.file_bytes);
    store_model_destroy(m);
    size_t len = strlen(paths[1]), slen = strlen(".safetensors");
    if (len < slen || strcmp(paths[1] + len - slen, ".safetensors") != 0)
        fprintf(stderr,
                "import_checkpoint: note: %s does not end in .safetensors; a models "
                "directory ignores it\n",
                paths[1]);
    return 0;
}
