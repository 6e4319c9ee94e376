# Sourced by build_image.sh and the podman tests (image_test.sh,
# compose_test.sh, kube_test.sh): podman's configuration from
# tests/deploy/podman/ rather than the user's, the local base image, and
# small helpers. Sets $top, the top of the tree.
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export CONTAINERS_CONF=$top/tests/deploy/podman/containers.conf
export CONTAINERS_REGISTRIES_CONF=$top/tests/deploy/podman/registries.conf
# The image `make image` builds, under the name compose.yaml and
# k8s/deployment.yaml give it; podman stores it as localhost/attention-server.
IMAGE=${IMAGE:-attention-server:latest}
BASE_IMAGE=localhost/debian:12-slim
CACHE=$top/build/image
BASE_ROOT=$CACHE/debian-12-slim
MIRROR=http://deb.debian.org/debian

say() { echo "${0##*/}: $*"; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# debian:12-slim without a registry: a minbase debootstrap of bookworm
# (cached in build/image/, about a minute the first time), slimmed as
# Debian's own slim images are (no documentation, manual pages or
# translations, dpkg told to leave them out of later packages too; apt
# keeping no caches), with their apt sources, imported with the PATH a
# Docker base image sets.
# Made once per recipe: the hash of this function marks the cached root
# and the imported image (its comment), so that a changed recipe makes
# both again and an unchanged one reuses them.
ensure_base() {
    local recipe
    recipe="debootstrap recipe $(declare -f ensure_base | sha256sum | cut -c1-16)"
    [ "$(podman image inspect -f '{{.Comment}}' "$BASE_IMAGE" 2>/dev/null)" = "$recipe" ] && return 0
    if [ "$(cat "$BASE_ROOT.done" 2>/dev/null)" != "$recipe" ]; then
        rm -rf "$BASE_ROOT"
        mkdir -p "$CACHE"
        say "debootstrap --variant=minbase bookworm into $BASE_ROOT (about a minute)"
        debootstrap --variant=minbase bookworm "$BASE_ROOT" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
            { tail -20 "$CACHE/debootstrap.log" >&2; return 1; }
        cat >"$BASE_ROOT/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
        cat >"$BASE_ROOT/etc/dpkg/dpkg.cfg.d/slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
EOF
        # apt as in Debian's images: no package caches or downloaded
        # packages kept, no translations or uncompressed indexes fetched.
        cat >"$BASE_ROOT/etc/apt/apt.conf.d/docker-clean" <<'APT'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT
        echo 'Acquire::Languages "none";' >"$BASE_ROOT/etc/apt/apt.conf.d/docker-no-languages"
        echo 'Acquire::GzipIndexes "true";' >"$BASE_ROOT/etc/apt/apt.conf.d/docker-gzip-indexes"
        echo 'Apt::AutoRemove::SuggestsImportant "false";' >"$BASE_ROOT/etc/apt/apt.conf.d/docker-autoremove-suggests"
        find "$BASE_ROOT/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
        find "$BASE_ROOT/usr/share/doc" -mindepth 1 -type d -empty -delete
        rm -rf "$BASE_ROOT"/usr/share/{groff,info,linda,locale,man}/* "$BASE_ROOT"/usr/share/lintian/overrides/*
        rm -rf "$BASE_ROOT"/var/cache/apt/*.bin "$BASE_ROOT"/var/cache/apt/archives/*.deb \
            "$BASE_ROOT"/var/lib/apt/lists/* "$BASE_ROOT"/var/log/*.log "$BASE_ROOT"/tmp/*
        : >"$BASE_ROOT/etc/resolv.conf"
        echo "$recipe" >"$BASE_ROOT.done"
    fi
    say "importing $BASE_ROOT as $BASE_IMAGE"
    tar --numeric-owner -C "$BASE_ROOT" -c . |
        podman import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
            --change 'CMD ["bash"]' --message "$recipe" - "$BASE_IMAGE" >/dev/null
}
