#!/usr/bin/env bash
# make image (with podman): the Dockerfile built as it is, as
# `docker build -t attention-server:latest .` builds it. Its
# `FROM debian:12-slim` resolves to the local base (tests/deploy/podman.sh);
# the build reaches Debian's mirror on the host's network. Layers are
# cached: on a tree that has not changed since the last build, every step
# is taken from the cache, the build stage's tests included.
# --format docker: the OCI image format has no HEALTHCHECK, and podman
# would drop it. IMAGE_TESTS=0 builds with --build-arg TESTS=0: the build
# stage skips `make test` (CI, which has just run it on the same sources).
set -euo pipefail
. "$(dirname "$0")/podman.sh"
ensure_base
start=$(date +%s)
podman build --format docker --network host --build-arg TESTS="${IMAGE_TESTS:-1}" \
    -t "$IMAGE" -f "$top/Dockerfile" "$top"
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
say "$IMAGE built in $(($(date +%s) - start)) s, $((size / 1000000)) MB"
