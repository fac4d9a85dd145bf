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
# sfdisk, mke2fs, mkfs.fat, blkid: the install mode's disk work; chroot, useradd run inside
# the new root and need nothing here.
path="$(command -v busybox)" || {
	echo "clusterctl hook: busybox is not installed" >&2
	exit 1
}
copy_exec "$path"
# busybox's own hook may have linked its applets of the same names already, and copy_exec keeps
# what is there: busybox's tar has no --xattrs, its mke2fs makes no ext4 and its blkid takes no
# -s. So the links go first and the real programs are copied under their real names.
for name in tar zstd gzip sfdisk mke2fs mkfs.fat blkid; do
	path="$(command -v "$name")" || {
		echo "clusterctl hook: $name is not installed" >&2
		exit 1
	}
	real="$(readlink -f "$path")"
	rm -f "${DESTDIR:?}$path" "${DESTDIR:?}$real"
	copy_exec "$real" "$path"
done
# The install mode's EFI system partition (FAT, and the code pages it names file names with) and
# the EFI variables grub-install writes its boot entry to: modules none of MODULES=most brings.
manual_add_modules vfat nls_cp437 nls_ascii nls_utf8 efivarfs
exit 0
