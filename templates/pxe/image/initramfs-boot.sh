# shellcheck shell=sh
# boot=clusterctl: the root filesystem comes from a clusterctl node image archive over HTTP.
#
# Installed by `clusterctl image build` (bare-metal target) as
# /etc/initramfs-tools/scripts/clusterctl; initramfs-tools' /init sources /scripts/${BOOT} and
# calls its mountroot() when the kernel command line says boot=clusterctl. Without boot= the
# same initramfs mounts root= as usual (an installed node boots from its disk).
#
# Kernel parameters (the GRUB and iPXE entries clusterctl renders set them):
#   ip=dhcp                      the network (initramfs-tools' configure_networking)
#   clusterctl.url=URL           the archive, .tar.zst or .tar.gz
#   clusterctl.sha256=HEX        its sha256: any other archive stops the boot
#   clusterctl.mode=MODE         stateless: / is a tmpfs filled from the archive, at every boot;
#                                install: write the archive to clusterctl.disk and boot it
#   clusterctl.disk=PATH         install: the disk (partitioned and formatted: all data on it is
#                                lost); empty: the largest non-removable disk
#   clusterctl.firmware=F        uefi (an EFI system partition and GRUB for EFI) or bios
#   clusterctl.hostname=NAME     this machine's planned name
#   clusterctl.hostkey=URL       this machine's SSH host key, served once by `clusterctl up`
#   clusterctl.pubkey=URL        clusterctl's public key
#   clusterctl.user=NAME         the user clusterctl logs in as (passwordless sudo)
#
# Any other argument (the serial console, say) is kept by an installed system: its GRUB boots
# the kernel with it (/etc/default/grub.d/40-clusterctl.cfg). Every failure stops the boot with
# a line starting "clusterctl: " on the console, which `clusterctl up` shows for the machine.

CLUSTERCTL_WORK=/run/clusterctl

clusterctl_param() {
	# The value of kernel parameter $1 (empty when absent). Words, not lines: the command line is one line.
	# shellcheck disable=SC2013
	for clusterctl_arg in $(cat /proc/cmdline); do
		case "$clusterctl_arg" in
		"$1="*)
			echo "${clusterctl_arg#*=}"
			return 0
			;;
		esac
	done
	echo ""
}

clusterctl_fail() {
	echo "clusterctl: $*" >&2
	panic "clusterctl: $*"
	exit 1
}

clusterctl_fetch() {
	# Download $1 to $2; retries for a server that is not listening yet. On failure, wget's last
	# words are in $CLUSTERCTL_WORK/fetch.err (clusterctl_fetch_error prints them).
	clusterctl_try=0
	while [ "$clusterctl_try" -lt 20 ]; do
		if busybox wget -q -O "$2" "$1" 2>"$CLUSTERCTL_WORK/fetch.err"; then
			return 0
		fi
		rm -f "$2"
		clusterctl_try=$((clusterctl_try + 1))
		sleep 3
	done
	return 1
}

clusterctl_fetch_error() {
	# wget's last error line, for a failure message (empty when it said nothing).
	tail -n 1 "$CLUSTERCTL_WORK/fetch.err" 2>/dev/null | tr -d '\r'
}

clusterctl_partition_name() {
	# /dev/nvme0n1 + 2 -> /dev/nvme0n1p2; /dev/sda + 2 -> /dev/sda2
	case "$1" in
	*[0-9]) echo "${1}p$2" ;;
	*) echo "$1$2" ;;
	esac
}

clusterctl_largest_disk() {
	# The largest non-removable whole disk (what Ubuntu's autoinstall picks with size: largest).
	clusterctl_best="" clusterctl_best_size=0
	for clusterctl_dev in /sys/block/*; do
		clusterctl_name="${clusterctl_dev##*/}"
		case "$clusterctl_name" in
		loop* | ram* | sr* | fd* | zram* | dm-* | md*) continue ;;
		esac
		[ "$(cat "$clusterctl_dev/removable" 2>/dev/null)" = 0 ] || continue
		clusterctl_size="$(cat "$clusterctl_dev/size" 2>/dev/null || echo 0)"
		if [ "$clusterctl_size" -gt "$clusterctl_best_size" ]; then
			clusterctl_best="/dev/$clusterctl_name" clusterctl_best_size="$clusterctl_size"
		fi
	done
	echo "$clusterctl_best"
}

clusterctl_prepare_disk() {
	# Partition $1 (GPT), make the file systems, mount the root at ${rootmnt}.
	clusterctl_disk="$1"
	[ -b "$clusterctl_disk" ] || clusterctl_fail "$clusterctl_disk is not a disk"
	if [ "$CLUSTERCTL_FIRMWARE" = bios ]; then
		# A BIOS boot partition for GRUB's core image, then the root.
		printf 'label: gpt\nsize=1MiB, type=21686148-6449-6E6F-744E-656564454649\ntype=0FC63DAF-8483-4772-8E79-3D69D8477DE4\n' |
			sfdisk --wipe always --wipe-partitions always "$clusterctl_disk" ||
			clusterctl_fail "could not partition $clusterctl_disk"
		CLUSTERCTL_ESP=""
	else
		printf 'label: gpt\nsize=512MiB, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B\ntype=0FC63DAF-8483-4772-8E79-3D69D8477DE4\n' |
			sfdisk --wipe always --wipe-partitions always "$clusterctl_disk" ||
			clusterctl_fail "could not partition $clusterctl_disk"
		CLUSTERCTL_ESP="$(clusterctl_partition_name "$clusterctl_disk" 1)"
	fi
	CLUSTERCTL_ROOT="$(clusterctl_partition_name "$clusterctl_disk" 2)"
	udevadm settle 2>/dev/null || sleep 2
	if [ -n "$CLUSTERCTL_ESP" ]; then
		mkfs.fat -F 32 -n EFI "$CLUSTERCTL_ESP" || clusterctl_fail "could not format $CLUSTERCTL_ESP"
	fi
	mke2fs -t ext4 -q -F -L clusterctl-root "$CLUSTERCTL_ROOT" || clusterctl_fail "could not format $CLUSTERCTL_ROOT"
	mount -t ext4 "$CLUSTERCTL_ROOT" "${rootmnt:?}" || clusterctl_fail "could not mount $CLUSTERCTL_ROOT"
}

clusterctl_kernel_args() {
	# The kernel arguments the installed system keeps: this boot's, less the boot loader's and
	# clusterctl's own (the serial console of the machine, for instance).
	# shellcheck disable=SC2013
	for clusterctl_arg in $(cat /proc/cmdline); do
		case "$clusterctl_arg" in
		BOOT_IMAGE=* | initrd=* | ip=* | boot=* | root=* | clusterctl.*) ;;
		*) printf '%s ' "$clusterctl_arg" ;;
		esac
	done
}

clusterctl_grub_defaults() {
	# /etc/default/grub.d/40-clusterctl.cfg: the kept kernel arguments, and GRUB on the serial
	# console too when the kernel has one (console=ttyS<unit>,<speed>).
	clusterctl_keep="$(clusterctl_kernel_args)"
	clusterctl_keep="${clusterctl_keep% }"
	mkdir -p "${rootmnt}/etc/default/grub.d"
	{
		echo "# written by the clusterctl installer: the kernel arguments this machine was installed with"
		echo "GRUB_CMDLINE_LINUX=\"$clusterctl_keep\""
		for clusterctl_arg in $clusterctl_keep; do
			case "$clusterctl_arg" in
			console=ttyS[0-9]*)
				clusterctl_serial="${clusterctl_arg#console=ttyS}"
				clusterctl_unit="${clusterctl_serial%%,*}"
				clusterctl_speed="${clusterctl_serial#*,}"
				[ "$clusterctl_speed" != "$clusterctl_serial" ] || clusterctl_speed=9600
				clusterctl_speed="${clusterctl_speed%%[!0-9]*}"
				echo 'GRUB_TERMINAL="console serial"'
				echo "GRUB_SERIAL_COMMAND=\"serial --unit=$clusterctl_unit --speed=${clusterctl_speed:-9600}\""
				;;
			esac
		done
	} >"${rootmnt}/etc/default/grub.d/40-clusterctl.cfg"
}

clusterctl_install_bootloader() {
	# fstab by UUID, GRUB on the disk, from inside the new root.
	clusterctl_uuid="$(blkid -s UUID -o value "$CLUSTERCTL_ROOT")"
	printf '# written by the clusterctl installer\nUUID=%s / ext4 errors=remount-ro 0 1\n' "$clusterctl_uuid" \
		>"${rootmnt}/etc/fstab"
	if [ -n "$CLUSTERCTL_ESP" ]; then
		mkdir -p "${rootmnt}/boot/efi"
		modprobe -q vfat || true # busybox's mount loads no module
		mount -t vfat "$CLUSTERCTL_ESP" "${rootmnt}/boot/efi" || clusterctl_fail "could not mount $CLUSTERCTL_ESP"
		printf 'UUID=%s /boot/efi vfat umask=0077 0 1\n' "$(blkid -s UUID -o value "$CLUSTERCTL_ESP")" \
			>>"${rootmnt}/etc/fstab"
	fi
	for clusterctl_fs in dev proc sys run; do
		mount -o bind "/$clusterctl_fs" "${rootmnt}/$clusterctl_fs"
	done
	if [ -n "$CLUSTERCTL_ESP" ]; then
		if [ -d /sys/firmware/efi/efivars ]; then
			modprobe -q efivarfs || true
			mount -t efivarfs efivarfs "${rootmnt}/sys/firmware/efi/efivars" 2>/dev/null || true
			chroot "${rootmnt}" grub-install --target=x86_64-efi --efi-directory=/boot/efi \
				--bootloader-id=clusterctl || clusterctl_fail "grub-install (EFI) failed"
		fi
		# Also at the fallback path (\EFI\BOOT\BOOTX64.EFI): firmware that lost its boot entries still boots.
		chroot "${rootmnt}" grub-install --target=x86_64-efi --efi-directory=/boot/efi --removable \
			--no-nvram || clusterctl_fail "grub-install (EFI, removable) failed"
	else
		chroot "${rootmnt}" grub-install --target=i386-pc "$CLUSTERCTL_DISK" || clusterctl_fail "grub-install (BIOS) failed"
	fi
	clusterctl_grub_defaults
	chroot "${rootmnt}" grub-mkconfig -o /boot/grub/grub.cfg || clusterctl_fail "grub-mkconfig failed"
	umount "${rootmnt}/sys/firmware/efi/efivars" 2>/dev/null || true
	for clusterctl_fs in run sys proc dev; do
		umount "${rootmnt}/$clusterctl_fs"
	done
	if [ -n "$CLUSTERCTL_ESP" ]; then
		umount "${rootmnt}/boot/efi"
	fi
}

clusterctl_identity() {
	# Name, SSH host key, clusterctl's user and key: what makes the image this machine.
	clusterctl_name="$(clusterctl_param clusterctl.hostname)"
	if [ -n "$clusterctl_name" ]; then
		echo "$clusterctl_name" >"${rootmnt}/etc/hostname"
		printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' "$clusterctl_name" \
			>"${rootmnt}/etc/hosts"
	fi
	clusterctl_hostkey="$(clusterctl_param clusterctl.hostkey)"
	if [ -n "$clusterctl_hostkey" ]; then
		# The key `clusterctl up` generated for this machine and serves once: the first line is the
		# public key, the rest the private one. A machine without it is never trusted: stop here.
		clusterctl_fetched="$CLUSTERCTL_WORK/host-key"
		clusterctl_fetch "$clusterctl_hostkey" "$clusterctl_fetched" || true
		if ! sed -n 2p "$clusterctl_fetched" 2>/dev/null | grep -q -- '^-----BEGIN OPENSSH '; then
			rm -f "$clusterctl_fetched"
			clusterctl_fail "no SSH host key was served for ${clusterctl_name:-this machine} from $clusterctl_hostkey" \
				"($(clusterctl_fetch_error)); is clusterctl up running?"
		fi
		rm -f "${rootmnt}"/etc/ssh/ssh_host_*
		(
			umask 077
			tail -n +2 "$clusterctl_fetched" >"${rootmnt}/etc/ssh/ssh_host_ed25519_key"
		)
		head -n 1 "$clusterctl_fetched" >"${rootmnt}/etc/ssh/ssh_host_ed25519_key.pub"
		rm -f "$clusterctl_fetched"
		chmod 0600 "${rootmnt}/etc/ssh/ssh_host_ed25519_key"
		chmod 0644 "${rootmnt}/etc/ssh/ssh_host_ed25519_key.pub"
		mkdir -p "${rootmnt}/etc/ssh/sshd_config.d"
		printf 'HostKey /etc/ssh/ssh_host_ed25519_key\n' >"${rootmnt}/etc/ssh/sshd_config.d/40-clusterctl-hostkey.conf"
	fi
	clusterctl_user="$(clusterctl_param clusterctl.user)"
	if [ -n "$clusterctl_user" ]; then
		chroot "${rootmnt}" id "$clusterctl_user" >/dev/null 2>&1 ||
			chroot "${rootmnt}" useradd -m -s /bin/bash -c clusterctl "$clusterctl_user" ||
			clusterctl_fail "could not create the user $clusterctl_user"
		mkdir -p "${rootmnt}/etc/sudoers.d"
		printf '%s ALL=(ALL) NOPASSWD:ALL\n' "$clusterctl_user" >"${rootmnt}/etc/sudoers.d/90-clusterctl"
		chmod 0440 "${rootmnt}/etc/sudoers.d/90-clusterctl"
		clusterctl_pubkey="$(clusterctl_param clusterctl.pubkey)"
		if [ -n "$clusterctl_pubkey" ]; then
			mkdir -p "${rootmnt}/etc/ssh/authorized_keys.d"
			clusterctl_fetch "$clusterctl_pubkey" "${rootmnt}/etc/ssh/authorized_keys.d/$clusterctl_user" ||
				clusterctl_fail "could not fetch clusterctl's key from $clusterctl_pubkey"
			chmod 0644 "${rootmnt}/etc/ssh/authorized_keys.d/$clusterctl_user"
			printf 'AuthorizedKeysFile .ssh/authorized_keys /etc/ssh/authorized_keys.d/%%u\n' \
				>"${rootmnt}/etc/ssh/sshd_config.d/50-clusterctl.conf"
		fi
	fi
}

mountroot() {
	CLUSTERCTL_URL="$(clusterctl_param clusterctl.url)"
	CLUSTERCTL_SHA256="$(clusterctl_param clusterctl.sha256)"
	CLUSTERCTL_MODE="$(clusterctl_param clusterctl.mode)"
	CLUSTERCTL_FIRMWARE="$(clusterctl_param clusterctl.firmware)"
	CLUSTERCTL_DISK="$(clusterctl_param clusterctl.disk)"
	[ -n "$CLUSTERCTL_URL" ] || clusterctl_fail "no clusterctl.url= on the kernel command line"
	[ -n "$CLUSTERCTL_SHA256" ] || clusterctl_fail "no clusterctl.sha256= on the kernel command line"
	case "$CLUSTERCTL_MODE" in
	stateless | install) ;;
	*) clusterctl_fail "clusterctl.mode must be stateless or install, not '$CLUSTERCTL_MODE'" ;;
	esac

	configure_networking
	mkdir -p "$CLUSTERCTL_WORK"
	# initramfs-tools' /run holds a tenth of the RAM, less than an archive on a small machine: the
	# archive gets a tmpfs of its own (at most half the RAM, tmpfs' default), gone before the real init.
	mount -t tmpfs -o mode=0700 clusterctl "$CLUSTERCTL_WORK" || clusterctl_fail "could not mount a tmpfs at $CLUSTERCTL_WORK"
	clusterctl_archive="$CLUSTERCTL_WORK/rootfs"
	log_begin_msg "clusterctl: fetching $CLUSTERCTL_URL"
	clusterctl_fetch "$CLUSTERCTL_URL" "$clusterctl_archive" ||
		clusterctl_fail "could not download $CLUSTERCTL_URL ($(clusterctl_fetch_error))"
	log_end_msg
	clusterctl_got="$(sha256sum "$clusterctl_archive" | cut -d ' ' -f 1)"
	if [ "$clusterctl_got" != "$CLUSTERCTL_SHA256" ]; then
		rm -f "$clusterctl_archive"
		# The verdict first: a console line quoted in `up`'s summary is cut at 240 characters.
		clusterctl_fail "refusing to boot $CLUSTERCTL_URL: its sha256 is $clusterctl_got, not the locked $CLUSTERCTL_SHA256"
	fi

	if [ "$CLUSTERCTL_MODE" = install ]; then
		[ -n "$CLUSTERCTL_DISK" ] || CLUSTERCTL_DISK="$(clusterctl_largest_disk)"
		[ -n "$CLUSTERCTL_DISK" ] || clusterctl_fail "no disk to install to"
		clusterctl_prepare_disk "$CLUSTERCTL_DISK"
	else
		mount -t tmpfs -o mode=0755 tmpfs "${rootmnt:?}" || clusterctl_fail "could not mount a tmpfs root"
	fi
	case "$CLUSTERCTL_URL" in
	*.tar.zst) clusterctl_unpack="zstd -dc" ;;
	*) clusterctl_unpack="gzip -dc" ;;
	esac
	log_begin_msg "clusterctl: unpacking the root filesystem"
	clusterctl_room=""
	[ "$CLUSTERCTL_MODE" = install ] || clusterctl_room=" (a stateless root holds at most half the RAM: is there room for the image?)"
	$clusterctl_unpack "$clusterctl_archive" | tar -x -p --numeric-owner --xattrs --xattrs-include='*' -f - -C "${rootmnt}" ||
		clusterctl_fail "could not unpack $CLUSTERCTL_URL$clusterctl_room"
	log_end_msg
	rm -f "$clusterctl_archive"
	# Which archive this root came from: `clusterctl up` reads it to run only the configure stage on a
	# machine made from its profile's locked archive (an installed one keeps it until reinstalled).
	mkdir -p "${rootmnt}/etc/clusterctl"
	echo "$CLUSTERCTL_SHA256" >"${rootmnt}/etc/clusterctl/image.sha256"
	if [ "$CLUSTERCTL_MODE" = install ]; then
		clusterctl_install_bootloader
	fi
	clusterctl_identity
	umount "$CLUSTERCTL_WORK" || true
	echo "clusterctl: booting ${CLUSTERCTL_MODE} from $CLUSTERCTL_URL (sha256 $CLUSTERCTL_SHA256)"
}
