#!/usr/bin/env bash
# make compose-test: deploy/compose.yaml brought up by podman-compose, nginx
# in front of the two replicas, on the network podman-compose creates for
# the project. The file is used as it is but for what the test must change:
#   - the proxy's port is published on 127.0.0.1 only, on a free port;
#   - the nginx configuration's path is made absolute (the copy lives in a
#     temporary folder);
#   - `build:` is dropped: the replicas run the image `make image` built;
#   - a project name of the test's own, so that nothing of a user's stack
#     is touched.
# `nginx:1.22` is the stand-in tests/deploy/nginx/Containerfile builds (no
# registry here). Checks:
#   - each replica's healthcheck passes (`podman healthcheck run`), and the
#     proxy's;
#   - a stream of requests through the proxy in 4 lanes, every answer
#     checked (the first against a float64 reference, the others byte for
#     byte against it), while replica 1 is stopped (SIGTERM, drained) and
#     started again, and nginx reloaded to learn its new address: no
#     request may fail;
#   - after the restart both replicas answer (each logs part of the next
#     100 requests' ids);
#   - `down` removes the containers, the network and the volume.
# Everything is removed on every exit.
set -euo pipefail
. "$(dirname "$0")/podman.sh"
podman image exists "$IMAGE" || { say "no image $IMAGE: make image first" >&2; exit 2; }

project=attention-compose-test-$$
tmp=$(mktemp -d)
file=$tmp/compose.yaml
compose() { podman-compose -p "$project" -f "$file" "$@"; }
cleanup() {
    compose down -v -t 5 >/dev/null 2>&1 || true
    podman ps -aq --filter "label=io.podman.compose.project=$project" | xargs -r podman rm -f -t 0 >/dev/null 2>&1 || true
    podman network ls -q --filter "label=io.podman.compose.project=$project" | xargs -r podman network rm -f >/dev/null 2>&1 || true
    podman volume rm -f "${project}_models" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
    echo "${0##*/}: FAILED: $*" >&2
    for c in $(podman ps -aq --filter "label=io.podman.compose.project=$project" 2>/dev/null); do
        echo "--- $(podman inspect -f '{{.Name}}' "$c")" >&2
        podman logs "$c" 2>&1 | grep -v ' access \|" 200 ' | tail -8 >&2 || true
    done
    exit 1
}

say "building the nginx:1.22 stand-in (tests/deploy/nginx/Containerfile)"
podman build -q --format docker --network host -t localhost/nginx:1.22 "$top/tests/deploy/nginx" >/dev/null ||
    fail "building the nginx stand-in"

port=$(free_port)
python3 - "$top/deploy/compose.yaml" "$file" "$port" <<'EOF' || fail "rewriting compose.yaml"
import os, sys, yaml
src, dst, port = sys.argv[1:]
here = os.path.dirname(os.path.abspath(src))
c = yaml.safe_load(open(src))
for name, s in c["services"].items():
    s.pop("build", None)
    vols = []
    for v in s.get("volumes", []):
        host, _, rest = v.partition(":")
        vols.append(os.path.normpath(os.path.join(here, host)) + ":" + rest if host.startswith(".") else v)
    s["volumes"] = vols
proxy = c["services"]["proxy"]
assert [p.split(":")[-1] for p in proxy["ports"]] == ["8080"], proxy["ports"]
proxy["ports"] = [f"127.0.0.1:{port}:8080"]
yaml.safe_dump(c, open(dst, "w"), sort_keys=False)
EOF

say "podman-compose up ($project)"
compose up -d >"$tmp/up.log" 2>&1 || { cat "$tmp/up.log" >&2; fail "podman-compose up"; }
cid() { podman ps -aq --filter "label=io.podman.compose.project=$project" --filter "label=com.docker.compose.service=$1"; }
r1=$(cid attention-1); r2=$(cid attention-2); px=$(cid proxy)
[ -n "$r1" ] && [ -n "$r2" ] && [ -n "$px" ] || fail "podman-compose up did not start attention-1, attention-2 and proxy"
podman network exists "${project}_default" || fail "no network ${project}_default"
[ "$(podman port "$px" 8080/tcp)" = "127.0.0.1:$port" ] || fail "the proxy is published on '$(podman port "$px" 8080/tcp)'"
podman exec "$px" nginx -v 2>&1 | grep -q 'nginx/1\.22\.' || fail "the proxy is not nginx 1.22"

# No systemd here to run healthchecks on a timer: they are run by hand until
# they pass, as compose's `condition: service_healthy` waits for them.
healthy() { # $1 container
    for _ in $(seq 50); do
        podman healthcheck run "$1" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    return 1
}
healthy "$r1" && healthy "$r2" || fail "the replicas' healthcheck does not pass"
healthy "$px" || fail "the proxy's healthcheck does not pass"
say "the replicas' and the proxy's healthchecks pass; the proxy on 127.0.0.1:$port"

body=$(python3 "$top/tests/deploy/demo4d_check.py" --request)
url=http://127.0.0.1:$port/v1/attention
curl -sf -H 'Content-Type: application/json' -d "$body" "$url" >"$tmp/want" || fail "no answer through the proxy"
python3 "$top/tests/deploy/demo4d_check.py" "$tmp/want" || fail "the answer through the proxy"
want=$(cat "$tmp/want")

one() { # $1: the request's id
    local got
    got=$(curl -sS -w '\n%{http_code}' -H 'Content-Type: application/json' -H "X-Request-Id: $1" \
          -d "$body" "$url" 2>"$tmp/curl-$1") || fail "request $1: curl: $(cat "$tmp/curl-$1")"
    rm -f "$tmp/curl-$1"
    [ "${got##*$'\n'}" = 200 ] || fail "request $1: status ${got##*$'\n'}"
    [ "${got%$'\n'*}" = "$want" ] || fail "request $1: a different answer"
}
# Each lane runs until told to stop, so that the stream outlasts the stop
# and the start of replica 1 however long they take; it writes its count.
lane() {
    local i=0
    while [ ! -e "$tmp/stop" ]; do i=$((i + 1)); one "stream-$1-$i"; done
    echo "$i" >"$tmp/lane$1"
}
lanes=()
for l in 1 2 3 4; do lane "$l" & lanes+=($!); done
answered() { podman logs "$1" 2>&1 | grep -c "id=$2" || true; }
# Replica 1 must be serving its part of the stream when it is stopped (a
# replica that failed an attempt is skipped for 5 s, nginx's fail_timeout).
for _ in $(seq 20); do
    sleep 0.5
    [ "$(answered "$r1" stream-)" -gt 20 ] && break
done
[ "$(answered "$r1" stream-)" -gt 20 ] ||
    fail "attention-1 had answered $(answered "$r1" stream-) of the stream before its stop" \
        "($(answered "$r2" stream-) by attention-2)"
say "stopping attention-1 while the stream runs"
podman stop -t 30 "$r1" >/dev/null || fail "podman stop attention-1"
[ "$(podman inspect -f '{{.State.ExitCode}}' "$r1")" = 0 ] || fail "attention-1 exited with $(podman inspect -f '{{.State.ExitCode}}' "$r1")"
sleep 2
say "starting attention-1 again"
podman start "$r1" >/dev/null || fail "podman start attention-1"
healthy "$r1" || fail "attention-1's healthcheck does not pass after its restart"
# The restarted replica has a new address, and nginx 1.22 resolves the
# upstream's names only when it starts or reloads (deploy/README.md): a
# reload, with the stream on, which must not fail a request either.
podman exec "$px" nginx -s reload 2>"$tmp/reload" || fail "nginx -s reload: $(cat "$tmp/reload")"
sleep 3
for j in "${lanes[@]}"; do kill -0 "$j" 2>/dev/null || fail "a lane ended before the stream was stopped"; done
touch "$tmp/stop"
for j in "${lanes[@]}"; do wait "$j" || fail "a request failed while attention-1 was stopped and started"; done
n=$(($(cat "$tmp/lane1") + $(cat "$tmp/lane2") + $(cat "$tmp/lane3") + $(cat "$tmp/lane4")))
say "$n requests through nginx while attention-1 was stopped and started again: all answered, all equal"

for i in $(seq 100); do one "after-$i"; done
c1=$(answered "$r1" after-)
c2=$(answered "$r2" after-)
[ "$c1" -gt 10 ] && [ "$c2" -gt 10 ] || fail "after the restart, attention-1 answered $c1 and attention-2 $c2 of 100"
say "after the restart, attention-1 answered $c1 and attention-2 $c2 of 100"

compose down -v -t 30 >"$tmp/down.log" 2>&1 || { cat "$tmp/down.log" >&2; fail "podman-compose down"; }
[ -z "$(podman ps -aq --filter "label=io.podman.compose.project=$project")" ] || fail "containers left after down"
if podman volume exists "${project}_models"; then fail "volume ${project}_models left after down"; fi
# podman-compose 1.0.3's down leaves the project's network: removed here.
podman network ls -q --filter "label=io.podman.compose.project=$project" | xargs -r podman network rm >/dev/null ||
    fail "removing the project's network"
[ -z "$(podman network ls -q --filter "label=io.podman.compose.project=$project")" ] || fail "networks left"
say "podman-compose down: containers and volume removed; then the network"
say "passed"
