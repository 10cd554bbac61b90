"""`builder preflight`: the probe job through the stack's launch plan, on the real nodes
(or, with --rehearse, on a rehearsal's containers here; with --scheduler slurm, as the
run's batch job, written for sbatch or run on the rehearsal's real Slurm; with --scheduler
kubernetes, as the run's TrainJob, written for kubectl; the saved output of either judged
with --from-log)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from builder import (
    MAX_REHEARSAL_NODES,
    ClusterPreflight,
    PreflightSettings,
    Ssh,
    connect,
    judge_log,
    kubernetes_expected,
    preflight_manifests_text,
    preflight_table,
    read_log,
    rehearsed_preflight,
    slurm_expected,
    write_preflight_job,
    write_preflight_manifests,
)
from builder.cli.app import app, say_error
from builder.cli.envelope import JsonOpt, files_result, refuse_stdout, set_result

# typer resolves the annotations at run time, so these stay real imports
from builder.cli.options import (
    Bounded,
    Choice,
    ForceOpt,
    ImageOpt,
    KubernetesJobOpt,
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
    from builder.preflight.report import Expected, Preflight
    from builder.resolved import Resolved

MAX_BUDGET = 24 * 3600
"""A day of measurements; the probe's own minimum (a few seconds) is PreflightSettings'."""
DEFAULTS = PreflightSettings()
QUICK = PreflightSettings(quick=True)
SSH, SLURM, KUBERNETES = "ssh", "slurm", "kubernetes"
"""Where the probe runs: the nodes over ssh (launch.sh), the run's batch job, or the run's
TrainJob."""


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
            **Choice((SSH, SLURM, KUBERNETES)).option,
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
            "--dry-run: the probe job's folder (as the nodes see it).",
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
        ssh_config=ssh_config,
        dry_run=dry_run,
    )
    site = check_scheduler(
        scheduler,
        job=job,
        output=output,
        force=force,
        from_log=from_log,
        rehearse=rehearse,
        dry_run=dry_run,
        cluster_dir=cluster_dir,
        ssh_config=ssh_config,
    )
    resolved = resolved_of(stack_of(spec, preset), scheduler=site)
    say = _say
    if from_log is not None:
        expected = _expected(
            site, resolved, settings, job=job, image=image, folder=cluster_dir, ssh=ssh_config
        )
        where = {**settings.as_data(), "where": str(from_log)}
        report(judge_log(read_log(from_log), expected, where), as_json)
        return
    reference = plan_image(resolved, image, spec)
    if site != SSH and not rehearse:
        refuse_stdout(as_json, output)
        written = _probe_job(
            site,
            resolved,
            output,
            image=reference,
            settings=settings,
            job=job,
            force=force,
            spec_ref=spec_ref(spec, preset),
        )
        set_result(files_result(written))
        return
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
    report(result, as_json)


def _expected(
    site: str,
    resolved: Resolved,
    settings: PreflightSettings,
    *,
    job: str | None,
    image: str | None,
    folder: Path | None,
    ssh: Path | None,
) -> Expected:
    """What a saved log of the probe should show, for the site it ran on."""
    if site == KUBERNETES:
        return kubernetes_expected(resolved, settings, job)
    if site == SLURM:
        return slurm_expected(resolved, settings)
    return ClusterPreflight(
        resolved,
        image=image or "",
        cluster_dir=folder or Path("cluster"),
        settings=settings,
        ssh=Ssh(ssh),
    ).expected()


def _probe_job(
    site: str,
    resolved: Resolved,
    output: Path | None,
    *,
    image: str,
    settings: PreflightSettings,
    job: str | None,
    force: bool,
    spec_ref: str,
) -> list[Path]:
    """The probe as the site's own job, written (or, for Kubernetes without -o, printed)."""
    if site == SLURM:
        assert output is not None  # check_scheduler asks for it
        written = write_preflight_job(
            resolved, output, image=image, settings=settings, spec_ref=spec_ref, force=force
        )
    elif output is None or str(output) == "-":
        text = preflight_manifests_text(resolved, image=image, settings=settings, job=job)
        return print_or_write(text, output, force=force)
    else:
        written = write_preflight_manifests(
            resolved, output, image=image, settings=settings, job=job, force=force
        )
    for path in written:
        typer.echo(f"wrote {path}", err=True)
    return written


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


def check_scheduler(
    scheduler: str | None,
    *,
    job: str | None,
    output: Path | None,
    force: bool,
    from_log: Path | None,
    rehearse: bool,
    dry_run: bool,
    cluster_dir: Path | None,
    ssh_config: Path | None,
) -> str:
    """Where the probe runs (ssh, slurm or kubernetes); the options of the other places
    preflight runs are refused, not ignored."""
    site = scheduler or SSH
    if from_log is not None and (rehearse or dry_run):
        given = "--rehearse" if rehearse else "--dry-run"
        raise UsageError(f"--from-log judges a saved log; {given} runs or prints the probe")
    if job is not None and site != KUBERNETES:
        raise UsageError("--job is for --scheduler kubernetes")
    if site == SSH:
        if output is not None:
            raise UsageError("--output is for --scheduler kubernetes or slurm")
        if force:
            raise UsageError("--force replaces the files --dry-run -o writes (kubernetes, slurm)")
        return site
    if cluster_dir is not None or ssh_config is not None:
        option = "--cluster-dir" if cluster_dir is not None else "--ssh-config"
        raise UsageError(
            f"{option} is for the nodes over ssh; a {site} job's nodes are the scheduler's"
        )
    if (from_log is not None or rehearse) and (output is not None or force):
        raise UsageError("--output and --force write the probe's job (--dry-run)")
    if from_log is None:
        _check_probe_job(site, output=output, rehearse=rehearse, dry_run=dry_run)
    return site


def _check_probe_job(site: str, *, output: Path | None, rehearse: bool, dry_run: bool) -> None:
    """The probe as the site's own job: written (--dry-run), or for Slurm run on the
    rehearsal's real Slurm (--rehearse); builder submits nothing to a real cluster."""
    if site == SLURM:
        if rehearse:
            return
        if not dry_run or output is None:
            raise UsageError(
                "builder runs no sbatch on a cluster: --scheduler slurm --dry-run -o FOLDER "
                "writes the probe's batch job; submit it, save its nodes' output and judge it "
                "with --scheduler slurm --from-log FILE (or run it on the rehearsal's Slurm "
                "here: --scheduler slurm --rehearse)",
                field="--dry-run" if not dry_run else "--output",
            )
        folder_option(output, "--output")
        return
    if rehearse:
        raise UsageError("--rehearse runs containers here; leave out --scheduler kubernetes")
    if not dry_run:
        raise UsageError(
            "builder runs no kubectl: --scheduler kubernetes --dry-run [-o FILE] writes the "
            "probe's TrainJob; apply it with kubectl, save its pods' logs, and judge them "
            "with --scheduler kubernetes --from-log FILE",
            field="--dry-run",
        )
    if output is not None:
        file_option(output, "--output")


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
