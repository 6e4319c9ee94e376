#!/usr/bin/env python3
"""Checks deploy/'s manifests without kubectl or docker (make deploy-test).

Every file must be well-formed YAML; each Kubernetes object must have the
fields its kind requires, and the objects must agree with each other and
with the service: selectors match the pods' labels, probes ask /readyz and
/healthz on the container's port, the grace period outlasts the drain,
the autoscaler and the disruption budget name the Deployment. compose.yaml
must define the services nginx.conf's upstream names.
"""
import pathlib
import re
import sys

import yaml

top = pathlib.Path(__file__).resolve().parents[2]
deploy = top / "deploy"
faults = []


def need(cond, what):
    if not cond:
        faults.append(what)


def get(obj, path):
    for key in path.split("."):
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj


objects = {}
for path in sorted((deploy / "k8s").glob("*.yaml")):
    for doc in yaml.safe_load_all(path.read_text()):
        if doc is None:
            continue
        for field in ("apiVersion", "kind", "metadata.name"):
            need(get(doc, field), f"{path.name}: no {field}")
        objects[doc.get("kind")] = doc

for kind in ("Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget",
             "ConfigMap"):
    need(kind in objects, f"k8s: no {kind}")

dep = objects.get("Deployment", {})
labels = get(dep, "spec.template.metadata.labels") or {}
need(get(dep, "spec.selector.matchLabels") == labels and labels,
     "Deployment: selector does not match the pod labels")
containers = get(dep, "spec.template.spec.containers") or []
need(len(containers) == 1, "Deployment: one container expected")
for c in containers:
    need(c.get("image"), "Deployment: container without image")
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
    need(ports.get("http") == 8080, "Deployment: no http port 8080")
    need(get(c, "readinessProbe.httpGet.path") == "/readyz", "Deployment: readiness is not /readyz")
    need(get(c, "livenessProbe.httpGet.path") == "/healthz", "Deployment: liveness is not /healthz")
    for which in ("requests", "limits"):
        for res in ("cpu", "memory"):
            need(get(c, f"resources.{which}.{res}"), f"Deployment: no resources.{which}.{res}")
    refs = [e.get("configMapRef", {}).get("name") for e in c.get("envFrom", [])]
    need(get(objects.get("ConfigMap", {}), "metadata.name") in refs,
         "Deployment: the ConfigMap is not used")
cm = get(objects.get("ConfigMap", {}), "data") or {}
need(all(k.startswith("ATTN_") for k in cm), "ConfigMap: keys other than ATTN_* variables")
timeout = int(cm.get("ATTN_CONNECTION_TIMEOUT", 30))
need((get(dep, "spec.template.spec.terminationGracePeriodSeconds") or 0) > timeout,
     "Deployment: terminationGracePeriodSeconds does not outlast the drain")

svc = objects.get("Service", {})
need(get(svc, "spec.selector") == labels, "Service: selector does not match the pods")
need(any(p.get("targetPort") in ("http", 8080) for p in get(svc, "spec.ports") or []),
     "Service: no port to the container's http")
hpa = objects.get("HorizontalPodAutoscaler", {})
need(get(hpa, "spec.scaleTargetRef.kind") == "Deployment" and
     get(hpa, "spec.scaleTargetRef.name") == get(dep, "metadata.name"),
     "HPA: does not scale the Deployment")
need(any(get(m, "resource.name") == "cpu" for m in get(hpa, "spec.metrics") or []),
     "HPA: not on CPU")
need((get(hpa, "spec.minReplicas") or 0) >= 2, "HPA: fewer than 2 replicas")
pdb = objects.get("PodDisruptionBudget", {})
need(get(pdb, "spec.selector.matchLabels") == labels, "PDB: selector does not match the pods")

compose = yaml.safe_load((deploy / "compose.yaml").read_text())
services = compose.get("services", {})
upstreams = re.findall(r"^\s*server\s+([\w.-]+):(\d+)",
                       (deploy / "nginx" / "nginx.conf").read_text(), re.M)
need(len(upstreams) >= 2, "nginx.conf: fewer than two replicas upstream")
for host, port in upstreams:
    need(host in services, f"compose.yaml: no service {host} for nginx's upstream")
    need(port == "8080", f"nginx.conf: {host} not on the service's port 8080")
need("proxy" in services, "compose.yaml: no proxy service")
for name in (h for h, _ in upstreams):
    s = services.get(name, {})
    need(s.get("healthcheck"), f"compose.yaml: {name} has no healthcheck")
    need("models:/models" in s.get("volumes", []), f"compose.yaml: {name} has no models volume")

if faults:
    print("validate_manifests: " + "\n  ".join(["FAILED"] + faults), file=sys.stderr)
    sys.exit(1)
print(f"validate_manifests: {len(objects)} Kubernetes objects, compose.yaml and nginx.conf agree")
