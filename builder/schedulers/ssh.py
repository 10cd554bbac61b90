"""The ssh scheduler, `builder bundle`: one folder with everything a run needs, and a
README saying how.

keys (made once, kept on later bundles), the nodes' ssh client config,
hostfile, .deepspeed_env, the launch commands as a script, the plan as JSON.
The folder is what `builder launch` mounts read-only at /etc/builder/cluster
on every node. Everything is prepared first (keys included) and written in one
``write_files`` call: a refusal writes nothing.
"""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING

from builder.cluster.dsenv import dsenv_for
from builder.cluster.hostfile import hostfile_text, hosts_from_nodes
from builder.cluster.keys import (
    AUTHORIZED,
    HOST_PRIVATE,
    NODE_SSH_CONFIG,
    SSH_CONFIG,
    host_ssh_config,
    kept_or_new,
    node_ssh_config,
)
from builder.contract import DSENV, HOSTFILE
from builder.launch.plan import LaunchPlan, NodeStep, launch_plan
from builder.launch.secrets import secret_files
from builder.output import OutputFile, check_private, write_files
from builder.schedulers.base import Scheduler

if TYPE_CHECKING:
    from pathlib import Path

    from builder.resolved import Resolved
    from builder.spec.records import Spec


class Ssh(Scheduler):
    """Nodes reached over ssh (or by hand): launch.sh runs each node's part."""

    name = "ssh"
    started = "on each node `sh launch.sh NODE`; then, for deepspeed, `sh launch.sh launch`"
    stopped = "Ctrl-C on the launcher's launch.sh, or `sh launch.sh stop` on its node"

    def materialize(
        self, resolved: Resolved, *, image: str, cluster_dir: Path, force: bool = False
    ) -> list[OutputFile]:
        """The bundle's files; an existing key is kept unless force (a new one would lock
        out running nodes)."""
        spec = resolved.spec
        directory = str(cluster_dir.resolve())
        plan = launch_plan(resolved, image=image, cluster_dir=directory)
        hosts = hosts_from_nodes(spec.launch.nodes, spec.launch.slots)
        port = spec.image.ssh.port
        files = [
            OutputFile(HOSTFILE, 0o644, hostfile_text(hosts)),
            OutputFile(DSENV, 0o644, dsenv_for(resolved, {}, None)),
            OutputFile("launch.sh", 0o755, launch_script(plan, directory, needed_files(spec))),
            OutputFile("plan.json", 0o644, json.dumps(plan.as_data(), indent=2) + "\n"),
            OutputFile("README.md", 0o644, _readme(spec, image, plan.launcher, plan.runtime)),
            OutputFile(NODE_SSH_CONFIG, 0o644, node_ssh_config([h.name for h in hosts], port)),
            OutputFile(SSH_CONFIG, 0o600, host_ssh_config(cluster_dir, port)),
            *kept_or_new(cluster_dir, comment=f"builder-{spec.name}", force=force),
        ]
        return files + secret_files(spec)  # 0600; none when launch.env holds no secret


SCHEDULER = Ssh()


def write_bundle(resolved: Resolved, directory: Path, *, image: str, force: bool) -> list[Path]:
    """Write the bundle. Everything is prepared first (keys included) and written in one
    call: a refusal writes nothing.

    A folder made here is 0700; an existing one keeps its mode and owner, and is
    refused if other users may enter it (it holds the cluster's private keys).
    """
    check_private(directory)
    files = SCHEDULER.materialize(resolved, image=image, cluster_dir=directory, force=force)
    return write_files(files, directory, force=force, private=True)


def needed_files(spec: Spec) -> list[str]:
    """The bundle's files launch.sh checks for on each node before anything starts."""
    return [HOSTFILE, DSENV, AUTHORIZED, HOST_PRIVATE, *(f.path for f in secret_files(spec))]


def launch_script(plan: LaunchPlan, directory: str, needed: list[str]) -> str:
    """A script to run on each node: `sh launch.sh NODE`; `sh launch.sh launch` starts the run.

    It first checks that the bundle is where the commands expect it: `docker run
    -v` would make an empty folder in its place, and DeepSpeed without its
    hostfile quietly runs on one node. A launcher or run with a stop action runs
    in the background while launch.sh waits: Ctrl-C, SIGTERM or SIGHUP run the
    stop (which reaches every node), and launch.sh ends when the launcher has.
    """
    starts: dict[str, list[NodeStep]] = {}
    for step in plan.steps:
        if step.role != "launch":
            starts.setdefault(step.node, []).append(step)
    launchers = plan.of_role("launch")  # deepspeed, mpirun: on the first node, once all are up
    stops = list(dict.fromkeys(step.stop_argv for step in plan.steps if step.stop_argv))
    names = " | ".join([*starts, *(["launch"] if launchers else []), *(["stop"] if stops else [])])
    lines = [
        "#!/bin/sh",
        "# Run on each node with its name; then, once every node is up, the launcher.",
        f"# usage: sh launch.sh {{{names}}}   (written by builder; plan.json has the argv)",
        "set -eu",
        f"cluster={shlex.quote(directory)}",
        f"for file in {' '.join(needed)}; do",
        '    if [ ! -f "$cluster/$file" ]; then',
        '        echo "launch.sh: $cluster/$file is missing on this node; copy the bundle'
        ' folder to every node at that path" >&2',
        "        exit 1",
        "    fi",
        "done",
        *_host_checks(plan.host_paths),
        *_stop_functions(stops),
        'case "${1:-}" in',
    ]
    check = ["    check_node"] if plan.host_paths else []
    for node, node_steps in starts.items():
        lines.append(f"{shlex.quote(node)})")
        lines += check + [line for step in node_steps for line in _run(step, stops)]
        lines.append("    ;;")
    if launchers:
        lines.append(f"launch)  # on {launchers[0].node}, after every node's container is up")
        lines += check + [line for step in launchers for line in _run(step, stops)]
        lines.append("    ;;")
    if stops:
        lines.append("stop)  # what Ctrl-C in launch.sh runs: the run's processes on every node")
        lines += [f"    {_stop_name(stops, argv)}" for argv in stops]
        lines.append("    ;;")
    lines += [
        "*)",
        f'    echo "usage: sh launch.sh {{{names}}}" >&2',
        "    exit 2",
        "    ;;",
        "esac",
        "",
    ]
    return "\n".join(lines)


def _stop_name(stops: list[tuple[str, ...]], argv: tuple[str, ...]) -> str:
    return "stop_run" if len(stops) == 1 else f"stop_run_{stops.index(argv) + 1}"


def _stop_functions(stops: list[tuple[str, ...]]) -> list[str]:
    """One function per stop action, and `supervise`: run a command in the background
    (a non-interactive shell's background job ignores SIGINT: the command goes on until
    the stop ends it), wait until it has ended, and end with its exit code."""
    if not stops:
        return []
    lines = []
    for argv in stops:
        lines += [f"{_stop_name(stops, argv)}() {{", f"    {shlex.join(argv)}", "}"]
    return [
        *lines,
        # the first signal runs the stop (and waits for it); a second gives up waiting
        "interrupted() {",
        '    if [ -n "${stopping:-}" ]; then',
        '        echo "launch.sh: interrupted again: not waiting for the run to end" >&2',
        '        kill "$child" 2>/dev/null || true',
        "        exit 130",
        "    fi",
        "    stopping=1",
        '    echo "launch.sh: stopping the run ($1)" >&2',
        '    "$1" || echo "launch.sh: the stop failed; run sh launch.sh stop again" >&2',
        "}",
        "supervise() {",
        "    stop=$1",
        "    shift",
        "    trap 'interrupted \"$stop\"' INT TERM HUP",
        '    "$@" &',
        "    child=$!",
        "    status=0",
        '    wait "$child" || status=$?',
        "    # a signal ends wait early: wait again until the command itself has ended",
        '    while [ "$status" -gt 128 ] && kill -0 "$child" 2>/dev/null; do',
        "        status=0",
        '        wait "$child" || status=$?',
        "    done",
        '    exit "$status"',
        "}",
    ]


def _run(step: NodeStep, stops: list[tuple[str, ...]]) -> list[str]:
    """The lines that run step: supervised, with its stop on interrupt, when it has one."""
    if step.stop_argv is None:
        return [f"    {shlex.join(step.argv)}"]
    stop = _stop_name(stops, step.stop_argv)
    return [f"    supervise {stop} {shlex.join(step.argv)}"]


def _host_checks(paths: tuple[str, ...]) -> list[str]:
    """Lines that stop launch.sh on a node that lacks the code, the cache, a mount or the
    script, naming the node: a container would start on an empty folder instead."""
    if not paths:
        return []
    return [
        "check_node() {",
        f"    for path in {' '.join(shlex.quote(path) for path in paths)}; do",
        '        if [ ! -e "$path" ]; then',
        '            echo "launch.sh: $path is missing on $(hostname); the code and cache'
        ' folders, mounts, script and SIF must be on every node at the same path" >&2',
        "            exit 1",
        "        fi",
        "    done",
        "}",
    ]


def _readme(spec: Spec, image: str, launcher: str, runtime: str) -> str:
    nodes = ", ".join(spec.launch.nodes)
    return f"""# Cluster bundle: {spec.name}

Image `{image}`, {launcher} on {runtime}, nodes {nodes} with {spec.launch.slots} slot(s) each.

- `id_ed25519`, `id_ed25519.pub`, `authorized_keys`: this cluster's login key
  pair; `ssh_host_ed25519_key`, `.pub`: the host key every node's sshd shows,
  pinned by `ssh_known_hosts`. Both are kept when the bundle is written again;
  keep this folder private (it is 0700 when builder makes it). Copy it to
  every node, at the same path; containers mount it read-only at
  /etc/builder/cluster.
- `node_ssh_config`: how the containers reach each other: only the nodes
  {nodes}, each of which must show the cluster host key (the entrypoint
  installs it with `ssh_known_hosts` under /etc/ssh).
- `ssh_config`: `ssh -F ssh_config NODE` reaches a node's container, checking
  the cluster host key.
- `hostfile`: `host slots=N` lines in node-rank order (DeepSpeed, mpirun).
- `.deepspeed_env`: what DeepSpeed's pdsh launcher exports on every node.
- `secrets.env`, `secrets.sh` (only when `launch.env` holds secrets, 0600):
  the secret variables, read by `docker run --env-file` and `apptainer exec
  --env-file` (or sourced on bare nodes); their values appear nowhere else.
- `launch.sh`: on each node `sh launch.sh NODE` starts what that node runs;
  for deepspeed, `sh launch.sh launch` on the first node then starts the run
  (`plan.json` holds the same commands as argv lists, for scripts). It first
  checks that the bundle, the code and cache folders (`launch.code`,
  `launch.cache`), the mounts and the script are on the node. Ctrl-C on the
  launcher's launch.sh (or `sh launch.sh stop` on its node) stops every rank
  on every node; for torchrun, Ctrl-C on the first node's does (the others
  end with its rendezvous).
"""
