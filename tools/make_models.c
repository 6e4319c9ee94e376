/*
 * make_models.c — writes the built-in models (store/builtin.h) into a
 * directory, then loads each file back with the server's loader to prove
 * it valid and to report the memory it takes.
 *
 *   make_models [--gpt3] [--llama3] OUTDIR
 *
 * Same bytes on every machine (a fixed seed, our own PRNG, no time, no
 * locale). Files are replaced atomically (written beside, then renamed), so
 * a server reloading the directory never sees half a file.
 *
 * Exit codes: 0 done, 1 a file could not be written or read back, 2 usage.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "store/builtin.h"
#include "store/model.h"

static void usage(FILE *to) {
    fprintf(
        to,
        "usage: make_models [--gpt3] [--llama3] OUTDIR\n"
        "\n"
        "Writes the built-in attention models into OUTDIR (created if missing):\n"
        "  demo-4d.safetensors           the worked example: d_model 4, 1 head of 4, mask none\n"
        "  demo-stories.safetensors      designed heads that tell the stories: 16 named\n"
        "                                dimensions, 5 heads of 4, a vocabulary of 40 words\n"
        "  demo-layers.safetensors       a stack of 2 layers, each 2 heads of 8, over\n"
        "                                demo-stories' words, causal\n"
        "  gpt2-small-shape.safetensors  d_model 768, 12 heads of 64, causal (~9.5 MB)\n"
        "  llama-small-shape.safetensors d_model 2048, 32 heads of 64 sharing 8 K/V heads,\n"
        "                                RoPE theta 500000, causal (~42 MB)\n"
        "with --gpt3 also\n"
        "  gpt3-shape.safetensors        d_model 12288, 96 heads of 128, causal (~2.4 GB)\n"
        "and with --llama3 also\n"
        "  llama3-8b-shape.safetensors   d_model 4096, 32 heads of 128 sharing 8 K/V heads,\n"
        "                                RoPE theta 500000 with llama3 scaling (factor 8,\n"
        "                                low 1, high 4, original 8192), causal (~168 MB)\n"
        "\n"
        "demo-4d's and demo-stories' weights are designed; the others come from a fixed\n"
        "seed (0x%016llx). The files are the same on every machine. Each file is read\n"
        "back with the server's loader. The format is\n"
        "described in models/README.md.\n"
        "\n"
        "  --gpt3   also write gpt3-shape (needs ~2.4 GB of disk)\n"
        "  --llama3 also write llama3-8b-shape (needs ~168 MB of disk)\n"
        "  --help   print this and exit\n"
        "\n"
        "Exit status: 0 done, 1 a model could not be written or read back, 2 usage.\n",
        (unsigned long long)STORE_BUILTIN_SEED);
}

static int write_one(const store_builtin *b, const char *dir) {
    attn_error err;
    size_t file_bytes;
    if (store_builtin_write(b, dir, &file_bytes, &err) != 0) {
        fprintf(stderr, "make_models: %s\n", err.message);
        return -1;
    }

    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s.safetensors", dir, b->name) >= (int)sizeof path) {
        fprintf(stderr, "make_models: %s: path too long\n", dir);
        return -1;
    }
    store_model *m;
    if (store_model_load(&m, path, &err) != 0) {
        fprintf(stderr, "make_models: written but not loadable: %s\n", err.message);
        return -1;
    }
    printf("%s: %zu bytes (tensor data %zu); d_model %zu, n_heads %zu, n_kv_heads %zu, d_head %zu, "
           "n_layers %zu, mask %s; loaded: %zu bytes mapped, %zu bytes on the heap\n",
           path, file_bytes, store_builtin_data_bytes(b), m->weights.d_model, m->weights.n_heads,
           m->weights.n_kv_heads, m->weights.d_head, m->n_layers,
           m->mask == ATTN_MASK_NONE ? "none" : "causal", m->bytes_mapped, m->bytes_owned);
    store_model_destroy(m);
    return 0;
}

int main(int argc, char **argv) {
    int gpt3 = 0, llama3 = 0;
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--gpt3") == 0) {
            gpt3 = 1;
        } else if (strcmp(argv[i], "--llama3") == 0) {
            llama3 = 1;
        } else if (argv[i][0] == '-' || dir) {
            fprintf(stderr, "make_models: unexpected argument '%s' (see --help)\n", argv[i]);
            return 2;
        } else {
            dir = argv[i];
        }
    }
    if (!dir || !*dir) {
        fprintf(stderr, "make_models: OUTDIR is missing (see --help)\n");
        return 2;
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "make_models: %s: cannot create: %s\n", dir, strerror(errno));
        return 1;
    }

    for (size_t i = 0; i < store_builtin_count(); i++) {
        const store_builtin *b = store_builtin_at(i);
        if (b->on_demand && !(gpt3 && strcmp(b->name, "gpt3-shape") == 0) &&
            !(llama3 && strcmp(b->name, "llama3-8b-shape") == 0))
            continue;
        if (write_one(b, dir) != 0) return 1;
    }
    return 0;
}
