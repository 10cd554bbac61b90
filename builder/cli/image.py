"""Commands about images in the engine: build, push, inspect."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from builder.cli.app import app
from builder.cli.options import (
    PROGRESS,
    BaseImageOpt,
    CaBundleOpt,
    JsonOpt,
    NoLockOpt,
    PipExtraOpt,
    PipIndexOpt,
    PresetOpt,
    ProgressOpt,
    SpecArg,
    TrustCaOpt,
    WheelhouseOpt,
    check_locked_base,
    choice,
    image_option,
    inputs_of,
    key_values,
    locked,
    stack_of,
)
from builder.engine.build import build_image
from builder.engine.docker import connect
from builder.engine.images import inspect_image, report_text
from builder.engine.progress import progress_for
from builder.engine.push import push_image
from builder.errors import NotInEngine, UsageError
from builder.image.inputs import with_base
from builder.image.pin import write_pin
from builder.spec.loader import load_spec

if TYPE_CHECKING:
    from pathlib import Path

    from builder.engine.base import Engine
    from builder.image.registry import Pushed


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
    progress: ProgressOpt = "auto",
    push: Annotated[
        bool,
        typer.Option(
            "--push", help="Then push it (as `builder push`) and record its digest (stack.digest)."
        ),
    ] = False,
) -> None:
    """Build the image through the Docker engine; tag it only if every step succeeds.

    With stack.lock beside stack.yaml, exactly the locked packages are installed."""
    stack = stack_of(spec, preset)
    inputs = inputs_of(
        base_image, ca_bundle, trust_ca, pip_index_url, pip_extra_index_url, wheelhouse
    )
    stack = with_base(stack, inputs)  # --base-image checked against the spec here, too
    inputs = locked(stack, inputs, None if no_lock else spec, None)
    build_args = key_values(build_arg or [], "--build-arg")
    shown_as = progress_for(choice(progress, "--progress", PROGRESS))
    reference = image_option(tag, "--tag")
    engine = connect()  # every option is checked before the engine is asked
    check_locked_base(inputs, engine)
    result = build_image(
        stack,
        inputs,
        engine=engine,
        reference=reference,
        build_args=build_args,
        nocache=no_cache,
        progress=shown_as,
    )
    typer.echo(result.reference)
    if push:
        _push(engine, result.reference, spec)


@app.command()
def push(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    image: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--image", help="name:tag to push (default: the spec's name:tag)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Push the built image to its registry (the name starts with it) and record the digest
    beside the spec (stack.digest): launch, bundle, slurm and preflight then pin it."""
    stack = stack_of(spec, preset)
    reference = image_option(image) or f"{stack.spec.image.name}:{stack.spec.image.tag}"
    if "@" in reference:
        raise UsageError(f"--image {reference}: push a name:tag; a digest is what a push gives")
    engine = connect()
    if not engine.exists(reference):
        raise NotInEngine(f"image {reference} is not in the local engine: build it first")
    pushed, record = _push(engine, reference, spec)
    if as_json:
        data = {"reference": pushed.reference, "digest": pushed.digest, "pinned": pushed.pinned,
                "record": None if record is None else str(record)}  # fmt: skip
        typer.echo(json.dumps(data, indent=2))
    else:
        typer.echo(pushed.pinned)


def _push(engine: Engine, reference: str, spec: Path | None) -> tuple[Pushed, Path | None]:
    """Push reference (progress on stderr) and record its digest beside a spec file."""
    pushed = push_image(engine, reference, lambda line: typer.echo(line, err=True))
    record = None
    if spec is None or str(spec) == "-":
        typer.echo(f"pushed {pushed.pinned} (no spec file: nothing recorded)", err=True)
    elif spec_reference(spec) == reference:
        record = write_pin(spec, pushed)
        typer.echo(f"pushed {pushed.pinned}; recorded in {record}", err=True)
    else:  # the spec's own name:tag is what its record pins; another push leaves it
        typer.echo(f"pushed {pushed.pinned} (not the spec's name:tag: nothing recorded)", err=True)
    return pushed, record


def spec_reference(spec: Path) -> str:
    found = load_spec(spec).spec.image
    return f"{found.name}:{found.tag}"


@app.command()
def inspect(
    image: Annotated[str, typer.Argument(help="Image name:tag or id.")],
    as_json: JsonOpt = False,
) -> None:
    """Show which spec built an image (labels, spec hash), its size and layers."""
    report = inspect_image(image_option(image, "IMAGE") or image)
    typer.echo(json.dumps(report, indent=2) if as_json else report_text(report))
