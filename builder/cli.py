"""The `builder` command line: parse options, call one library function, print.

Heavy modules (the spec models, yaml, jinja2, docker) are imported inside the
commands, so `builder --help` stays fast. ``BuilderGroup`` is the one place
that turns a ``BuilderError`` into a red message and its exit code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

from builder._version import __version__
from builder.errors import BuilderError


class BuilderGroup(TyperGroup):
    """Maps library errors to a one-paragraph message and exit code (no traceback)."""

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except BuilderError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
            raise typer.Exit(exc.exit_code) from None


app = typer.Typer(
    cls=BuilderGroup,
    name="builder",
    help="Reproducible multi-node training environments from one stack spec.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

SpecArg = Annotated[
    Optional[Path],  # noqa: UP045 - typer needs a runtime-evaluable annotation on 3.10
    typer.Argument(help="stack.yaml to use (or --preset).", show_default=False),
]
PresetOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option("--preset", "-p", help="Use a built-in preset instead of a spec file."),
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Replace files that already exist.")]
FormatOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        "--format",
        "-f",
        help="docker, apptainer or all (default: all with -o, docker without).",
        show_default=False,
    ),
]


BaseImageOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        "--base-image", help="Build on this base instead of the spec's.", show_default=False
    ),
]
CaBundleOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(
        "--ca-bundle",
        help="PEM file of CAs to trust while building (corporate proxy, mirror).",
        show_default=False,
    ),
]
TrustCaOpt = Annotated[
    bool, typer.Option("--trust-ca", help="Also trust the --ca-bundle in the final image.")
]
PipIndexOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option("--pip-index-url", help="pip index (mirror) for every pip step but torch's."),
]
PipExtraOpt = Annotated[
    Optional[list[str]],  # noqa: UP045
    typer.Option("--pip-extra-index-url", help="Extra pip index; repeatable."),
]
WheelhouseOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(
        "--wheelhouse",
        help="Folder of wheels pip may use (e.g. a CPU torch); they stay out of the image.",
        show_default=False,
    ),
]


def _inputs(
    base_image: str | None,
    ca_bundle: Path | None,
    trust_ca: bool,
    pip_index_url: str | None,
    pip_extra_index_url: list[str] | None,
    wheelhouse: Path | None,
) -> Any:
    from builder.inputs import load_inputs

    return load_inputs(
        base_image=base_image,
        ca_bundle=ca_bundle,
        trust_ca=trust_ca,
        pip_index_url=pip_index_url,
        pip_extra_index_urls=tuple(pip_extra_index_url or ()),
        wheelhouse=wheelhouse,
    )


def _version(value: bool) -> None:
    if value:
        typer.echo(f"builder {__version__}")
        raise typer.Exit


@app.callback()
def _main(
    ctx: typer.Context,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
    version: Annotated[  # noqa: ARG001 - handled eagerly by its callback
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    ctx.obj = {"debug": debug}


def _stack(spec: Path | None, preset: str | None) -> Any:
    from builder.loader import load_stack

    return load_stack(spec, preset)


def _print_or_write(text: str, output: Path | None, *, force: bool) -> None:
    if output is None:
        typer.echo(text, nl=False)
        return
    from builder.context import OutputFile
    from builder.output import write_files

    write_files([OutputFile(output.name, 0o644, text)], output.parent, force=force)
    typer.echo(f"wrote {output}", err=True)


_FORMATS = ("docker", "apptainer", "all")


def _format(value: str | None, *, has_output: bool) -> Any:
    from builder.errors import UsageError

    fmt = _choice(value or ("all" if has_output else "docker"), "--format", _FORMATS)
    if fmt == "all" and not has_output:
        raise UsageError("--format all writes several files: add -o DIR")
    return fmt


@app.command()
def presets(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List the built-in stacks."""
    from builder.presets import preset_summaries

    rows = preset_summaries()
    if as_json:
        typer.echo(json.dumps([{"name": n, "description": d} for n, d in rows], indent=2))
        return
    width = max(len(name) for name, _ in rows)
    for name, description in rows:
        typer.echo(f"{name:<{width}}  {description}")


@app.command()
def init(
    preset: Annotated[str, typer.Option("--preset", "-p", help="Preset to start from.")] = (
        "cuda-deepspeed"
    ),
    output: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--output", "-o", help="File to write (default: print)."),
    ] = None,
    force: ForceOpt = False,
) -> None:
    """Write a preset out as a stack.yaml to edit."""
    from builder.presets import preset_text

    _print_or_write(preset_text(preset), output, force=force)


@app.command()
def render(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    output: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--output", "-o", help="Folder to write the files to (default: print)."),
    ] = None,
    fmt: FormatOpt = None,
    force: ForceOpt = False,
    base_image: BaseImageOpt = None,
    ca_bundle: CaBundleOpt = None,
    trust_ca: TrustCaOpt = False,
    pip_index_url: PipIndexOpt = None,
    pip_extra_index_url: PipExtraOpt = None,
    wheelhouse: WheelhouseOpt = None,
) -> None:
    """Render the Dockerfile (+ files it copies) and the Apptainer .def files.

    The build-input options change the files exactly as they change `builder build`.
    """
    from builder.context import primary_output, render_outputs

    stack = _stack(spec, preset)
    chosen = _format(fmt, has_output=output is not None)
    inputs = _inputs(
        base_image, ca_bundle, trust_ca, pip_index_url, pip_extra_index_url, wheelhouse
    )
    files = render_outputs(stack, chosen, inputs)
    if output is None:
        typer.echo(primary_output(files, chosen).text, nl=False)
        return
    from builder.output import write_files

    for path in write_files(files, output, force=force):
        typer.echo(f"wrote {path}", err=True)


@app.command()
def build(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    tag: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--tag", "-t", help="name:tag (default: image.name:image.tag of the spec)."),
    ] = None,
    base_image: BaseImageOpt = None,
    ca_bundle: CaBundleOpt = None,
    trust_ca: TrustCaOpt = False,
    pip_index_url: PipIndexOpt = None,
    pip_extra_index_url: PipExtraOpt = None,
    wheelhouse: WheelhouseOpt = None,
    build_arg: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Option("--build-arg", help="KEY=VALUE passed to the build; repeatable."),
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Rebuild every layer.")] = False,
    progress: Annotated[
        str, typer.Option("--progress", help="auto, tty (live view), plain (CI logs) or quiet.")
    ] = "auto",
) -> None:
    """Build the image through the Docker engine; tag it only if every step succeeds."""
    from builder.build import build_image
    from builder.progress import progress_for

    stack = _stack(spec, preset)
    inputs = _inputs(
        base_image, ca_bundle, trust_ca, pip_index_url, pip_extra_index_url, wheelhouse
    )
    result = build_image(
        stack,
        inputs,
        reference=tag,
        build_args=_key_values(build_arg or [], "--build-arg"),
        nocache=no_cache,
        progress=progress_for(_choice(progress, "--progress", ("auto", "tty", "plain", "quiet"))),
    )
    typer.echo(result.reference)


@app.command()
def inspect(
    image: Annotated[str, typer.Argument(help="Image name:tag or id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show which spec built an image (labels, spec hash), its size and layers."""
    from builder.images import inspect_image, report_text

    report = inspect_image(image)
    typer.echo(json.dumps(report, indent=2) if as_json else report_text(report))


def _key_values(items: list[str], option: str) -> dict[str, str]:
    from builder.errors import UsageError

    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{option} {item!r}: write it as KEY=VALUE")
        pairs[key] = value
    return pairs


def _choice(value: str, option: str, choices: tuple[str, ...]) -> Any:
    from builder.errors import UsageError

    if value not in choices:
        raise UsageError(f"{option} {value!r}: choose one of {', '.join(choices)}")
    return value


@app.command()
def hostfile(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    nodes: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Option("--nodes", "-n", help="Host names or Slurm node lists; repeatable."),
    ] = None,
    slots: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option("--slots", "-s", help="Processes per node (default: the spec's or 1)."),
    ] = None,
    from_slurm: Annotated[
        bool, typer.Option("--from-slurm", help="The nodes of the Slurm job this runs in.")
    ] = False,
    output: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--output", "-o", help="File to write (default: print)."),
    ] = None,
    force: ForceOpt = False,
) -> None:
    """Write a DeepSpeed/mpirun hostfile (`host slots=N` lines, node-rank order)."""
    import os

    from builder.cluster.hostfile import choose_hosts, hostfile_text

    launch = _stack(spec, preset).spec.launch if (spec or preset) else None
    hosts = choose_hosts(
        spec_nodes=launch.nodes if launch else None,
        spec_slots=launch.slots if launch else None,
        nodes=nodes or [],
        slots=slots,
        from_slurm=from_slurm,
        env=os.environ,
    )
    _print_or_write(hostfile_text(hosts), output, force=force)


@app.command()
def keys(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Folder for the key pair (made 0700).")
    ] = Path("cluster"),
    force: Annotated[
        bool, typer.Option("--force", help="Replace an existing key (locks out old nodes).")
    ] = False,
) -> None:
    """Make the cluster's ed25519 key pair, authorized_keys and an ssh_config."""
    from builder.cluster.keys import make_keys

    stack = _stack(spec, preset) if (spec or preset) else None
    port = stack.spec.image.ssh.port if stack else 3022
    name = stack.spec.name if stack else "cluster"
    for path in make_keys(output, port=port, comment=f"builder-{name}", force=force):
        typer.echo(f"wrote {path}", err=True)


@app.command()
def dsenv(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    set_: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Option("--set", help="NAME=VALUE to add or override; repeatable."),
    ] = None,
    image: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--image", help="Read Gaudi runtime values from this image's ENV."),
    ] = None,
    output: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--output", "-o", help="File to write (default: print)."),
    ] = None,
    force: ForceOpt = False,
) -> None:
    """Write .deepspeed_env: the variables DeepSpeed's pdsh launcher exports on every node."""
    from builder.cluster.dsenv import dsenv_for, parse_assignments

    stack = _stack(spec, preset)
    extra = parse_assignments(set_ or [], "--set")
    image_env = None
    if image is not None:
        from builder.engine import Engine

        pairs = (item.partition("=") for item in Engine.connect().image(image).env)
        image_env = {key: value for key, _, value in pairs}
    _print_or_write(dsenv_for(stack.spec, extra, image_env), output, force=force)


@app.command()
def launch(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    image: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--image", help="Image to run (default: the spec's name:tag)."),
    ] = None,
    cluster_dir: Annotated[
        Path, typer.Option("--cluster-dir", help="Folder with keys, hostfile, .deepspeed_env.")
    ] = Path("cluster"),
    runtime: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--runtime", help="docker, apptainer, singularity or none."),
    ] = None,
    launcher: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--launcher", help="deepspeed or torchrun (default: the spec's)."),
    ] = None,
    infiniband: Annotated[
        bool, typer.Option("--infiniband", help="Pass /dev/infiniband and IPC_LOCK.")
    ] = False,
    aws_efa: Annotated[
        bool, typer.Option("--aws-efa", help="Gaudi on AWS DL1: privileged, for EFA.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Print the per-node container commands and the launcher command."""
    from builder.launch.plan import launch_plan

    stack = _stack(spec, preset)
    image_spec = stack.spec.image
    plan = launch_plan(
        stack.spec,
        image=image or f"{image_spec.name}:{image_spec.tag}",
        cluster_dir=str(cluster_dir.resolve()),
        runtime=runtime,
        launcher=launcher,
        infiniband=infiniband,
        aws_efa=aws_efa,
    )
    typer.echo(json.dumps(plan.as_data(), indent=2) if as_json else plan.text(), nl=as_json)


@app.command()
def bundle(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder to write.")] = Path(
        "cluster"
    ),
    image: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--image", help="Image to run (default: the spec's name:tag)."),
    ] = None,
    runtime: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--runtime", help="docker, apptainer, singularity or none."),
    ] = None,
    launcher: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--launcher", help="deepspeed or torchrun (default: the spec's)."),
    ] = None,
    force: ForceOpt = False,
) -> None:
    """Write keys, hostfile, .deepspeed_env, the launch commands and a README in one folder."""
    from builder.launch.bundle import write_bundle

    stack = _stack(spec, preset)
    image_spec = stack.spec.image
    for path in write_bundle(
        stack.spec,
        output,
        image=image or f"{image_spec.name}:{image_spec.tag}",
        force=force,
        runtime=runtime,
        launcher=launcher,
    ):
        typer.echo(f"wrote {path}", err=True)


@app.command()
def slurm(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    image: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--image", help="Image to run (default: the spec's name:tag)."),
    ] = None,
    cluster_dir: Annotated[
        Path, typer.Option("--cluster-dir", help="The cluster folder, as the nodes see it.")
    ] = Path("cluster"),
    runtime: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--runtime", help="apptainer, singularity, docker or none."),
    ] = None,
    output: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--output", "-o", help="File to write (default: print)."),
    ] = None,
    force: ForceOpt = False,
) -> None:
    """Write the sbatch script: one task per node, each running torchrun in the runtime."""
    from builder.launch.slurm import sbatch_script

    stack = _stack(spec, preset)
    image_spec = stack.spec.image
    text = sbatch_script(
        stack.spec,
        image=image or f"{image_spec.name}:{image_spec.tag}",
        cluster_dir=str(cluster_dir.resolve()),
        source=stack.source,
        runtime=runtime,
    )
    _print_or_write(text, output, force=force)


@app.command()
def sif(
    image: Annotated[str, typer.Argument(help="name:tag of an image in the local engine.")],
    output: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--output", "-o", help="SIF file (default: NAME-TAG.sif)."),
    ] = None,
    program: Annotated[
        str, typer.Option("--program", help="apptainer or singularity.")
    ] = "apptainer",
    as_json: Annotated[bool, typer.Option("--json", help="The argv as JSON.")] = False,
) -> None:
    """Print the command that builds a SIF from an image of the local Docker engine."""
    import shlex

    from builder.launch.apptainer import sif_build_argv

    argv = sif_build_argv(image, output=output, program=program)
    typer.echo(json.dumps(argv) if as_json else shlex.join(argv))


@app.command()
def lint(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    fmt: FormatOpt = None,
) -> None:
    """Check the rendered outputs with hadolint, BuildKit's parser and the .def rules."""
    from builder.lint import lint_stack

    report = lint_stack(_stack(spec, preset), fmt or "all")
    typer.echo(report.text())
    report.raise_for_findings()


@app.command()
def schema(
    output: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--output", "-o", help="File to write (default: print)."),
    ] = None,
    force: ForceOpt = False,
) -> None:
    """Print the JSON Schema of stack.yaml (for editors)."""
    from builder.spec import spec_json_schema

    text = json.dumps(spec_json_schema(), indent=2, sort_keys=True) + "\n"
    _print_or_write(text, output, force=force)


def main() -> None:
    """Console-script entry point."""
    sys.exit(app())


__all__ = ["app", "main"]
