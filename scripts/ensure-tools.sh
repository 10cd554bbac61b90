#!/usr/bin/env bash
# Install the real tools the test suite runs (OpenSSH's sshd and ssh, ShellCheck,
# Slurm's scontrol, pdsh, OpenMPI's mpirun, tc and nsenter, a registry)
# when they are missing. Debian/Ubuntu, as root; elsewhere it says what to do.
set -euo pipefail

missing=()
command -v ssh >/dev/null || missing+=(openssh-client)
{ command -v sshd >/dev/null || [ -x /usr/sbin/sshd ]; } || missing+=(openssh-server)
command -v shellcheck >/dev/null || missing+=(shellcheck)
command -v scontrol >/dev/null || missing+=(slurm-client)  # Slurm's own node-list expansion
command -v pdsh >/dev/null || missing+=(pdsh)  # what carries .deepspeed_env to the nodes
command -v mpirun >/dev/null || missing+=(openmpi-bin)  # reads our hostfiles and -x values
{ command -v tc >/dev/null || [ -x /usr/sbin/tc ]; } || missing+=(iproute2)  # a node's slow link
{ command -v nsenter >/dev/null || [ -x /usr/bin/nsenter ]; } || missing+=(util-linux)  # its netns
command -v docker-registry >/dev/null || missing+=(docker-registry)  # push and pull by digest

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "missing test tools: ${missing[*]} (install them with your package manager)" >&2
    exit 1
fi
echo "installing test tools: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# policy-rc.d keeps the package from starting a system sshd on port 22; an
# existing one (Debian's container images ship one) is put back afterwards.
policy=/usr/sbin/policy-rc.d
saved=""
if [ -e "$policy" ]; then
    saved=$(mktemp)
    cp -p "$policy" "$saved"
fi
restore() {
    if [ -n "$saved" ]; then mv -f "$saved" "$policy"; else rm -f "$policy"; fi
}
trap restore EXIT
printf '#!/bin/sh\nexit 101\n' > "$policy"
chmod +x "$policy"
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
