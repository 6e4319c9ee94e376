/*
 * fuzz_safetensors.c — libFuzzer target over the model loader (make fuzz).
 *
 * Each input is written as a model file and loaded with store_model_load:
 * the safetensors reader (header length, JSON header, dtypes, shapes,
 * offsets) and the model's own checks (tensor names and shapes,
 * __metadata__, finite values, F16/BF16 conversion). It must end in a
 * model or a message, never a crash, a leak or undefined behaviour; a model
 * that loads must compute: one small request runs on it.
 *
 * The file lives in /dev/shm (memory) when there is one, under a name of
 * this process's, and is rewritten for each input: the loader maps files,
 * so it needs a real one.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attention/attention.h"
#include "store/model.h"

static char path[128];

static int write_file(const uint8_t *data, size_t size) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return -1;
    while (size > 0) {
        ssize_t n = write(fd, data, size);
        if (n <= 0) {
            close(fd);
            return -1;
        }
        data += n, size -= (size_t)n;
    }
    return close(fd);
}

/* One causal computation of 3 tokens with every head, as a request would. */
static void compute_with(const store_model *m) {
    const attn_weights *w = &m->weights;
    size_t n = 3, dm = w->d_model, h = w->n_heads;
    if (dm > 4096 || h > 256) return; /* a fuzzer's file is small; stay quick */
    float *e = calloc(n * dm, sizeof(float)), *out = calloc(n * dm, sizeof(float));
    size_t *heads = calloc(h, sizeof(size_t));
    attn_workspace *ws = attn_workspace_create();
    if (e && out && heads && ws) {
        for (size_t i = 0; i < n * dm; i++)
            e[i] = (float)((int)(i % 5) - 2) / 8.0f;
        for (size_t i = 0; i < h; i++)
            heads[i] = i;
        attn_input in = {.weights = w,
                         .embeddings = e,
                         .n_tokens = n,
                         .mask = {.kind = m->mask},
                         .scale = 0.5f,
                         .heads = heads,
                         .n_heads_out = h};
        attn_output o = {.embeddings = out};
        (void)attn_compute(&o, ws, &in, NULL);
    }
    attn_workspace_destroy(ws);
    free(e), free(out), free(heads);
}

static void remove_file(void) {
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!path[0]) {
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(path, sizeof path, "%s/fuzz-model-%ld.safetensors", dir, (long)getpid());
        atexit(remove_file);
    }
    if (write_file(data, size) != 0) abort();
    store_model *m = NULL;
    attn_error err;
    if (store_model_load(&m, path, &err) == 0) {
        compute_with(m);
        store_model_destroy(m);
    }
    return 0;
}
