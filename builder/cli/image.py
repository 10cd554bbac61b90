"""Commands about images: build, push, ship (to the nodes without a registry), inspect."""

from __future__ import annotations

from pathlib import Path  # noqa: TC003 - typer reads the annotations at run time
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from builder import (
    Ssh,
    build_platforms,
    check_images,
    connect,
    hosts_from_nodes,
    image_report_text,
    inspect_image,
    progress_for,
    push_and_record,
    read_pin,
    ship_image,
)
from builder.cli.app import app
from builder.cli.envelope import JsonOpt, set_result
from builder.cli.options import (
    PROGRESS,
    BaseImageOpt,
    CaBundleOpt,
    NodesSshConfigOpt,
    NoLockOpt,
    PipExtraOpt,
    PipIndexOpt,
    PresetOpt,
    ProgressOpt,
    SpecArg,
    TrustCaOpt,
    WheelhouseOpt,
    choice,
    image_option,
    image_ref,
    inputs_of,
    key_values,
    resolved_of,
    spec_file,
    ssh_config_file,
    stack_of,
)
from builder.errors import DriftFound, NotInEngine, TransferFailed, UsageError

if TYPE_CHECKING:
    from builder import Pushed, Stack
    from builder.engine.base import Engine


@app.command()
def build(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    tag: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--tag", "-t", help="name:tag (default: image.name:image.tag of the spec)."),
    ] = None,
    base_image: BaseImageOpt = None,
    platform_base: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Option(
            "--platform-base",
            metavar="PLATFORM=NAME:TAG",
            help="PLATFORM=NAME:TAG: that architecture's build starts from this base "
            "instead (e.g. linux/arm64=registry.example.com/base:arm64); repeatable.",
        ),
    ] = None,
    ca_bundle: CaBundleOpt = None,
    trust_ca: TrustCaOpt = False,
    pip_index_url: PipIndexOpt = None,
    pip_extra_index_url: PipExtraOpt = None,
    wheelhouse: WheelhouseOpt = None,
    build_arg: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Option(
            "--build-arg", metavar="KEY=VALUE", help="KEY=VALUE passed to the build; repeatable."
        ),
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
    as_json: JsonOpt = False,
) -> None:
    """Build the image through the Docker engine; tag it only if every step succeeds.

    One image per architecture of image.platforms (several: tagged name:tag-ARCH each,
    pushed as one manifest list). With stack.lock beside stack.yaml, exactly the locked
    packages are installed."""
    stack = stack_of(spec, preset)
    inputs = inputs_of(
        base_image,
        ca_bundle,
        trust_ca,
        pip_index_url,
        pip_extra_index_url,
        wheelhouse,
        tuple(platform_base or ()),
    )
    resolved = resolved_of(stack, inputs, spec=None if no_lock else spec)
    build_args = key_values(build_arg or [], "--build-arg")
    shown_as = progress_for(choice(progress, "--progress", PROGRESS))
    reference = image_option(tag, "--tag")
    if push:
        _check_record(stack, reference or image_ref(stack, None), spec)
    engine = connect()  # every option is checked before the engine is asked
    built = build_platforms(
        resolved,
        engine=engine,
        reference=reference,
        build_args=build_args,
        nocache=no_cache,
        progress=shown_as,
    )
    result = built.primary
    several = len(built.results) > 1
    for platform, each in built.results.items():
        typer.echo(f"{each.reference} ({platform})" if several else each.reference, err=as_json)
    data: dict[str, object] = {
        "reference": built.reference,
        "image_id": result.image_id,
        "platforms": {
            platform: {"reference": each.reference, "image_id": each.image_id}
            for platform, each in built.results.items()
        },
    }
    if push:
        pushed, record = _push(engine, built.reference, stack, spec, tuple(built.results))
        data |= {
            "digest": pushed.digest,
            "pinned": pushed.pinned,
            "platform_digests": pushed.platforms,
            "record": None if record is None else str(record),
        }
    set_result(data)


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
    reference = image_ref(stack, image)
    if "@" in reference:
        raise UsageError(f"--image {reference}: push a name:tag; a digest is what a push gives")
    _check_record(stack, reference, spec)
    engine = connect()
    if not engine.exists(reference):
        raise NotInEngine(
            f"image {reference} is not in the local engine: build it first", image=reference
        )
    own = reference == image_ref(stack, None)
    platforms = (stack.spec.image.platforms or ()) if own else ()
    pushed, record = _push(engine, reference, stack, spec, platforms)
    set_result(
        {
            "reference": pushed.reference,
            "digest": pushed.digest,
            "pinned": pushed.pinned,
            "platform_digests": pushed.platforms,
            "record": None if record is None else str(record),
        }
    )
    typer.echo(pushed.pinned, err=as_json)


def _check_record(stack: Stack, reference: str, spec: Path | None) -> None:
    """A push of the spec's own name:tag replaces its record (stack.digest): what is there
    now must be one (or nothing), checked before the engine is asked."""
    source = spec_file(spec)
    if source is not None and reference == image_ref(stack, None):
        read_pin(source)


def _push(
    engine: Engine,
    reference: str,
    stack: Stack,
    spec: Path | None,
    platforms: tuple[str, ...] = (),
) -> tuple[Pushed, Path | None]:
    """Push reference (of several platforms: each architecture's image and their manifest
    list; progress on stderr) and record its digest beside a spec file."""
    source = spec_file(spec)
    pushed, record = push_and_record(
        engine, reference, source, lambda line: typer.echo(line, err=True), platforms, stack=stack
    )
    if source is None:
        typer.echo(f"pushed {pushed.pinned} (no spec file: nothing recorded)", err=True)
    elif record is not None:
        typer.echo(f"pushed {pushed.pinned}; recorded in {record}", err=True)
    else:  # the spec's own name:tag is what its record pins; another push leaves it
        typer.echo(f"pushed {pushed.pinned} (not the spec's name:tag: nothing recorded)", err=True)
    return pushed, record


@app.command()
def ship(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    image: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--image", help="name:tag to send (default: the spec's name:tag)."),
    ] = None,
    ssh_config: NodesSshConfigOpt = None,
    check: Annotated[
        bool, typer.Option("--check", help="Send nothing: name the nodes without the image.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Send it also to nodes that already have it.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Put the built image on every node without a registry: docker save here, docker load
    on each node (ssh NODE, in parallel) that lacks it, its image id checked on arrival.

    --check compares each node's image id with this engine's and exits 13 when one
    differs or lacks it."""
    stack = stack_of(spec, preset)
    reference = image_ref(stack, image)
    if "@" in reference:
        raise UsageError(
            f"--image {reference}: ship a name:tag; `docker load` keeps tags, not registry digests"
        )
    why = resolved_of(stack).runtime.not_shipped
    if why:
        raise UsageError(f"launch.runtime {stack.spec.launch.runtime}: {why}")
    if check and force:
        raise UsageError("--check sends nothing; --force sends to every node: give one of them")
    ssh_config_file(ssh_config)
    names = [host.name for host in hosts_from_nodes(stack.spec.launch.nodes, 1)]
    engine = connect()  # every option is checked before the engine is asked
    ssh = Ssh(ssh_config)
    if check:
        shipment = check_images(engine, reference, names, ssh)
    else:
        say = lambda line: typer.echo(line, err=True)  # noqa: E731
        shipment = ship_image(engine, reference, names, ssh, force=force, say=say)
    set_result(shipment.as_data())
    for row in shipment.nodes:
        id_ = (row.image_id or "-").removeprefix("sha256:")[:12]
        seconds = f"{row.seconds:.1f} s" if row.state == "sent" else ""
        typer.echo(f"{row.node}\t{row.state}\t{id_}\t{seconds}\t{row.detail}".rstrip(), err=as_json)
    problems = "\n".join(f"- {line}" for line in shipment.problems())
    if not shipment.ok and check:
        raise DriftFound(
            f"{reference} is not on every node as built here:\n{problems}", nodes=shipment.failed
        )
    if not shipment.ok:
        raise TransferFailed(
            f"{reference} did not reach every node:\n{problems}", nodes=shipment.failed
        )
    sent = sum(row.state == "sent" for row in shipment.nodes)
    said = "all have it" if check else f"sent to {sent}, checked on arrival"
    typer.echo(
        f"ok: {reference} ({shipment.image_id}) on all {len(shipment.nodes)} nodes ({said})",
        err=True,
    )


@app.command()
def inspect(
    image: Annotated[str, typer.Argument(help="Image name:tag or id.")],
    as_json: JsonOpt = False,
) -> None:
    """Show which spec built an image (labels, spec hash), its size and layers."""
    report = inspect_image(image_option(image, "IMAGE") or image)
    set_result(report)
    if not as_json:
        typer.echo(image_report_text(report))
