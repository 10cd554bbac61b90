"""`builder rehearse`: the multi-node run, on this machine, in real containers."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from builder import (
    MAX_REHEARSAL_NODES,
    connect,
    kill_of,
    parse_assignments,
    rank_table,
    rehearsal_launchers,
    why_not_rehearsed,
)
from builder import rehearse_stack as run_rehearsal
from builder.cli.app import app
from builder.cli.envelope import JsonOpt, set_result

# typer resolves the annotations at run time, so these stay real imports
from builder.cli.options import (
    Bounded,
    Choice,
    ImageOpt,
    PresetOpt,
    SetOpt,
    SpecArg,
    choice,
    image_option,
    input_file,
    stack_of,
    text_option,
)
from builder.errors import RehearsalFailed, UsageError

MAX_TIMEOUT = 7 * 24 * 3600
"""A week: the longest rehearsal of a user's script that --timeout allows."""


@app.command()
def rehearse(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    image: ImageOpt = None,
    nodes: Annotated[int, typer.Option("--nodes", "-n", help="How many nodes (containers).")] = 2,
    launcher: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            "--launcher",
            **Choice(rehearsal_launchers(), why=why_not_rehearsed).option,
            help="Launcher to rehearse (default: the spec's).",
        ),
    ] = None,
    script: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            "--script",
            help="Run this script instead of the probe job: a file here (copied into the "
            "nodes' shared code folder, as launch.code on a cluster) or the absolute path "
            "of one in the image. Its arguments go after --.",
        ),
    ] = None,
    args: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Argument(
            metavar="[-- ARGS...]", help="After --: the script's arguments.", show_default=False
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            **Bounded(0, MAX_TIMEOUT, low_open=True).option,
            help="Seconds the job may take before it counts as hung.",
        ),
    ] = 300.0,
    keep: Annotated[
        bool, typer.Option("--keep", help="Leave the containers, network and bundle up.")
    ] = False,
    kill: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            "--kill",
            metavar="NODE[:LOCAL_RANK]",
            help="Inject a fault: kill a node's container (node2), or one rank on it "
            "(node2:1), with SIGKILL; when: --kill-at or --kill-after. torchrun only.",
        ),
    ] = None,
    kill_at: Annotated[
        Optional[float],  # noqa: UP045
        typer.Option(
            "--kill-at",
            **Bounded(0, MAX_TIMEOUT).option,
            help="Seconds after the nodes started to --kill.",
        ),
    ] = None,
    kill_after: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            "--kill-after", metavar="TEXT", help="--kill once a line of the script holds TEXT."
        ),
    ] = None,
    back: Annotated[
        Optional[float],  # noqa: UP045
        typer.Option(
            "--back",
            **Bounded(0, MAX_TIMEOUT).option,
            help="Seconds after --kill NODE to start the node's container again.",
        ),
    ] = None,
    node_image: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            "--node-image",
            help="--launcher slurm: the nodes are this image, a site's node image with "
            "slurmd, munge and the job's runtime (pyxis and enroot, or apptainer); the job "
            "then runs in launch.slurm.runtime from launch.squashfs (or launch.sif).",
        ),
    ] = None,
    set_: SetOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the stack's multi-node launch locally: N containers, the emitted commands, a probe."""
    if spec is not None and preset is not None:
        raise UsageError("give either a spec file (stack.yaml) or --preset NAME, not both")
    stack = stack_of(spec, preset) if (spec or preset) else None
    if stack is None and image is None:
        raise UsageError("say what to rehearse: a spec file, --preset NAME or --image NAME:TAG")
    check_options(
        image=image, nodes=nodes, launcher=launcher, script=script, args=args, timeout=timeout
    )
    image_option(node_image, "--node-image")
    text_option(kill_after, "--kill-after")
    fault = kill_of(kill, at=kill_at, after=kill_after, back=back, nodes=nodes)
    outcome = run_rehearsal(
        stack,
        image=image,
        engine=connect(),
        nodes=nodes,
        launcher=launcher,
        script=script,
        args=args or [],
        timeout=timeout,
        keep=keep,
        kill=fault,
        say=lambda line: print(line, file=sys.stderr, flush=True),
        settings=parse_assignments(set_ or [], "--set"),
        nodes_image=node_image,
    )
    set_result(outcome.as_data())
    if not as_json:
        if outcome.rows:
            typer.echo(rank_table(outcome.rows), nl=False)
        phases = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in outcome.phases)
        typer.echo(f"phases: {phases}")
        for event in outcome.events:
            typer.echo(f"- {event}")
    if not outcome.ok:
        faults = "\n".join(f"- {fault.text()}" for fault in outcome.faults)
        raise RehearsalFailed(
            f"the {outcome.launcher} rehearsal on {len(outcome.nodes)} nodes failed:\n{faults}",
            nodes=tuple(dict.fromkeys(f.node for f in outcome.faults if f.node)),
        )
    what = "probe passed on every rank" if outcome.rows else "the script succeeded on every node"
    typer.echo(f"ok: {outcome.launcher} on {len(outcome.nodes)} nodes, {what}", err=as_json)


def check_options(
    *,
    image: str | None,
    nodes: int,
    launcher: str | None,
    script: str | None,
    args: list[str] | None,
    timeout: float,
) -> None:
    """What the options can get wrong on their own, refused before the engine is asked."""
    image_option(image)
    if not 1 <= nodes <= MAX_REHEARSAL_NODES:
        raise UsageError(f"--nodes {nodes}: a rehearsal runs 1 to {MAX_REHEARSAL_NODES} nodes")
    if launcher is not None and launcher not in rehearsal_launchers():
        choice(launcher, "--launcher", rehearsal_launchers())
    if not (math.isfinite(timeout) and 0 < timeout <= MAX_TIMEOUT):
        raise UsageError(
            f"--timeout {timeout}: give the seconds the job may take (above 0, at most "
            f"{MAX_TIMEOUT:g})"
        )
    text_option(script, "--script")
    if script is not None:
        script_option(script)
    if args and script is None:
        raise UsageError(
            "the arguments after -- are the script's: give --script FILE (the probe job takes none)"
        )


def script_option(script: str) -> None:
    """--script names a file here or, by its absolute path, one in the image: a relative
    path that is no file here (a typo) and anything here that is not a regular file are
    refused before the engine is asked."""
    path = Path(script)
    if path.is_absolute() and not os.path.lexists(path):
        return  # a path in the image
    input_file(
        path,
        "--script",
        "give a script file on this machine, or the absolute path of one in the image "
        "(e.g. /workspace/train.py)",
    )
