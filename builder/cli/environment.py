"""Commands about environments being the same everywhere: lock, fingerprint, verify, diff."""

from __future__ import annotations

from functools import cache
from pathlib import Path  # noqa: TC003 - typer reads the annotations at run time
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from builder import (
    MAX_HOSTFILE_BYTES,
    OutputFile,
    connect,
    difference_table,
    differences,
    is_lock_reference,
    lock_path,
    of_container,
    of_containers,
    of_hosts,
    of_image,
    of_reference,
    take_lock,
    with_image,
    write_files,
)
from builder.cli.app import app
from builder.cli.envelope import JsonOpt, files_result, set_result

# typer resolves the annotations at run time, so these stay real imports
from builder.cli.options import (
    DASH,
    PresetOpt,
    SpecArg,
    file_option,
    image_option,
    image_ref,
    input_file,
    print_or_write,
    resolved_of,
    spec_file,
    ssh_config_file,
    stack_of,
    text_option,
)
from builder.errors import DriftFound, UsageError, shown

if TYPE_CHECKING:
    from builder.fingerprint.record import Fingerprint

"""A hostfile of 100,000 nodes is about 4 MiB."""
HOSTFILE_FIX = "give the hostfile `builder hostfile` or `builder bundle` wrote (host slots=N lines)"


@app.command()
def lock(
    spec: SpecArg = None,
    preset: PresetOpt = None,
    image: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            "--image",
            help="The built image whose packages are locked (default: the spec's name:tag).",
        ),
    ] = None,
    output: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(
            "--output", "-o", help="Lock file (default: stack.lock beside the spec; -: print)."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write stack.lock: the base digest, every Python and Debian package of the built image.

    The lock is generated: writing it again replaces it."""
    stack = stack_of(spec, preset)
    source = spec_file(spec)
    target = output or (lock_path(source) if source is not None else None)
    if target is None:
        raise UsageError(
            "a preset or a spec on stdin has no folder for its lock: pass -o FILE.lock"
        )
    if target == DASH and as_json:
        raise UsageError("--json lists the files written: give -o FILE.lock (not stdout)")
    if target != DASH and target.is_dir():
        raise UsageError(f"-o {target} is a folder; give the lock file's path (FILE.lock)")
    file_option(target, "-o" if output is not None else "the lock file")
    reference = image_ref(stack, image)  # every option is checked before the engine is asked
    taken = take_lock(resolved_of(stack), connect(), reference)
    if target == DASH:
        print_or_write(taken.text(), None, force=True)
        return
    written = write_files([OutputFile(target.name, 0o644, taken.text())], target.parent, force=True)
    set_result(
        {
            **files_result(written),
            "base": taken.base.reference,
            "python": len(taken.python),
            "apt": len(taken.apt),
        }
    )
    typer.echo(
        f"wrote {target}: {len(taken.python)} Python packages, {len(taken.apt)} Debian "
        f"packages over {taken.base.reference}",
        err=True,
    )


@app.command()
def fingerprint(
    image: Annotated[
        Optional[str],  # noqa: UP045
        typer.Argument(help="Image name:tag (or use --container)."),
    ] = None,
    container: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--container", help="A running container instead of an image."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show an environment's fingerprint: OS, Python, packages, torch build, NCCL/HCCL, env."""
    if (image is None) == (container is None):
        raise UsageError("give an image or --container NAME (one of them)")
    image_option(image, "IMAGE")
    text_option(container, "--container")
    engine = connect()
    found = of_container(engine, container) if container else of_image(engine, image or "")
    set_result(found.as_data())
    if not as_json:
        typer.echo(found.summary(), nl=False)


@app.command()
def verify(
    hostfile: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--hostfile", help="Reach every host of this hostfile over ssh."),
    ] = None,
    ssh_config: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--ssh-config", help="ssh -F file (default: ssh_config beside the hostfile)."),
    ] = None,
    containers: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--containers", help="Comma-separated running containers (docker exec)."),
    ] = None,
    image: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--image", help="Also compare every node with this image."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Fingerprint every node and show what differs; exit 13 when anything does."""
    engine = cache(connect)  # only when containers or an image are asked for, once
    if hostfile is not None and containers is None:
        input_file(hostfile, "--hostfile", HOSTFILE_FIX, limit=MAX_HOSTFILE_BYTES)
        ssh_config_file(ssh_config)
        nodes = of_hosts(hostfile, ssh_config)
    elif containers is not None and hostfile is None:
        names = [name.strip() for name in containers.split(",") if name.strip()]
        if not names or not all(name.isprintable() for name in names):
            raise UsageError(
                f"--containers {shown(containers)}: name the running containers, "
                "comma-separated (node1,node2)"
            )
        image_option(image)
        nodes = of_containers(engine(), names)
    else:
        raise UsageError("say which nodes: --hostfile FILE or --containers a,b,c (one of them)")
    reference = of_image(engine(), image) if image else None
    if reference is not None and containers is not None:  # which image each runs, too
        reference = with_image(reference, engine().image(image or "").id)
    _report(nodes, reference, as_json=as_json, what="nodes")


@app.command()
def diff(
    first: Annotated[str, typer.Argument(help="Image, container:NAME or FILE.lock.")],
    second: Annotated[str, typer.Argument(help="Image, container:NAME or FILE.lock.")],
    as_json: JsonOpt = False,
) -> None:
    """Compare two environments (images, containers or a lock); exit 13 when they differ."""
    engine = cache(connect)  # lock files are read first: a bad one never waits for the engine
    operands = sorted((first, second), key=lambda ref: not is_lock_reference(ref))
    found = {ref: of_reference(engine, ref) for ref in operands}
    _report([found[first], found[second]], None, as_json=as_json, what="environments")


def _report(
    prints: list[Fingerprint], reference: Fingerprint | None, *, as_json: bool, what: str
) -> None:
    sources, table = differences(prints, reference=reference)
    set_result(
        {
            "same": not table,
            "digests": {p.source: p.digest for p in prints},
            "differences": table,
            "sources": sources,
        }
    )
    if not as_json:
        if reference:
            typer.echo(f"{reference.digest}  {reference.source} (reference; env not compared)")
        for p in prints:
            typer.echo(f"{p.digest}  {p.source}")
        if table:
            typer.echo("")
            typer.echo(difference_table(sources, table), nl=False)
    if table:
        raise DriftFound(_blame(sources, table, what))
    if len(prints) == 1 and reference is not None:
        said = f"ok: {prints[0].source} matches {reference.source}"
    else:
        said = f"ok: the {len(prints)} {what} are the same"
    typer.echo(said, err=as_json)


def _blame(sources: list[str], table: dict[str, list[str]], what: str) -> str:
    """Which sources stand out from the first (the reference when there is one)."""
    odd: dict[str, list[str]] = {}
    for field, values in table.items():
        for source, value in zip(sources[1:], values[1:], strict=True):
            if value not in (values[0], "-"):
                odd.setdefault(source, []).append(f"{field} {value} ({sources[0]}: {values[0]})")
    lines = [
        f"{source}: {'; '.join(items[:5])}" + (f"; and {len(items) - 5} more" if items[5:] else "")
        for source, items in odd.items()
    ]
    return f"the {what} differ in {len(table)} field(s):\n" + "\n".join(f"- {x}" for x in lines)
