/*
 * test_readme.c — the README's examples, sent to the real server.
 *
 * Every ```sh block of README.md that holds a `curl … http://127.0.0.1:8080…`
 * command is one example; the first ```json block after it is its
 * documented answer. The test starts the built server on a free loopback
 * port, sends each example's method, path and body (the text between
 * `-d '` and the closing quote), and compares the answer with the documented
 * one: the same keys, strings and array lengths, numbers within a float32
 * tolerance (a BLAS build may round the last digit differently).
 *
 * The README is found at $ATTN_README, else ./README.md (make runs the tests
 * from the top of the tree); the server serves the built-in models of
 * $ATTN_TEST_MODELS_DIR, else build/models, as `make run` does. docs/API.md
 * is compared with the shared contract at $SHARED_API_MD, else
 * ../shared/API.md; where there is none, that test is reported skipped.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "server/route.h"
#include "tests/http_harness.h"

#define README_HOST "http://127.0.0.1:8080"

typedef struct example {
    char method[8];
    char path[256];
    char *body;     /* NULL for a GET */
    char *expected; /* the documented answer */
    int line;       /* of the curl command, for messages */
} example;

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)size + 1);
    if (text && fread(text, 1, (size_t)size, f) != (size_t)size) {
        free(text);
        text = NULL;
    }
    if (text) text[size] = '\0';
    fclose(f);
    return text;
}

static int line_of(const char *text, const char *at) {
    int line = 1;
    for (const char *p = text; p < at; p++)
        line += *p == '\n';
    return line;
}

/* The text of the fenced block that opens at `fence` ("```lang\n"), and
 * where the text after the block starts. */
static char *fenced_block(const char *fence, const char **after) {
    const char *start = strchr(fence, '\n');
    if (!start) return NULL;
    start++;
    const char *end = strstr(start, "\n```");
    if (!end) return NULL;
    *after = end + 4;
    return strndup(start, (size_t)(end - start + 1));
}

/* Reads README examples into `out`; returns how many. */
static int readme_examples(const char *text, example *out, int max) {
    int count = 0;
    const char *p = text;
    while (count < max && (p = strstr(p, "```sh\n")) != NULL) {
        const char *after;
        char *block = fenced_block(p, &after);
        ck_assert_ptr_nonnull(block);
        const char *url = strstr(block, "curl ");
        url = url ? strstr(url, README_HOST) : NULL;
        if (url) {
            example *ex = &out[count];
            memset(ex, 0, sizeof *ex);
            ex->line = line_of(text, p);
            url += strlen(README_HOST);
            size_t plen = strcspn(url, " '\"\n");
            ck_assert_uint_lt(plen, sizeof ex->path);
            memcpy(ex->path, url, plen);
            const char *data = strstr(block, "-d '");
            if (data) {
                data += 4;
                const char *close = strchr(data, '\'');
                ck_assert_msg(close, "README line %d: unclosed -d '", ex->line);
                ex->body = strndup(data, (size_t)(close - data));
                strcpy(ex->method, "POST");
            } else {
                strcpy(ex->method, "GET");
            }
            const char *answer = strstr(after, "```json\n");
            ck_assert_msg(answer, "README line %d: no ```json answer follows", ex->line);
            ex->expected = fenced_block(answer, &after);
            ck_assert_ptr_nonnull(ex->expected);
            count++;
        }
        free(block);
        p = after;
    }
    return count;
}

/* Compares `got` with `want`; on the first difference fills `where` with
 * its JSON Pointer and returns 0. */
static int json_matches(const json_t *got, const json_t *want, char *where, size_t size) {
    if (json_is_number(want)) {
        if (!json_is_number(got)) return 0;
        double g = json_number_value(got), w = json_number_value(want);
        return fabs(g - w) <= 1e-6 + 1e-5 * fabs(w);
    }
    if (json_typeof(got) != json_typeof(want)) return 0;
    if (json_is_array(want)) {
        if (json_array_size(got) != json_array_size(want)) return 0;
        for (size_t i = 0; i < json_array_size(want); i++) {
            size_t used = strlen(where);
            snprintf(where + used, size - used, "/%zu", i);
            if (!json_matches(json_array_get(got, i), json_array_get(want, i), where, size))
                return 0;
            where[used] = '\0';
        }
        return 1;
    }
    if (json_is_object(want)) {
        const char *key;
        json_t *value;
        if (json_object_size(got) != json_object_size(want)) return 0;
        json_object_foreach((json_t *)want, key, value) {
            size_t used = strlen(where);
            snprintf(where + used, size - used, "/%s", key);
            if (!json_matches(json_object_get(got, key), value, where, size)) return 0;
            where[used] = '\0';
        }
        return 1;
    }
    return json_equal((json_t *)got, (json_t *)want);
}

static const char *readme_path(void) {
    return getenv("ATTN_README") ? getenv("ATTN_README") : "README.md";
}

START_TEST(readme_examples_answer_as_documented) {
    const char *path = readme_path();
    char *text = read_file(path);
    ck_assert_msg(text != NULL, "cannot read %s", path);

    example examples[16];
    int count = readme_examples(text, examples, 16);
    /* The README promises at least the 我爱你, the causal, the models and the
     * error examples. */
    ck_assert_int_ge(count, 5);

    /* the models `make run` serves */
    const char *models =
        getenv("ATTN_TEST_MODELS_DIR") ? getenv("ATTN_TEST_MODELS_DIR") : "build/models";
    const char *args[] = {"--models-dir", models, NULL};
    hs_server server;
    ck_assert_int_eq(hs_start(&server, args), 0);
    for (int i = 0; i < count; i++) {
        example *ex = &examples[i];
        hs_response r;
        ck_assert_int_eq(hs_request(NULL, server.port, ex->method, ex->path, NULL, ex->body,
                                    ex->body ? strlen(ex->body) : 0, &r),
                         CURLE_OK);
        json_error_t jerr;
        json_t *got = json_loadb(r.body, r.len, 0, &jerr);
        json_t *want = json_loads(ex->expected, 0, &jerr);
        ck_assert_msg(want, "README line %d: documented answer is not JSON: %s", ex->line,
                      jerr.text);
        ck_assert_msg(got, "README line %d: answer is not JSON: %s", ex->line, r.body);
        char where[512] = "";
        ck_assert_msg(json_matches(got, want, where, sizeof where),
                      "README line %d: answer differs at '%s':\n%s", ex->line, where, r.body);
        json_decref(got);
        json_decref(want);
        hs_response_free(&r);
        free(ex->body);
        free(ex->expected);
    }
    ck_assert_int_eq(hs_stop(&server), 0);
    free(text);
}
END_TEST

/* The README's two passages on API keys name the routes open without one
 * as the route table has them: the --api-keys-file row of the options'
 * table the list --help prints, the Access control paragraph each of its
 * paths. */
START_TEST(readme_names_the_open_routes) {
    char *text = read_file(readme_path());
    ck_assert_msg(text != NULL, "cannot read %s", readme_path());
    char open[256];
    ck_assert_uint_lt(srv_route_open_paths(open, sizeof open), sizeof open);

    const char *row = strstr(text, "\n| `--api-keys-file` |");
    ck_assert_msg(row != NULL, "no --api-keys-file row in the options' table");
    char *line = strndup(row + 1, strcspn(row + 1, "\n"));
    ck_assert_msg(strstr(line, open), "the --api-keys-file row does not list %s:\n%s", open, line);
    free(line);

    const char *para = strstr(text, "\nAccess control. ");
    ck_assert_msg(para != NULL, "no Access control paragraph");
    const char *end = strstr(para + 1, "\n\n");
    char *passage = strndup(para + 1, end ? (size_t)(end - para - 1) : strlen(para + 1));
    for (char *path = strtok(open, ", "); path; path = strtok(NULL, ", ")) {
        char quoted[64];
        snprintf(quoted, sizeof quoted, "`%s`", path);
        ck_assert_msg(strstr(passage, quoted), "the Access control paragraph lacks %s", quoted);
    }
    free(passage);
    free(text);
}
END_TEST

/* The shared copy of the contract: $SHARED_API_MD, else ../shared/API.md
 * (beside the checkout). */
static const char *shared_api_path(void) {
    const char *path = getenv("SHARED_API_MD");
    return path && *path ? path : "../shared/API.md";
}

/* The contract shipped in docs/ is the shared one, word for word. main()
 * adds this test only where the shared copy exists, and says it skipped it
 * otherwise. */
START_TEST(docs_contract_is_the_shared_one) {
    const char *path = shared_api_path();
    char *shared = read_file(path);
    ck_assert_msg(shared != NULL, "cannot read %s", path);
    char *ours = read_file("docs/API.md");
    ck_assert_msg(ours != NULL, "docs/API.md is missing");
    ck_assert_msg(strcmp(ours, shared) == 0, "docs/API.md differs from %s", path);
    free(ours);
    free(shared);
}
END_TEST

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    Suite *s = suite_create("readme");
    TCase *tc = tcase_create("examples");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, readme_examples_answer_as_documented);
    tcase_add_test(tc, readme_names_the_open_routes);
    if (access(shared_api_path(), F_OK) == 0) {
        tcase_add_test(tc, docs_contract_is_the_shared_one);
    } else {
        printf("SKIP docs_contract_is_the_shared_one: no %s (SHARED_API_MD names the shared "
               "contract)\n",
               shared_api_path());
        fflush(stdout); /* before check forks the tests */
    }
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    curl_global_cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
