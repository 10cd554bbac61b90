"""`builder preflight`: the probe job through the stack's launch plan, on the real nodes
(or, with --rehearse, on a rehearsal's containers here; with --scheduler slurm, as the
run's batch job, written for sbatch or run on the rehearsal's real Slurm; with --scheduler
kubernetes, as the run's TrainJob, written for kubectl; the saved output of either judged
with --from-log)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path  # noqa: TC003 - typer reads the annotations at run time
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from builder import (
    MAX_REHEARSAL_NODES,
    PreflightSettings,
    ProbeOutput,
    ProbeRequest,
    connect,
    judge_log,
    preflight_table,
    read_log,
    rehearsed_preflight,
    scheduler_names,
)
from builder.cli.app import app, say_error
from builder.cli.envelope import JsonOpt, files_result, refuse_stdout, say_next, set_result

# typer resolves the annotations at run time, so these stay real imports
from builder.cli.options import (
    Bounded,
    ForceOpt,
    ImageOpt,
    KubernetesJobOpt,
    NodeDirOpt,
    NodesSshConfigOpt,
    PresetOpt,
    SpecArg,
    file_option,
    folder_option,
    plan_image,
    print_or_write,
    resolved_of,
    spec_ref,
    ssh_config_file,
    stack_of,
)
from builder.errors import PreflightFailed, UsageError

if TYPE_CHECKING:
    from builder.preflight.report import Preflight

MAX_BUDGET = 24 * 3600
"""A day of measurements; the probe's own minimum (a few seconds) is PreflightSettings'."""
DEFAULTS = PreflightSettings()
QUICK = PreflightSettings(quick=True)
DEFAULT_SITE = "ssh"
"""Where the probe runs unless --scheduler says: the nodes over ssh (launch.sh)."""


@app.command()
def preflight(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    image: ImageOpt = None,
    cluster_dir: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(
            "--cluster-dir",
            help="The bundle folder here (written when missing; an existing one must match "
            "the spec), which every node sees at this path or at --node-dir's. Default: "
            "cluster.",
            show_default=False,
        ),
    ] = None,
    node_dir: NodeDirOpt = None,
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
        bool,
        typer.Option(
            "--dry-run",
            help="Print the probe's launch plan (--scheduler kubernetes: its manifests); run "
            "nothing.",
        ),
    ] = False,
    scheduler: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            "--scheduler",
            metavar="[" + "|".join(scheduler_names()) + "]",
            help="ssh: the nodes of launch.nodes, reached from here (default); slurm: the "
            "probe as the run's batch job, written with --dry-run -o FOLDER for sbatch (or "
            "run on the rehearsal's Slurm with --rehearse), its nodes' output read with "
            "--from-log; kubernetes: the probe as the run's TrainJob or PyTorchJob, written "
            "with --dry-run for kubectl, its pods' logs read with --from-log.",
            show_default=False,
        ),
    ] = None,
    job: KubernetesJobOpt = None,
    output: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(
            "--output",
            "-o",
            help="With --scheduler kubernetes --dry-run: the manifests' file (Secrets in its "
            "0600 neighbour NAME.secrets.yaml); default or -: print. With --scheduler slurm "
            "--dry-run: the probe job's folder here (the nodes see it there, or at "
            "--node-dir).",
        ),
    ] = None,
    force: ForceOpt = False,
    from_log: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(
            "--from-log",
            help="Judge the probe's output saved in FILE (the pods' logs, or launch.sh's "
            "output) instead of running it: the same table and exit code.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Prove the cluster before the run: devices, compute, memory, links, all-reduce,
    transport and environment, node by node, through the stack's own launch plan."""
    settings = PreflightSettings(quick=quick, budget=budget, threshold=threshold)
    check_options(
        rehearse=rehearse,
        nodes=nodes,
        cluster_dir=cluster_dir,
        node_dir=node_dir,
        ssh_config=ssh_config,
        dry_run=dry_run,
    )
    if from_log is not None and (rehearse or dry_run):
        given = "--rehearse" if rehearse else "--dry-run"
        raise UsageError(f"--from-log judges a saved log; {given} runs or prints the probe")
    if from_log is not None and node_dir is not None:
        raise UsageError(
            "--node-dir names where the nodes see the folder preflight writes or runs "
            "from; --from-log judges a saved log and needs neither",
            field="--node-dir",
        )
    request = ProbeRequest(
        settings,
        image=image or "",
        dry_run=dry_run,
        rehearse=rehearse,
        from_log=from_log is not None,
        output=output,
        force=force,
        job=job,
        cluster_dir=cluster_dir,
        node_dir=node_dir,
        ssh_config=ssh_config,
        spec_ref=spec_ref(spec, preset),
        engine=connect,
    )
    resolved = resolved_of(stack_of(spec, preset), scheduler=scheduler or DEFAULT_SITE)
    site = resolved.scheduler
    site.check_probe(request)
    if from_log is not None:
        expected = site.probe_expected(resolved, request)
        where = {**settings.as_data(), "where": str(from_log)}
        report(judge_log(read_log(from_log), expected, where), as_json)
        return
    if output is not None and site.probe_writes is not None:
        writes_file = site.probe_writes == "file"
        file_option(output, "--output") if writes_file else folder_option(output, "--output")
    request = replace(request, image=plan_image(resolved, image, spec))
    if rehearse:
        result = rehearsed_preflight(
            resolved,
            image=request.image,
            engine=connect(),
            nodes=nodes or 2,
            settings=settings,
            say=_say,
        )
        report(result, as_json)
        return
    if site.probe_writes is not None:
        refuse_stdout(as_json, output)
    outcome = site.preflight(resolved, request, say=_say)
    if isinstance(outcome, ProbeOutput):
        shown(outcome, output, force=force, as_json=as_json)
        return
    report(outcome, as_json)


def shown(outcome: ProbeOutput, output: Path | None, *, force: bool, as_json: bool) -> None:
    """What a site's preflight gave back without running the probe: the files of its job
    (listed), or a text (a plan, manifests) printed or written to -o."""
    if outcome.written:
        for path in outcome.written:
            typer.echo(f"wrote {path}", err=True)
        set_result(files_result(list(outcome.written), say_next(outcome.next)))
        return
    text = outcome.text or ""
    if outcome.data is not None:  # a plan: printed, its data the --json result
        set_result(outcome.data)
        if not as_json:
            typer.echo(text, nl=False)
        return
    set_result(files_result(print_or_write(text, output, force=force)))


def report(result: Preflight, as_json: bool) -> None:
    """The table (or the --json envelope), the warnings, and a failure as its exit code."""
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
    node_dir: str | None,
    ssh_config: Path | None,
    dry_run: bool,
) -> None:
    """Options that belong to the other place preflight runs are refused, not ignored;
    the real nodes' cluster folder and ssh config are checked before anything runs."""
    if cluster_dir is not None:
        folder_option(cluster_dir, "--cluster-dir")
    if rehearse:
        real_only = (
            (cluster_dir, "--cluster-dir"),
            (node_dir, "--node-dir"),
            (ssh_config, "--ssh-config"),
        )
        for given, option in real_only:
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
