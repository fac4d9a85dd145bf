#!/usr/bin/env bash
# Make a Docker engine and the local node image available on this machine.
# Why: no registry is reachable here, so the systemd node image is built from
# Debian's archive with debootstrap and imported; dockerd may not be running.
set -euo pipefail

IMAGE="${CLUSTERCTL_BASE_IMAGE:-local/debian:bookworm}"
ROOTFS_DIR="${CLUSTERCTL_ROOTFS_DIR:-/var/tmp/clusterctl-rootfs}"

log() { printf 'docker-bootstrap: %s\n' "$*" >&2; }

need_pkg() {
  local missing=()
  command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
  command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
  if [ "${#missing[@]}" -gt 0 ]; then
    log "installing ${missing[*]} from Debian's archive"
    if [ "$(id -u)" -ne 0 ]; then
      log "need root to install ${missing[*]}; run: sudo apt-get install -y ${missing[*]}"
      exit 1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

start_engine() {
  if docker info >/dev/null 2>&1; then
    return
  fi
  log "starting dockerd (log: /var/log/dockerd.log)"
  nohup dockerd --storage-driver=overlay2 >/var/log/dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && return
    sleep 1
  done
  log "dockerd did not answer within 60 s; last lines of /var/log/dockerd.log:"
  tail -n 20 /var/log/dockerd.log >&2 || true
  exit 1
}

build_image() {
  if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    return
  fi
  log "building $IMAGE with debootstrap (about 90 s)"
  rm -rf "$ROOTFS_DIR"
  debootstrap --variant=minbase \
    --include=python3,python3-apt,systemd,systemd-sysv,sudo,dbus,iproute2,procps,ca-certificates \
    bookworm "$ROOTFS_DIR" >/var/log/clusterctl-debootstrap.log 2>&1 || {
      log "debootstrap failed; see /var/log/clusterctl-debootstrap.log"
      tail -n 20 /var/log/clusterctl-debootstrap.log >&2
      exit 1
    }
  # Containers start with an empty machine-id so systemd generates one per node.
  : >"$ROOTFS_DIR/etc/machine-id"
  rm -f "$ROOTFS_DIR"/var/cache/apt/archives/*.deb
  tar -C "$ROOTFS_DIR" -c . | docker import \
    -c 'CMD ["/lib/systemd/systemd"]' -c 'ENV container=docker' \
    - "$IMAGE" >/dev/null
  rm -rf "$ROOTFS_DIR"
  log "built $IMAGE"
}

need_pkg
start_engine
build_image
