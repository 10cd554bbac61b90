"""Commands about the image: presets, init, render, lint, schema, build, inspect."""

from __future__ import annotations

import json
from pathlib import Path  # noqa: TC003 - typer resolves annotations at run time
from typing import Annotated, Optional

import typer

from builder.cli.app import app
from builder.cli.options import (
    BaseImageOpt,
    CaBundleOpt,
    ForceOpt,
    FormatOpt,
    JsonOpt,
    NoLockOpt,
    OutputFileOpt,
    PipExtraOpt,
    PipIndexOpt,
    PresetOpt,
    SpecArg,
    TrustCaOpt,
    WheelhouseOpt,
    choice,
    format_of,
    inputs_of,
    key_values,
    locked,
    print_or_write,
    stack_of,
)
from builder.engine.build import build_image
from builder.engine.docker import connect
from builder.engine.images import inspect_image, report_text
from builder.engine.progress import progress_for
from builder.image.context import primary_output, render_outputs
from builder.lint import lint_stack
from builder.output import write_files
from builder.spec.presets import preset_summaries, preset_text
from builder.spec.records import spec_json_schema


@app.command()
def presets(
    as_json: JsonOpt = False,
) -> None:
    """List the built-in stacks."""
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
    output: OutputFileOpt = None,
    force: ForceOpt = False,
) -> None:
    """Write a preset out as a stack.yaml to edit."""
    print_or_write(preset_text(preset), output, force=force)


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
    no_lock: NoLockOpt = False,
) -> None:
    """Render the Dockerfile (+ files it copies) and the Apptainer .def files.

    The build-input options and stack.lock change the files exactly as they change
    `builder build` (which also checks that a locked base image is still there).
    """
    stack = stack_of(spec, preset)
    chosen = format_of(fmt, has_output=output is not None)
    inputs = inputs_of(
        base_image, ca_bundle, trust_ca, pip_index_url, pip_extra_index_url, wheelhouse
    )
    inputs = locked(stack, inputs, None if no_lock else spec, engine=None)
    files = render_outputs(stack, chosen, inputs)
    if output is None:
        typer.echo(primary_output(files, chosen).text, nl=False)
        return
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
    no_lock: NoLockOpt = False,
    progress: Annotated[
        str, typer.Option("--progress", help="auto, tty (live view), plain (CI logs) or quiet.")
    ] = "auto",
) -> None:
    """Build the image through the Docker engine; tag it only if every step succeeds.

    With stack.lock beside stack.yaml, exactly the locked packages are installed."""
    stack = stack_of(spec, preset)
    inputs = inputs_of(
        base_image, ca_bundle, trust_ca, pip_index_url, pip_extra_index_url, wheelhouse
    )
    engine = connect()
    inputs = locked(stack, inputs, None if no_lock else spec, engine)
    result = build_image(
        stack,
        inputs,
        engine=engine,
        reference=tag,
        build_args=key_values(build_arg or [], "--build-arg"),
        nocache=no_cache,
        progress=progress_for(choice(progress, "--progress", ("auto", "tty", "plain", "quiet"))),
    )
    typer.echo(result.reference)


@app.command()
def inspect(
    image: Annotated[str, typer.Argument(help="Image name:tag or id.")],
    as_json: JsonOpt = False,
) -> None:
    """Show which spec built an image (labels, spec hash), its size and layers."""
    report = inspect_image(image)
    typer.echo(json.dumps(report, indent=2) if as_json else report_text(report))


@app.command()
def lint(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    fmt: FormatOpt = None,
) -> None:
    """Check the rendered outputs with hadolint, BuildKit's parser and the .def rules."""
    report = lint_stack(stack_of(spec, preset), fmt or "all")
    typer.echo(report.text())
    report.raise_for_findings()


@app.command()
def schema(
    output: OutputFileOpt = None,
    force: ForceOpt = False,
) -> None:
    """Print the JSON Schema of stack.yaml (for editors)."""
    text = json.dumps(spec_json_schema(), indent=2, sort_keys=True) + "\n"
    print_or_write(text, output, force=force)
