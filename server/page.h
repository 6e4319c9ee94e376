/*
 * page.h — the teaching page, embedded in the binary.
 *
 * The Makefile generates build/gen/web_index_html.c from web/index.html
 * (tools/embed.sh); GET / serves these bytes as they are. The page is one
 * self-contained file that talks to nothing but this server's public API.
 */
#ifndef SRV_PAGE_H
#define SRV_PAGE_H

#include <stddef.h>

extern const char web_index_html[];
extern const size_t web_index_html_len;

#endif
