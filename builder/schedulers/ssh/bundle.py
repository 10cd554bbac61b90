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
import re
import shlex
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from builder.cluster.dsenv import dsenv_for
from builder.cluster.folder import RECORD
from builder.cluster.hostfile import hostfile_text, run_hosts
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
from builder.launch.actions import ContainerRemove
from builder.launch.plan import LaunchPlan, NodeStep, launch_plan
from builder.launch.secrets import secret_files
from builder.output import OutputFile
from builder.schedulers.base import build_step, image_words, rsync_to, ship_command

if TYPE_CHECKING:
    from builder.cluster.folder import RunFolder
    from builder.resolved import Resolved
    from builder.spec.records import Spec


LAUNCH_SH = "launch.sh"
PLAN = "plan.json"


def bundle_files(
    resolved: Resolved, *, image: str, folder: RunFolder, force: bool, spec_ref: str
) -> list[OutputFile]:
    """The bundle's files (``Scheduler.materialize``): the plan and README name the folder
    where the nodes see it; an existing key (read here) is kept unless force (a new one
    would lock out running nodes)."""
    spec = resolved.spec
    cluster_dir, directory = folder.here, folder.nodes
    plan = launch_plan(resolved, image=image, cluster_dir=directory)
    hosts = run_hosts(spec.launch)
    port = spec.image.ssh.port
    needed = needed_files(spec)
    files = [
        OutputFile(HOSTFILE, 0o644, hostfile_text(hosts)),
        OutputFile(DSENV, 0o644, dsenv_for(resolved, {}, None)),
        OutputFile(LAUNCH_SH, 0o755, launch_script(plan, directory, needed, at=LAUNCH_SH)),
        OutputFile(PLAN, 0o644, json.dumps(plan.as_data(), indent=2) + "\n"),
        OutputFile("README.md", 0o644, _readme(resolved, image, plan, folder, spec_ref)),
        OutputFile(NODE_SSH_CONFIG, 0o644, node_ssh_config([h.name for h in hosts], port)),
        OutputFile(SSH_CONFIG, 0o600, host_ssh_config(cluster_dir, port)),
        *kept_or_new(cluster_dir, comment=f"builder-{spec.name}", force=force),
    ]
    return files + secret_files(spec)  # 0600; none when launch.env holds no secret


def needed_files(spec: Spec) -> list[str]:
    """The bundle's files launch.sh checks for on each node before anything starts."""
    return [HOSTFILE, DSENV, AUTHORIZED, HOST_PRIVATE, *(f.path for f in secret_files(spec))]


def launch_script(
    plan: LaunchPlan, directory: str, needed: list[str], *, at: str | None = None
) -> str:
    """A script to run on each node: `sh launch.sh NODE`; `sh launch.sh launch` starts the run.

    at: the script's path inside directory (the bundle's ``launch.sh``): it finds the
    folder from its own location, so the bundle may be copied or moved to the nodes
    (every path of the folder in the plan's commands becomes ``$cluster``); None: the
    folder is where it is now (a rehearsal's or a probe's script, run in place).

    It first checks that the bundle is where the commands expect it: `docker run
    -v` would make an empty folder in its place, and DeepSpeed without its
    hostfile quietly runs on one node. A launcher or run with a stop action runs
    in the background while launch.sh waits: Ctrl-C, SIGTERM or SIGHUP run the
    stop (which reaches every node), and launch.sh ends when the launcher has.
    """
    words = _Words(directory if at is not None else None)
    starts: dict[str, list[NodeStep]] = {}
    for step in plan.steps:
        if step.role != "launch":
            starts.setdefault(step.node, []).append(step)
    launchers = plan.of_role("launch")  # deepspeed, mpirun: on the first node, once all are up
    stops = list(dict.fromkeys(step.stop_argv for step in plan.steps if step.stop_argv))
    removes = list(dict.fromkeys(step.remove_argv for step in plan.steps if step.remove_argv))
    names = " | ".join(
        [
            *starts,
            *(["launch"] if launchers else []),
            *(["stop"] if stops else []),
            *(["down"] if removes else []),
        ]
    )
    missing = (
        "copy the whole bundle folder to every node"
        if at is not None
        else "copy the bundle folder to every node at that path"
    )
    lines = [
        "#!/bin/sh",
        "# Run on each node with its name; then, once every node is up, the launcher.",
        f"# usage: sh launch.sh {{{names}}}   (written by builder; plan.json has the argv)",
        "set -eu",
        *_folder_lines(directory, at),
        f"for file in {' '.join(needed)}; do",
        '    if [ ! -f "$cluster/$file" ]; then',
        f'        echo "launch.sh: $cluster/$file is missing on this node; {missing}" >&2',
        "        exit 1",
        "    fi",
        "done",
        *_host_checks(plan.host_paths, words),
        *_stop_functions(stops, words),
        *_remove_functions(removes),
        'case "${1:-}" in',
    ]
    check = ["    check_node"] if plan.host_paths else []
    for node, node_steps in starts.items():
        lines.append(f"{shlex.quote(node)})")
        lines += check + [line for step in node_steps for line in _left(step)]
        lines += [line for step in node_steps for line in _run(step, stops, words)]
        lines.append("    ;;")
    if launchers:
        lines.append(f"launch)  # on {launchers[0].node}, after every node's container is up")
        lines += check + [line for step in launchers for line in _left(step)]
        lines += [line for step in launchers for line in _run(step, stops, words)]
        lines.append("    ;;")
    if stops:
        lines.append("stop)  # what Ctrl-C in launch.sh runs: the run's processes on every node")
        lines += [f"    {_stop_name(stops, argv)}" for argv in stops]
        lines.append("    ;;")
    if removes:
        lines.append("down)  # on every node: the run stopped and its containers removed")
        lines += [f"    {_stop_name(stops, argv)} || true" for argv in stops]
        lines += [f"    remove {shlex.join(argv)}" for argv in removes]
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


def _folder_lines(directory: str, at: str | None) -> list[str]:
    """Where the cluster folder is: the script's own folder (up as many levels as at is
    deep), checked as the binds need it; or the absolute path it was written at."""
    if at is None:
        return [f"cluster={shlex.quote(directory)}"]
    up = "/.." * (len(PurePosixPath(at).parts) - 1)
    return [
        f'cluster=$(CDPATH="" cd -- "$(dirname -- "$0"){up}" && pwd -P)',
        "case $cluster in",
        "    *[:,]*)",
        "        echo \"launch.sh: the bundle folder $cluster holds ':' or ',', which"
        " docker run -v and apptainer --bind split binds at; move it to a path without"
        ' them" >&2',
        "        exit 1",
        "        ;;",
        "esac",
    ]


class _Words:
    """How the script writes a command's words: shell-quoted, with the cluster folder's
    path (a whole word, or a word's part up to a '/' or ':') as ``${cluster}`` when the
    script finds the folder itself."""

    def __init__(self, directory: str | None) -> None:
        self.pattern = (
            None
            if directory is None
            else re.compile(r"(?<![^=:])" + re.escape(directory) + r"(?=$|[/:])")
        )

    def word(self, word: str) -> str:
        if self.pattern is None or not self.pattern.search(word):
            return shlex.quote(word)
        parts = self.pattern.split(word)
        return '"' + "${cluster}".join(_in_double_quotes(part) for part in parts) + '"'

    def join(self, argv: tuple[str, ...]) -> str:
        return " ".join(self.word(word) for word in argv)


def _in_double_quotes(text: str) -> str:
    return re.sub(r'([\\"$`])', r"\\\1", text)


def _stop_name(stops: list[tuple[str, ...]], argv: tuple[str, ...]) -> str:
    return "stop_run" if len(stops) == 1 else f"stop_run_{stops.index(argv) + 1}"


def _stop_functions(stops: list[tuple[str, ...]], words: _Words) -> list[str]:
    """One function per stop action, and `supervise`: run a command in the background
    (a non-interactive shell's background job ignores SIGINT: the command goes on until
    the stop ends it), wait until it has ended, and end with its exit code."""
    if not stops:
        return []
    lines = []
    for argv in stops:
        lines += [f"{_stop_name(stops, argv)}() {{", f"    {words.join(argv)}", "}"]
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


def _remove_functions(removes: list[tuple[str, ...]]) -> list[str]:
    """`remove ARGV...`: run a removal, for which a container that is not on this node
    (another node's, or gone already) is no error; any other failure is."""
    if not removes:
        return []
    return [
        "remove() {",
        '    if out=$("$@" 2>&1); then',
        '        echo "launch.sh: removed $out on $(hostname)"',
        "    else",
        "        case $out in",
        '            *"No such container"*) ;;',
        '            *) echo "$out" >&2; return 1 ;;',
        "        esac",
        "    fi",
        "}",
    ]


def _left(step: NodeStep) -> list[str]:
    """Lines that stop launch.sh where an earlier run left the container this step
    starts (docker run would refuse the name): `sh launch.sh down` removes it."""
    if not isinstance(step.remove, ContainerRemove):
        return []
    name = shlex.quote(step.remove.name)
    return [
        f"    if docker container inspect {name} >/dev/null 2>&1; then",
        f'        echo "launch.sh: container {_in_double_quotes(name)} is already on $(hostname),'
        ' left by an earlier run: sh launch.sh down removes it (on every node)" >&2',
        "        exit 1",
        "    fi",
    ]


def _run(step: NodeStep, stops: list[tuple[str, ...]], words: _Words) -> list[str]:
    """The lines that run step: supervised, with its stop on interrupt, when it has one."""
    if step.stop_argv is None:
        return [f"    {words.join(step.argv)}"]
    stop = _stop_name(stops, step.stop_argv)
    return [f"    supervise {stop} {words.join(step.argv)}"]


def _host_checks(paths: tuple[str, ...], words: _Words) -> list[str]:
    """Lines that stop launch.sh on a node that lacks the code, the cache, a mount or the
    script, naming the node: a container would start on an empty folder instead."""
    if not paths:
        return []
    return [
        "check_node() {",
        f"    for path in {words.join(paths)}; do",
        '        if [ ! -e "$path" ]; then',
        '            echo "launch.sh: $path is missing on $(hostname); the code and cache'
        ' folders, mounts, script and SIF must be on every node at the same path" >&2',
        "            exit 1",
        "        fi",
        "    done",
        "}",
    ]


def _readme(
    resolved: Resolved, image: str, plan: LaunchPlan, run_folder: RunFolder, spec_ref: str
) -> str:
    spec, run = resolved.spec, resolved.runtime
    nodes = ", ".join(spec.launch.nodes)
    first = plan.nodes[0]
    folder = run_folder.here.name or "cluster"
    there = shlex.quote(run_folder.nodes)  # where the nodes see it
    local = str(run_folder.here.resolve())  # this machine's, where these commands run
    here = shlex.quote(local)
    again = f" --node-dir {there}" if run_folder.named else ""
    ref, slots = spec_ref, spec.launch.slots
    shipped = ship_command(resolved, spec_ref=ref, image=image)
    if shipped and run.pulls:
        ship = (
            f"   `{shipped}` (to its registry, which every node pulls from; it records the "
            f"digest), or `builder ship {ref}{image_words(resolved, image)}` (docker save "
            "here, docker load on each node over ssh: no registry)."
        )
    elif shipped:
        ship = f"   `{shipped}` (the file every node reads)."
    elif run.pulls and run.runs_image:
        ship = "   every node pulls it by that digest."
    else:
        ship = f"   {run.name}: {run.not_shipped}."
    if plan.of_role("launch"):
        start = (
            f"   on each node `sh launch.sh NODE` ({nodes}) starts its container; then, on "
            f"{first}, `sh launch.sh launch` starts the run."
        )
    else:
        start = f"   on each node ({nodes}) `sh launch.sh NODE` starts its part of the run."
    down = (
        "\n6. Take it down: `sh launch.sh down` on every node stops the run and removes its "
        "containers\n   (nothing else); run it before starting the run again, whose "
        "containers have the same names."
        if any(step.remove is not None for step in plan.steps)
        else ""
    )
    return f"""# Cluster bundle: {spec.name}

Image `{image}`, {plan.launcher} on {plan.runtime}, nodes {nodes} with {slots} slot(s) each.

## From here to the run

1. {build_step(resolved, spec_ref=ref, image=image)}
2. Put it where the nodes run it:
{ship}
3. Copy this folder to every node at {there}, the path plan.json names (or keep it
   there on shared storage), e.g. `{rsync_to(local, first, run_folder.nodes)}`; launch.sh
   finds the folder from its own location.
4. Prove the nodes before the run (GPUs, links, all-reduce, stragglers):
   `builder preflight {ref} --cluster-dir {here}` (it writes its probe here and
   runs it from {there} on the nodes).
5. Run it:
{start}
   Ctrl-C on that launch.sh (or `sh launch.sh stop` on {first}) stops every rank on
   every node.{down}

`builder bundle {ref} --cluster-dir {here}{again}` writes this folder again (after a change
to the stack) and keeps its keys; files you changed by hand are refused, not replaced.

## What is in it

- `id_ed25519`, `id_ed25519.pub`, `authorized_keys`: this cluster's login key
  pair; `ssh_host_ed25519_key`, `.pub`: the host key every node's sshd shows,
  pinned by `ssh_known_hosts`. Both are kept when the bundle is written again;
  keep this folder ({folder}) private (it is 0700 when builder makes it).
  Containers mount it read-only at /etc/builder/cluster.
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
- `{RECORD}`: what builder wrote here, so that a new bundle replaces
  only its own files.
"""
