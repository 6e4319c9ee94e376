#!/usr/bin/env python3
"""make image-test: the Dockerfile's runtime stage, run without Docker.

There is no Docker engine here, so this follows the Dockerfile itself, line
by line, the way `docker build` and `docker run` would:

- the build stage is checked, not run: it must be FROM debian:12-slim and
  run `make deps` and `make test`, the targets .ci/run runs on this same
  Debian 12 (CI has just run them, so build/ holds what the stage makes);
- the runtime stage is run: its base, debian:12-slim, is a minbase
  debootstrap of bookworm (cached under build/image/); every RUN runs in a
  chroot of it with /bin/sh -c; every COPY --from=build takes the file from
  build/; ENV, USER, EXPOSE, HEALTHCHECK, STOPSIGNAL and ENTRYPOINT are
  kept, and any other instruction fails the test, so this cannot silently
  fall behind the Dockerfile;
- the result is started as a container would be: in new network, mount and
  PID namespaces, on a read-only root (as deploy/k8s/ runs it), as the
  image's USER, with the image's ENV and nothing else, the ENTRYPOINT in
  exec form. Then: /healthz on the EXPOSEd port; the HEALTHCHECK command
  succeeds; the built-in models are listed and compute; the teaching page is
  served; STOPSIGNAL makes the server exit 0; the HEALTHCHECK command then
  fails.

Needs root (debootstrap, chroot, namespaces) and Debian's mirror.
"""
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOCKERFILE = os.path.join(TOP, "Dockerfile")
CI_RUN = os.path.join(TOP, ".ci", "run")
CACHE = os.path.join(TOP, "build", "image")
BASE = os.path.join(CACHE, "debian-12-slim")
ROOT = os.path.join(CACHE, "root")
MIRROR = "http://deb.debian.org/debian"
# The build stage's WORKDIR is /src and it copies the tree there, so its
# /src/build/... is this tree's build/...
BUILD_STAGE_SRC = "/src/"


def fail(msg):
    sys.stdout.flush()
    print(f"image-test: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


def say(msg):
    print(f"image-test: {msg}", flush=True)


def instructions(path):
    """The Dockerfile's instructions as (KEYWORD, argument text), with
    continuation lines joined and comments dropped."""
    out, cur = [], ""
    for line in open(path, encoding="utf-8"):
        s = line.strip()
        if not cur and (not s or s.startswith("#")):
            continue
        if cur and s.startswith("#"):
            continue
        if s.endswith("\\"):
            cur += s[:-1] + " "
            continue
        cur += s
        word, _, rest = cur.partition(" ")
        out.append((word.upper(), rest.strip()))
        cur = ""
    if cur:
        fail("the Dockerfile ends inside a continued line")
    return out


def stages(instrs):
    """[(from argument, [instructions])] per FROM."""
    out = []
    for word, arg in instrs:
        if word == "FROM":
            out.append((arg, []))
        elif not out:
            fail(f"{word} before the first FROM")
        else:
            out[-1][1].append((word, arg))
    return out


def check_build_stage(stage_list):
    if len(stage_list) != 2:
        fail(f"expected two stages (build, runtime), found {len(stage_list)}")
    (frm, body), (rt_from, _) = stage_list
    if frm.split()[0] != "debian:12-slim" or rt_from.split()[0] != "debian:12-slim":
        fail("both stages must be FROM debian:12-slim, the Debian 12 CI runs on")
    runs = " && ".join(arg for word, arg in body if word == "RUN")
    ci = open(CI_RUN, encoding="utf-8").read().splitlines()
    for target in ("make deps", "make test"):
        if target not in runs:
            fail(f"the build stage does not run `{target}`")
        if target not in (line.strip() for line in ci):
            fail(f".ci/run does not run `{target}`, which the build stage runs")
    if ("WORKDIR", BUILD_STAGE_SRC.rstrip("/")) not in body:
        fail(f"the build stage's WORKDIR is not {BUILD_STAGE_SRC}")
    say("build stage: FROM debian:12-slim, runs `make deps` and `make test` as .ci/run does")


def ensure_base():
    if os.path.exists(os.path.join(BASE, ".complete")):
        return
    shutil.rmtree(BASE, ignore_errors=True)
    os.makedirs(CACHE, exist_ok=True)
    say(f"debootstrap --variant=minbase bookworm (about a minute) into {BASE}")
    r = subprocess.run(["debootstrap", "--variant=minbase", "bookworm", BASE, MIRROR],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        fail("debootstrap: " + r.stderr[-2000:])
    # debian:12-slim's sources: the security suite and updates as well.
    with open(os.path.join(BASE, "etc/apt/sources.list"), "w") as f:
        f.write(f"deb {MIRROR} bookworm main\n"
                f"deb {MIRROR} bookworm-updates main\n"
                "deb http://deb.debian.org/debian-security bookworm-security main\n")
    open(os.path.join(BASE, ".complete"), "w").close()


def mount(*args):
    subprocess.run(["mount", *args], check=True)


def chroot_run(cmd, env, user=None, **kw):
    spec = [f"--userspec={user[0]}:{user[1]}"] if user else []
    return subprocess.run(["chroot", *spec, ROOT, *cmd], env=env, **kw)


def image_env(env_pairs):
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    env.update(env_pairs)
    return env


def parse_env(arg):
    pairs = {}
    for item in shlex.split(arg):
        k, eq, v = item.partition("=")
        if not eq:
            fail(f"ENV {arg!r}: use the KEY=VALUE form")
        pairs[k] = v
    return pairs


def build_runtime(body):
    """Runs the runtime stage's instructions into ROOT; returns the image's
    configuration."""
    shutil.rmtree(ROOT, ignore_errors=True)
    subprocess.run(["cp", "-a", BASE, ROOT], check=True)
    shutil.copy("/etc/resolv.conf", os.path.join(ROOT, "etc/resolv.conf"))
    mount("-t", "proc", "proc", os.path.join(ROOT, "proc"))
    mount("--rbind", "/dev", os.path.join(ROOT, "dev"))
    image = {"env": {}, "user": "root", "expose": None, "healthcheck": None,
             "stopsignal": "SIGTERM", "entrypoint": None}
    for word, arg in body:
        if word == "RUN":
            say(f"RUN {arg[:70]}{'…' if len(arg) > 70 else ''}")
            r = chroot_run(["/bin/sh", "-c", arg], image_env(image["env"]),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                fail(f"RUN {arg}: exit {r.returncode}: {r.stderr[-2000:]}")
        elif word == "COPY":
            args = shlex.split(arg)
            if not args or args[0] != "--from=build" or len(args) != 3:
                fail(f"COPY {arg}: only `COPY --from=build SRC DST` is followed here")
            src, dst = args[1], args[2]
            if not src.startswith(BUILD_STAGE_SRC):
                fail(f"COPY {arg}: the source is not under the build stage's {BUILD_STAGE_SRC}")
            host = os.path.join(TOP, src[len(BUILD_STAGE_SRC):])
            target = os.path.join(ROOT, dst.lstrip("/"))
            if os.path.isdir(host):
                shutil.copytree(host, target, dirs_exist_ok=True)
            elif os.path.isfile(host):
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copy2(host, target)
            else:
                fail(f"COPY {arg}: {host} does not exist (run `make` first)")
            say(f"COPY {src} {dst}")
        elif word == "ENV":
            image["env"].update(parse_env(arg))
        elif word == "USER":
            image["user"] = arg
        elif word == "EXPOSE":
            image["expose"] = int(arg.split("/")[0])
        elif word == "HEALTHCHECK":
            _, _, cmd = arg.partition("CMD ")
            image["healthcheck"] = json.loads(cmd)
        elif word == "STOPSIGNAL":
            image["stopsignal"] = arg
        elif word == "ENTRYPOINT":
            try:
                image["entrypoint"] = json.loads(arg)
            except ValueError:
                fail("ENTRYPOINT is not in exec form (a JSON array): the server would not be PID 1")
        else:
            fail(f"{word} in the runtime stage is not followed by this test; teach it")
    return image


def user_ids(name):
    for line in open(os.path.join(ROOT, "etc/passwd")):
        f = line.split(":")
        if f[0] == name or f[2] == name:
            return int(f[2]), int(f[3])
    fail(f"USER {name} is not in the image's /etc/passwd")


def http(port, path, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body,
                                 headers={"Content-Type": "application/json"} if body else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def run_container(image):
    uid, gid = user_ids(image["user"])
    if uid == 0:
        fail("the image runs as root")
    port = image["expose"]
    if not port or not image["entrypoint"] or not image["healthcheck"]:
        fail("the image needs EXPOSE, ENTRYPOINT and HEALTHCHECK")
    # Read-only root, as deploy/k8s/ runs it: the server must need no writes.
    mount("--bind", ROOT, ROOT)
    mount("-o", "remount,bind,ro", ROOT)
    mount("-t", "proc", "proc", os.path.join(ROOT, "proc"))
    mount("--rbind", "/dev", os.path.join(ROOT, "dev"))
    env = image_env(image["env"])
    say(f"run {image['entrypoint']} as uid {uid}, env {sorted(image['env'])}, port {port}")
    log = open(os.path.join(CACHE, "server.log"), "w")
    server = subprocess.Popen(["chroot", f"--userspec={uid}:{gid}", ROOT, *image["entrypoint"]],
                              env=env, stdout=log, stderr=log)

    def healthcheck():
        return chroot_run(image["healthcheck"], env, (uid, gid), stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, timeout=10).returncode

    try:
        for _ in range(200):
            try:
                if http(port, "/healthz")[0] == 200:
                    break
            except OSError:
                pass
            if server.poll() is not None:
                fail(f"the server exited with {server.returncode}; {CACHE}/server.log says why")
            time.sleep(0.05)
        else:
            fail(f"no /healthz on the EXPOSEd port {port} within 10 s")
        say(f"/healthz answers on port {port}")
        if healthcheck() != 0:
            fail("the HEALTHCHECK command fails against a serving container")
        say("the HEALTHCHECK command succeeds")

        status, _, text = http(port, "/v1/models")
        names = {m["name"] for m in json.loads(text)["models"]} if status == 200 else set()
        if not {"demo-4d", "gpt2-small-shape"} <= names:
            fail(f"GET /v1/models: {status}, models {sorted(names)}; the built-in models are missing")
        body = json.dumps({"model": "demo-4d", "embeddings": [[0.1, -0.2, 0.3, 0.1],
                           [-0.1, 0.2, 0.2, -0.3], [0.2, 0.1, -0.1, 0.2]]}).encode()
        status, _, text = http(port, "/v1/attention", body)
        if status != 200 or json.loads(text)["n_tokens"] != 3:
            fail(f"POST /v1/attention on demo-4d: {status} {text[:200]!r}")
        say("the built-in models are listed and compute")
        status, headers, text = http(port, "/")
        if status != 200 or not headers.get("Content-Type", "").startswith("text/html"):
            fail(f"GET /: {status} {headers.get('Content-Type')}")
        with open(os.path.join(TOP, "web", "index.html"), "rb") as f:
            if text != f.read():
                fail("GET / is not web/index.html")
        for name in ("ETag", "Content-Security-Policy"):
            if not headers.get(name):
                fail(f"GET /: no {name} header")
        say("the teaching page is served")
        server.send_signal(getattr(signal, image["stopsignal"]))
        try:
            rc = server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            fail(f"{image['stopsignal']} did not stop the server within 15 s")
        if rc != 0:
            fail(f"after {image['stopsignal']} the server exited with {rc}, not 0")
        say(f"{image['stopsignal']} stops it, exit 0")
        if healthcheck() == 0:
            fail("the HEALTHCHECK command succeeds with no server running")
        say("the HEALTHCHECK command fails once it has stopped")
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def main():
    if os.geteuid() != 0:
        fail("needs root (debootstrap, chroot, namespaces); CI runs as root")
    here = [sys.executable, os.path.abspath(__file__)]
    image_json = os.path.join(CACHE, "image.json")
    if len(sys.argv) == 1:
        stage_list = stages(instructions(DOCKERFILE))
        check_build_stage(stage_list)
        ensure_base()
        # The stage is built in a mount namespace of its own (its /proc and
        # /dev mounts go away with it) but on the host's network: apt-get.
        if subprocess.run(["unshare", "--mount", "--fork", *here, "--build"]).returncode != 0:
            sys.exit(1)
        # Run in new mount, network and PID namespaces, as a container is:
        # the EXPOSEd port is free whatever else runs on this machine.
        os.execvp("unshare", ["unshare", "--mount", "--net", "--pid", "--fork", "--mount-proc",
                              *here, "--run"])
    mount("--make-rprivate", "/")
    if sys.argv[1] == "--build":
        _, (_, body) = stages(instructions(DOCKERFILE))
        image = build_runtime(body)
        with open(image_json, "w") as f:
            json.dump(image, f)
    else:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        with open(image_json) as f:
            run_container(json.load(f))
        say("passed")


if __name__ == "__main__":
    main()
