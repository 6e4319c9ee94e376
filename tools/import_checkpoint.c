/*
 * import_checkpoint.c — extracts one layer's attention from a Hugging Face
 * checkpoint (.safetensors, GPT-2 or BERT) into one of our model files,
 * then loads it back with the server's loader to prove it valid.
 *
 *   import_checkpoint [--arch gpt2|bert] [--layer L] --heads H
 *                     [--name NAME] [--description TEXT] INPUT OUTPUT
 *
 * The work is store_import_checkpoint (store/import.h, which documents the
 * tensor names and layouts); this file is the command line around it.
 *
 * Exit codes: 0 done, 1 the checkpoint could not be read or imported or
 * the model not written, 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/import.h"
#include "store/model.h"

static void usage(FILE *to) {
    fprintf(to, "usage: import_checkpoint [--arch gpt2|bert] [--layer L] --heads H\n"
                "                         [--name NAME] [--description TEXT] INPUT OUTPUT\n"
                "\n"
                "Extracts the attention of one layer of a Hugging Face checkpoint INPUT (one\n"
                ".safetensors file, F32, F16 or BF16) into the model file OUTPUT (F32), ready\n"
                "for a models directory (models/README.md):\n"
                "  gpt2  [transformer.]h.L.attn.c_attn.{weight,bias}, c_proj.{weight,bias}\n"
                "        (Conv1D, taken as they are); mask causal\n"
                "  bert  [bert.]encoder.layer.L.attention.self.{query,key,value}.{weight,bias},\n"
                "        attention.output.dense.{weight,bias} (nn.Linear, transposed); mask none\n"
                "Other tensors of the checkpoint are ignored.\n"
                "\n"
                "  --arch A          gpt2 or bert (default: detected from the tensor names)\n"
                "  --layer L         the layer, from 0 (default 0)\n"
                "  --heads H         the number of heads (required: the file does not say it;\n"
                "                    GPT-2 small 12, BERT-base 12)\n"
                "  --name NAME       the model name, [A-Za-z0-9._-]{1,64} (default: OUTPUT's\n"
                "                    file name without .safetensors)\n"
                "  --description T   shown by GET /v1/models (default: \"GPT-2 layer L attention,\n"
                "                    from INPUT\")\n"
                "  --help            print this and exit\n"
                "\n"
                "OUTPUT is replaced atomically, then loaded back with the server's loader.\n"
                "Name it NAME.safetensors: the server loads only *.safetensors files.\n"
                "\n"
                "Exit status: 0 done, 1 the checkpoint could not be imported or the model\n"
                "written, 2 usage.\n");
}

/* A decimal size_t, digits only, at most `max`; 0 or -1. */
static int size_parse(const char *s, size_t max, size_t *out) {
    size_t v = 0;
    if (!*s) return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        v = v * 10 + (size_t)(*s - '0');
        if (v > max) return -1;
    }
    *out = v;
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

int main(int argc, char **argv) {
    store_import_options opt = {.arch = STORE_IMPORT_AUTO};
    const char *paths[2] = {NULL, NULL};
    int n_paths = 0, have_heads = 0, only_paths = 0;

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
        } else if ((v = option_value(argc, argv, &i, "--arch", &missing))) {
            if (store_import_arch_parse(v, &opt.arch) != 0) {
                fprintf(stderr, "import_checkpoint: unknown arch '%s' (gpt2 or bert)\n", v);
                return 2;
            }
        } else if ((v = option_value(argc, argv, &i, "--layer", &missing))) {
            if (size_parse(v, 1000000, &opt.layer) != 0) {
                fprintf(stderr, "import_checkpoint: --layer '%s' is not a layer number\n", v);
                return 2;
            }
        } else if ((v = option_value(argc, argv, &i, "--heads", &missing))) {
            if (size_parse(v, STORE_HEADS_MAX, &opt.n_heads) != 0 || opt.n_heads == 0) {
                fprintf(stderr, "import_checkpoint: --heads '%s' is not a number in 1 … %d\n", v,
                        STORE_HEADS_MAX);
                return 2;
            }
            have_heads = 1;
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
    if (!have_heads) {
        fprintf(stderr, "import_checkpoint: --heads is required: a checkpoint file does not "
                        "say it (GPT-2 small 12, BERT-base 12; see --help)\n");
        return 2;
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
    printf("%s: model '%s' from %s layer %zu (of %zu): d_model %zu, %zu heads of %zu, mask %s; "
           "%zu bytes\n",
           paths[1], m->name, res.arch == STORE_IMPORT_GPT2 ? "GPT-2" : "BERT", opt.layer,
           res.n_layers, m->weights.d_model, m->weights.n_heads, m->weights.d_head,
           m->mask == ATTN_MASK_NONE ? "none" : "causal", res.file_bytes);
    store_model_destroy(m);
    size_t len = strlen(paths[1]), slen = strlen(".safetensors");
    if (len < slen || strcmp(paths[1] + len - slen, ".safetensors") != 0)
        fprintf(stderr,
                "import_checkpoint: note: %s does not end in .safetensors; a models "
                "directory ignores it\n",
                paths[1]);
    return 0;
}
