/*
 * openapi.h — the OpenAPI document embedded in the binary.
 *
 * The Makefile generates build/gen/openapi_yaml.c from api/openapi.yaml
 * (tools/embed.sh); GET /v1/openapi.yaml serves these bytes as they are.
 */
#ifndef SRV_OPENAPI_H
#define SRV_OPENAPI_H

#include <stddef.h>

extern const char api_openapi_yaml[];
extern const size_t api_openapi_yaml_len;

#endif
