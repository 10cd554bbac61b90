#!/usr/bin/env bash
# Let this machine run another architecture's binaries, in and out of containers:
#   scripts/emulation.sh [ARCH]   (Debian's name, default arm64)
# qemu-user-static and binfmt-support from the machine's own apt sources when missing,
# binfmt_misc mounted, the interpreters enabled; then it checks that the entry has the
# F flag (the kernel opens the interpreter when it is registered, so a container runs
# foreign binaries without qemu inside it). Nothing to do on a machine of ARCH itself.
# Debian/Ubuntu, as root; elsewhere it says what to do. Safe to run repeatedly.
set -euo pipefail

ARCH=${1:-arm64}
case "$ARCH" in
arm64) QEMU=aarch64 ;;
amd64) QEMU=x86_64 ;;
*)
    echo "emulation: no qemu entry known for $ARCH (arm64 or amd64)" >&2
    exit 2
    ;;
esac
say() { echo "emulation: $*"; }
die() {
    echo "emulation: error: $*" >&2
    exit 1
}

[ "$(dpkg --print-architecture 2>/dev/null || true)" != "$ARCH" ] || exit 0
ENTRY=/proc/sys/fs/binfmt_misc/qemu-$QEMU
if [ -r "$ENTRY" ] && grep -q '^enabled' "$ENTRY" && grep -q '^flags:.*F' "$ENTRY"; then
    exit 0
fi
[ "$(id -u)" = 0 ] || die "$ARCH emulation is not registered (needs root: run this as root)"
if [ ! -x "/usr/bin/qemu-$QEMU-static" ] || ! command -v update-binfmts >/dev/null; then
    command -v apt-get >/dev/null || die "no apt-get: install qemu-user-static and binfmt-support"
    say "installing qemu-user-static binfmt-support"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq -o DPkg::Lock::Timeout=300
    apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 \
        qemu-user-static binfmt-support >/dev/null
fi
if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc ||
        die "binfmt_misc cannot be mounted (a container without the right to? run on the host)"
fi
update-binfmts --enable "qemu-$QEMU" >/dev/null 2>&1 || update-binfmts --enable >/dev/null 2>&1 || true
[ -r "$ENTRY" ] || die "no binfmt entry qemu-$QEMU after update-binfmts --enable"
grep -q '^flags:.*F' "$ENTRY" ||
    die "$ENTRY lacks the F flag: containers would not find the interpreter ($(grep flags "$ENTRY"))"
say "qemu-$QEMU registered ($(grep '^flags' "$ENTRY"))"
