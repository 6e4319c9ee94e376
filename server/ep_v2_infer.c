/*
 * ep_v2_infer.c — POST /v2/models/{name}/infer, the Open Inference
 * Protocol's inference (api/oip.h says what the wire format follows).
 *
 * From the headers alone, before a byte of the body is read: 503 while
 * draining, 415 for a Content-Type other than JSON or
 * application/octet-stream (none at all is accepted: tritonclient sends
 * none), 413 from Content-Length, 503 when the body budget cannot hold a
 * first piece. Once the body is in: 404 for a name no model can have;
 * 400 for an Inference-Header-Content-Length that is not a length, past
 * the body (its text quoted as sent) or given twice with different values
 * (as two Content-Lengths are); then a computation of the Open Inference
 * Protocol's wire format (dispatch.h, api/call.h), whose job finds the
 * model in the store's current set. The answer carries
 * Inference-Header-Content-Length when binary tensors follow its JSON;
 * those are sent from the block the computation wrote them into, read as
 * libmicrohttpd sends them (api_answer, srv_reply_answer), never copied
 * into a body: an answer of binary tensors takes their size once.
 */
#include "server/endpoint.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "server/dispatch.h"
#include "server/headers.h"
#include "server/model_view.h"
#include "server/post.h"
#include "server/reply.h"
#include "store/model.h"

/* JSON (any application/json or +json, as /v1), application/octet-stream,
 * or no Content-Type. */
static int infer_type(const char *ct) {
    if (srv_headers_json_type(ct)) return 1;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    static const char oct[] = "application/octet-stream";
    size_t n = sizeof oct - 1;
    return strncasecmp(ct, oct, n) == 0 &&
           (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ' || ct[n] == '\t');
}

static enum MHD_Result infer_accept(srv_exchange *x) {
    return srv_post_accept(x, infer_type,
                           "the body must be JSON (application/json), or JSON and binary "
                           "tensors (application/octet-stream with "
                           "Inference-Header-Content-Length)");
}

/* Every Inference-Header-Content-Length of a request, read as framing.c
 * reads Content-Length: the same value more than once (blanks around it
 * aside) is that value, and values that differ are refused. */
typedef struct header_lengths {
    const char *first; /* the first value, leading blanks skipped; NULL: none */
    size_t first_len;  /* its length, trailing blanks dropped */
    int differ;        /* a later one differs from it */
} header_lengths;

static enum MHD_Result header_length_seen(void *cls, enum MHD_ValueKind kind, const char *key,
                                          const char *value) {
    (void)kind;
    header_lengths *hl = cls;
    if (strcasecmp(key, "Inference-Header-Content-Length") != 0) return MHD_YES;
    if (!value) value = "";
    value += strspn(value, " \t");
    size_t n = strlen(value);
    while (n && (value[n - 1] == ' ' || value[n - 1] == '\t'))
        n--;
    if (!hl->first) {
        hl->first = value;
        hl->first_len = n;
    } else if (n != hl->first_len || memcmp(value, hl->first, n) != 0) {
        hl->differ = 1;
    }
    return MHD_YES;
}

/* The most of a header's text a message quotes. */
#define QUOTED_MAX 64

static enum MHD_Result infer_answer(srv_exchange *x) {
    enum MHD_Result ret;
    if (srv_post_body_failed(x, &ret)) return ret;
    size_t len;
    const char *name = srv_route_v2_model_name(x->path, &len);
    attn_error err;
    if (!store_model_name_valid(name, len)) {
        srv_model_unknown(&err);
        return srv_reply_error(x, &err);
    }
    header_lengths hl = {0};
    MHD_get_connection_values(x->conn, MHD_HEADER_KIND, header_length_seen, &hl);
    if (hl.differ)
        return srv_reply_fail(x, 400, "invalid_binary",
                              "the request has Inference-Header-Content-Length headers of "
                              "different values");
    long long json_len = -1;
    if (hl.first) {
        size_t n;
        if (srv_headers_parse_length(hl.first, &n) != 0)
            return srv_reply_fail(x, 400, "invalid_binary",
                                  "Inference-Header-Content-Length is not a length in bytes");
        /* checked here, where the header's text is at hand: the message
         * shows the length as sent, whatever its size */
        if (n > x->body.len)
            return srv_reply_fail(x, 400, "invalid_binary",
                                  "Inference-Header-Content-Length is %.*s%s, past the body's %zu "
                                  "bytes",
                                  (int)(hl.first_len < QUOTED_MAX ? hl.first_len : QUOTED_MAX),
                                  hl.first, hl.first_len > QUOTED_MAX ? "…" : "", x->body.len);
        json_len = (long long)n;
    }
    memcpy(x->job.model, name, len);
    x->job.model[len] = '\0';
    x->job.header_len = json_len;
    return srv_dispatch_call(x, API_CALL_OIP);
}

static int infer_headers(const srv_exchange *x, struct MHD_Response *r, unsigned status) {
    if (status == 200 && x->job.json_len) {
        char v[32];
        snprintf(v, sizeof v, "%zu", x->job.json_len);
        MHD_add_response_header(r, "Inference-Header-Content-Length", v);
    }
    return 0;
}

const srv_endpoint srv_ep_v2_infer = {infer_accept, infer_answer, infer_headers};
