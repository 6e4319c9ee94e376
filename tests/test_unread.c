/*
 * test_unread.c — answers their clients do not read: counted against
 * --max-unsent-bytes (new work refused with 503 while over it), cut after
 * --connection-timeout of reading nothing, and logged with what went out.
 * A real server on 127.0.0.1; the clients shrink their receive buffers so
 * that an answer of some 20 MB cannot vanish into the sockets' buffers.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/fixtures.h"
#include "tests/http_harness.h"

static void finish(hs_server *s) {
    char why[2048];
    ck_assert_msg(hs_finish(s, why, sizeof why) == 0, "%s", why);
}

/* n tokens of 4 dimensions through one head of 4, no mask, the patterns
 * asked: an answer of about 11 bytes a pattern entry, 22 MB at n = 1400,
 * from a body of some 50 KB. */
static char *big_answer_body(int n) {
    char *b = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&b, &len);
    fputs("{\"mask\":\"none\",\"return\":[\"patterns\"],\"embeddings\":[", f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s[0.%d,-0.%d,0.%d,1]", i ? "," : "", i % 97, i % 89, i % 83);
    fputs("],\"weights\":{\"heads\":[{", f);
    const char *names[] = {"w_q", "w_k", "w_v"};
    for (int m = 0; m < 3; m++) {
        fprintf(f, "%s\"%s\":[", m ? "," : "", names[m]);
        for (int r = 0; r < 4; r++)
            fprintf(f, "%s[%d,%d,%d,%d]", r ? "," : "", r == 0, r == 1, r == 2, r == 3);
        fputs("]", f);
    }
    fputs("}]}}", f);
    fclose(f);
    return b;
}

/* A connection with a small receive buffer that sent `body` as request id
 * and reads nothing. */
static int send_unread(unsigned port, const char *body, const char *id) {
    int fd = hs_raw_open_rcvbuf(port, 4096);
    ck_assert_int_ge(fd, 0);
    char head[256];
    snprintf(head, sizeof head,
             "POST /v1/attention HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             "X-Request-Id: %s\r\nContent-Length: %zu\r\n\r\n",
             id, strlen(body));
    ck_assert_int_eq(hs_raw_send(fd, head, strlen(head)), 0);
    ck_assert_int_eq(hs_raw_send(fd, body, strlen(body)), 0);
    return fd;
}

/* While unread answers hold more than --max-unsent-bytes, a computation is
 * refused (503 overloaded, Retry-After) and the probes still answer; once
 * the answer is read, work is taken again. */
START_TEST(unsent_budget_refuses) {
    hs_server s;
    static const char *const args[] = {"--max-unsent-bytes", "4m", "--connection-timeout", "120",
                                       NULL};
    ck_assert_int_eq(hs_start(&s, args), 0);
    char *big = big_answer_body(1400);
    int fd = send_unread(s.port, big, "unread-big");
    ck_assert_int_ge(hs_wait_metric_at_least(s.port, "\nattn_answer_bytes_unsent ", 4 << 20, 60),
                     4 << 20);
    ck_assert_int_eq(hs_metric(s.port, "\nattn_answer_bytes_capacity "), 4 << 20);

    const char *small = "{\"embeddings\":[[1,0],[0,1]],\"weights\":{\"heads\":[{\"w_q\":[[1,0],[0,"
                        "1]],\"w_k\":[[1,0],[0,1]],\"w_v\":[[1,0],[0,1]]}]}}";
    hs_response r;
    hs_request(NULL, s.port, "POST", "/v1/attention", NULL, small, strlen(small), &r);
    ck_assert_msg(r.status == 503 && strstr(r.body, "\"overloaded\"") && strstr(r.body, "not read"),
                  "%ld: %s", r.status, r.body);
    char *retry = hs_header(&r, "Retry-After");
    ck_assert_ptr_nonnull(retry);
    free(retry);
    hs_response_free(&r);
    ck_assert(hs_wait_served(s.port, "/healthz", 5));

    /* read whole, the answer lets its bytes go, and work is taken again */
    char *answer = hs_raw_recv(fd, 120.0);
    ck_assert_msg(strncmp(answer, "HTTP/1.1 200", 12) == 0, "got: %.200s", answer);
    ck_assert_ptr_nonnull(strstr(answer, "\"patterns\""));
    free(answer);
    close(fd);
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_answer_bytes_unsent ", 0, 20), 0);
    hs_request(NULL, s.port, "POST", "/v1/attention", NULL, small, strlen(small), &r);
    ck_assert_msg(r.status == 200, "%ld: %s", r.status, r.body);
    hs_response_free(&r);
    free(big);
    finish(&s);
}
END_TEST

/* A job queued before the unread answers filled the budget is refused when
 * its turn comes, not run: only the answers being made can pass the bound. */
START_TEST(queued_job_refused_when_full) {
    hs_server s;
    static const char *const args[] = {"--workers",
                                       "1",
                                       "--max-unsent-bytes",
                                       "4m",
                                       "--max-flops",
                                       "1e14",
                                       "--connection-timeout",
                                       "120",
                                       "--inline-max-flops",
                                       "0",
                                       NULL};
    ck_assert_int_eq(hs_start(&s, args), 0);
    /* slow to compute and large to answer: seconds of the worker, and head
     * 0's patterns, some 45 MB */
    char *slow = tf_narrow_heads_body(2000, "\"select_heads\":[0],\"return\":[\"patterns\"],",
                                      "\"softcap\":30,");
    int fd = send_unread(s.port, slow, "unread-slow");
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_workers_busy ", 1, 30), 1);
    /* queued behind it, while the budget is empty */
    char *small = big_answer_body(3);
    int q = send_unread(s.port, small, "queued");
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_queue_depth ", 1, 30), 1);
    ck_assert_int_eq(hs_metric(s.port, "\nattn_answer_bytes_unsent "), 0);
    char *answer = hs_raw_recv(q, 120.0);
    ck_assert_msg(strncmp(answer, "HTTP/1.1 503", 12) == 0 && strstr(answer, "not read"),
                  "got: %.300s", answer);
    free(answer);
    close(q);
    close(fd);
    free(small);
    free(slow);
    finish(&s);
}
END_TEST

/* A client that reads nothing of its answer for --connection-timeout is
 * cut: its connection closed, its answer's bytes let go, and the access
 * log says the status that went out, the bytes that went and why — not a
 * 408 of nothing. */
START_TEST(unread_answer_cut) {
    hs_server s;
    static const char *const args[] = {"--connection-timeout", "2", NULL};
    ck_assert_int_eq(hs_start(&s, args), 0);
    char *big = big_answer_body(1400);
    int fd = send_unread(s.port, big, "unread-cut");
    char *line = hs_wait_access_line(&s, "unread-cut", 60);
    ck_assert_msg(line, "no access line");
    ck_assert_msg(strstr(line, "access POST /v1/attention 200 ") && strstr(line, " cut=timeout"),
                  "%s", line);
    /* what went is some of it: more than nothing, less than the whole */
    const char *bytes = strstr(line, " 200 ") + 5;
    long sent = strtol(bytes, NULL, 10);
    ck_assert_msg(sent > 0 && sent < 20 * 1000 * 1000, "%s", line);
    free(line);
    ck_assert_int_eq(hs_metric(s.port, "\nattn_answers_cut_total "), 1);
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_answer_bytes_unsent ", 0, 20), 0);
    close(fd);
    free(big);
    finish(&s);
}
END_TEST

/* The log writes the bytes that went: a HEAD's answer is built, none of its
 * body goes, and it is logged 0B, not its length. */
START_TEST(head_logged_as_sent) {
    hs_server s;
    ck_assert_int_eq(hs_start(&s, NULL), 0);
    const char *head = "HEAD /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Request-Id: headed\r\n"
                       "Connection: close\r\n\r\n";
    char *raw = hs_raw(s.port, head, strlen(head), 10.0);
    ck_assert_msg(raw && strncmp(raw, "HTTP/1.1 200", 12) == 0, "got: %.200s", raw);
    free(raw);
    char *line = hs_wait_access_line(&s, "headed", 10);
    ck_assert_msg(line && strstr(line, "access HEAD /v1/models 200 0B "), "%s",
                  line ? line : "(no access line)");
    free(line);
    finish(&s);
}
END_TEST

int main(void) {
    Suite *s = suite_create("unread");
    TCase *tc = tcase_create("unread");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, unsent_budget_refuses);
    tcase_add_test(tc, unread_answer_cut);
    tcase_add_test(tc, queued_job_refused_when_full);
    tcase_add_test(tc, head_logged_as_sent);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
