# attention-server, multi-stage on Debian 12 slim.
#
# The build stage installs what CI installs (`make deps`, the README's
# packages) and runs what CI runs (`make test`: every unit and integration
# test) before the image takes the binary. The packages come first, from
# the Makefile alone, so that a change to the sources rebuilds from
# `COPY . .` on and reuses the layer of packages. With --build-arg
# TESTS=0 the stage builds without running the tests: CI does so, having
# run `make test` on the same sources with the same Debian 12 toolchain
# just before, then runs the image itself (make image-test). The runtime stage
# carries only the binary, its runtime libraries and the built-in models,
# and runs as a non-root user. Configuration is by ATTN_* environment
# variables only (README, "Configuration"). `make image` builds this file
# with docker or podman; `make image-test`, `make compose-test` and
# `make kube-test` run the image with podman (deploy/README.md).
#
#   docker build -t attention-server .                      (tests run)
#   docker build --build-arg TESTS=0 -t attention-server .  (no tests)
#   docker run --rm -p 8080:8080 attention-server

FROM debian:12-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends make ca-certificates \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Makefile ./
RUN make deps
COPY . .
ARG TESTS=1
RUN if [ "$TESTS" = 0 ]; then make -j"$(nproc)" all; else make -j"$(nproc)" test; fi

FROM debian:12-slim
# The shared libraries the binary links (ldd build/attention-server), nothing else.
RUN apt-get update && apt-get install -y --no-install-recommends \
        libmicrohttpd12 libjansson4 libopenblas0-pthread libsleef3 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin attention
COPY --from=build /src/build/attention-server /usr/local/bin/attention-server
COPY --from=build /src/build/models /models
ENV ATTN_BIND=0.0.0.0 \
    ATTN_PORT=8080 \
    ATTN_MODELS_DIR=/models
USER attention
EXPOSE 8080
# No curl in the image: bash's /dev/tcp asks /healthz.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${ATTN_PORT:-8080} && printf 'GET /healthz HTTP/1.0\\r\\n\\r\\n' >&3 && head -1 <&3 | grep -q ' 200 '"]
# Exec form: the server is PID 1 and gets SIGTERM itself; it drains (answers
# every request already accepted) and exits 0. It starts no children, so
# there is nothing to reap.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/attention-server"]
