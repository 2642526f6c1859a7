#!/usr/bin/env bash
# Make a Docker engine and a registry-free base image available for the container tests.
#
# Idempotent: every step checks first and does nothing when its result is already there.
#   1. docker.io + debootstrap from Debian, when missing;
#   2. dockerd (no iptables, no bridge: works without a kernel network setup), when `docker info`
#      fails; its log goes to $DOCKERD_LOG. The engine picks its storage driver (overlay2 where the
#      kernel mounts overlays); $STORAGE_DRIVER forces one. vfs copies the whole tree at every layer,
#      which filled the disk when the container tests built their images;
#   3. the base image $BASE_IMAGE, built by debootstrap from the Debian mirror of the machine's apt
#      sources and `docker import`, when missing (no registry is needed).
# When the engine cannot run here it prints "docker: unavailable (<reason>)" and exits 0: the tests
# marked `docker` then skip and say why.
set -uo pipefail

BASE_IMAGE="${BASE_IMAGE:-milebench-base:bookworm}"
SUITE="${SUITE:-bookworm}"
DOCKERD_LOG="${DOCKERD_LOG:-/var/log/milebench-dockerd.log}"
WAIT_S="${WAIT_S:-60}"
STORAGE_DRIVER="${STORAGE_DRIVER:-}"
IMAGE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

unavailable() {
    echo "docker: unavailable ($1)"
    exit 0
}

step() { echo "docker-setup: $*"; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo -n "$@"; else return 1; fi
}

debian_mirror() {
    # First non-security Debian URI of the apt sources (deb822 "URIs:" or one-line "deb URI SUITE").
    local files=(/etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list)
    cat "${files[@]}" 2>/dev/null |
        sed -n -e 's/^URIs:[[:space:]]*//p' -e 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]\+\).*/\2/p' |
        tr ' ' '\n' | grep -E '/debian/?$' | grep -v security | head -n 1
}

install_packages() {
    local missing=()
    command -v dockerd >/dev/null || missing+=(docker.io)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null || unavailable "no apt-get to install ${missing[*]}"
    step "installing ${missing[*]}"
    as_root apt-get update -qq || unavailable "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null ||
        unavailable "apt-get install ${missing[*]} failed"
}

start_engine() {
    docker info >/dev/null 2>&1 && return 0
    local driver_flag=""
    [ -n "$STORAGE_DRIVER" ] && driver_flag="--storage-driver=$STORAGE_DRIVER"
    step "starting dockerd ${driver_flag:-(engine-chosen storage driver)} (log: $DOCKERD_LOG)"
    as_root sh -c "nohup dockerd $driver_flag --iptables=false --bridge=none >>'$DOCKERD_LOG' 2>&1 &" ||
        unavailable "cannot start dockerd without root"
    local waited=0
    until docker info >/dev/null 2>&1; do
        [ "$waited" -ge "$WAIT_S" ] && unavailable "dockerd did not answer within ${WAIT_S}s, see $DOCKERD_LOG"
        sleep 1
        waited=$((waited + 1))
    done
}

build_base() {
    docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 && return 0
    local mirror rootfs start
    mirror="$(debian_mirror)"
    [ -n "$mirror" ] || unavailable "no Debian mirror in the apt sources"
    rootfs="$(mktemp -d /tmp/milebench-rootfs.XXXXXX)"
    step "debootstrap $SUITE from $mirror into $rootfs"
    start=$SECONDS
    as_root debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        "$SUITE" "$rootfs" "$mirror" >"$rootfs.log" 2>&1 ||
        { as_root rm -rf "$rootfs"; unavailable "debootstrap failed, see $rootfs.log"; }
    step "debootstrap took $((SECONDS - start))s; importing as $BASE_IMAGE"
    # mktemp made the root 0700; an image root must be traversable by non-root users. An imported
    # tarball carries no config, so give it the PATH and shell that registry images have.
    as_root chmod 0755 "$rootfs"
    as_root tar -C "$rootfs" -c . |
        docker import --change "ENV PATH=$IMAGE_PATH" --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE" >/dev/null ||
        { as_root rm -rf "$rootfs"; unavailable "docker import failed"; }
    as_root rm -rf "$rootfs" "$rootfs.log"
}

install_packages
start_engine
build_base
echo "docker: available (base image $BASE_IMAGE, storage driver $(docker info --format '{{.Driver}}'))"
