"""What the commands share: option types, loading the stack, printing or writing."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from builder.errors import UsageError, shown
from builder.image.context import FORMATS
from builder.image.inputs import load_inputs
from builder.lock.apply import check_base, with_lock
from builder.output import OutputFile, write_files
from builder.spec.loader import load_stack
from builder.spec.records import ENV_NAME, IMAGE_REF

if TYPE_CHECKING:
    from builder.engine.base import Engine
    from builder.image.context import Format
    from builder.image.inputs import BuildInputs
    from builder.spec.loader import Stack

MAX_REFERENCE = 512

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

NoLockOpt = Annotated[bool, typer.Option("--no-lock", help="Ignore stack.lock beside the spec.")]


ImageOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option("--image", help="Image to run (default: the spec's name:tag)."),
]
RuntimeOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option("--runtime", help="docker, apptainer, singularity or none (default: the spec's)."),
]
LauncherOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        "--launcher", help="deepspeed, torchrun, gaudi_spawn or mpirun (default: the spec's)."
    ),
]
OutputFileOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option("--output", "-o", help="File to write (default: print)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def inputs_of(
    base_image: str | None,
    ca_bundle: Path | None,
    trust_ca: bool,
    pip_index_url: str | None,
    pip_extra_index_url: list[str] | None,
    wheelhouse: Path | None,
) -> BuildInputs:
    return load_inputs(
        base_image=base_image,
        ca_bundle=ca_bundle,
        trust_ca=trust_ca,
        pip_index_url=pip_index_url,
        pip_extra_index_urls=tuple(pip_extra_index_url or ()),
        wheelhouse=wheelhouse,
    )


def locked(
    stack: Stack, inputs: BuildInputs, spec: Path | None, engine: Engine | None
) -> BuildInputs:
    """inputs with the lock beside spec (spec None: no lock), said on stderr. Without an
    engine (rendering) the locked base image is not checked."""
    inputs = with_lock(stack, inputs, spec, engine)
    if inputs.lock is not None:
        typer.echo(f"using the lock of {spec} ({len(inputs.lock.python)} Python, "
                   f"{len(inputs.lock.apt)} Debian packages)", err=True)  # fmt: skip
    return inputs


def check_locked_base(inputs: BuildInputs, engine: Engine) -> None:
    """The engine half of ``locked``: a build reads and checks its lock (``locked`` with
    engine None) before connecting, then checks the locked base here."""
    if inputs.lock is not None:
        check_base(inputs.lock, engine)


def stack_of(spec: Path | None, preset: str | None) -> Stack:
    return load_stack(spec, preset)


def print_or_write(text: str, output: Path | None, *, force: bool) -> None:
    if output is None:
        typer.echo(text, nl=False)
        return
    write_files([OutputFile(output.name, 0o644, text)], output.parent, force=force)
    typer.echo(f"wrote {output}", err=True)


def format_of(value: str | None, *, has_output: bool) -> Format:
    fmt: Format = choice(value or ("all" if has_output else "docker"), "--format", FORMATS)
    if fmt == "all" and not has_output:
        raise UsageError("--format all writes several files: add -o DIR")
    return fmt


def key_values(items: list[str], option: str) -> dict[str, str]:
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not re.fullmatch(ENV_NAME, key) or not value.isprintable():
            raise UsageError(
                f"{option} {shown(item)}: write it as KEY=VALUE (a name of letters, digits "
                "and _, a one-line value)"
            )
        pairs[key] = value
    return pairs


def image_option(value: str | None, option: str = "--image") -> str | None:
    """An image reference given on the command line, checked before any engine is asked."""
    if value is not None and (len(value) > MAX_REFERENCE or not re.fullmatch(IMAGE_REF, value)):
        raise UsageError(
            f"{option} {shown(value)}: not an image reference (name[:tag], letters, digits "
            "and ._/:@+- only)"
        )
    return value


def text_option(value: str | None, option: str) -> str | None:
    """A one-line option value: no line break or other control character."""
    if value is not None and (not value or not value.isprintable()):
        raise UsageError(f"{option} {shown(value)}: give one line of printable text")
    return value


def choice(value: str, option: str, choices: tuple[str, ...]) -> Any:
    if value not in choices:
        raise UsageError(f"{option} {shown(value)}: choose one of {', '.join(choices)}")
    return value


def image_ref(stack: Stack, image: str | None) -> str:
    """--image (checked), or the spec's name:tag."""
    return image_option(image) or f"{stack.spec.image.name}:{stack.spec.image.tag}"
