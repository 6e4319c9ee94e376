#!/usr/bin/env python3
"""Checks deploy/'s manifests without kubectl or docker (make deploy-test).

Every file must be well-formed YAML; each Kubernetes object must have the
fields its kind requires, and the objects must agree with each other and
with the service: selectors match the pods' labels, probes ask /readyz and
/healthz on the container's port, the grace period outlasts the drain,
the autoscaler and the disruption budget name the Deployment. compose.yaml
must define the services nginx.conf's upstream names.

deploy/kserve/ holds a ServingRuntime (or ClusterServingRuntime) and an
InferenceService. Without KServe's CRDs or webhooks here, the fields and
rules they enforce are written out below from KServe's source (release 0.20:
pkg/apis/serving/v1alpha1/servingruntime_types.go,
pkg/apis/serving/v1beta1/{predictor,predictor_model,component,podspec,
inference_service_validation}.go, the controller's
components/predictor.go), with Knative's rules for the one serving port
(knative/serving pkg/apis/serving/k8s_validation.go). On top of those, the
KServe objects must agree with deploy/k8s/ and the Dockerfile (image, port,
uid, read-only root, configuration) and probe the protocol's health paths
that docs/API.md lists.

    validate_manifests.py [TOP]   # TOP: a tree with deploy/, Dockerfile,
                                  # docs/API.md (default: this repository)

tests/deploy/validate_manifests_test.py runs validate() on broken copies.
"""
import pathlib
import re
import sys

import yaml

KSERVE_GROUP = "serving.kserve.io"
RUNTIME_KINDS = ("ServingRuntime", "ClusterServingRuntime")
# The manifest's own top-level keys; status belongs to the cluster.
TOP_KEYS = {"apiVersion", "kind", "metadata", "spec"}
# ServingRuntimeSpec with its inlined ServingRuntimePodSpec (json tags).
RUNTIME_SPEC_KEYS = {
    "supportedModelFormats", "multiModel", "disabled", "protocolVersions", "workerSpec",
    "containers", "volumes", "nodeSelector", "affinity", "tolerations", "labels", "annotations",
    "imagePullSecrets", "hostIPC", "schedulerName", "resourceClaims", "grpcEndpoint",
    "grpcDataEndpoint", "httpDataEndpoint", "replicas", "storageHelper", "builtInAdapter"}
MODEL_FORMAT_KEYS = {"name", "version", "autoSelect", "priority"}
PROTOCOLS = {"v1", "v2", "grpc-v1", "grpc-v2"}
# corev1.Container.
CONTAINER_KEYS = {
    "name", "image", "command", "args", "workingDir", "ports", "envFrom", "env", "resources",
    "resizePolicy", "restartPolicy", "restartPolicyRules", "volumeMounts", "volumeDevices",
    "livenessProbe", "readinessProbe", "startupProbe", "lifecycle", "terminationMessagePath",
    "terminationMessagePolicy", "imagePullPolicy", "securityContext", "stdin", "stdinOnce", "tty"}
ISVC_SPEC_KEYS = {"predictor", "transformer", "explainer"}
# v1beta1.PodSpec (a copy of corev1.PodSpec).
POD_SPEC_KEYS = {
    "volumes", "initContainers", "containers", "ephemeralContainers", "restartPolicy",
    "terminationGracePeriodSeconds", "activeDeadlineSeconds", "dnsPolicy", "nodeSelector",
    "serviceAccountName", "serviceAccount", "automountServiceAccountToken", "nodeName",
    "hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace", "securityContext",
    "imagePullSecrets", "hostname", "subdomain", "affinity", "schedulerName", "tolerations",
    "hostAliases", "priorityClassName", "priority", "dnsConfig", "readinessGates",
    "runtimeClassName", "enableServiceLinks", "preemptionPolicy", "overhead",
    "topologySpreadConstraints", "setHostnameAsFQDN", "os", "hostUsers", "schedulingGates",
    "resourceClaims", "resources", "hostnameOverride"}
# PredictorSpec: its implementations, storage, and ComponentExtensionSpec.
PREDICTOR_KEYS = POD_SPEC_KEYS | {
    "name", "sklearn", "xgboost", "tensorflow", "pytorch", "triton", "onnx", "huggingface",
    "pmml", "lightgbm", "paddle", "model", "storageUris", "storageContainerName", "workerSpec",
    "minReplicas", "maxReplicas", "scaleTarget", "scaleMetric", "scaleMetricType", "autoScaling",
    "containerConcurrency", "timeout", "canaryTrafficPercent", "logger", "batcher", "labels",
    "annotations", "deploymentStrategy"}
# ModelSpec: the format and runtime, PredictorExtensionSpec, an inlined container.
MODEL_KEYS = CONTAINER_KEYS | {
    "modelFormat", "runtime", "storageUri", "runtimeVersion", "protocolVersion", "storage",
    "confidential"}
# inference_service_validation.go, IsvcNameFmt.
ISVC_NAME = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
# Knative serves one port, named "", "http1" (HTTP/1.1) or "h2c"; the server
# speaks HTTP/1.1 only.
KNATIVE_HTTP_PORT_NAMES = {"", "http1"}
# A Deployment rather than a Knative Service; RawDeployment is the name before
# KServe 0.20's rename (constants.go, ParseDeploymentMode).
STANDARD_MODES = {"Standard", "RawDeployment"}
# KServe mounts a storageUri's download here (constants.DefaultModelLocalMountPath).
KSERVE_MODEL_DIR = "/mnt/models"


def get(obj, path):
    for key in path.split("."):
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj


def env_of(container):
    return {e.get("name"): e.get("value") for e in container.get("env") or []}


def check_keys(need, obj, allowed, where):
    if isinstance(obj, dict):
        for key in sorted(set(obj) - allowed):
            need(False, f"{where}: unknown field {key}")


def contract_v2_paths(api_md):
    """The GET paths of docs/API.md's section on the Open Inference Protocol."""
    m = re.search(r"^## Open Inference Protocol.*?(?=^## )", api_md, re.M | re.S)
    return set(re.findall(r"`GET (/v2[^`\s]*)`", m.group(0))) if m else set()


def check_probe(need, where, probe, path, ports, paths):
    need(get(probe, "httpGet.path") == path, f"{where}: not on {path}")
    need(path in paths, f"{where}: {path} is not a GET path of docs/API.md's Open Inference Protocol")
    port = get(probe, "httpGet.port")
    # A probe's port may be the container port's number or name; Knative
    # refuses any other.
    need(port in ports.values() or (port in ports and port != ""),
         f"{where}: port {port!r} is not the container's port")


def check_runtime(need, rt, dep_container, pod_user, cm, image_env, paths):
    kind, name = rt.get("kind"), get(rt, "metadata.name")
    where = f"{kind} {name}"
    need(rt.get("apiVersion") == f"{KSERVE_GROUP}/v1alpha1", f"{where}: apiVersion is not {KSERVE_GROUP}/v1alpha1")
    spec = rt.get("spec") or {}
    check_keys(need, spec, RUNTIME_SPEC_KEYS, f"{where}: spec")
    formats = spec.get("supportedModelFormats") or []
    need(formats, f"{where}: no supportedModelFormats")
    for f in formats:
        check_keys(need, f, MODEL_FORMAT_KEYS, f"{where}: supportedModelFormats")
        need(isinstance(f.get("name"), str) and f["name"], f"{where}: a supported model format without a name")
        need(f.get("version") is None or isinstance(f["version"], str),
             f"{where}: a model format's version must be a string (\"1\", not 1)")
        need(f.get("priority") is None or (f.get("autoSelect") is True and f["priority"] >= 1),
             f"{where}: priority needs autoSelect and must be at least 1")
    protocols = spec.get("protocolVersions") or []
    need(set(protocols) <= PROTOCOLS, f"{where}: protocolVersions other than {sorted(PROTOCOLS)}")
    need("v2" in protocols, f"{where}: protocolVersions does not list v2")
    need(not any(p.startswith("grpc") for p in protocols), f"{where}: the server has no gRPC")
    need(spec.get("multiModel") is not True, f"{where}: multiModel is ModelMesh's, which the server does not implement")
    containers = spec.get("containers") or []
    preds = [c for c in containers if c.get("name") == "kserve-container"]
    need(len(preds) == 1, f"{where}: no container named kserve-container")
    for c in preds:
        cw = f"{where}: kserve-container"
        check_keys(need, c, CONTAINER_KEYS, cw)
        need(c.get("image") and c.get("image") == dep_container.get("image"),
             f"{cw}: image {c.get('image')!r} is not deploy/k8s's {dep_container.get('image')!r}")
        ports = c.get("ports") or []
        need(len(ports) == 1, f"{cw}: Knative serves exactly one port")
        ports = {p.get("name", ""): p.get("containerPort") for p in ports[:1]}
        dep_ports = {p.get("name"): p.get("containerPort") for p in dep_container.get("ports") or []}
        need(list(ports.values()) == [dep_ports.get("http")],
             f"{cw}: port {list(ports.values())} is not deploy/k8s's http port {dep_ports.get('http')}")
        need(set(ports) <= KNATIVE_HTTP_PORT_NAMES, f"{cw}: port name {list(ports)} is not \"\" or http1")
        env = env_of(c)
        need(all(k.startswith("ATTN_") for k in env), f"{cw}: variables other than ATTN_*")
        port = env.get("ATTN_PORT", image_env.get("ATTN_PORT"))
        need([str(v) for v in ports.values()] == [port],
             f"{cw}: the server listens on ATTN_PORT {port}, not the container port")
        need(env.get("ATTN_MODELS_DIR", image_env.get("ATTN_MODELS_DIR")) == image_env.get("ATTN_MODELS_DIR"),
             f"{cw}: ATTN_MODELS_DIR is not the image's built-in models")
        for k, v in cm.items():
            need(env.get(k) in (None, v), f"{cw}: {k} is {env.get(k)!r}, deploy/k8s's ConfigMap says {v!r}")
        check_probe(need, f"{cw}: readiness", c.get("readinessProbe"), "/v2/health/ready", ports, paths)
        check_probe(need, f"{cw}: liveness", c.get("livenessProbe"), "/v2/health/live", ports, paths)
        for which in ("requests", "limits"):
            for res in ("cpu", "memory"):
                need(get(c, f"resources.{which}.{res}") and
                     str(get(c, f"resources.{which}.{res}")) == str(get(dep_container, f"resources.{which}.{res}")),
                     f"{cw}: resources.{which}.{res} is not deploy/k8s's")
        # A runtime has no pod securityContext: the container carries it all.
        sc = c.get("securityContext") or {}
        need(sc.get("runAsNonRoot") is True, f"{cw}: runAsNonRoot is not true")
        need(sc.get("runAsUser") == pod_user, f"{cw}: runAsUser is not the image's uid {pod_user}")
        need(sc.get("readOnlyRootFilesystem") is True, f"{cw}: the root filesystem is not read-only")
        need(sc.get("allowPrivilegeEscalation") is False, f"{cw}: allowPrivilegeEscalation is not false")


def check_isvc(need, isvc, runtimes, timeout):
    name = get(isvc, "metadata.name")
    where = f"InferenceService {name}"
    need(isvc.get("apiVersion") == f"{KSERVE_GROUP}/v1beta1", f"{where}: apiVersion is not {KSERVE_GROUP}/v1beta1")
    need(isinstance(name, str) and ISVC_NAME.fullmatch(name), f"{where}: the name does not match {ISVC_NAME.pattern}")
    spec = isvc.get("spec") or {}
    check_keys(need, spec, ISVC_SPEC_KEYS, f"{where}: spec")
    pred = spec.get("predictor") or {}
    need(pred, f"{where}: no spec.predictor")
    check_keys(need, pred, PREDICTOR_KEYS, f"{where}: predictor")
    model = pred.get("model") or {}
    need(model, f"{where}: no predictor.model")
    check_keys(need, model, MODEL_KEYS, f"{where}: predictor.model")
    fmt = model.get("modelFormat") or {}
    need(fmt.get("name"), f"{where}: no predictor.model.modelFormat.name")
    rt = runtimes.get(model.get("runtime"))
    need(rt is not None, f"{where}: runtime {model.get('runtime')!r} is not a runtime of deploy/kserve")
    rt_spec = (rt or {}).get("spec") or {}
    # predictor_model.go, RuntimeSupportsModel: the format's name, and its
    # version when the model gives one.
    offered = {(f.get("name"), f.get("version")) for f in rt_spec.get("supportedModelFormats") or []}
    need((fmt.get("name"), fmt.get("version")) in offered or
         (fmt.get("version") is None and fmt.get("name") in {n for n, _ in offered}),
         f"{where}: the runtime does not support model format {fmt.get('name')} {fmt.get('version')}")
    need(model.get("protocolVersion") == "v2", f"{where}: protocolVersion is not v2")
    need(model.get("protocolVersion") in (rt_spec.get("protocolVersions") or []),
         f"{where}: the runtime does not support protocolVersion {model.get('protocolVersion')}")
    # With a storageUri, KServe downloads into /mnt/models; the server must
    # read that, not the image's models.
    rt_env = {}
    for c in rt_spec.get("containers") or []:
        if c.get("name") == "kserve-container":
            rt_env = env_of(c)
    models_dir = env_of(model).get("ATTN_MODELS_DIR", rt_env.get("ATTN_MODELS_DIR"))
    if model.get("storageUri"):
        need(models_dir == KSERVE_MODEL_DIR, f"{where}: a storageUri lands in {KSERVE_MODEL_DIR}, ATTN_MODELS_DIR is {models_dir}")
    annotations = get(isvc, "metadata.annotations") or {}
    standard = annotations.get("serving.kserve.io/deploymentMode") in STANDARD_MODES
    # inference_service_validation.go, validateAutoScalingCompExtension.
    if pred.get("scaleMetric") in ("cpu", "memory"):
        need(standard and annotations.get("serving.kserve.io/autoscalerClass") == "hpa",
             f"{where}: scaleMetric {pred.get('scaleMetric')} needs deploymentMode Standard and autoscalerClass hpa")
    if pred.get("scaleMetric") == "cpu" and pred.get("scaleTarget") is not None:
        need(1 <= pred["scaleTarget"] <= 100, f"{where}: a CPU scaleTarget is a percentage, 1 to 100")
    need((pred.get("minReplicas") or 0) >= 2, f"{where}: fewer than 2 replicas")
    need((pred.get("maxReplicas") or 0) >= (pred.get("minReplicas") or 0), f"{where}: maxReplicas below minReplicas")
    if standard:
        need((pred.get("terminationGracePeriodSeconds") or 0) > timeout,
             f"{where}: terminationGracePeriodSeconds does not outlast the drain")
    else:
        # knative/serving pkg/apis/serving/fieldmask.go, PodSpecMask.
        need("terminationGracePeriodSeconds" not in pred,
             f"{where}: Knative refuses terminationGracePeriodSeconds (deploymentMode Standard allows it)")


def validate(top):
    top = pathlib.Path(top)
    deploy = top / "deploy"
    faults = []

    def need(cond, what):
        if not cond:
            faults.append(what)

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

    # The image: its user and port, and where its built-in models are.
    dockerfile = (top / "Dockerfile").read_text()
    m = re.search(r"useradd\b.*--uid (\d+)", dockerfile)
    image_uid = int(m.group(1)) if m else None
    image_env = dict(re.findall(r"\b(ATTN_\w+)=(\S+)", dockerfile))
    need(re.search(r"^EXPOSE (\d+)", dockerfile, re.M) and
         re.search(r"^EXPOSE (\d+)", dockerfile, re.M).group(1) == image_env.get("ATTN_PORT") == "8080",
         "Dockerfile: does not listen on and EXPOSE 8080")
    pod_user = get(dep, "spec.template.spec.securityContext.runAsUser")
    need(pod_user == image_uid, f"Deployment: runAsUser {pod_user} is not the image's uid {image_uid}")

    kserve = {}
    for path in sorted((deploy / "kserve").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is None:
                continue
            for field in ("apiVersion", "kind", "metadata.name"):
                need(get(doc, field), f"{path.name}: no {field}")
            check_keys(need, doc, TOP_KEYS, path.name)
            kserve.setdefault(doc.get("kind"), []).append(doc)
    runtimes = {get(r, "metadata.name"): r for k in RUNTIME_KINDS for r in kserve.get(k, [])}
    need(set(kserve) <= set(RUNTIME_KINDS) | {"InferenceService"},
         f"kserve: kinds other than {', '.join(RUNTIME_KINDS)} and InferenceService")
    need(runtimes, "kserve: no ServingRuntime or ClusterServingRuntime")
    need(kserve.get("InferenceService"), "kserve: no InferenceService")
    paths = contract_v2_paths((top / "docs" / "API.md").read_text())
    for rt in runtimes.values():
        check_runtime(need, rt, containers[0] if containers else {}, image_uid, cm, image_env, paths)
    for isvc in kserve.get("InferenceService", []):
        check_isvc(need, isvc, runtimes, timeout)

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
        # Without one of its own, the image's HEALTHCHECK applies.
        hc = s.get("healthcheck", {})
        need(not hc.get("disable") and hc.get("test", ["CMD"])[0] != "NONE",
             f"compose.yaml: {name} has its healthcheck disabled")
        need(hc.get("test") or re.search(r"^HEALTHCHECK\s(?:[^\n]*\\\n)*[^\n]*\bCMD\s", dockerfile, re.M),
             f"compose.yaml: {name} has no healthcheck, and the Dockerfile no HEALTHCHECK")
        need("models:/models" in s.get("volumes", []), f"compose.yaml: {name} has no models volume")
    return faults, len(objects) + sum(len(v) for v in kserve.values())


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2]
    faults, count = validate(top)
    if faults:
        print("validate_manifests: " + "\n  ".join(["FAILED"] + faults), file=sys.stderr)
        sys.exit(1)
    print(f"validate_manifests: {count} Kubernetes and KServe objects, compose.yaml and nginx.conf agree")


if __name__ == "__main__":
    main()
