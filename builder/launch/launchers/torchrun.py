"""torchrun: every node runs the same command, c10d rendezvous on the master (or
static rendezvous with explicit node ranks)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from builder.launch.launchers.base import FromShell, LaunchContext, Launcher, LauncherCommand
from builder.launch.logs import NodeFailure, RankLog, tail

if TYPE_CHECKING:
    from pathlib import Path

    from builder.spec.records import LaunchSpec

TORCHRUN_C10D_PORT = 29400


# torchrun's error summary: "Root Cause (first observed failure): ... host : node2
# ... rank : 2 (local_rank: 0) ... exitcode : 3"
ROOT_CAUSE = re.compile(
    r"Root Cause.*?host\s*:\s*(\S+)\s+rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)"
    r".*?exitcode\s*:\s*(-?\d+)",
    re.S,
)


def rank_lines(logs: str) -> str:
    """A torchrun node's log tail without the agent's own traceback, which would
    push the ranks' output (and their tracebacks) out of view."""
    lines = logs.splitlines()
    for start, line in enumerate(lines):
        if line.startswith("Traceback") and "bin/torchrun" in "".join(lines[start + 1 : start + 2]):
            end = next(
                (i for i in range(start, len(lines)) if lines[i].startswith("torch.distributed")),
                start,
            )
            lines[start : end + 1] = []
            break
    return tail("\n".join(lines), 25)


NODE_TIMEOUT = 6
"""Seconds without a heartbeat before an elastic rendezvous gives a node up (torch: 15)."""
LAST_CALL = 3
"""Seconds an elastic rendezvous waits for more nodes once enough have joined (torch: 30)."""
KEEP_ALIVE_ATTEMPTS = 3
"""Missed heartbeats before a node is given up: torch's own count, at a shorter interval."""


def rendezvous_conf(launch: LaunchSpec) -> list[tuple[str, int]]:
    """torchrun's --rdzv-conf for the c10d rendezvous (torch 2.13's dynamic_rendezvous
    reads join_timeout, last_call_timeout, keep_alive_interval, keep_alive_max_attempt).

    An elastic run (launch.min_nodes) regroups without a lost node once the rendezvous
    has given its heartbeat up (keep_alive_interval x keep_alive_max_attempt) and its
    last call has passed: with torch's defaults (5 s x 3, then 30 s) that is about 45 s
    of every surviving rank idle; with builder's (2 s x 3, then 3 s) about 10 s."""
    conf = []
    if launch.rendezvous_timeout is not None:
        conf.append(("join_timeout", launch.rendezvous_timeout))
    if launch.min_nodes is not None:
        node_timeout = launch.node_timeout or NODE_TIMEOUT
        conf += [
            ("last_call_timeout", launch.last_call or LAST_CALL),
            ("keep_alive_interval", max(1, node_timeout // KEEP_ALIVE_ATTEMPTS)),
            ("keep_alive_max_attempt", KEEP_ALIVE_ATTEMPTS),
        ]
    return conf


def torchrun_argv(
    launch: LaunchSpec,
    *,
    nnodes: int | str,
    master_addr: str,
    rdzv_id: str,
    node_rank: int | None = None,
    endpoint: str | None = None,
) -> list[str]:
    """`torchrun`: c10d rendezvous (the same command on every node) or, with
    node_rank, static rendezvous with explicit ranks. ``endpoint`` replaces
    MASTER:PORT (a batch script's "$MASTER_ADDR:$MASTER_PORT")."""
    # a str stays itself (str() would drop FromShell, a value the batch shell expands)
    count = nnodes if isinstance(nnodes, str) else str(nnodes)
    if launch.min_nodes is not None:  # elastic: MIN:MAX, MAX the batch shell's own where it is
        elastic = f"{launch.min_nodes}:{count}"
        count = FromShell(elastic) if isinstance(count, FromShell) else elastic
    argv = ["torchrun", "--nnodes", count, "--nproc-per-node", str(launch.slots)]
    if launch.restarts:
        argv += ["--max-restarts", str(launch.restarts)]
    if node_rank is None:
        host = f"[{master_addr}]" if ":" in master_addr else master_addr  # IPv6: [addr]
        rendezvous = endpoint or f"{host}:{launch.master_port}"
        argv += ["--rdzv-backend", "c10d", "--rdzv-endpoint", rendezvous, "--rdzv-id", rdzv_id]
        if conf := rendezvous_conf(launch):
            argv += ["--rdzv-conf", ",".join(f"{key}={value}" for key, value in conf)]
    else:
        argv += ["--node-rank", str(node_rank), "--master-addr", master_addr]
        argv += ["--master-port", str(launch.master_port)]
    return [*argv, launch.script, *launch.args]


TORCHRUN_OPTIONS = (
    "--duplicate-stderr-filters",
    "--duplicate-stdout-filters",
    "--duplicate_stderr_filters",
    "--duplicate_stdout_filters",
    "--event-log-handler",
    "--event_log_handler",
    "--help",
    "--local-addr",
    "--local-ranks-filter",
    "--local_addr",
    "--local_ranks_filter",
    "--log-dir",
    "--log_dir",
    "--logs-specs",
    "--logs_specs",
    "--master-addr",
    "--master-port",
    "--master_addr",
    "--master_port",
    "--max-restarts",
    "--max_restarts",
    "--module",
    "--monitor-interval",
    "--monitor_interval",
    "--nnodes",
    "--no-python",
    "--no_python",
    "--node-rank",
    "--node_rank",
    "--nproc-per-node",
    "--nproc_per_node",
    "--numa-binding",
    "--numa_binding",
    "--rdzv-backend",
    "--rdzv-conf",
    "--rdzv-endpoint",
    "--rdzv-id",
    "--rdzv_backend",
    "--rdzv_conf",
    "--rdzv_endpoint",
    "--rdzv_id",
    "--redirects",
    "--role",
    "--run-path",
    "--run_path",
    "--shutdown-timeout",
    "--shutdown_timeout",
    "--signals-to-handle",
    "--signals_to_handle",
    "--standalone",
    "--start-method",
    "--start_method",
    "--tee",
    "--virtual-local-rank",
    "--virtual_local_rank",
)
"""torch.distributed.run's long options (torch 2.13), which read the script's arguments."""


LOGGED = (
    'node=$(hostname); export TORCHELASTIC_ERROR_FILE="$0/error-$node.json"; '
    'rm -f "$TORCHELASTIC_ERROR_FILE"; '
    'export TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE="[rank\\${rank}]:"; '
    'exec torchrun --log-dir "$0/ranks-$node" --tee 3 "$@"'
)
"""What each node runs where the run has a logs folder ($0: launch.logs, or a batch
job's folder): torchrun with its ranks' logs (ranks-NODE/RUN/attempt_N/LOCAL_RANK/) and
its error file (error-NODE.json, none left from a run before), one of each per node;
the console's lines start with their global rank ([rank3]:)."""


RESTART_WORKAROUND = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
"""With restarts across nodes, torch's c10d rendezvous shares its TCP store with the
ranks, and a restart reads the stale peer addresses of the attempt before: every restart
dies in init_process_group ("Gloo connectFullMesh failed ... Connection refused";
pytorch/pytorch#135712, seen with torch 2.13 in builder's rehearsal). Turning the
sharing off makes the restart work; launch.env can set it back to 0 once the image's
torch has the fix."""


class Torchrun(Launcher):
    name = "torchrun"
    commands = ("torchrun",)
    batch = True
    elastic = True
    uneven = True  # each node's own --nproc-per-node; c10d sums the world
    rank_log = "--log-dir LOGS/ranks-NODE, --tee 3, TORCHELASTIC_ERROR_FILE LOGS/error-NODE.json"
    batch_task = "running the same torchrun (c10d rendezvous on the first node)"
    script_arg_parsers = (TORCHRUN_OPTIONS,)

    def command(self, context: LaunchContext) -> LauncherCommand:
        argv = torchrun_argv(
            context.spec.launch,
            nnodes=context.node_count,
            master_addr=context.master,
            rdzv_id=context.rdzv_id,
            endpoint=context.rendezvous,
        )
        if context.logs:
            # each node's torchrun: its ranks' own logs (and the console's, --tee) under the
            # job's logs folder, and its error summary (the first failing rank, its
            # traceback where the script uses @record) in error-NODE.json beside them
            return LauncherCommand(("sh", "-c", LOGGED, context.logs, *argv[1:]))
        return LauncherCommand(tuple(argv))

    def run_env(self, launch: LaunchSpec) -> dict[str, str]:
        return dict(RESTART_WORKAROUND) if launch.restarts else {}

    def failures(self, output: str) -> list[NodeFailure]:
        """The rank torchrun's error summary names as the root cause (first failure)."""
        cause = ROOT_CAUSE.search(output)
        if cause is None and "RendezvousTimeoutError" in output:
            what = (
                "torchrun gave up waiting for the other nodes to join the rendezvous "
                "(launch.rendezvous_timeout; torch's default 600 s)"
            )
            return [NodeFailure("", what, rank_lines(output))]  # this node's own
        if cause is None:
            return []
        host, rank, local, code = cause.groups()
        what = f"rank {rank} exited with code {code} (torchrun's root cause)"
        return [NodeFailure(host, what, rank_lines(output), int(local))]

    def node_log(self, output: str, node: str) -> str:  # noqa: ARG002 - one node's log
        return rank_lines(output)

    def rank_logs(self, logs: Path) -> list[RankLog]:
        """Every rank's logs of every attempt: LOGS/ranks-NODE/RUN/attempt_N/LOCAL_RANK/
        (``LOGGED``; torchrun's --log-dir layout)."""
        found = []
        for folder in logs.glob("ranks-*/*/attempt_*/*"):
            attempt, node = folder.parent.name, folder.parent.parent.parent.name
            if folder.name.isdigit() and attempt.removeprefix("attempt_").isdigit():
                number = int(attempt.removeprefix("attempt_"))
                found.append(RankLog(node.removeprefix("ranks-"), number, int(folder.name), folder))
        return sorted(found, key=lambda log: (log.node, log.attempt, log.local_rank))


LAUNCHER = Torchrun()
