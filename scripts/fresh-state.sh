#!/usr/bin/env bash
# Put this machine in the state of a fresh one, as far as the test suite can tell, and
# (with --run) prove that CI passes from there:
#
#   scripts/fresh-state.sh            remove everything earlier runs keep
#   scripts/fresh-state.sh --run      then clone this checkout's HEAD into a new folder
#                                     and run `CI=true bash .ci/run` there; .ci/run prints
#                                     the wall time of each of its phases
#
# What a fresh machine lacks and an earlier run leaves behind, all removed here:
# - the Docker engine's whole state: every image (the kept test images, the test base,
#   the Slurm images), the build cache, containers, networks and volumes (dockerd is
#   stopped, its data root emptied; .ci/run starts it again);
# - /run/sshd (made by Debian's service start, which the suite's installs block);
# - the CPU torch wheelhouse, pip's cache, builder's template cache, pytest's folders;
# - the debootstrap work folders and the engine's and base image's locks and logs;
# - the clones (and their venvs) of earlier --run proofs, and scripts/typer-bounds.sh's venvs.
# With --packages it also purges the Debian packages .ci/run installs (docker.io, sshd,
# pdsh, OpenMPI, Slurm's client, the registry, debootstrap, qemu-user-static and
# binfmt-support, whose arm64 entry is taken out of binfmt_misc), as a new machine has none.
#
# The packages' downloads (apt's and pip's indexes) come from this machine's own
# configuration, as on any machine. Root only; it asks nothing.
set -euo pipefail

run=0
packages=0
for arg in "$@"; do
    case "$arg" in
    --run) run=1 ;;
    --packages) packages=1 ;;
    *)
        echo "usage: $0 [--packages] [--run]" >&2
        exit 2
        ;;
    esac
done
[ "$(id -u)" = 0 ] || {
    echo "fresh-state: root only (it stops dockerd and empties its data root)" >&2
    exit 1
}
say() { echo "fresh-state: $*"; }
repo=$(cd "$(dirname "$0")/.." && pwd)

# The engine: stopped, then its data root emptied (images, build cache, containers).
root=/var/lib/docker
if [ -S /var/run/docker.sock ] && command -v docker >/dev/null; then
    root=$(docker info --format '{{.DockerRootDir}}' 2>/dev/null || echo /var/lib/docker)
fi
if [ -s /var/run/docker.pid ] && kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
    pid=$(cat /var/run/docker.pid)
    say "stopping dockerd (pid $pid)"
    kill "$pid"
    for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$pid" 2>/dev/null || true
fi
pkill -x containerd 2>/dev/null || true
pkill -f 'containerd-shim' 2>/dev/null || true
# overlay mounts of containers that were still up
awk -v r="$root" 'index($2, r "/") == 1 { print $2 }' /proc/mounts | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
# the data root may be a mount point of its own (a volume): then only what is in it goes
find "${root:?}" -mindepth 1 -delete 2>/dev/null || rm -rf "${root:?}"/* "${root:?}"/.[!.]* 2>/dev/null || true
rm -rf /var/lib/containerd /var/run/docker.sock /var/run/docker.pid
[ -z "$(ls -A "$root" 2>/dev/null)" ] || { echo "fresh-state: could not empty $root" >&2; exit 1; }
say "engine state removed ($root)"

# What the suite and its scripts keep between runs.
rm -rf /run/sshd
rm -rf "${HOME:?}/.cache/builder-tests" "$HOME/.cache/pip" "$HOME/.cache/builder" \
    "${XDG_CACHE_HOME:-$HOME/.cache}/builder" "/tmp/pytest-of-$(id -un)"
rm -rf /var/tmp/builder-rootfs.* /var/lock/builder-*.lock /var/log/builder-dockerd.log
rm -rf "$repo/.venv" "$repo/.mypy_cache" "$repo/.ruff_cache" "$repo/.pytest_cache"
rm -rf /tmp/builder-prebuild-* /var/tmp/builder-fresh.*  # earlier proofs' clones and venvs
rm -rf "${TMPDIR:-/tmp}/builder-typer-bounds"  # scripts/typer-bounds.sh's venvs
say "caches, venv, wheelhouse and /run/sshd removed"

if [ "$packages" = 1 ]; then
    export DEBIAN_FRONTEND=noninteractive
    for entry in /proc/sys/fs/binfmt_misc/qemu-*; do
        if [ -w "$entry" ]; then echo -1 >"$entry" 2>/dev/null || true; fi
    done
    apt-get purge -y -qq docker.io containerd runc openssh-server pdsh openmpi-bin \
        slurm-client docker-registry debootstrap shellcheck qemu-user-static \
        binfmt-support >/dev/null 2>&1 || true
    apt-get autoremove -y -qq --purge >/dev/null 2>&1 || true
    say "the suite's Debian packages purged"
fi

[ "$run" = 1 ] || exit 0
work=$(mktemp -d /var/tmp/builder-fresh.XXXXXX)
git clone -q "$repo" "$work/main"
say "running CI=true bash .ci/run in $work/main ($(git -C "$work/main" log -1 --format='%h %s' | cut -c1-70))"
cd "$work/main"
start=$(date +%s)
rc=0
CI=true bash .ci/run </dev/null || rc=$?
say "exit $rc after $(($(date +%s) - start)) s (the clone stays in $work)"
exit "$rc"
