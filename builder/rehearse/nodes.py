"""The rehearsal's nodes: containers started with the commands `builder launch` emits.

The plan's argv lists are run with the docker CLI, as a user would type them;
only what a laptop lacks is changed, in one visible place (``adapt_run``):
host networking becomes a private network on which each container has its
node's hostname, the accelerator's device flags become the CPU's, and every
container gets a unique name and the rehearsal's label (for teardown).
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.errors import ToolMissing
from builder.recipe import LABEL_PREFIX
from builder.spec import Accelerator
from builder.stacks import DOCKER_RUN_FLAGS

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from builder.spec import Spec

LABEL = f"{LABEL_PREFIX}.rehearsal"


@dataclass(frozen=True)
class Node:
    """One rehearsal node: its hostname in the plan and its container's name."""

    name: str
    container: str


def docker_cli() -> str:
    found = shutil.which("docker")
    if found is None:
        raise ToolMissing(
            "the docker command is not installed; the rehearsal runs the emitted `docker run` "
            "commands with it (package docker.io or docker-ce-cli)"
        )
    return found


def _replace(argv: list[str], old: Sequence[str], new: Sequence[str]) -> list[str]:
    """argv with the first run of old replaced by new (old must be there)."""
    size = len(old)
    for start in range(len(argv) - size + 1):
        if argv[start : start + size] == list(old):
            return [*argv[:start], *new, *argv[start + size :]]
    raise AssertionError(f"{list(old)} not in the emitted command {argv}")


def adapt_run(
    argv: Sequence[str], spec: Spec, node: Node, network: str, rehearsal: str
) -> list[str]:
    """The plan's `docker run` for node, as the rehearsal runs it on one machine."""
    adapted = list(argv)
    adapted = _replace(adapted, ["--name", f"builder-{spec.name}"], ["--name", node.container])
    adapted = _replace(
        adapted,
        ["--network", "host"],
        ["--network", network, "--hostname", node.name, "--network-alias", node.name],
    )
    accelerator = spec.image.accelerator
    if accelerator is not Accelerator.cpu:
        adapted = _replace(
            adapted, DOCKER_RUN_FLAGS[accelerator], DOCKER_RUN_FLAGS[Accelerator.cpu]
        )
    return _replace(
        adapted, ["docker", "run"], ["docker", "run", "--label", f"{LABEL}={rehearsal}"]
    )


def adapt_exec(argv: Sequence[str], spec: Spec, node: Node) -> list[str]:
    """The plan's `docker exec` (the launcher) in node's container."""
    return _replace(list(argv), [f"builder-{spec.name}"], [node.container])


def run_docker(
    argv: Sequence[str], timeout: float, on_line: Callable[[str], None] | None = None
) -> tuple[int | None, str]:
    """Run a `docker ...` argv with the CLI, each output line (stdout and stderr) to
    on_line as it comes: (exit code, or None when it ran past timeout and was killed;
    the output)."""
    lines: list[str] = []
    with subprocess.Popen(
        [docker_cli(), *argv[1:]],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    ) as process:

        def pump() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                lines.append(line)
                if on_line is not None:
                    on_line(line.rstrip("\n"))

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            code: int | None = process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            code = None
        reader.join(5)
    return code, "".join(lines)
