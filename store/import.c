/*
 * import.c — store_import_checkpoint (import.h): a Hugging Face checkpoint
 * layer in, one model file out; or several layers, as one stack.
 *
 * The steps, each failing with a message that names the checkpoint:
 *
 *   0. open the checkpoint (import_source.c): a directory's config.json and
 *      its safetensors, or one file; the options override the
 *      configuration (import.h);
 *   1. the family: the option's, else config.json's model_type, else the
 *      tensor names, scanned once for each family's "anchor" tensor (the
 *      first one a layer needs) under each accepted prefix, which also
 *      counts the layers and fixes the prefix of the requested layer (two
 *      prefixes at once is refused as ambiguous, not guessed);
 *   2. for each layer requested (--layers: in the stack's order), the
 *      family's read (import_<family>.c): find every tensor of the layer,
 *      check its shape against d, h, g and dh and its dtype, read it into
 *      floats and lay it out as ours (import_tensors.c), with the layer's
 *      variants (import_variants.c);
 *   3. a stack's layers checked to share their sizes, and the file written
 *      (import_write.c).
 *
 * The families are a table (import_families.c); nothing here names one.
 *
 * Memory: the checkpoint's files stay mapped (read-only) for the call,
 * since one layer is a small part of files that may be larger than memory;
 * a checkpoint truncated during the import can fault only this one-shot
 * call's process, never a server. Each layer's tensors are read into heap
 * buffers its import_out owns, freed before returning.
 */
#include "store/import.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store/import_internal.h"
#include "store/model.h"

/* Layer indices beyond this are not names we parse (no checkpoint has them). */
#define LAYER_MAX 1000000u

/* ---- the families by name --------------------------------------------------- */

/* The family of arch, or NULL (AUTO, or not a value of the enum). */
static const import_family *family_of(store_import_arch arch) {
    for (size_t i = 0; i < import_n_families; i++)
        if (import_families[i]->arch == arch) return import_families[i];
    return NULL;
}

int store_import_arch_parse(const char *text, store_import_arch *out) {
    if (strcmp(text, "auto") == 0) {
        *out = STORE_IMPORT_AUTO;
        return 0;
    }
    for (size_t i = 0; i < import_n_families; i++)
        if (strcmp(text, import_families[i]->name) == 0) {
            *out = import_families[i]->arch;
            return 0;
        }
    return -1;
}

const char *store_import_arch_name(store_import_arch arch) {
    const import_family *f = family_of(arch);
    return f ? f->name : "auto";
}

const char *store_import_arch_label(store_import_arch arch) {
    const import_family *f = family_of(arch);
    return f ? f->label : "auto";
}

/* config.json's model_type as a family: 0 and *out (AUTO when the config
 * has no model_type), or -1 for one this does not read. */
static int arch_from_config(const json_t *cfg, store_import_arch *out, const char *path,
                            attn_error *err) {
    *out = STORE_IMPORT_AUTO;
    json_t *mt = json_object_get(cfg, "model_type");
    if (!cfg || !mt) return 0;
    const char *type = json_string_value(mt);
    if (!type) return store_error_set(err, path, "config.json's \"model_type\" is not a string");
    for (size_t i = 0; i < import_n_families; i++) {
        const import_family *f = import_families[i];
        for (size_t k = 0; k < 6 && f->model_types[k]; k++)
            if (strcmp(type, f->model_types[k]) == 0) {
                *out = f->arch;
                return 0;
            }
    }
    return store_error_set(err, path,
                           "config.json's model_type '%s' is not one this tool reads (%s); "
                           "--arch reads it as one of those, if its attention is",
                           type, import_model_types_text);
}

/* ---- step 1: which family, which layers, which prefix ----------------------- */

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

/* What the names say about one family. */
typedef struct family_scan {
    size_t n_layers;   /* highest anchor layer + 1; 0 when none */
    unsigned prefixes; /* bit i: the requested layer's anchor is under prefixes[i] */
} family_scan;

static void names_scan(const import_src *src, size_t layer, family_scan *scan) {
    memset(scan, 0, import_n_families * sizeof scan[0]);
    for (size_t fi = 0; fi < src->n_files; fi++)
        for (size_t t = 0; t < store_file_count(src->files[fi]); t++) {
            const char *name = store_file_tensor(src->files[fi], t)->name;
            for (size_t a = 0; a < import_n_families; a++) {
                const import_family *f = import_families[a];
                for (unsigned p = 0; p < IMPORT_PREFIXES_MAX && f->prefixes[p]; p++) {
                    size_t l;
                    if (!layer_match(name, f->prefixes[p], f->head, f->anchor, &l)) continue;
                    if (l + 1 > scan[a].n_layers) scan[a].n_layers = l + 1;
                    if (l == layer) scan[a].prefixes |= 1u << p;
                }
            }
        }
}

/* Picks the family (arch's, or the only one the names show) and the
 * prefix of the layer; fills *out and *prefix, or fails with err. */
static int layer_locate(const import_src *src, const char *path, store_import_arch arch,
                        size_t layer, const import_family **out, const char **prefix,
                        size_t *n_layers, attn_error *err) {
    family_scan scan[IMPORT_FAMILIES_MAX];
    names_scan(src, layer, scan);

    const import_family *a = NULL;
    const family_scan *s = NULL;
    if (arch == STORE_IMPORT_AUTO) {
        for (size_t i = 0; i < import_n_families; i++) {
            if (scan[i].n_layers == 0 || !import_families[i]->by_name) continue;
            if (a)
                return store_error_set(err, path,
                                       "holds both %s and %s attention tensors; pass --arch",
                                       a->label, import_families[i]->label);
            a = import_families[i];
            s = &scan[i];
        }
        if (!a) return store_error_set(err, path, "%s", import_no_family_text);
    } else {
        for (size_t i = 0; i < import_n_families; i++)
            if (import_families[i]->arch == arch) {
                a = import_families[i];
                s = &scan[i];
            }
        if (!a) return store_error_set(err, NULL, "unknown architecture %d", (int)arch);
    }

    /* the first two prefixes found, or the family's first two */
    char want[2][160];
    unsigned found[2] = {0, 1}, n_found = 0;
    for (unsigned p = 0; p < IMPORT_PREFIXES_MAX; p++)
        if (s->prefixes & 1u << p && n_found < 2) found[n_found++] = p;
    for (unsigned i = 0; i < 2; i++)
        snprintf(want[i], sizeof want[i], "%s%s%zu%s",
                 a->prefixes[found[i]] ? a->prefixes[found[i]] : "", a->head, layer, a->anchor);
    if (n_found == 2)
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
    *prefix = a->prefixes[found[0]];
    *n_layers = s->n_layers;
    return 0;
}

/* ---- step 2: each layer ------------------------------------------------------- */

/* The number of heads: the option's, else config.json's. */
static int heads_resolve(const store_import_options *opt, const json_t *cfg, size_t *h,
                         const char *path, attn_error *err) {
    *h = opt->n_heads;
    if (*h) return 0;
    int got = import_cfg_count(cfg, IMPORT_HEADS_KEYS, h, path, err);
    if (got < 0) return -1;
    if (!got)
        return store_error_set(err, path, "the number of heads is unknown: %s (--heads)",
                               cfg ? "config.json does not say it" : "give it");
    if (*h > STORE_HEADS_MAX)
        return store_error_set(err, path, "config.json's %zu heads are more than %d", *h,
                               STORE_HEADS_MAX);
    return 0;
}

/* Reads checkpoint layer `layer` into *m (which then owns every buffer it
 * points to); the family in *a, its layer count in *n_layers. */
static int layer_import(const import_src *src, const char *in_path, store_import_arch arch,
                        size_t layer, const store_import_options *opt, size_t h, import_out *m,
                        const import_family **a, size_t *n_layers, attn_error *err) {
    const char *prefix = "";
    if (layer_locate(src, in_path, arch, layer, a, &prefix, n_layers, err) != 0) return -1;
    /* Gemma 3's and Llama 4's multimodal configs keep the text layers'
     * keys in text_config; the others have none */
    import_layer L = {.src = src,
                      .cfg = import_cfg_text(src->config),
                      .path = in_path,
                      .family = *a,
                      .prefix = prefix,
                      .layer = layer,
                      .h = h,
                      .opt = opt};
    return (*a)->read(&L, m, err);
}

/* The layers of a stack share d_model, n_heads, d_head, n_kv_heads and
 * d_context (models/README.md, "Stacks"); a checkpoint whose layers differ
 * is refused here rather than written and refused at load. */
static int stack_check(const import_out *ms, const size_t *layers, size_t n, const char *path,
                       attn_error *err) {
    for (size_t i = 1; i < n; i++) {
        const import_out *m = &ms[i], *f = &ms[0];
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

    import_src *src = calloc(1, sizeof *src);
    if (!src) return store_error_set(err, NULL, "out of memory");
    const import_family *a = NULL;
    size_t n_layers = 0, h = 0, n = 0, *all = NULL;
    const size_t *layers = opt->layers ? opt->layers : &opt->layer;
    int stacked = opt->layers != NULL || opt->all_layers;
    import_out *ms = NULL;
    store_import_arch arch = opt->arch;
    int rc = -1;
    if (opt->layers && (opt->n_layers == 0 || opt->n_layers > STORE_LAYERS_MAX)) {
        store_error_set(err, NULL, "%zu layers: a stack has 1 … %d", opt->n_layers,
                        STORE_LAYERS_MAX);
        goto done;
    }
    n = opt->layers ? opt->n_layers : 1;
    if (import_src_open(src, in_path, err) != 0) goto done;
    if (arch == STORE_IMPORT_AUTO && arch_from_config(src->config, &arch, in_path, err) != 0)
        goto done;
    if (heads_resolve(opt, import_cfg_text(src->config), &h, in_path, err) != 0) goto done;
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
        import_model_write(out_path, in_path, a, opt, ms, layers, n, stacked, name, res, err) != 0)
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
    import_src_close(src);
    free(src);
    return rc;
}
