"""Commands about running on a cluster: keys, hostfile, dsenv, launch, bundle, slurm,
kubernetes, sif, squashfs."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from builder import (
    APPTAINER_PROGRAMS,
    choose_hosts,
    connect,
    dsenv_for,
    hostfile_text,
    kubernetes_text,
    launch_plan,
    launcher_names,
    make_keys,
    plan_warnings,
    run_folder,
    sbatch_script,
    scheduler_names,
    secret_files,
    sif_build_argv,
    sif_notes,
    squashfs_import_argv,
    write_cluster_file,
    write_kubernetes,
)
from builder.cli.app import app
from builder.cli.envelope import JsonOpt, files_result, refuse_stdout, say_next, set_result
from builder.cli.options import (
    Choice,
    ForceOpt,
    ImageOpt,
    KubernetesJobOpt,
    LauncherOpt,
    NodeDirOpt,
    OutputFileOpt,
    PresetOpt,
    RuntimeOpt,
    SetOpt,
    SpecArg,
    file_option,
    folder_option,
    image_option,
    plan_image,
    print_or_write,
    resolved_of,
    spec_ref,
    stack_of,
    with_set,
)
from builder.errors import UsageError

SLURM = "slurm"
"""The scheduler `builder slurm` writes for."""
KUBERNETES = "kubernetes"
"""The scheduler `builder kubernetes` writes for."""
CLUSTER_DIR = "--cluster-dir"
"""The cluster folder's option (keys and bundle also take it as -o)."""

SchedulerOpt = Annotated[
    str,
    typer.Option(
        "--scheduler",
        metavar="[" + "|".join(scheduler_names()) + "]",
        help="The site the run folder is for: ssh (launch.sh on each node), slurm (a batch "
        "job), kubernetes (manifests).",
    ),
]

if TYPE_CHECKING:
    from builder import RunFolder
    from builder.resolved import Resolved


@app.command()
def hostfile(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    nodes: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Option(
            "--nodelist",
            "-w",
            "--nodes",
            metavar="NODES",
            help="Host names or Slurm node lists, as srun's --nodelist (-w); repeatable. "
            "(--nodes, kept for scripts, is a count in rehearse and preflight, as in srun.)",
        ),
    ] = None,
    slots: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option("--slots", "-s", help="Processes per node (default: the spec's or 1)."),
    ] = None,
    from_slurm: Annotated[
        bool, typer.Option("--from-slurm", help="The nodes of the Slurm job this runs in.")
    ] = False,
    output: OutputFileOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Write a DeepSpeed/mpirun hostfile (`host slots=N` lines, node-rank order)."""
    refuse_stdout(as_json, output)
    launch = stack_of(spec, preset).spec.launch if (spec or preset) else None
    hosts = choose_hosts(
        spec_nodes=launch.nodes if launch else None,
        spec_slots=launch.slots if launch else None,
        spec_node_slots=launch.node_slots if launch else None,
        nodes=nodes or [],
        slots=slots,
        from_slurm=from_slurm,
        env=os.environ,
    )
    set_result(files_result(write_output(hostfile_text(hosts), output, force=force)))


@app.command()
def keys(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    cluster_dir: Annotated[
        Path,
        typer.Option(
            "--cluster-dir",
            "--output",
            "-o",
            help="Folder for the keys (made 0700; an existing one must be 0700).",
        ),
    ] = Path("cluster"),
    force: Annotated[
        bool, typer.Option("--force", help="Replace an existing key (locks out old nodes).")
    ] = False,
    as_json: JsonOpt = False,  # noqa: ARG001 - read by the envelope, through its callback
) -> None:
    """Make the cluster's login and host key pairs, authorized_keys, known_hosts, an ssh_config."""
    folder_option(cluster_dir, CLUSTER_DIR)
    stack = stack_of(spec, preset) if (spec or preset) else None
    port = stack.spec.image.ssh.port if stack else 3022
    name = stack.spec.name if stack else "cluster"
    written = make_keys(
        cluster_dir,
        port=port,
        comment=f"builder-{name}",
        force=force,
        stack=stack.spec.name if stack else None,
    )
    for path in written:
        typer.echo(f"wrote {path}", err=True)
    set_result(files_result(written))


@app.command()
def dsenv(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    set_: SetOpt = None,
    image: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--image", help="Read Gaudi runtime values from this image's ENV."),
    ] = None,
    output: OutputFileOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Write .deepspeed_env: the variables DeepSpeed's pdsh launcher exports on every node."""
    refuse_stdout(as_json, output)
    file_option(output)
    resolved = with_set(resolved_of(stack_of(spec, preset)), set_)
    image_env = None
    if image is not None:
        pairs = (item.partition("=") for item in connect().image(image).env)
        image_env = {key: value for key, _, value in pairs}
    text = dsenv_for(resolved, {}, image_env)
    set_result(files_result(write_output(text, output, force=force)))


@app.command()
def launch(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    image: ImageOpt = None,
    cluster_dir: Annotated[
        Path, typer.Option("--cluster-dir", help="Folder with keys, hostfile, .deepspeed_env.")
    ] = Path("cluster"),
    node_dir: NodeDirOpt = None,
    runtime: RuntimeOpt = None,
    launcher: LauncherOpt = None,
    set_: SetOpt = None,
    infiniband: Annotated[bool, typer.Option("--infiniband", hidden=True)] = False,
    aws_efa: Annotated[bool, typer.Option("--aws-efa", hidden=True)] = False,
    as_json: JsonOpt = False,
) -> None:
    """Print the per-node container commands and the launcher command."""
    if infiniband or aws_efa:
        raise UsageError(
            f"{'--infiniband' if infiniband else '--aws-efa'}: the fabric is part of the "
            "image now (its RDMA userspace is installed at build): set image.fabric "
            "(infiniband, roce or efa), rebuild, and launch, bundle and slurm pass what "
            "the containers need"
        )
    folder_option(cluster_dir, CLUSTER_DIR)
    stack = stack_of(spec, preset)
    resolved = with_set(resolved_of(stack, runtime=runtime, launcher=launcher), set_)
    resolved.scheduler.check_folder(resolved, cluster_dir)
    folder = nodes_folder(cluster_dir, node_dir)
    plan = launch_plan(resolved, image=plan_image(resolved, image, spec), cluster_dir=folder.nodes)
    warn(resolved)
    set_result(plan.as_data())
    if not as_json:
        typer.echo(plan.text(), nl=False)


@app.command()
def bundle(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    cluster_dir: Annotated[
        Path,
        typer.Option(
            "--cluster-dir", "--output", "-o", help="Folder to write (the nodes see it here)."
        ),
    ] = Path("cluster"),
    node_dir: NodeDirOpt = None,
    scheduler: SchedulerOpt = "ssh",
    image: ImageOpt = None,
    runtime: RuntimeOpt = None,
    launcher: LauncherOpt = None,
    set_: SetOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,  # noqa: ARG001 - read by the envelope, through its callback
) -> None:
    """Write the whole folder of a run for one site, with a README of the next commands:
    ssh (keys, hostfile, .deepspeed_env, launch.sh), slurm (the batch job) or kubernetes
    (the manifests); the secrets of launch.env in 0600 files beside them."""
    folder_option(cluster_dir, CLUSTER_DIR)
    stack = stack_of(spec, preset)
    resolved = resolved_of(stack, runtime=runtime, launcher=launcher, scheduler=scheduler)
    resolved = with_set(resolved, set_)
    site = resolved.scheduler
    site.check_node_dir(node_dir)
    folder = nodes_folder(cluster_dir, node_dir) if site.nodes_read_folder else None
    where = folder or run_folder(cluster_dir)
    reference, ref = plan_image(resolved, image, spec), spec_ref(spec, preset)
    written = site.write(
        resolved, where, image=reference, force=force, spec_ref=ref, settings=bool(set_)
    )
    for path in written:
        typer.echo(f"wrote {path}", err=True)
    warn(resolved, reference)
    as_given = [cluster_dir / path.name for path in written]  # the folder as given
    after = site.next_commands(
        resolved,
        as_given,
        spec_ref=ref,
        image=reference,
        nodes=folder.nodes if folder else None,
    )
    set_result(files_result(written, say_next(after)))


@app.command()
def slurm(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    image: ImageOpt = None,
    cluster_dir: Annotated[
        Path,
        typer.Option(
            "--cluster-dir", help="The run folder the job reads (secrets.sh, logs/, hostfiles)."
        ),
    ] = Path("cluster"),
    node_dir: NodeDirOpt = None,
    runtime: RuntimeOpt = None,
    launcher: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            "--launcher",
            **Choice(launcher_names()).option,
            help="The launcher each node's task runs (default: the spec's): deepspeed "
            "--no_ssh, torchrun, or srun itself (one task per rank).",
        ),
    ] = None,
    set_: SetOpt = None,
    output: OutputFileOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Write the batch script alone: srun runs the launcher in the runtime on every node
    (one task per node; launcher srun: one per rank). `builder bundle --scheduler slurm`
    writes it with the files it reads (secrets) and a README."""
    refuse_stdout(as_json, output)
    folder_option(cluster_dir, CLUSTER_DIR)
    stack = stack_of(spec, preset)
    resolved = resolved_of(stack, runtime=runtime, launcher=launcher, scheduler=SLURM)
    resolved = with_set(resolved, set_)
    reference = plan_image(resolved, image, spec)
    folder = nodes_folder(cluster_dir, node_dir)
    text = sbatch_script(resolved, image=reference, cluster_dir=folder.nodes, option=folder.option)
    written = write_output(text, output, force=force)
    if secret_files(resolved.spec):
        typer.echo(
            f"note: the job reads launch.env's secrets from {folder.nodes}/secrets.sh "
            "(0600) on every node; `builder bundle --scheduler slurm -o "
            f"{shlex.quote(str(cluster_dir))}"
            + (f" --node-dir {shlex.quote(folder.nodes)}" if folder.named else "")
            + "` writes it beside the script",
            err=True,
        )
    warn(resolved, reference)
    ref = spec_ref(spec, preset)
    after = resolved.scheduler.next_commands(resolved, written, spec_ref=ref, image=reference)
    set_result(files_result(written, say_next(after)))


@app.command()
def kubernetes(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    image: ImageOpt = None,
    job: KubernetesJobOpt = None,
    set_: SetOpt = None,
    output: OutputFileOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Write the run's Kubernetes manifests: a Kubeflow Trainer TrainJob with its
    TrainingRuntime (torch for torchrun, MPI over the image's sshd for deepspeed and
    mpirun) or a PyTorchJob, with its claims and /dev/shm. Secrets (launch.env's secret
    values, the cluster host key) go in FILE's 0600 neighbour NAME.secrets.yaml, never in
    the manifests: `kubectl apply -f NAME.secrets.yaml -f FILE`."""
    refuse_stdout(as_json, output)
    stack = stack_of(spec, preset)
    resolved = with_set(resolved_of(stack, scheduler=KUBERNETES), set_)
    reference = plan_image(resolved, image, spec)
    if output is None or str(output) == "-":
        text = kubernetes_text(resolved, image=reference, job=job)
        written = print_or_write(text, output, force=force)
    else:
        written = write_kubernetes(resolved, output, image=reference, job=job, force=force)
        for path in written:
            typer.echo(f"wrote {path}", err=True)
    warn(resolved, reference)
    ref = spec_ref(spec, preset)
    after = resolved.scheduler.next_commands(resolved, written, spec_ref=ref, image=reference)
    set_result(files_result(written, say_next(after)))


def nodes_folder(cluster_dir: Path, node_dir: str | None = None) -> RunFolder:
    """The cluster folder here and where its nodes see it (``run_folder``), saying so
    when that is this machine's path of a relative folder."""
    folder = run_folder(cluster_dir, node_dir)
    note = folder.note(CLUSTER_DIR)
    if note:
        typer.echo(f"note: {note}", err=True)
    return folder


def write_output(text: str, output: Path | None, *, force: bool) -> list[Path]:
    """text on stdout, or in the file -o names, whose folder is made as the cluster
    folder is (0700) when this command makes it first."""
    if output is None or str(output) == "-":
        return print_or_write(text, output, force=force)
    written = write_cluster_file(output, text, force=force)
    typer.echo(f"wrote {output}", err=True)
    return written


def warn(resolved: Resolved, image: str | None = None) -> None:
    """The plan's warnings, and what the site's nodes would get wrong about image."""
    found = plan_warnings(resolved)
    found += resolved.scheduler.image_warnings(image) if image else ()
    for line in found:
        typer.echo(f"warning: {line}", err=True)


@app.command()
def sif(
    image: Annotated[str, typer.Argument(help="name:tag of an image in the local engine.")],
    output: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--output", "-o", help="SIF file (default: NAME-TAG.sif)."),
    ] = None,
    program: Annotated[
        str,
        typer.Option(
            "--program",
            **Choice(APPTAINER_PROGRAMS).option,
            help="The program to build with.",
        ),
    ] = "apptainer",
    as_json: JsonOpt = False,
) -> None:
    """Print the command that builds a SIF from an image of the local Docker engine."""
    argv = sif_build_argv(image_option(image, "IMAGE") or image, output=output, program=program)
    set_result({"argv": argv})
    for note in sif_notes(image):
        typer.echo(f"note: {note}", err=True)
    if not as_json:
        typer.echo(shlex.join(argv))


@app.command()
def squashfs(
    image: Annotated[
        str,
        typer.Argument(help="name:tag of an image in the local engine, or name@sha256:... pushed."),
    ],
    output: Annotated[
        str,
        typer.Option(
            "--output",
            "-o",
            help="The squashfs file: an absolute path on shared storage (NAME.sqsh).",
        ),
    ],
    as_json: JsonOpt = False,
) -> None:
    """Print the command that makes an enroot squashfs of an image, for runtime pyxis
    (launch.squashfs): from the local Docker engine, or from its registry when pinned."""
    argv = squashfs_import_argv(image_option(image, "IMAGE") or image, output=output)
    set_result({"argv": argv})
    if not as_json:
        typer.echo(shlex.join(argv))
