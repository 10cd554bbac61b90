#!/usr/bin/env bash
# Make a real Docker engine answer on /var/run/docker.sock, for CI and `make test`.
#
# - If an engine already answers there, print its version and exit 0.
# - Else (root, Debian/Ubuntu): install Debian's docker.io if dockerd is missing
#   (services kept from starting during the install), start dockerd in the
#   background detached from this script (log: /var/log/builder-dockerd.log),
#   wait for the socket to answer and fail with the log tail if it does not.
#   The storage driver is overlay2; if dockerd dies with it, it is retried with vfs.
#
# Safe to run repeatedly and concurrently; never prompts. The dockerd it starts
# is left running on purpose. Environment:
#   BUILDER_ENGINE_WAIT            seconds to wait for the socket (default 60)
#   BUILDER_DOCKER_STORAGE_DRIVER  force a storage driver (default overlay2)
#   BUILDER_DOCKERD_LOG            dockerd log file (default /var/log/builder-dockerd.log)
set -euo pipefail

SOCK=/var/run/docker.sock
PIDFILE=/var/run/docker.pid
DAEMON_JSON=/etc/docker/daemon.json
DOCKERD_LOG=${BUILDER_DOCKERD_LOG:-/var/log/builder-dockerd.log}
WAIT=${BUILDER_ENGINE_WAIT:-60}
LOCK=/var/lock/builder-engine.lock
# Debian's client; an unrelated (newer, buildx-less) docker may be first on PATH.
DEBIAN_DOCKER=/usr/bin/docker

say() { echo "engine: $*"; }
die() {
    echo "engine: error: $*" >&2
    exit 1
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

# True when the engine answers _ping on the socket. Needs curl, else Debian's
# client, else the Python Docker SDK.
engine_answers() {
    [ -S "$SOCK" ] || return 1
    if command -v curl >/dev/null; then
        [ "$(curl -fsS --max-time 5 --unix-socket "$SOCK" http://localhost/_ping 2>/dev/null)" = OK ]
    elif [ -x "$DEBIAN_DOCKER" ]; then
        DOCKER_HOST="unix://$SOCK" timeout 10 "$DEBIAN_DOCKER" version >/dev/null 2>&1
    else
        DOCKER_HOST="unix://$SOCK" timeout 10 python3 -c \
            'import docker; docker.from_env().ping()' >/dev/null 2>&1
    fi
}

# "Docker VERSION (API X), storage driver D" for the running engine.
engine_summary() {
    local out=""
    if [ -x "$DEBIAN_DOCKER" ]; then
        out=$(DOCKER_HOST="unix://$SOCK" timeout 20 "$DEBIAN_DOCKER" info \
            --format 'Docker {{.ServerVersion}}, storage driver {{.Driver}}, cgroup v{{.CgroupVersion}}' \
            2>/dev/null) || out=""
    fi
    if [ -z "$out" ] && command -v curl >/dev/null && command -v python3 >/dev/null; then
        out=$(curl -fsS --max-time 20 --unix-socket "$SOCK" http://localhost/info 2>/dev/null |
            python3 -c 'import json, sys; i = json.load(sys.stdin)
print("Docker %s, storage driver %s, cgroup v%s" % (i.get("ServerVersion"), i.get("Driver"), i.get("CgroupVersion", "?")))' \
            2>/dev/null) || out=""
    fi
    echo "${out:-Docker engine (version and storage driver unknown: no /usr/bin/docker, curl or python3)}"
}

finish() {
    say "ready on $SOCK: $(engine_summary)"
    exit 0
}

# Fast path: nothing to do (and no root needed) when an engine already answers.
if engine_answers; then
    finish
fi

[ "$(id -u)" = 0 ] || die "no Docker engine answers on $SOCK, and starting one needs root (run as root, or start dockerd yourself)"

# One starter at a time: a second caller waits here, then finds the engine up.
mkdir -p "$(dirname "$LOCK")"
exec 9>"$LOCK"
if ! flock -w 600 9; then
    die "timed out waiting for $LOCK (another engine.sh is stuck?)"
fi
if engine_answers; then
    finish
fi

install_docker_io() {
    command -v apt-get >/dev/null || die "dockerd is missing and there is no apt-get: install Docker Engine with your package manager"
    local t0 policy=/usr/sbin/policy-rc.d backup=""
    t0=$(now)
    export DEBIAN_FRONTEND=noninteractive
    say "installing Debian's docker.io (apt-get update + install)"
    local tries=0
    until apt-get update -qq -o DPkg::Lock::Timeout=300; do
        tries=$((tries + 1))
        [ "$tries" -lt 3 ] || die "apt-get update failed 3 times"
        say "apt-get update failed, retrying in 5 s"
        sleep 5
    done
    # Keep the package from starting dockerd/containerd itself: we start dockerd
    # below, detached and with our log. An existing policy-rc.d is restored after.
    if [ -e "$policy" ]; then
        backup=$(mktemp /usr/sbin/policy-rc.d.builder-XXXXXX)
        cp -p "$policy" "$backup"
    fi
    # shellcheck disable=SC2064 # expand now: the paths are fixed for this trap
    trap "if [ -n '$backup' ]; then mv -f '$backup' '$policy'; else rm -f '$policy'; fi" EXIT
    printf '#!/bin/sh\n# builder scripts/engine.sh: no service starts during the install\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    # No recommends: they pull apparmor, needrestart (hooks into every later
    # apt run), git and more; dockerd needs none of them.
    tries=0
    until apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
        docker.io >/dev/null; do
        tries=$((tries + 1))
        [ "$tries" -lt 3 ] || die "apt-get install docker.io failed 3 times"
        say "apt-get install failed, retrying after apt-get update"
        sleep 5
        apt-get update -qq -o DPkg::Lock::Timeout=300 || true
    done
    if [ -n "$backup" ]; then mv -f "$backup" "$policy"; else rm -f "$policy"; fi
    trap - EXIT
    command -v dockerd >/dev/null || die "docker.io installed but dockerd is not on PATH"
    say "docker.io installed ($(dpkg-query -W -f='${Version}' docker.io)) in $(since "$t0")"
}

# Start dockerd detached (own session, stdin from /dev/null, output to the log)
# and wait for it. Returns 0 when it answers, 1 when it died, 2 on timeout.
start_dockerd() {
    local driver=$1 t0 pid args=()
    t0=$(now)
    if [ -n "$driver" ]; then
        args+=(--storage-driver "$driver")
    fi
    mkdir -p "$(dirname "$DOCKERD_LOG")"
    LOG_START=$(stat -c %s "$DOCKERD_LOG" 2>/dev/null || echo 0)
    {
        echo
        echo "=== $(date -u +%FT%TZ) builder scripts/engine.sh: dockerd ${args[*]}"
    } >>"$DOCKERD_LOG"
    say "starting dockerd ${args[*]} (log: $DOCKERD_LOG)"
    # 9>&-: dockerd must not inherit (and so hold forever) our lock.
    setsid dockerd "${args[@]}" </dev/null >>"$DOCKERD_LOG" 2>&1 9>&- &
    pid=$!
    disown "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + WAIT + 1))
    while [ "$SECONDS" -lt "$deadline" ]; do
        if engine_answers; then
            say "dockerd (pid $(cat "$PIDFILE" 2>/dev/null || echo "$pid")) answers after $(since "$t0")"
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            # setsid may have forked; the daemon's own pid file then tells.
            local dpid
            dpid=$(cat "$PIDFILE" 2>/dev/null || true)
            if [ -z "$dpid" ] || ! kill -0 "$dpid" 2>/dev/null; then
                say "dockerd exited after $(since "$t0")"
                return 1
            fi
        fi
        sleep 0.5
    done
    return 2
}

# The end of what the last start wrote to the log (the whole log's tail if none).
LOG_START=0
log_tail() {
    echo "---- $DOCKERD_LOG (last 40 lines of this start)" >&2
    tail -c "+$((LOG_START + 1))" "$DOCKERD_LOG" 2>/dev/null | tail -n 40 >&2 || true
    echo "----" >&2
}

if ! command -v dockerd >/dev/null; then
    install_docker_io
fi

# A dockerd that is running but not (yet) answering, e.g. started by someone else:
# give it the same time to come up instead of starting a second one.
if [ -s "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    say "dockerd already running (pid $(cat "$PIDFILE")), waiting up to ${WAIT} s for $SOCK"
    deadline=$((SECONDS + WAIT + 1))
    while [ "$SECONDS" -lt "$deadline" ]; do
        engine_answers && finish
        sleep 0.5
    done
    log_tail
    die "dockerd (pid $(cat "$PIDFILE")) runs but $SOCK did not answer within ${WAIT} s"
fi

# Storage driver: the caller's choice, else daemon.json's (a flag would clash
# with it: dockerd refuses a directive given both ways), else overlay2.
driver=${BUILDER_DOCKER_STORAGE_DRIVER:-}
if [ -z "$driver" ] && [ -f "$DAEMON_JSON" ] && grep -q '"storage-driver"' "$DAEMON_JSON"; then
    say "storage driver from $DAEMON_JSON"
elif [ -z "$driver" ]; then
    driver=overlay2
fi

rc=0
start_dockerd "$driver" || rc=$?
if [ "$rc" = 1 ] && [ "$driver" = overlay2 ] && [ -z "${BUILDER_DOCKER_STORAGE_DRIVER:-}" ]; then
    log_tail
    say "WARNING: dockerd did not start with overlay2 (log above); falling back to the vfs storage driver (slow, uses much more disk)"
    rc=0
    start_dockerd vfs || rc=$?
fi
case "$rc" in
0) ;;
1)
    log_tail
    die "dockerd exited before answering on $SOCK (see $DOCKERD_LOG)"
    ;;
*)
    log_tail
    die "dockerd did not answer on $SOCK within ${WAIT} s (it is left running; see $DOCKERD_LOG)"
    ;;
esac

actual=$(engine_summary)
case "$actual" in
*"storage driver ${driver:-}"*) ;;
*) say "WARNING: asked for storage driver '${driver:-from daemon.json}', engine reports: $actual" ;;
esac
finish
