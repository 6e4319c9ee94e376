#!/usr/bin/env bash
# make image-test: the image `make image` built from the Dockerfile, run by
# podman as `docker run` would, with a read-only root and its port published
# on 127.0.0.1 only. Checks:
#   - the server (PID 1) runs as uid 10001, and the root cannot be written;
#   - /healthz answers on the published port;
#   - the models listed are the image's /models files, and demo-4d computes
#     the worked example (models/README.md), checked against a float64
#     reference written here;
#   - the teaching page is served;
#   - the image's HEALTHCHECK passes (`podman healthcheck run`);
#   - `podman stop` (the image's STOPSIGNAL, SIGTERM) ends it with exit
#     status 0 well within the grace period, not by the SIGKILL after it;
#   - the runtime stage holds no compiler, make or curl.
# The container is removed on every exit.
set -euo pipefail
. "$(dirname "$0")/podman.sh"
podman image exists "$IMAGE" || { say "no image $IMAGE: make image first" >&2; exit 2; }

name=attention-image-test-$$
tmp=$(mktemp -d)
cleanup() {
    podman rm -f -t 0 "$name" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
    echo "${0##*/}: FAILED: $*" >&2
    podman logs --tail 20 "$name" >&2 2>/dev/null || true
    exit 1
}

port=$(free_port)
# No tmpfs either (podman's --read-only adds some by default): the server
# needs no place to write.
podman run -d --name "$name" --read-only --read-only-tmpfs=false -p "127.0.0.1:$port:8080" "$IMAGE" >/dev/null ||
    fail "podman run"
up=
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && { up=1; break; }
    [ "$(podman inspect -f '{{.State.Running}}' "$name")" = true ] || fail "the container exited"
    sleep 0.1
done
[ -n "$up" ] || fail "no /healthz on 127.0.0.1:$port within 10 s"
published=$(podman port "$name" 8080/tcp)
[ "$published" = "127.0.0.1:$port" ] || fail "port 8080 is published on '$published', not 127.0.0.1:$port only"
say "/healthz answers on 127.0.0.1:$port"

# The server itself, PID 1 of the container, seen from the host (rootful
# podman, no user namespace: its uid is the container's).
pid=$(podman inspect -f '{{.State.Pid}}' "$name")
uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")
[ "$uid" = 10001 ] || fail "the server runs as uid $uid, not 10001"
[ "$(tr '\0' ' ' <"/proc/$pid/cmdline")" = "/usr/local/bin/attention-server " ] ||
    fail "PID 1 is '$(tr '\0' ' ' <"/proc/$pid/cmdline")', not the server"
[ "$(podman inspect -f '{{.HostConfig.ReadonlyRootfs}}' "$name")" = true ] || fail "the root is not read-only"
if podman exec "$name" bash -c ': >/models/x' 2>"$tmp/err"; then fail "/models could be written"; fi
grep -q 'Read-only file system' "$tmp/err" || fail "writing /models: $(cat "$tmp/err")"
say "the server is PID 1, uid 10001, on a read-only root"

# The image's files against the server's list: every built-in model, and
# no other (a model added to tools/make_models needs no edit here).
podman exec "$name" sh -c 'ls /models' | sed -n 's/\.safetensors$//p' | sort >"$tmp/files"
curl -sf "http://127.0.0.1:$port/v1/models" >"$tmp/models.json" || fail "GET /v1/models"
python3 -c 'import json, sys; print("\n".join(sorted(m["name"] for m in json.load(open(sys.argv[1]))["models"])))' \
    "$tmp/models.json" >"$tmp/listed"
grep -qx demo-4d "$tmp/files" || fail "no demo-4d.safetensors in /models: $(tr '\n' ' ' <"$tmp/files")"
cmp -s "$tmp/files" "$tmp/listed" ||
    fail "GET /v1/models lists $(tr '\n' ' ' <"$tmp/listed")but /models holds $(tr '\n' ' ' <"$tmp/files")"
say "GET /v1/models lists the image's $(wc -l <"$tmp/files") models: $(tr '\n' ' ' <"$tmp/files")"

# demo-4d is models/README.md's worked example: the answer against a
# float64 reference (tests/deploy/demo4d_check.py).
curl -sf -H 'Content-Type: application/json' "http://127.0.0.1:$port/v1/attention" \
    -d "$(python3 "$top/tests/deploy/demo4d_check.py" --request)" >"$tmp/answer.json" ||
    fail "POST /v1/attention on demo-4d"
python3 "$top/tests/deploy/demo4d_check.py" "$tmp/answer.json" || fail "demo-4d's answer"
say "demo-4d computes the worked example (patterns and embeddings within 1e-5 of float64)"

curl -sf -D "$tmp/page.h" -o "$tmp/page" "http://127.0.0.1:$port/" || fail "GET /"
# The page as built: web/index.html with its style sheets and scripts in place.
sh "$top/tools/inline_page.sh" "$top/web/index.html" > "$tmp/page.want"
cmp -s "$tmp/page" "$tmp/page.want" || fail "GET / is not the page built from web/"
grep -qi '^content-type: text/html' "$tmp/page.h" || fail "GET / is not text/html"
say "the teaching page is served"

# The HEALTHCHECK as the image declares it (kept by the docker image
# format), run by podman in the container.
hc=$(podman image inspect "$IMAGE" | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["Healthcheck"]["Test"])') ||
    fail "the image has no HEALTHCHECK"
[[ "$hc" == *"/dev/tcp/127.0.0.1/"* ]] || fail "the image's HEALTHCHECK is '$hc', not the Dockerfile's"
podman healthcheck run "$name" >"$tmp/hc" 2>&1 || fail "podman healthcheck run: $(cat "$tmp/hc")"
status=$(podman inspect -f '{{.State.Health.Status}}' "$name")
[ "$status" = healthy ] || fail "after podman healthcheck run the container is '$status', not healthy"
say "the HEALTHCHECK passes: $status"

for tool in cc gcc make curl; do
    if podman exec "$name" sh -c "command -v $tool" >/dev/null; then fail "the runtime stage holds $tool"; fi
done
say "no compiler, make or curl in the runtime stage"

# SIGTERM, then SIGKILL after 30 s: the server must drain and exit 0 by
# itself, long before.
grace=30
start=$(date +%s)
podman stop -t "$grace" "$name" >/dev/null || fail "podman stop"
took=$(($(date +%s) - start))
code=$(podman inspect -f '{{.State.ExitCode}}' "$name")
[ "$code" = 0 ] || fail "after podman stop the server exited with $code, not 0"
[ "$took" -lt "$grace" ] || fail "podman stop took $took s: the grace period ran out"
stopsignal=$(podman image inspect -f '{{.Config.StopSignal}}' "$IMAGE")
[ "$stopsignal" = SIGTERM ] || fail "the image's STOPSIGNAL is '$stopsignal', not SIGTERM"
say "podman stop: exit 0 after $took s (grace $grace s)"
say "passed"
