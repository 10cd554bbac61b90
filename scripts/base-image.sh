#!/usr/bin/env bash
# Make a local Debian bookworm base image without any registry, for CI and
# `make test`: scripts/base-image.sh [NAME:TAG]   (default builder-test/bookworm:latest)
#
# - Makes sure an engine answers (scripts/engine.sh).
# - If NAME:TAG already exists in the engine, prints it and exits 0.
# - Else: debootstrap --variant=minbase bookworm (installs debootstrap if needed),
#   apt sources like debian:bookworm-slim (bookworm, bookworm-updates,
#   bookworm-security, deb822), the official image's container tweaks
#   (policy-rc.d, apt clean-up hooks), then `docker import` with
#   ENV PATH and CMD ["bash"], under a temporary tag.
# - Checks that the image runs and that apt-get update works inside it (through
#   the engine's NAT), and only then tags it NAME:TAG. An interrupted run thus
#   never leaves a NAME:TAG that was not checked.
# - Prints the image id and size.
#
# Safe to run repeatedly and concurrently; never prompts. Environment:
#   BUILDER_DEBIAN_MIRROR     default: the archive this machine's apt uses for bookworm
#   BUILDER_DEBIAN_SECURITY   default: the one it uses for bookworm-security
#   BUILDER_BASE_REBUILD=1    rebuild even if NAME:TAG exists
#   BUILDER_BASE_ARCH         the Debian architecture of the image (default: this machine's);
#                             another one (arm64 on x86_64) runs debootstrap's second stage
#                             and the checks under qemu (scripts/emulation.sh registers it:
#                             about 4 minutes here), and the image is made by a build
#                             `FROM scratch` with --platform, which records the architecture
#                             (a `docker import` does not)
set -euo pipefail

IMAGE=${1:-builder-test/bookworm:latest}
[ $# -le 1 ] || {
    echo "usage: $0 [NAME:TAG]" >&2
    exit 2
}
SUITE=bookworm
NATIVE=$(dpkg --print-architecture 2>/dev/null || echo amd64)
ARCH=${BUILDER_BASE_ARCH:-$NATIVE}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
LOCK=/var/lock/builder-base-image.lock
HERE=$(cd "$(dirname "$0")" && pwd)

say() { echo "base-image: $*"; }
die() {
    echo "base-image: error: $*" >&2
    exit 1
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

# The first URI this machine's apt sources give for a suite (deb822 .sources files and
# one-line .list files), so the image fetches from the mirror the machine is set up for.
apt_uri() {
    python3 - "$1" <<'PY'
import glob, sys

want = sys.argv[1]
files = ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]
for name in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")) + files:
    try:
        text = open(name, encoding="utf-8").read()
    except OSError:
        continue
    if name.endswith(".sources"):
        for paragraph in text.split("\n\n"):
            fields = {}
            for line in paragraph.splitlines():
                if line.strip() and not line.lstrip().startswith("#") and ":" in line:
                    key, _, value = line.partition(":")
                    fields[key.strip().lower()] = value.split()
            if "deb" in fields.get("types", []) and want in fields.get("suites", []):
                if fields.get("uris") and fields.get("enabled", ["yes"]) != ["no"]:
                    sys.exit(print(fields["uris"][0]))
    else:
        for line in text.splitlines():
            words = line.split("#", 1)[0].split()
            if words[:1] != ["deb"]:
                continue
            words = words[1:]
            if words and words[0].startswith("["):
                while words and not words[0].endswith("]"):
                    words = words[1:]
                words = words[1:]
            if len(words) >= 2 and words[1] == want:
                sys.exit(print(words[0]))
PY
}
MIRROR=${BUILDER_DEBIAN_MIRROR:-$(apt_uri "$SUITE")}
SECURITY=${BUILDER_DEBIAN_SECURITY:-$(apt_uri "$SUITE-security")}
[ -n "$MIRROR" ] ||
    die "this machine's apt sources name no archive for $SUITE: set BUILDER_DEBIAN_MIRROR to a Debian mirror"
[ -n "$SECURITY" ] ||
    die "this machine's apt sources name no archive for $SUITE-security: set BUILDER_DEBIAN_SECURITY"

case "$IMAGE" in
*:*) ;;
*) IMAGE="$IMAGE:latest" ;;
esac

# The engine: started if needed; its last line says version and storage driver.
"$HERE/engine.sh" || die "no Docker engine (scripts/engine.sh failed)"

# Debian's client; an unrelated docker may be first on PATH. Any client that
# talks to the engine does for import/inspect/run, so fall back to it.
if [ -x /usr/bin/docker ]; then
    DOCKER=/usr/bin/docker
elif command -v docker >/dev/null && docker version >/dev/null 2>&1; then
    DOCKER=$(command -v docker)
else
    die "no docker client (/usr/bin/docker comes with Debian's docker.io: apt-get install docker.io)"
fi

image_exists() { "$DOCKER" image inspect "$1" >/dev/null 2>&1; }

report() {
    local id size
    id=$("$DOCKER" image inspect --format '{{.Id}}' "$IMAGE")
    size=$("$DOCKER" image inspect --format '{{.Size}}' "$IMAGE")
    say "$IMAGE: id $id, size $(awk -v s="$size" 'BEGIN { printf "%.1f MB", s / 1e6 }')"
}

if [ "${BUILDER_BASE_REBUILD:-0}" != 1 ] && image_exists "$IMAGE"; then
    report
    exit 0
fi

[ "$(id -u)" = 0 ] || die "$IMAGE is missing, and debootstrap needs root"

# One builder at a time; a second caller waits, then finds the image.
mkdir -p "$(dirname "$LOCK")"
exec 9>"$LOCK"
flock -w 1800 9 || die "timed out waiting for $LOCK (another base-image.sh is stuck?)"
if [ "${BUILDER_BASE_REBUILD:-0}" != 1 ] && image_exists "$IMAGE"; then
    report
    exit 0
fi

T_ALL=$(now)

# debootstrap, and the archive keyring so the Release files are verified.
need=()
command -v debootstrap >/dev/null || [ -x /usr/sbin/debootstrap ] || need+=(debootstrap)
[ -s "$KEYRING" ] || need+=(debian-archive-keyring)
if [ ${#need[@]} -gt 0 ]; then
    command -v apt-get >/dev/null || die "missing ${need[*]} and no apt-get to install it"
    t0=$(now)
    say "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq -o DPkg::Lock::Timeout=300 || die "apt-get update failed"
    apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 "${need[@]}" >/dev/null ||
        die "apt-get install ${need[*]} failed"
    say "installed ${need[*]} in $(since "$t0")"
fi
DEBOOTSTRAP=$(command -v debootstrap || echo /usr/sbin/debootstrap)

# Work dir on disk (not /tmp, which may be a small tmpfs), removed on exit.
# debootstrap mounts proc/sys inside it: unmount before removing, and never
# cross into another file system.
ROOTFS=""
TMP_TAG=""
cleanup() {
    local rc=$?
    if [ -n "$ROOTFS" ] && [ -d "$ROOTFS" ]; then
        local m
        awk -v r="$ROOTFS" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/mounts |
            sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
        rm -rf --one-file-system "$ROOTFS" || echo "base-image: warning: could not remove $ROOTFS" >&2
        rm -f "$ROOTFS.log" "$ROOTFS.Dockerfile" "$ROOTFS.rootfs.tar"
    fi
    if [ -n "$TMP_TAG" ]; then
        "$DOCKER" rmi "$TMP_TAG" >/dev/null 2>&1 || true
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'echo "base-image: interrupted, cleaning up" >&2; exit 130' INT
trap 'echo "base-image: terminated, cleaning up" >&2; exit 143' TERM
ROOTFS=$(mktemp -d /var/tmp/builder-rootfs.XXXXXX)
chmod 755 "$ROOTFS"

t0=$(now)
if [ "$ARCH" != "$NATIVE" ]; then
    "$HERE/emulation.sh" "$ARCH" || die "$ARCH binaries do not run here (scripts/emulation.sh failed)"
fi
say "debootstrap --arch=$ARCH --variant=minbase $SUITE from $MIRROR (log: $ROOTFS.log)"
if ! "$DEBOOTSTRAP" --arch="$ARCH" --variant=minbase --keyring="$KEYRING" "$SUITE" "$ROOTFS" "$MIRROR" \
    >"$ROOTFS.log" 2>&1; then
    echo "---- last 30 lines of the debootstrap log" >&2
    tail -n 30 "$ROOTFS.log" >&2
    [ -f "$ROOTFS/debootstrap/debootstrap.log" ] && tail -n 30 "$ROOTFS/debootstrap/debootstrap.log" >&2
    rm -f "$ROOTFS.log"
    die "debootstrap failed"
fi
rm -f "$ROOTFS.log"
say "debootstrap done in $(since "$t0")"

# Make the tree like debian:bookworm-slim where it matters to images built on it.
t0=$(now)
# apt sources: deb822, with updates and security, as in the official image.
rm -f "$ROOTFS/etc/apt/sources.list"
mkdir -p "$ROOTFS/etc/apt/sources.list.d"
cat >"$ROOTFS/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
[ -s "$ROOTFS/usr/share/keyrings/debian-archive-keyring.gpg" ] ||
    die "the rootfs has no debian-archive-keyring: apt inside it could not verify anything"
# No service starts during `apt-get install` in builds (as in the official image).
cat >"$ROOTFS/usr/sbin/policy-rc.d" <<'EOF'
#!/bin/sh
# For most Docker users, "apt-get install" only happens during "docker build",
# where starting services doesn't work. This keeps services from trying to start.
exit 101
EOF
chmod 755 "$ROOTFS/usr/sbin/policy-rc.d"
# The official image's apt settings: drop downloaded .debs after installs, no
# translations, suggested packages are not kept by autoremove.
cat >"$ROOTFS/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
echo 'Acquire::Languages "none";' >"$ROOTFS/etc/apt/apt.conf.d/docker-no-languages"
echo 'Apt::AutoRemove::SuggestsImportant "false";' >"$ROOTFS/etc/apt/apt.conf.d/docker-autoremove-suggests"
# Nothing of this machine, and no caches, in the image: the engine provides
# resolv.conf/hosts/hostname at run time; lists are fetched by `apt-get update`.
: >"$ROOTFS/etc/resolv.conf"
: >"$ROOTFS/etc/hostname"
rm -rf "$ROOTFS/var/lib/apt/lists/"* "$ROOTFS/var/cache/apt/"*.bin \
    "$ROOTFS/var/cache/apt/archives/"*.deb "$ROOTFS/debootstrap"
mkdir -p "$ROOTFS/var/lib/apt/lists/partial"
find "$ROOTFS/var/log" -type f -exec truncate -s 0 {} +
say "rootfs tidied in $(since "$t0") ($(du -sm --one-file-system "$ROOTFS" | cut -f1) MB)"

# Import under a temporary tag; NAME:TAG only after the checks pass.
t0=$(now)
TMP_TAG="builder-base-image-tmp/$(basename "$ROOTFS" | tr '[:upper:]' '[:lower:]' | tr -c 'a-z0-9\n' '-'):unchecked"
if [ "$ARCH" = "$NATIVE" ]; then
    tar --numeric-owner -C "$ROOTFS" -c . |
        "$DOCKER" import \
            --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
            --change 'CMD ["bash"]' \
            --message "builder scripts/base-image.sh: debootstrap --variant=minbase $SUITE" \
            - "$TMP_TAG" >/dev/null
    say "docker import done in $(since "$t0")"
else
    # The rootfs and a Dockerfile as the build context, streamed (tar of a tar).
    {
        printf 'FROM scratch\nADD rootfs.tar /\n'
        printf 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n'
        printf 'CMD ["bash"]\n'
    } >"$ROOTFS.Dockerfile"
    tar --numeric-owner -C "$ROOTFS" -cf "$ROOTFS.rootfs.tar" .
    tar -c --transform "s|.*\.Dockerfile\$|Dockerfile|;s|.*\.rootfs\.tar\$|rootfs.tar|" \
        -C "$(dirname "$ROOTFS")" "$(basename "$ROOTFS").Dockerfile" "$(basename "$ROOTFS").rootfs.tar" |
        DOCKER_BUILDKIT=0 "$DOCKER" build -q --platform "linux/$ARCH" -t "$TMP_TAG" - >/dev/null ||
        die "the build FROM scratch of the $ARCH rootfs failed"
    rm -f "$ROOTFS.Dockerfile" "$ROOTFS.rootfs.tar"
    got=$("$DOCKER" image inspect --format '{{.Architecture}}' "$TMP_TAG")
    [ "$got" = "$ARCH" ] || die "the image says architecture $got, not $ARCH"
    say "built FROM scratch for linux/$ARCH in $(since "$t0")"
fi

# Checks: it runs, and apt works inside it through the engine's NAT.
t0=$(now)
# shellcheck disable=SC2016 # expanded by the container's shell
out=$("$DOCKER" run --rm "$TMP_TAG" sh -c '. /etc/os-release && echo "$PRETTY_NAME"' 2>&1) ||
    die "the image does not run: $out"
say "image runs: $out"
if ! out=$("$DOCKER" run --rm "$TMP_TAG" sh -c 'apt-get update 2>&1 && echo APT-OK' 2>&1) ||
    ! grep -q '^APT-OK$' <<<"$out"; then
    echo "$out" | tail -n 20 >&2
    why=""
    [ "$(cat /proc/sys/net/ipv4/ip_forward 2>/dev/null)" = 1 ] || why="$why; net.ipv4.ip_forward is not 1 on the host"
    host=$(sed -E 's#^[a-z]+://([^/:]+).*#\1#' <<<"$MIRROR")
    dns=$("$DOCKER" run --rm "$TMP_TAG" getent hosts "$host" 2>&1) || why="$why; $host does not resolve inside a container ($dns)"
    die "apt-get update fails inside the image${why:- (see its output above)}"
fi
for s in "$SUITE" "$SUITE-updates" "$SUITE-security"; do
    grep -q " $s InRelease" <<<"$out" || die "apt-get update inside the image did not fetch $s: $out"
done
say "apt-get update works inside the image ($SUITE, $SUITE-updates, $SUITE-security) in $(since "$t0")"

"$DOCKER" tag "$TMP_TAG" "$IMAGE"
"$DOCKER" rmi "$TMP_TAG" >/dev/null
TMP_TAG=""
say "built $IMAGE in $(since "$T_ALL")"
report
