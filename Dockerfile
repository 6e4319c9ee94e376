# attention-server, multi-stage on Debian 12 slim.
#
# The build stage installs what CI installs (`make deps`, the README's
# packages) and runs what CI runs (`make test`: every unit and integration
# test), so the image holds exactly the binary CI tested. The runtime stage
# carries only the binary, its runtime libraries and the built-in models,
# and runs as a non-root user. Configuration is by ATTN_* environment
# variables only (README, "Configuration"). `make image` builds this file
# with docker or podman; `make image-test`, `make compose-test` and
# `make kube-test` run the image with podman (deploy/README.md).
#
#   docker build -t attention-server .
#   docker run --rm -p 8080:8080 attention-server

FROM debian:12-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends make ca-certificates \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN make deps && make test

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
