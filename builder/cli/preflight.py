"""`builder preflight`: the probe job through the stack's launch plan, on the real nodes
(or, with --rehearse, on a rehearsal's containers here)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from builder import (
    MAX_REHEARSAL_NODES,
    ClusterPreflight,
    PreflightSettings,
    Ssh,
    connect,
    preflight_table,
    rehearsed_preflight,
)
from builder.cli.app import app, say_error
from builder.cli.envelope import JsonOpt, set_result

# typer resolves the annotations at run time, so these stay real imports
from builder.cli.options import (
    Bounded,
    ImageOpt,
    NodesSshConfigOpt,
    PresetOpt,
    SpecArg,
    folder_option,
    plan_image,
    resolved_of,
    ssh_config_file,
    stack_of,
)
from builder.errors import PreflightFailed, UsageError

MAX_BUDGET = 24 * 3600
"""A day of measurements; the probe's own minimum (a few seconds) is PreflightSettings'."""
DEFAULTS = PreflightSettings()
QUICK = PreflightSettings(quick=True)


@app.command()
def preflight(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    image: ImageOpt = None,
    cluster_dir: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(
            "--cluster-dir",
            help="The bundle folder, at the same path on every node (written when missing; "
            "an existing one must match the spec). Default: cluster.",
            show_default=False,
        ),
    ] = None,
    quick: Annotated[
        bool, typer.Option("--quick", help="Small sizes and short windows: seconds, not minutes.")
    ] = False,
    budget: Annotated[
        Optional[float],  # noqa: UP045
        typer.Option(
            "--budget",
            **Bounded(0, MAX_BUDGET, low_open=True).option,
            help=f"Seconds for all measurements (default {DEFAULTS.seconds:g}, "
            f"{QUICK.seconds:g} with --quick); the launch gets 120 s more before it counts "
            "as hung.",
            show_default=False,
        ),
    ] = None,
    threshold: Annotated[
        float,
        typer.Option(
            "--threshold",
            **Bounded(0, 1, low_open=True, high_open=True).option,
            help="A node this fraction below the median of the other nodes (matmul, memory "
            "copy, link) is named as a straggler.",
        ),
    ] = DEFAULTS.threshold,
    ssh_config: NodesSshConfigOpt = None,
    rehearse: Annotated[
        bool,
        typer.Option("--rehearse", help="Run on a rehearsal's containers here instead (gloo)."),
    ] = False,
    nodes: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(
            "--nodes", "-n", help="Nodes of the --rehearse cluster (default 2).", show_default=False
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the probe's launch plan; run nothing.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Prove the cluster before the run: devices, compute, memory, links, all-reduce,
    transport and environment, node by node, through the stack's own launch plan."""
    settings = PreflightSettings(quick=quick, budget=budget, threshold=threshold)
    check_options(
        rehearse=rehearse,
        nodes=nodes,
        cluster_dir=cluster_dir,
        ssh_config=ssh_config,
        dry_run=dry_run,
    )
    resolved = resolved_of(stack_of(spec, preset))
    reference = plan_image(resolved, image, spec)
    say = _say
    if rehearse:
        result = rehearsed_preflight(
            resolved,
            image=reference,
            engine=connect(),
            nodes=nodes or 2,
            settings=settings,
            say=say,
        )
    else:
        run = ClusterPreflight(
            resolved,
            image=reference,
            cluster_dir=cluster_dir or Path("cluster"),
            settings=settings,
            ssh=Ssh(ssh_config),
            say=say,
        )
        if dry_run:
            set_result(run.plan.as_data())
            if not as_json:
                typer.echo(run.plan.text(), nl=False)
            return
        result = run.run()
    set_result(result.as_data())
    if not as_json:
        typer.echo(preflight_table(result), nl=False)
        phases = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in result.phases)
        typer.echo(f"phases: {phases}")
    warnings = [f for f in result.findings if f.severity == "warn"]
    for finding in warnings:
        say_error(f"warning: {finding.text()}", fg=typer.colors.YELLOW)
    if not result.ok:
        problems = [f for f in result.findings if f.severity == "fail"]
        raise PreflightFailed(
            f"preflight named {len(problems)} problem{'s' if len(problems) != 1 else ''} on "
            f"{len(result.nodes)} nodes:\n" + "\n".join(f"- {f.text()}" for f in problems),
            nodes=tuple(dict.fromkeys(f.node for f in problems if f.node)),
        )
    typer.echo(f"ok: preflight passed on {len(result.nodes)} nodes", err=as_json)


def check_options(
    *,
    rehearse: bool,
    nodes: int | None,
    cluster_dir: Path | None,
    ssh_config: Path | None,
    dry_run: bool,
) -> None:
    """Options that belong to the other place preflight runs are refused, not ignored;
    the real nodes' cluster folder and ssh config are checked before anything runs."""
    if cluster_dir is not None:
        folder_option(cluster_dir, "--cluster-dir")
    if rehearse:
        for given, option in ((cluster_dir, "--cluster-dir"), (ssh_config, "--ssh-config")):
            if given is not None:
                raise UsageError(
                    f"{option} is for the real nodes; --rehearse runs on containers here"
                )
        if dry_run:
            raise UsageError("--dry-run prints the plan for the real nodes; leave out --rehearse")
        if nodes is not None and not 1 <= nodes <= MAX_REHEARSAL_NODES:
            raise UsageError(f"--nodes {nodes}: a rehearsal runs 1 to {MAX_REHEARSAL_NODES} nodes")
    elif nodes is not None:
        raise UsageError(
            "--nodes sets the size of a --rehearse cluster; the real nodes are launch.nodes"
        )
    else:
        ssh_config_file(ssh_config)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
