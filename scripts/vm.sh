#!/usr/bin/env bash
# The testbed in a local VM with the kernel Open vSwitch datapath and netem (as root):
#   bash scripts/setup.sh vm         build the guest image once, boot it, run the quickstart inside
#   bash scripts/setup.sh vm test    the same, then the whole test suite inside
#   bash scripts/vm.sh exec COMMAND  set up inside, then run COMMAND in the guest's checkout
#                                    (bench/vm.py uses it)
#   bash scripts/vm.sh box FILE      the image as a local Vagrant box for vagrant-libvirt (README)
# The guest is Debian 12 built with debootstrap from Debian's packages, booted under QEMU (software
# emulation: it runs anywhere, slowly) with user-mode networking: SSH is forwarded on 127.0.0.1
# only and the guest reaches nothing else. The guest needs no network: its Debian packages are in
# the image and its Python packages come from a wheelhouse this machine downloads. Nothing of this
# machine's own configuration goes in. The VM is stopped when this script ends, Ctrl-C included.
# Image and wheelhouse are cached in TESTBED_VM_DIR (default /var/cache/testbed-vm); the image is
# rebuilt when the package list below changes.
set -euo pipefail

action="${1:-run}"
case "$action" in
  run|test) ;;
  exec) [ -n "${2:-}" ] || { echo "usage: bash scripts/vm.sh exec COMMAND" >&2; exit 2; } ;;
  box) case "${2:-}" in *.box) ;; *) echo "usage: bash scripts/vm.sh box FILE.box" >&2; exit 2 ;; esac ;;
  *) echo "usage: bash scripts/setup.sh vm [test]" >&2; exit 2 ;;
esac
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${TESTBED_VM_DIR:-/var/cache/testbed-vm}"
release=bookworm
mirror="${TESTBED_VM_MIRROR:-http://deb.debian.org/debian}"
# What scripts/setup.sh installs, plus a kernel, an init, an SSH server, and what Vagrant expects
# of a box (sudo, rsync for its synced folder).
source "$root/scripts/packages.sh"
guest_packages=(linux-image-amd64 systemd-sysv udev kmod openssh-server sudo rsync "${testbed_packages[@]}")
cpus="${TESTBED_VM_CPUS:-2}"
memory_mb="${TESTBED_VM_MEMORY_MB:-4096}"
disk_gb=12

if [ "$(id -u)" != 0 ]; then
  echo "setup.sh vm must run as root (debootstrap builds the guest's files); try: sudo bash scripts/setup.sh vm" >&2
  exit 2
fi
install_missing qemu-system-x86 qemu-utils debootstrap openssh-client e2fsprogs python3-pip
if [ "$action" = box ]; then
  # Vagrant logs into its boxes with its own published key pair; the box carries the public half.
  vagrant_key="$(ls /usr/share/rubygems-integration/all/gems/vagrant-*/keys/vagrant.pub 2>/dev/null | head -1 || true)"
  [ -n "$vagrant_key" ] || { echo "vm.sh box needs Vagrant's public key: install vagrant (apt-get install vagrant) and retry" >&2; exit 2; }
  box_file="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
fi

mkdir -p "$cache"
key="$(printf '%s\n' "$release" "${guest_packages[@]}" "$(sed -n '/^ *# --- guest set-up/,/^ *# --- end/p' "$0")" |
       sha256sum | cut -c1-16)"
image="$cache/guest-$key.raw"
started=$(date +%s)
if [ ! -f "$image" ]; then
  echo "== building the guest image (debootstrap, once): $image"
  rootfs="$cache/rootfs-$key"
  rm -rf "$rootfs"
  debootstrap --variant=minbase --include="$(IFS=,; echo "${guest_packages[*]}")" "$release" "$rootfs" "$mirror" \
    > "$cache/debootstrap.log" 2>&1 || { echo "debootstrap failed; see $cache/debootstrap.log" >&2; exit 1; }
  # --- guest set-up
  [ -f "$cache/id_ed25519" ] || ssh-keygen -q -t ed25519 -N "" -C testbed-vm -f "$cache/id_ed25519"
  install -d -m 700 "$rootfs/root/.ssh"
  install -m 600 "$cache/id_ed25519.pub" "$rootfs/root/.ssh/authorized_keys"
  echo testbed-vm > "$rootfs/etc/hostname"
  printf '127.0.0.1 localhost\n127.0.1.1 testbed-vm\n' > "$rootfs/etc/hosts"
  printf '/dev/vda / ext4 rw,relatime 0 1\n' > "$rootfs/etc/fstab"
  printf '[Match]\nName=en* eth*\n[Network]\nDHCP=ipv4\n' > "$rootfs/etc/systemd/network/20-wired.network"
  ln -sf /lib/systemd/system/systemd-networkd.service \
    "$rootfs/etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
  printf 'PermitRootLogin prohibit-password\nPasswordAuthentication no\nUseDNS no\n' \
    > "$rootfs/etc/ssh/sshd_config.d/testbed.conf"
  rm -f "$rootfs"/etc/ssh/ssh_host_*  # each image gets its own host keys, made at its first boot
  chroot "$rootfs" ssh-keygen -A >/dev/null
  # --- end
  cp -L "$rootfs/vmlinuz" "$cache/vmlinuz-$key"
  cp -L "$rootfs/initrd.img" "$cache/initrd-$key"
  mkfs.ext4 -q -F -L testbed -d "$rootfs" "$image.tmp" "${disk_gb}G"
  mv "$image.tmp" "$image"
  rm -rf "$rootfs"
  # Images of an older package list, and their kernels and overlays, are of no further use.
  find "$cache" -maxdepth 1 \( -name 'guest-*.raw' -o -name 'state-*.qcow2' -o -name 'vmlinuz-*' \
    -o -name 'initrd-*' \) ! -name "*-$key*" -delete
  echo "== image built in $(( $(date +%s) - started )) s"
fi

wheels="$cache/wheels"
stamp="$wheels/.pyproject-$(sha256sum "$root/pyproject.toml" | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "== downloading the Python packages for the guest"
  rm -rf "$wheels"
  bash "$root/scripts/setup.sh" wheels "$wheels" > "$cache/wheels.log" 2>&1 ||
    { echo "downloading the wheelhouse failed; see $cache/wheels.log" >&2; exit 1; }
  touch "$stamp"
fi

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
work="$(mktemp -d /tmp/testbed-vm.XXXXXX)"
# A command as root in the guest, over the forwarded port with the VM's own key.
guest() {
  ssh -q -p "$port" -i "$cache/id_ed25519" -o BatchMode=yes -o StrictHostKeyChecking=no \
    -o UserKnownHostsFile=/dev/null -o ConnectTimeout=5 -o ServerAliveInterval=30 root@127.0.0.1 "$@"
}
qemu_pid=""
stop_vm_only() {
  if [ -n "$qemu_pid" ] && kill -0 "$qemu_pid" 2>/dev/null; then
    # A clean shutdown keeps the guest's disk consistent; QEMU is killed if it takes too long.
    guest 'systemctl poweroff' 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$qemu_pid" 2>/dev/null || break; sleep 1; done
    kill "$qemu_pid" 2>/dev/null || true
    wait "$qemu_pid" 2>/dev/null || true
  fi
}
stop_vm() {
  stop_vm_only
  rm -rf "$work"
}
trap stop_vm EXIT
trap 'exit 130' INT TERM

# The guest's own changes (its venv, its calibration) live in an overlay kept beside the image,
# so a second `vm` skips what the first set up; delete it to start from the image again. A box
# starts from the image alone.
state="$cache/state-$key.qcow2"
if [ "$action" = box ]; then
  state="$work/box.qcow2"
  qemu-img create -q -f qcow2 -b "$image" -F raw "$state"
fi
[ -f "$state" ] || qemu-img create -q -f qcow2 -b "$image" -F raw "$state"
echo "== booting the guest (QEMU, software emulation, ${cpus} CPUs, ${memory_mb} MB)"
booted=$(date +%s)
# qemu64 runs fastest under software emulation; the x86-64-v2 features are what numpy's wheels need.
# In a session of its own: Ctrl-C reaches this script (which shuts the guest down), not QEMU.
setsid qemu-system-x86_64 -accel tcg,thread=multi -cpu qemu64,+ssse3,+sse4.1,+sse4.2,+popcnt,+cx16,+lahf_lm \
  -smp "$cpus" -m "$memory_mb" -kernel "$cache/vmlinuz-$key" -initrd "$cache/initrd-$key" \
  -append "root=/dev/vda rw console=ttyS0 net.ifnames=1 quiet" \
  -drive "file=$state,if=virtio,format=qcow2" \
  -netdev "user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:$port-:22" -device virtio-net-pci,netdev=net0 \
  -display none -serial "file:$work/console.log" -monitor none &
qemu_pid=$!
for _ in $(seq 1 120); do
  guest true 2>/dev/null && break
  kill -0 "$qemu_pid" 2>/dev/null || { echo "the VM stopped while booting; its console: $work/console.log" >&2
                                       tail -20 "$work/console.log" >&2; exit 1; }
  sleep 2
done
guest true || { echo "the VM did not answer SSH within 4 minutes" >&2
                                             tail -20 "$work/console.log" >&2; exit 1; }
if [ "$action" = box ]; then
  echo "== guest up in $(( $(date +%s) - booted )) s; adding Vagrant's user"
  guest 'id vagrant >/dev/null 2>&1 || useradd -m -s /bin/bash vagrant
         install -d -m 700 -o vagrant -g vagrant ~vagrant/.ssh
         cat > ~vagrant/.ssh/authorized_keys && chown vagrant:vagrant ~vagrant/.ssh/authorized_keys
         chmod 600 ~vagrant/.ssh/authorized_keys
         echo "vagrant ALL=(ALL) NOPASSWD:ALL" > /etc/sudoers.d/vagrant && chmod 440 /etc/sudoers.d/vagrant
         visudo -cq' < "$vagrant_key"
  stop_vm_only
  mkdir -p "$work/box"
  qemu-img convert -O qcow2 -c "$state" "$work/box/box.img"
  cp "$cache/vmlinuz-$key" "$work/box/vmlinuz"
  cp "$cache/initrd-$key" "$work/box/initrd.img"
  printf '{"provider": "libvirt", "format": "qcow2", "virtual_size": %s}\n' "$disk_gb" > "$work/box/metadata.json"
  # The image has no boot loader: libvirt boots its kernel directly, as QEMU does here.
  cat > "$work/box/Vagrantfile" <<'BOX'
Vagrant.configure("2") do |config|
  config.vm.provider "libvirt" do |lv|
    lv.kernel = File.expand_path("vmlinuz", __dir__)
    lv.initrd = File.expand_path("initrd.img", __dir__)
    lv.cmd_line = "root=/dev/vda rw console=ttyS0 net.ifnames=1"
    lv.disk_bus = "virtio"
  end
end
BOX
  tar -C "$work/box" -czf "$box_file.tmp" metadata.json Vagrantfile box.img vmlinuz initrd.img
  mv "$box_file.tmp" "$box_file"
  echo "== box written: $box_file ($(du -h "$box_file" | cut -f1)); add it with: vagrant box add --name testbed-local $box_file"
  exit 0
fi
echo "== guest up in $(( $(date +%s) - booted )) s; copying the checkout and the wheelhouse"
tar -C "$root" --exclude=./.venv --exclude=./.git --exclude=./runs --exclude=./sweeps -czf - . |
  guest 'mkdir -p /root/testbed && tar -C /root/testbed -xzf -'
tar -C "$cache" -cf - wheels | guest 'rm -rf /root/wheels && tar -C /root -xf -'

inside="cd /root/testbed && TESTBED_WHEELHOUSE=/root/wheels bash scripts/setup.sh"
ran=$(date +%s)
status=0
if [ "$action" = exec ]; then
  guest "$inside >&2 && cd /root/testbed && $2" || status=$?
else
  guest "$inside run" || status=$?
fi
if [ "$status" = 0 ] && [ "$action" = test ]; then
  guest "$inside test" || status=$?
fi
echo "== inside the VM: exit $status after $(( $(date +%s) - ran )) s (boot $(( ran - booted )) s)"
exit "$status"
