/*
 * config.c — the option table and its parser.
 *
 * One row per option, as redis's config.c: the name, the flag, the
 * environment variable, the kind of value, its bounds, its default (as the
 * text a user would type, parsed by the same code as user input) and a line
 * of help. cfg_load applies the rows in three passes — defaults, then the
 * environment, then the command line — so the last word is the flag's.
 *
 * Sizes accept a binary suffix (k, m, g: 1024, 1024², 1024³), so that
 * "64m" means 64 MiB. The bounds are checked after the suffix is applied.
 *
 * Each row carries its field's offset AND size (F below takes both from
 * the field's name), so that a text is checked against the buffer it is
 * copied into and nothing else, and a number or flag is written only into
 * a field of its type's size (a mismatch is a broken table, refused at
 * start and caught by the tests).
 */
#include "server/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "server/route.h"

typedef enum {
    CFG_SIZE,   /* a whole number, with an optional k/m/g suffix */
    CFG_DOUBLE, /* a number */
    CFG_ADDR,   /* a numeric IPv4 or IPv6 address */
    CFG_PATH,   /* a file system path; "" for none */
    CFG_BOOL,   /* true/false, 1/0, yes/no; a bare flag means true */
    CFG_ORIGINS /* "*", or origins (scheme://host[:port]) separated by commas; "" for none */
} cfg_kind;

typedef struct cfg_option {
    const char *name; /* also the flag, after "--" */
    const char *env;
    cfg_kind kind;
    double min, max; /* inclusive bounds of CFG_SIZE and CFG_DOUBLE */
    const char *def; /* default, as text */
    size_t offset;   /* of the field in cfg_config */
    size_t cap;      /* sizeof the field: a text holds at most cap - 1 bytes */
    const char *help;
} cfg_option;

/* The offset and the size of one field: the two initializers of a row. */
#define F(field) offsetof(cfg_config, field), sizeof(((cfg_config *)0)->field)

static const cfg_option cfg_table[] = {
    {"bind", "ATTN_BIND", CFG_ADDR, 0, 0, "0.0.0.0", F(bind),
     "numeric IPv4 or IPv6 address to listen on"},
    {"port", "ATTN_PORT", CFG_SIZE, 0, 65535, "8080", F(port),
     "TCP port; 0 picks a free one (logged at start)"},
    {"io-threads", "ATTN_IO_THREADS", CFG_SIZE, 1, 256, "2", F(io_threads),
     "threads polling sockets (libmicrohttpd thread pool)"},
    {"workers", "ATTN_WORKERS", CFG_SIZE, 0, 1024, "0", F(workers),
     "compute threads; 0 = number of online cores"},
    {"queue-depth", "ATTN_QUEUE_DEPTH", CFG_SIZE, 1, 1000000, "64", F(queue_depth),
     "requests waiting for a worker before 503 overloaded"},
    {"max-body-bytes", "ATTN_MAX_BODY_BYTES", CFG_SIZE, 1, 1099511627776.0, "64m",
     F(max_body_bytes), "largest request body (413 above)"},
    {"max-inflight-bytes", "ATTN_MAX_INFLIGHT_BYTES", CFG_SIZE, 1, 1099511627776.0, "512m",
     F(max_inflight_bytes),
     "request-body bytes held at once, all connections (503 overloaded above); "
     "at least --max-body-bytes"},
    {"max-unsent-bytes", "ATTN_MAX_UNSENT_BYTES", CFG_SIZE, 1, 1099511627776.0, "512m",
     F(max_unsent_bytes),
     "bytes of answers built and not yet sent whole (each counted at its full length until "
     "its last byte is out), all connections: new work is refused (503 overloaded) while "
     "they are over it"},
    {"max-connections", "ATTN_MAX_CONNECTIONS", CFG_SIZE, 1, 1000000, "512", F(max_connections),
     "open connections at once; more are closed as soon as they are accepted; at least "
     "--io-threads"},
    {"max-tokens", "ATTN_MAX_TOKENS", CFG_SIZE, 1, 1048576, "8192", F(max_tokens),
     "most tokens in one request (a batch: in each sequence, and in all of them)"},
    {"max-batch", "ATTN_MAX_BATCH", CFG_SIZE, 1, 1048576, "256", F(max_batch),
     "most sequences in one POST /v1/attention/batch, and rows (B) of one /v2 infer"},
    {"max-heads", "ATTN_MAX_HEADS", CFG_SIZE, 1, 65536, "128", F(max_heads),
     "most heads in one request"},
    {"max-d-model", "ATTN_MAX_D_MODEL", CFG_SIZE, 1, 1048576, "16384", F(max_d_model),
     "widest d_model (and d_head)"},
    {"max-flops", "ATTN_MAX_FLOPS", CFG_DOUBLE, 1, 1e18, "1e12", F(max_flops),
     "most floating-point operations in one request"},
    {"inline-max-flops", "ATTN_INLINE_MAX_FLOPS", CFG_DOUBLE, 0, 1e9, "1e6", F(inline_max_flops),
     "a request of at most 4 KiB and at most this much work is answered on its polling "
     "thread, without the hand-off to a worker; 0 = never"},
    {"max-json-depth", "ATTN_MAX_JSON_DEPTH", CFG_SIZE, 8, 256, "32", F(max_json_depth),
     "deepest nesting of arrays and objects in a request body"},
    {"max-string-bytes", "ATTN_MAX_STRING_BYTES", CFG_SIZE, 64, 1099511627776.0, "64k",
     F(max_string_bytes), "longest string in a request body (a tensor's base64 data excepted)"},
    {"max-response-bytes", "ATTN_MAX_RESPONSE_BYTES", CFG_SIZE, 1, 1099511627776.0, "256m",
     F(max_response_bytes), "largest response body, estimated before computing"},
    {"max-workspace-bytes", "ATTN_MAX_WORKSPACE_BYTES", CFG_SIZE, 1, 1099511627776.0, "1g",
     F(max_workspace_bytes), "most scratch memory one computation may use"},
    {"models-dir", "ATTN_MODELS_DIR", CFG_PATH, 0, 0, "", F(models_dir),
     "directory of *.safetensors models loaded at start and on SIGHUP; none if empty"},
    {"skip-bad-models", "ATTN_SKIP_BAD_MODELS", CFG_BOOL, 0, 0, "false", F(skip_bad_models),
     "log and skip model files that fail to load instead of refusing to start"},
    {"map-models", "ATTN_MAP_MODELS", CFG_BOOL, 0, 0, "false", F(map_models),
     "map model files instead of reading them into memory (for models too large to copy); "
     "a mapped file must then be replaced by rename, never rewritten or truncated in place, "
     "which would change the weights served or kill the server (SIGBUS)"},
    {"connection-timeout", "ATTN_CONNECTION_TIMEOUT", CFG_SIZE, 1, 86400, "30",
     F(connection_timeout),
     "seconds a request's headers may take to arrive, counted from the connection's accept or "
     "its previous answer, and its body, counted from its headers; late ones get 408 and the "
     "connection is closed. An idle connection is closed a second after it"},
    {"api-keys-file", "ATTN_API_KEYS_FILE", CFG_PATH, 0, 0, "", F(api_keys_file),
     "file of API keys, one per line, reloaded on SIGHUP; when set, every route but the open "
     "ones (listed below) needs Authorization: Bearer KEY"},
    {"cors-origin", "ATTN_CORS_ORIGIN", CFG_ORIGINS, 0, 0, "", F(cors_origin),
     "origins browsers may call from (https://a.example,http://localhost:5173), or *; none "
     "if empty"},
};

#define CFG_N (sizeof cfg_table / sizeof cfg_table[0])

static int cfg_fail(attn_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int cfg_fail(attn_error *err, const char *fmt, ...) {
    char text[sizeof err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return attn_error_set(err, 0, "invalid_config", NULL, "%s", text);
}

/* Parses an unsigned integer with an optional k/m/g suffix into *out.
 * Returns 0, or -1 for anything else (signs, spaces, overflow). */
static int cfg_parse_size(const char *s, double *out) {
    if (*s < '0' || *s > '9') return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE) return -1;
    double mul = 1;
    if (*end) {
        switch (*end) {
        case 'k':
        case 'K': mul = 1024.0; break;
        case 'm':
        case 'M': mul = 1024.0 * 1024; break;
        case 'g':
        case 'G': mul = 1024.0 * 1024 * 1024; break;
        default: return -1;
        }
        if (end[1]) return -1;
    }
    *out = (double)v * mul;
    return 0;
}

/* 0 when `text` is "" or origins separated by commas, each "http://" or
 * "https://" and a host (letters, digits, '.', '-', '[', ']', ':' for a
 * port or an IPv6 address), nothing after it. */
static int cfg_origins_valid(const char *text) {
    for (const char *p = text; *p;) {
        size_t scheme = !strncmp(p, "http://", 7) ? 7 : !strncmp(p, "https://", 8) ? 8 : 0;
        if (!scheme) return -1;
        p += scheme;
        const char *host = p;
        while (*p && *p != ',') {
            char c = *p++;
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '-' || c == '[' || c == ']' || c == ':'))
                return -1;
        }
        if (p == host) return -1;
        if (*p == ',' && !*++p) return -1; /* a trailing comma */
    }
    return 0;
}

/* The size a field of kind k must have; 0 for text, whose size is its own. */
static size_t cfg_kind_size(cfg_kind k) {
    switch (k) {
    case CFG_SIZE: return sizeof(size_t);
    case CFG_DOUBLE: return sizeof(double);
    case CFG_BOOL: return sizeof(int);
    default: return 0;
    }
}

/* Sets one option from text. `source` names where the text came from. */
static int cfg_set(cfg_config *cfg, const cfg_option *o, const char *text, const char *source,
                   attn_error *err) {
    char *field = (char *)cfg + o->offset;
    size_t want = cfg_kind_size(o->kind);
    if (want ? o->cap != want : o->cap == 0)
        return cfg_fail(err, "--%s: its field of %zu bytes does not fit its kind of value", o->name,
                        o->cap);
    if (!want && strlen(text) >= o->cap)
        return cfg_fail(err, "--%s (%s): the value is longer than %zu bytes", o->name, source,
                        o->cap - 1);
    if (o->kind == CFG_PATH) {
        memcpy(field, text, strlen(text) + 1);
        return 0;
    }
    if (o->kind == CFG_ORIGINS) {
        if (strcmp(text, "*") != 0 && cfg_origins_valid(text) != 0)
            return cfg_fail(err,
                            "--%s (%s): \"%.64s\" is not * nor origins like "
                            "https://host[:port] separated by commas",
                            o->name, source, text);
        memcpy(field, text, strlen(text) + 1);
        return 0;
    }
    if (o->kind == CFG_BOOL) {
        static const char *const yes[] = {"true", "1", "yes", "on"};
        static const char *const no[] = {"false", "0", "no", "off"};
        for (size_t i = 0; i < 4; i++) {
            if (strcasecmp(text, yes[i]) == 0) return *(int *)field = 1, 0;
            if (strcasecmp(text, no[i]) == 0) return *(int *)field = 0, 0;
        }
        return cfg_fail(err, "--%s (%s): \"%.64s\" is not true or false", o->name, source, text);
    }
    if (o->kind == CFG_ADDR) {
        unsigned char buf[sizeof(struct in6_addr)];
        if (inet_pton(AF_INET, text, buf) != 1 && inet_pton(AF_INET6, text, buf) != 1)
            return cfg_fail(err, "--%s (%s): \"%.64s\" is not a numeric IP address", o->name,
                            source, text);
        memcpy(field, text, strlen(text) + 1);
        return 0;
    }
    double v;
    if (o->kind == CFG_SIZE) {
        if (cfg_parse_size(text, &v) != 0)
            return cfg_fail(err, "--%s (%s): \"%.64s\" is not a whole number", o->name, source,
                            text);
    } else {
        char *end;
        errno = 0;
        v = strtod(text, &end);
        if (end == text || *end || errno == ERANGE || !isfinite(v))
            return cfg_fail(err, "--%s (%s): \"%.64s\" is not a number", o->name, source, text);
    }
    if (!(v >= o->min && v <= o->max))
        return cfg_fail(err, "--%s (%s): %.64s is outside %.17g..%.17g", o->name, source, text,
                        o->min, o->max);
    if (o->kind == CFG_SIZE)
        *(size_t *)field = (size_t)v;
    else
        *(double *)field = v;
    return 0;
}

static const char *cfg_getenv(char **envp, const char *name) {
    size_t n = strlen(name);
    for (char **e = envp; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
    return NULL;
}

static const cfg_option *cfg_find_flag(const char *arg, size_t len) {
    for (size_t i = 0; i < CFG_N; i++)
        if (strlen(cfg_table[i].name) == len && strncmp(cfg_table[i].name, arg, len) == 0)
            return &cfg_table[i];
    return NULL;
}

int cfg_load(cfg_config *cfg, int argc, char **argv, char **envp, attn_error *err) {
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < CFG_N; i++)
        if (cfg_set(cfg, &cfg_table[i], cfg_table[i].def, "default", err) != 0)
            return -1; /* a broken table; caught by the tests */

    for (size_t i = 0; i < CFG_N; i++) {
        const char *v = cfg_getenv(envp, cfg_table[i].env);
        if (v && cfg_set(cfg, &cfg_table[i], v, cfg_table[i].env, err) != 0) return -1;
    }

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            cfg->help = 1;
            return 0;
        }
        if (strncmp(a, "--", 2) != 0)
            return cfg_fail(err, "unexpected argument \"%.64s\" (try --help)", a);
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const cfg_option *o = cfg_find_flag(name, len);
        if (!o) return cfg_fail(err, "unknown option \"%.64s\" (try --help)", a);
        const char *value;
        if (eq) {
            value = eq + 1;
        } else if (o->kind == CFG_BOOL) {
            value = "true"; /* a bare --skip-bad-models */
        } else {
            if (i + 1 >= argc) return cfg_fail(err, "--%s needs a value", o->name);
            value = argv[++i];
        }
        if (cfg_set(cfg, o, value, "flag", err) != 0) return -1;
    }

    /* Cross-checks, once every source has spoken. */
    if (cfg->max_inflight_bytes < cfg->max_body_bytes)
        return cfg_fail(err,
                        "--max-inflight-bytes (%zu) is below --max-body-bytes (%zu): a body "
                        "the size of the limit could never be taken",
                        cfg->max_inflight_bytes, cfg->max_body_bytes);
    if (cfg->max_connections < cfg->io_threads)
        return cfg_fail(err,
                        "--max-connections (%zu) is below --io-threads (%zu): each polling "
                        "thread needs at least one",
                        cfg->max_connections, cfg->io_threads);

    if (cfg->workers == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        cfg->workers = n > 0 ? (size_t)n : 1;
    }
    return 0;
}

void cfg_print_help(FILE *out, const char *argv0) {
    fprintf(out,
            "usage: %s [--option value | --option=value]...\n"
            "Serves multi-head masked attention over HTTP. A flag wins over its\n"
            "environment variable. Sizes take a k, m or g suffix (binary).\n\n",
            argv0 ? argv0 : "attention-server");
    for (size_t i = 0; i < CFG_N; i++) {
        const cfg_option *o = &cfg_table[i];
        fprintf(out, "  --%-20s %s\n", o->name, o->help);
        fprintf(out, "  %-22s env %s, default %s", "", o->env, *o->def ? o->def : "\"\"");
        if (o->kind == CFG_SIZE || o->kind == CFG_DOUBLE)
            fprintf(out, ", range %.17g..%.17g", o->min, o->max);
        fputc('\n', out);
    }
    fprintf(out, "  --%-20s %s\n", "help", "print this text and exit");
    char open[256];
    srv_route_open_paths(open, sizeof open);
    fprintf(out, "\nOpen routes, answered without an API key: %s\n", open);
}
