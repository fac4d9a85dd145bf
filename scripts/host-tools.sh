#!/usr/bin/env bash
# Install the Debian tools the tests run the rendered files through (their own parsers and checkers):
# grub-script-check (grub-common), shellcheck, dash, cpio and zstd (the bare-metal image archive), and
# chromium (the end-to-end suite renders verify's HTML report in it).
set -euo pipefail

log() { printf 'host-tools: %s\n' "$*" >&2; }

declare -A wanted=([grub-script-check]=grub-common [shellcheck]=shellcheck [dash]=dash [cpio]=cpio [zstd]=zstd [chromium]=chromium)
missing=()
for tool in "${!wanted[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("${wanted[$tool]}")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  log "need root to install ${missing[*]}; run: sudo apt-get install -y ${missing[*]}"
  exit 1
fi
log "installing ${missing[*]} from Debian's archive"
DEBIAN_FRONTEND=noninteractive apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
