/*
 * config.h — the server's configuration, from flags and the environment.
 *
 * Every option is one row of a table in config.c (name, flag, environment
 * variable, bounds, default, help), in the manner of redis's config.c. The
 * table is read once at start: defaults first, then the environment, then
 * the command line, so a flag wins over its environment variable. Values are
 * validated against the row's bounds, and a text value against the size of
 * its own field; nothing here exits the process.
 */
#ifndef SRV_CONFIG_H
#define SRV_CONFIG_H

#include <stddef.h>
#include <stdio.h>

#include "attention/error.h"

typedef struct cfg_config {
    char bind[64];      /* numeric IPv4 or IPv6 address */
    size_t port;        /* 0: any free port */
    size_t io_threads;  /* libmicrohttpd polling threads */
    size_t workers;     /* compute threads; 0 in the table means "online cores" */
    size_t queue_depth; /* jobs waiting for a worker, at most */
    size_t max_body_bytes;
    size_t max_inflight_bytes; /* request bodies held at once, all connections */
    size_t max_unsent_bytes;   /* answers built and not yet sent, all connections */
    size_t max_connections;    /* open at once (libmicrohttpd's connection limit) */
    size_t max_tokens;
    size_t max_batch; /* sequences of one POST /v1/attention/batch, rows of one /v2 infer */
    size_t max_heads;
    size_t max_d_model;
    double max_flops;
    size_t max_json_depth;
    size_t max_string_bytes;
    double inline_max_flops; /* tiny requests answered on the polling thread (inline.h) */
    size_t max_response_bytes;
    size_t max_workspace_bytes;
    size_t connection_timeout; /* seconds */
    char models_dir[4096];     /* "" for none */
    int skip_bad_models;       /* 1: log a bad model file and go on */
    int map_models;            /* 1: map model files instead of reading them into memory */
    char api_keys_file[4096];  /* "" for none: no key needed */
    char cors_origin[1024];    /* "", "*", or origins separated by commas */
    int help;                  /* 1: --help or -h was given (nothing else is checked) */
} cfg_config;

/*
 * Fills *cfg from the defaults, then `envp` (a NULL-terminated array of
 * "NAME=value" strings, as `environ`; NULL for none), then argv[1..argc-1].
 * Flags are "--name value" or "--name=value"; "--help" / "-h" ask for help.
 * Returns 0 (with cfg->help set when help was asked for), or -1 with err
 * (code "invalid_config", status 0) a sentence naming the option.
 */
int cfg_load(cfg_config *cfg, int argc, char **argv, char **envp, attn_error *err);

/* Writes the usage text: every option with its flag, variable, default and
 * bounds. */
void cfg_print_help(FILE *out, const char *argv0);

#endif
