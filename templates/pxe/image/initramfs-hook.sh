#!/bin/sh
# shellcheck shell=sh
# initramfs-tools hook of clusterctl node images (/etc/initramfs-tools/hooks/clusterctl): the
# programs the boot=clusterctl script (scripts/clusterctl) runs before the real root exists.
# Written by `clusterctl image build` (bare-metal target); a missing program fails the build.
PREREQ=""
prereqs() { echo "$PREREQ"; }
case "$1" in
prereqs)
	prereqs
	exit 0
	;;
esac

# shellcheck disable=SC1091
. /usr/share/initramfs-tools/hook-functions

# busybox: wget (HTTP), sha256sum, cut, sed, grep; GNU tar (xattrs, numeric owners); zstd;
# sfdisk, mkfs.ext4, mkfs.vfat, blkid: the install mode's disk work; chroot, useradd run inside
# the new root and need nothing here.
for name in busybox tar zstd gzip sfdisk mkfs.ext4 mkfs.vfat blkid; do
	path="$(command -v "$name")" || {
		echo "clusterctl hook: $name is not installed" >&2
		exit 1
	}
	copy_exec "$path"
done
exit 0
