#!/usr/bin/env python3
"""The manifest checks must refuse broken manifests (make deploy-test).

Each case copies the files validate_manifests.py reads (deploy/, the
Dockerfile, docs/API.md) into a temporary tree, breaks one thing in one
manifest, and expects validate() to fail naming it: a check that passes
everything would otherwise go unnoticed. A few cases change something that
must stay accepted (a ClusterServingRuntime, a storageUri with the models
directory KServe fills). The untouched copy must pass.
"""
import importlib.util
import pathlib
import shutil
import sys
import tempfile

import yaml

here = pathlib.Path(__file__).resolve().parent
top = here.parents[1]
spec = importlib.util.spec_from_file_location("validate_manifests", here / "validate_manifests.py")
vm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(vm)

RT = "deploy/kserve/servingruntime.yaml"
ISVC = "deploy/kserve/inferenceservice.yaml"
DEP = "deploy/k8s/deployment.yaml"
SVC = "deploy/k8s/service.yaml"
COMPOSE = "deploy/compose.yaml"


def pred(doc):  # the runtime's kserve-container
    return next(c for c in doc["spec"]["containers"] if c["name"] == "kserve-container")


def env(c, name, value):
    c["env"] = [e for e in c.get("env", []) if e["name"] != name] + [{"name": name, "value": value}]


def model(doc):
    return doc["spec"]["predictor"]["model"]


def drop_annotation(doc, key):
    del doc["metadata"]["annotations"][key]
    return doc


def knative(doc, grace=False):
    """The InferenceService as deploy/README.md says to run it on Knative."""
    del doc["metadata"]["annotations"]
    for key in ("scaleMetric", "scaleTarget") + (() if grace else ("terminationGracePeriodSeconds",)):
        del doc["spec"]["predictor"][key]


# (what, file, change to the parsed document, words the fault must contain;
# None: must still pass)
CASES = [
    ("predictor container renamed", RT, lambda d: pred(d).update(name="server"), "kserve-container"),
    ("protocol v1 only", RT, lambda d: d["spec"].update(protocolVersions=["v1"]), "does not list v2"),
    ("gRPC listed", RT, lambda d: d["spec"]["protocolVersions"].append("grpc-v2"), "no gRPC"),
    ("ModelMesh", RT, lambda d: d["spec"].update(multiModel=True), "multiModel"),
    ("no model formats", RT, lambda d: d["spec"].pop("supportedModelFormats"), "no supportedModelFormats"),
    ("numeric format version", RT, lambda d: d["spec"]["supportedModelFormats"][0].update(version=1),
     "must be a string"),
    ("priority without autoSelect", RT,
     lambda d: d["spec"]["supportedModelFormats"][0].update(autoSelect=False, priority=1), "priority"),
    ("readiness on /readyz", RT, lambda d: pred(d)["readinessProbe"]["httpGet"].update(path="/readyz"),
     "readiness: not on /v2/health/ready"),
    ("liveness on a path the contract lacks", RT,
     lambda d: pred(d)["livenessProbe"]["httpGet"].update(path="/v2/health/alive"), "liveness: not on"),
    ("probe on another port", RT, lambda d: pred(d)["readinessProbe"]["httpGet"].update(port=9000),
     "readiness: port 9000"),
    ("container port 9000", RT, lambda d: pred(d)["ports"][0].update(containerPort=9000),
     "not deploy/k8s's http port"),
    ("two ports", RT, lambda d: pred(d)["ports"].append({"name": "metrics", "containerPort": 9090}),
     "exactly one port"),
    ("port named http", RT, lambda d: pred(d)["ports"][0].update(name="http"), "port name"),
    ("ATTN_PORT elsewhere", RT, lambda d: env(pred(d), "ATTN_PORT", "9000"), "ATTN_PORT 9000"),
    ("models elsewhere", RT, lambda d: env(pred(d), "ATTN_MODELS_DIR", "/data"), "ATTN_MODELS_DIR"),
    ("timeout unlike the ConfigMap", RT, lambda d: env(pred(d), "ATTN_CONNECTION_TIMEOUT", "5"),
     "ATTN_CONNECTION_TIMEOUT"),
    ("another image", RT, lambda d: pred(d).update(image="attention-server:old"), "image"),
    ("no memory limit", RT, lambda d: pred(d)["resources"]["limits"].pop("memory"), "limits.memory"),
    ("root", RT, lambda d: pred(d)["securityContext"].update(runAsUser=0), "runAsUser"),
    ("writable root", RT, lambda d: pred(d)["securityContext"].update(readOnlyRootFilesystem=False),
     "read-only"),
    ("escalation", RT, lambda d: pred(d)["securityContext"].pop("allowPrivilegeEscalation"),
     "allowPrivilegeEscalation"),
    ("unknown top-level key", RT, lambda d: d.update(specs={}), "unknown field specs"),
    ("unknown spec key", RT, lambda d: d["spec"].update(protocolVersion=["v2"]), "unknown field protocolVersion"),
    ("unknown container key", RT, lambda d: pred(d).update(environment=[]), "unknown field environment"),
    ("wrong API version", RT, lambda d: d.update(apiVersion="serving.kserve.io/v1beta1"), "apiVersion"),
    ("cluster-wide runtime", RT, lambda d: d.update(kind="ClusterServingRuntime"), None),
    ("unknown runtime", ISVC, lambda d: model(d).update(runtime="triton"), "not a runtime"),
    ("unsupported format version", ISVC, lambda d: model(d)["modelFormat"].update(version="2"),
     "does not support model format"),
    ("unsupported format", ISVC, lambda d: model(d)["modelFormat"].update(name="onnx"),
     "does not support model format"),
    ("no format", ISVC, lambda d: model(d).pop("modelFormat"), "modelFormat.name"),
    ("protocol v1", ISVC, lambda d: model(d).update(protocolVersion="v1"), "protocolVersion"),
    ("storageUri, models read from the image", ISVC, lambda d: model(d).update(storageUri="pvc://models/"),
     "storageUri"),
    ("storageUri into /mnt/models", ISVC,
     lambda d: model(d).update(storageUri="pvc://models/", env=[{"name": "ATTN_MODELS_DIR", "value": "/mnt/models"}]),
     None),
    ("misspelt storageUri", ISVC, lambda d: model(d).update(storageURI="pvc://models/"), "unknown field storageURI"),
    ("unknown predictor key", ISVC, lambda d: d["spec"]["predictor"].update(replicas=2), "unknown field replicas"),
    ("unknown top-level key", ISVC, lambda d: d.update(status={}), "unknown field status"),
    ("upper-case name", ISVC, lambda d: d["metadata"].update(name="Attention"), "does not match"),
    ("cpu metric without HPA", ISVC, lambda d: drop_annotation(d, "serving.kserve.io/autoscalerClass"),
     "needs deploymentMode Standard"),
    ("CPU target over 100 %", ISVC, lambda d: d["spec"]["predictor"].update(scaleTarget=150), "percentage"),
    ("one replica", ISVC, lambda d: d["spec"]["predictor"].update(minReplicas=1), "fewer than 2"),
    ("short grace period", ISVC, lambda d: d["spec"]["predictor"].update(terminationGracePeriodSeconds=30),
     "outlast the drain"),
    ("on Knative", ISVC, knative, None),
    ("on Knative with a grace period", ISVC, lambda d: knative(d, grace=True), "Knative refuses"),
    ("under the name before the rename", ISVC,
     lambda d: d["metadata"]["annotations"].update({"serving.kserve.io/deploymentMode": "RawDeployment"}), None),
    ("no predictor", ISVC, lambda d: d["spec"].pop("predictor"), "no spec.predictor"),
    ("Deployment readiness on /healthz", DEP,
     lambda d: d["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"].update(path="/healthz"),
     "readiness is not /readyz"),
    ("Deployment as root", DEP, lambda d: d["spec"]["template"]["spec"]["securityContext"].update(runAsUser=0),
     "runAsUser 0"),
    ("Service selects nothing", SVC, lambda d: d["spec"].update(selector={"app": "other"}), "Service: selector"),
    ("replica's healthcheck disabled", COMPOSE,
     lambda d: d["services"]["attention-1"].update(healthcheck={"disable": True}), "healthcheck disabled"),
    ("replica's healthcheck NONE", COMPOSE,
     lambda d: d["services"]["attention-2"].update(healthcheck={"test": ["NONE"]}), "healthcheck disabled"),
    ("replica with a healthcheck of its own", COMPOSE,
     lambda d: d["services"]["attention-1"].update(healthcheck={"test": ["CMD", "true"]}), None),
]

COPIED = ["deploy", "Dockerfile", "docs/API.md"]


def tree(into):
    for rel in COPIED:
        src, dst = top / rel, into / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dst)


def main():
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        base = pathlib.Path(tmp) / "base"
        tree(base)
        faults, _ = vm.validate(base)
        if faults:
            failed.append(f"the unchanged manifests: {faults}")
        for what, rel, change, words in CASES:
            case = pathlib.Path(tmp) / "case"
            shutil.rmtree(case, ignore_errors=True)
            tree(case)
            doc = yaml.safe_load((case / rel).read_text())
            change(doc)
            (case / rel).write_text(yaml.safe_dump(doc, sort_keys=False))
            faults, _ = vm.validate(case)
            if words is None and faults:
                failed.append(f"{what}: refused, but must pass: {faults}")
            elif words is not None and not any(words in f for f in faults):
                failed.append(f"{what}: no fault with {words!r} (faults: {faults or 'none'})")
    if failed:
        print("validate_manifests_test: " + "\n  ".join(["FAILED"] + failed), file=sys.stderr)
        sys.exit(1)
    print(f"validate_manifests_test: {len(CASES)} changed copies, each refused or accepted as it must be")


if __name__ == "__main__":
    main()
