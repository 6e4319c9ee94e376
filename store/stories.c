/*
 * stories.c — demo-stories, the designed model: every number chosen by a
 * rule below, none drawn at random, so that a student can redo any row by
 * hand and each head tells one of the classic stories of attention.
 *
 * The embedding space has 16 named dimensions, one meaning each. A word's
 * token embedding is 1 on each of its features and 0 elsewhere; the
 * position table adds p on `pos` and p² on `pos_sq` at position p, so two
 * occurrences of a word differ only there.
 *
 * Five heads of width 4 (scale 1/√4 = 1/2). A head reads a few dimensions
 * into its query and key columns, so its score Q·Kᵀ asks one question;
 * "a match" is 8 in Q·K, 4 after the scale, and e^4 ≈ 55: one matching key
 * outweighs about fifty that do not. Each head's value columns copy a few
 * dimensions of the key token, and W_o writes each copy back onto the
 * dimension it came from, so a head's part of ΔE says, in the same named
 * dimensions, what it gathered.
 *
 *   0 adjective → noun   a noun's query asks "adjectives?" (noun → 8 against
 *                        adjective → 1), and a second column adds 1/2 per
 *                        position of the key (noun → 1 against pos → 1): the
 *                        nearer an adjective, the stronger its pull, so in
 *                        "… verdant forest" forest hears verdant over the
 *                        fluffy and blue a causal row also sees. Values:
 *                        colour, texture, small.
 *   1 context → meaning  a noun's query asks "a word that says which world
 *                        this is?": keys carry animal, chemistry, medicine
 *                        and paris. Values: those four. An ambiguous noun
 *                        (mole, tower) has 0 on all of them itself, and takes
 *                        its meaning from its neighbours.
 *   2 fiction            a person's query asks "fiction around?" Value: fiction.
 *   3 royalty            a person's query asks "royalty around?" Value: royalty.
 *                        Two heads, two readings of one name: harry after
 *                        wizard, or after queen, sussex and william.
 *   4 previous token     the query of position q is (16q − 16, −8) by its
 *                        bias and pos, the key of position k is (k, k²):
 *                        Q·K/2 = 8(q−1)k − 4k² = −4(k − (q−1))² + 4(q−1)², so
 *                        the key just before the query scores 4 above its
 *                        neighbours, whatever the mask (the first token, with
 *                        no key before it, takes itself). Values: none — the
 *                        pattern is the lesson.
 *
 * No b_k, b_v or b_o; the only bias is head 4's query.
 */
#include "store/stories.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "store/error.h"

enum dimension {
    NOUN,
    ADJECTIVE,
    VERB,
    FUNCTION,
    COLOUR,
    TEXTURE,
    ANIMAL,
    CHEMISTRY,
    MEDICINE,
    PARIS,
    SMALL,
    FICTION,
    ROYALTY,
    PERSON,
    POS,
    POS_SQ,
    DIMENSIONS
};

static const char *const dimension_names[DIMENSIONS] = {
    "noun",     "adjective", "verb",  "function", "colour",  "texture", "animal", "chemistry",
    "medicine", "paris",     "small", "fiction",  "royalty", "person",  "pos",    "pos_sq",
};

#define F(d) (1u << (d))

/* The vocabulary: each word and its features (1 there, 0 elsewhere). */
static const struct word {
    const char *text;
    unsigned features;
} words[] = {
    /* function words */
    {"a", F(FUNCTION)},
    {"the", F(FUNCTION)},
    {"of", F(FUNCTION)},
    {"on", F(FUNCTION)},
    {"in", F(FUNCTION)},
    {"and", F(FUNCTION)},
    {"one", F(FUNCTION)},
    /* adjectives */
    {"fluffy", F(ADJECTIVE) | F(TEXTURE)},
    {"soft", F(ADJECTIVE) | F(TEXTURE)},
    {"blue", F(ADJECTIVE) | F(COLOUR)},
    {"verdant", F(ADJECTIVE) | F(COLOUR)},
    {"red", F(ADJECTIVE) | F(COLOUR)},
    {"green", F(ADJECTIVE) | F(COLOUR)},
    {"miniature", F(ADJECTIVE) | F(SMALL)},
    {"tiny", F(ADJECTIVE) | F(SMALL)},
    {"american", F(ADJECTIVE)},
    {"magic", F(ADJECTIVE) | F(FICTION)},
    /* nouns */
    {"creature", F(NOUN) | F(ANIMAL)},
    {"shrew", F(NOUN) | F(ANIMAL)},
    {"cat", F(NOUN) | F(ANIMAL)},
    {"dog", F(NOUN) | F(ANIMAL)},
    {"forest", F(NOUN)},
    {"mole", F(NOUN)},
    {"tower", F(NOUN)},
    {"carbon", F(NOUN) | F(CHEMISTRY)},
    {"dioxide", F(NOUN) | F(CHEMISTRY)},
    {"biopsy", F(NOUN) | F(MEDICINE)},
    {"paris", F(NOUN) | F(PARIS)},
    {"eiffel", F(PARIS)}, /* a name used as a modifier: not itself a noun that asks */
    {"sussex", F(NOUN) | F(ROYALTY)},
    /* people */
    {"harry", F(NOUN) | F(PERSON)},
    {"wizard", F(NOUN) | F(PERSON) | F(FICTION)},
    {"queen", F(NOUN) | F(PERSON) | F(ROYALTY)},
    {"king", F(NOUN) | F(PERSON) | F(ROYALTY)},
    {"prince", F(NOUN) | F(PERSON) | F(ROYALTY)},
    {"william", F(NOUN) | F(PERSON) | F(ROYALTY)},
    /* verbs */
    {"roamed", F(VERB)},
    {"take", F(VERB)},
    {"sat", F(VERB)},
    {"is", F(VERB)},
};

#define N_WORDS (sizeof words / sizeof words[0])

/* One weight: matrix 'q', 'k' or 'v' of a head, row = an embedding
 * dimension, col = a column of the head (0 … 3). */
typedef struct weight {
    int head;
    char matrix;
    enum dimension row;
    int col;
    float value;
} weight;

static const weight weights[] = {
    /* 0 adjective → noun */
    {0, 'q', NOUN, 0, 8},
    {0, 'k', ADJECTIVE, 0, 1},
    {0, 'q', NOUN, 1, 1},
    {0, 'k', POS, 1, 1},
    {0, 'v', COLOUR, 0, 1},
    {0, 'v', TEXTURE, 1, 1},
    {0, 'v', SMALL, 2, 1},
    /* 1 context → meaning */
    {1, 'q', NOUN, 0, 8},
    {1, 'k', ANIMAL, 0, 1},
    {1, 'k', CHEMISTRY, 0, 1},
    {1, 'k', MEDICINE, 0, 1},
    {1, 'k', PARIS, 0, 1},
    {1, 'v', ANIMAL, 0, 1},
    {1, 'v', CHEMISTRY, 1, 1},
    {1, 'v', MEDICINE, 2, 1},
    {1, 'v', PARIS, 3, 1},
    /* 2 fiction, 3 royalty */
    {2, 'q', PERSON, 0, 8},
    {2, 'k', FICTION, 0, 1},
    {2, 'v', FICTION, 0, 1},
    {3, 'q', PERSON, 0, 8},
    {3, 'k', ROYALTY, 0, 1},
    {3, 'v', ROYALTY, 0, 1},
    /* 4 previous token (and its query bias, below) */
    {4, 'q', POS, 0, 16},
    {4, 'k', POS, 0, 1},
    {4, 'k', POS_SQ, 1, 1},
};

static const float head4_b_q[STORIES_D_HEAD] = {-16, -8, 0, 0};

#define HD       (STORIES_HEADS * STORIES_D_HEAD)
#define QKV_COLS (3 * HD)

static size_t data_bytes(void) {
    size_t floats = (size_t)STORIES_D_MODEL * QKV_COLS + QKV_COLS + (size_t)HD * STORIES_D_MODEL +
                    N_WORDS * STORIES_D_MODEL + (size_t)STORIES_POSITIONS * STORIES_D_MODEL;
    return floats * sizeof(float);
}

/* A JSON array of strings, as the metadata keys `vocabulary` and
 * `dimensions` hold it; free() the result. */
static char *string_array_json(const char *const *items, size_t count, size_t stride) {
    json_t *a = json_array();
    if (!a) return NULL;
    for (size_t i = 0; i < count; i++) {
        const char *s = *(const char *const *)((const char *)items + i * stride);
        if (json_array_append_new(a, json_string(s)) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    char *text = json_dumps(a, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(a);
    return text;
}

_Static_assert(N_WORDS == STORIES_WORDS, "STORIES_WORDS is the vocabulary's length");

int store_stories_vocabulary(float *tokens, char **vocabulary, char **dimensions) {
    enum { DM = STORIES_D_MODEL };
    memset(tokens, 0, N_WORDS * DM * sizeof(float));
    for (size_t t = 0; t < N_WORDS; t++)
        for (int d = 0; d < DM; d++)
            if (words[t].features & F(d)) tokens[t * DM + (size_t)d] = 1;
    *vocabulary = string_array_json(&words[0].text, N_WORDS, sizeof words[0]);
    *dimensions = string_array_json(dimension_names, DIMENSIONS, sizeof dimension_names[0]);
    if (*vocabulary && *dimensions) return 0;
    free(*vocabulary);
    free(*dimensions);
    return -1;
}

static int write(const char *path, const store_metadata *meta, size_t n_meta, size_t *file_bytes,
                 attn_error *err) {
    enum { DM = STORIES_D_MODEL, DH = STORIES_D_HEAD };
    /* 9 KB in all: on the stack. */
    float w_qkv[DM * QKV_COLS] = {0}, b_qkv[QKV_COLS] = {0}, w_o[HD * DM] = {0};
    float tokens[N_WORDS * DM] = {0}, positions[STORIES_POSITIONS * DM] = {0};

    /* w_qkv's columns: [Q of the heads | K of the heads | V of the heads];
     * W_o row h·DH + c writes value column c of head h back onto the
     * dimension that column copied. */
    for (size_t i = 0; i < sizeof weights / sizeof weights[0]; i++) {
        const weight *w = &weights[i];
        size_t block = w->matrix == 'q' ? 0 : w->matrix == 'k' ? 1 : 2;
        size_t col = block * HD + (size_t)w->head * DH + (size_t)w->col;
        w_qkv[(size_t)w->row * QKV_COLS + col] = w->value;
        if (w->matrix == 'v') w_o[((size_t)w->head * DH + (size_t)w->col) * DM + w->row] = 1;
    }
    memcpy(&b_qkv[4 * DH], head4_b_q, sizeof head4_b_q);

    for (size_t t = 0; t < N_WORDS; t++)
        for (int d = 0; d < DM; d++)
            if (words[t].features & F(d)) tokens[t * DM + (size_t)d] = 1;
    for (size_t p = 0; p < STORIES_POSITIONS; p++) {
        positions[p * DM + POS] = (float)p;
        positions[p * DM + POS_SQ] = (float)(p * p);
    }

    char *vocabulary = string_array_json(&words[0].text, N_WORDS, sizeof words[0]);
    char *dimensions = string_array_json(dimension_names, DIMENSIONS, sizeof dimension_names[0]);
    store_metadata all[24];
    if (!vocabulary || !dimensions || n_meta + 2 > sizeof all / sizeof all[0]) {
        free(vocabulary);
        free(dimensions);
        return store_error_set(err, path,
                               vocabulary && dimensions ? "%zu metadata entries, room for %zu"
                                                        : "out of memory",
                               n_meta, sizeof all / sizeof all[0] - 2);
    }
    memcpy(all, meta, n_meta * sizeof *meta);
    all[n_meta] = (store_metadata){"vocabulary", vocabulary};
    all[n_meta + 1] = (store_metadata){"dimensions", dimensions};

    static const size_t shape_w_qkv[2] = {DM, QKV_COLS}, shape_b_qkv[1] = {QKV_COLS};
    static const size_t shape_w_o[2] = {HD, DM}, shape_tokens[2] = {N_WORDS, DM};
    static const size_t shape_positions[2] = {STORIES_POSITIONS, DM};
    const store_write_tensor t[] = {
        {.name = "w_qkv", .dtype = STORE_DTYPE_F32, .rank = 2, .shape = shape_w_qkv, .data = w_qkv},
        {.name = "b_qkv", .dtype = STORE_DTYPE_F32, .rank = 1, .shape = shape_b_qkv, .data = b_qkv},
        {.name = "w_o", .dtype = STORE_DTYPE_F32, .rank = 2, .shape = shape_w_o, .data = w_o},
        {.name = "token_embeddings",
         .dtype = STORE_DTYPE_F32,
         .rank = 2,
         .shape = shape_tokens,
         .data = tokens},
        {.name = "position_embeddings",
         .dtype = STORE_DTYPE_F32,
         .rank = 2,
         .shape = shape_positions,
         .data = positions},
    };
    int rc = store_file_write(path, all, n_meta + 2, t, sizeof t / sizeof t[0], file_bytes, err);
    free(vocabulary);
    free(dimensions);
    return rc;
}

const store_design store_stories_design = {
    .source = "tools/make_models, designed weights (store/stories.c)",
    .data_bytes = data_bytes,
    .write = write,
};
