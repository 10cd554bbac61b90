"""Commands about images in the engine: build, inspect."""

from __future__ import annotations

import json
from typing import Annotated, Optional

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
from builder.image.inputs import with_base


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


@app.command()
def inspect(
    image: Annotated[str, typer.Argument(help="Image name:tag or id.")],
    as_json: JsonOpt = False,
) -> None:
    """Show which spec built an image (labels, spec hash), its size and layers."""
    report = inspect_image(image_option(image, "IMAGE") or image)
    typer.echo(json.dumps(report, indent=2) if as_json else report_text(report))
