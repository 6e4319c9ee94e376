#!/usr/bin/env bash
# make kube-test: deploy/k8s/'s ConfigMap, Deployment and Service played by
# `podman kube play`, on a network the test creates and removes. The
# HorizontalPodAutoscaler and the PodDisruptionBudget have no podman
# counterpart; tests/deploy/validate_manifests.py checks them (make
# deploy-test). The manifests are used as they are but for two changes in
# the copy: the container port is published on 127.0.0.1 only (hostIP and
# hostPort, a free port), since the host has no cluster network to reach
# the pod by; and one replica, since podman 4.3 makes a pod per replica,
# each of which would take the same host port.
# Checks:
#   - the pod's container runs the image as uid 10001 on a read-only root,
#     with the ConfigMap's ATTN_* values in its environment;
#   - the pod becomes ready through its readiness probe: podman does not
#     run readiness probes, so the test runs the one the Deployment
#     declares as the kubelet would (its httpGet every periodSeconds, ready
#     at the first answer from 200 to 399);
#   - the liveness probe's path answers 200, and the pod serves: the models
#     are listed and demo-4d computes (against a float64 reference);
#   - stopping the pod within terminationGracePeriodSeconds ends the server
#     with exit status 0;
#   - `podman kube down` removes the pod.
# Everything is removed on every exit.
set -euo pipefail
. "$(dirname "$0")/podman.sh"
podman image exists "$IMAGE" || { say "no image $IMAGE: make image first" >&2; exit 2; }

tmp=$(mktemp -d)
file=$tmp/attention-server.yaml
net=attention-kube-test-$$
cleanup() {
    [ -f "$file" ] && podman kube down "$file" >/dev/null 2>&1 || true
    podman pod rm -f -t 0 "${pod:-attention-server-pod}" >/dev/null 2>&1 || true
    podman network rm -f "$net" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
    echo "${0##*/}: FAILED: $*" >&2
    [ -n "${ctr:-}" ] && podman logs --tail 20 "$ctr" >&2 2>&1 || true
    exit 1
}

port=$(free_port)
python3 - "$top/deploy/k8s" "$file" "$port" <<'EOF' || fail "reading deploy/k8s/"
import sys, yaml
k8s, dst, port = sys.argv[1:]
docs = []
for name in ("configmap.yaml", "deployment.yaml", "service.yaml"):
    docs += [d for d in yaml.safe_load_all(open(f"{k8s}/{name}")) if d]
for d in docs:
    if d["kind"] == "Deployment":
        (c,) = d["spec"]["template"]["spec"]["containers"]
        (p,) = c["ports"]
        p["hostIP"], p["hostPort"] = "127.0.0.1", int(port)
        d["spec"]["replicas"] = 1
yaml.safe_dump_all(docs, open(dst, "w"), sort_keys=False)
EOF
# What the test reads from the manifests, as lines of shell assignments.
eval "$(python3 - "$file" <<'EOF'
import shlex, sys, yaml
docs = list(yaml.safe_load_all(open(sys.argv[1])))
dep = next(d for d in docs if d["kind"] == "Deployment")
cm = next(d for d in docs if d["kind"] == "ConfigMap")
spec = dep["spec"]["template"]["spec"]
(c,) = spec["containers"]
ports = {p["name"]: p["containerPort"] for p in c["ports"]}
ready, live = c["readinessProbe"], c["livenessProbe"]
assert ports.get(ready["httpGet"]["port"], ready["httpGet"]["port"]) == 8080, ready
out = {
    "deployment": dep["metadata"]["name"], "container": c["name"],
    "ready_path": ready["httpGet"]["path"], "ready_period": ready.get("periodSeconds", 10),
    "ready_delay": ready.get("initialDelaySeconds", 0), "live_path": live["httpGet"]["path"],
    "grace": spec.get("terminationGracePeriodSeconds", 30),
    "env": " ".join(f"{k}={v}" for k, v in cm["data"].items()),
}
for k, v in out.items():
    print(f"{k}={shlex.quote(str(v))}")
EOF
)" || fail "reading the copy of the manifests"

podman network create "$net" >/dev/null || fail "podman network create"
say "podman kube play (ConfigMap, Deployment, Service) on network $net"
podman kube play --network "$net" "$file" >"$tmp/play.log" 2>&1 || { cat "$tmp/play.log" >&2; fail "podman kube play"; }
pod=$(podman pod ps -q --filter "name=^$deployment-pod" | head -1)
[ -n "$pod" ] || { cat "$tmp/play.log" >&2; fail "no pod for the Deployment $deployment"; }
pod=$(podman pod inspect -f '{{.Name}}' "$pod")
ctr=$pod-$container
podman container exists "$ctr" || fail "no container $ctr in pod $pod"
[ "$(podman inspect -f '{{.ImageName}}' "$ctr")" = "localhost/$IMAGE" ] ||
    fail "$ctr runs $(podman inspect -f '{{.ImageName}}' "$ctr"), not localhost/$IMAGE"

# The kubelet's readiness probe: the declared httpGet, every periodSeconds.
sleep "$ready_delay"
ready=
for i in $(seq 12); do
    code=$(curl -s -o /dev/null -m 1 -w '%{http_code}' "http://127.0.0.1:$port$ready_path" || true)
    [ "$code" -ge 200 ] 2>/dev/null && [ "$code" -lt 400 ] && { ready=$i; break; }
    [ "$(podman inspect -f '{{.State.Running}}' "$ctr")" = true ] || fail "$ctr exited"
    sleep "$ready_period"
done
[ -n "$ready" ] || fail "the readiness probe $ready_path never passed (last: $code)"
say "pod $pod ready: its readiness probe $ready_path answered $code (probe $ready)"

pid=$(podman inspect -f '{{.State.Pid}}' "$ctr")
uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")
[ "$uid" = 10001 ] || fail "the server runs as uid $uid, not 10001"
[ "$(podman inspect -f '{{.HostConfig.ReadonlyRootfs}}' "$ctr")" = true ] || fail "the root is not read-only"
for kv in $env; do
    grep -qxF "$kv" <(tr '\0' '\n' <"/proc/$pid/environ") || fail "the server's environment lacks $kv (ConfigMap)"
done
say "the server runs as uid 10001 on a read-only root, with the ConfigMap's $env"

code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port$live_path")
[ "$code" = 200 ] || fail "the liveness probe's $live_path answered $code"
curl -sf "http://127.0.0.1:$port/v1/models" | grep -q '"demo-4d"' || fail "GET /v1/models does not list demo-4d"
curl -sf -H 'Content-Type: application/json' -d "$(python3 "$top/tests/deploy/demo4d_check.py" --request)" \
    "http://127.0.0.1:$port/v1/attention" >"$tmp/answer.json" || fail "POST /v1/attention on demo-4d"
python3 "$top/tests/deploy/demo4d_check.py" "$tmp/answer.json" || fail "demo-4d's answer through the pod"
say "the pod serves: $live_path 200, the models listed, demo-4d computes"

start=$(date +%s)
podman pod stop -t "$grace" "$pod" >/dev/null || fail "podman pod stop"
took=$(($(date +%s) - start))
code=$(podman inspect -f '{{.State.ExitCode}}' "$ctr")
[ "$code" = 0 ] || fail "the server exited with $code after the pod was stopped"
[ "$took" -lt "$grace" ] || fail "stopping the pod took $took s, the whole grace period"
say "pod stopped: the server exited 0 after $took s (grace $grace s)"

podman kube down "$file" >"$tmp/down.log" 2>&1 || { cat "$tmp/down.log" >&2; fail "podman kube down"; }
if podman pod exists "$pod"; then fail "pod $pod left after podman kube down"; fi
say "podman kube down: pod $pod removed"
say "passed"
