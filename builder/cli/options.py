"""What the commands share: option types, loading the stack, printing or writing."""

from __future__ import annotations

import errno
import math
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from builder import (
    KUBERNETES_JOBS,
    RENDER_FORMATS,
    OutputFile,
    Stack,
    check_input,
    checked_reference,
    image_for,
    launcher_names,
    load_inputs,
    load_stack,
    parse_assignments,
    parse_spec,
    pin_path,
    preset_names,
    resolve,
    runtime_names,
    write_files,
)
from builder.errors import UsageError, shown
from builder.spec.loader import MAX_SPEC_BYTES
from builder.spec.loader import decoded as decode_spec
from builder.spec.records import ENV_NAME

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from builder.engine.base import Engine
    from builder.engine.progress import Mode
    from builder.image.context import Format
    from builder.image.inputs import BuildInputs
    from builder.resolved import Resolved

DASH = Path("-")
"""A spec given as - is read from stdin; -o - writes a single-file output to stdout."""
STDIN_SOURCE = "<stdin>"


class Choice:
    """A fixed set of values, given to an option as ``typer.Option(..., **Choice(v).option)``:
    shown in --help as [a|b|c], offered by shell completion, and refused (exit 2, naming
    the option) with our wording and, where given, why.

    Built from typer's public parser, metavar and autocompletion, which every typer of
    the supported range takes (click_type, and the click types, left typer in 0.29)."""

    def __init__(self, values: Iterable[str], why: Callable[[str], str] | None = None) -> None:
        self.choices = tuple(values)
        self.why = why

    @property
    def option(self) -> dict[str, Any]:
        """The keywords of typer.Option that make it this choice."""
        return {
            "parser": self.parse,
            "metavar": f"[{'|'.join(self.choices)}]",
            "autocompletion": self.complete,
        }

    def parse(self, value: str) -> str:
        if value in self.choices:
            return value
        reason = self.why(value) if self.why is not None else ""
        raise typer.BadParameter(f"{shown(value)}: choose one of {', '.join(self.choices)}{reason}")

    def complete(self, incomplete: str) -> list[str]:
        return [value for value in self.choices if value.startswith(incomplete)]


def _complete_preset(incomplete: str) -> list[str]:
    return [name for name in preset_names() if name.startswith(incomplete)]


SetOpt = Annotated[
    Optional[list[str]],  # noqa: UP045
    typer.Option(
        "--set",
        metavar="NAME=VALUE",
        help="A variable every rank gets, added to launch.env or overriding it; repeatable.",
    ),
]
"""--set of every command that writes or prints a run: the values join launch.env
(``Resolved.with_settings``), so they reach every rank on every site as launch.env does."""
SpecArg = Annotated[
    Optional[Path],  # noqa: UP045 - typer needs a runtime-evaluable annotation on 3.10
    typer.Argument(help="stack.yaml to use, - for stdin (or --preset).", show_default=False),
]
PresetOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        "--preset",
        "-p",
        help="Use a built-in preset instead of a spec file (`builder presets` lists them).",
        autocompletion=_complete_preset,
    ),
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Replace files that already exist.")]
FormatOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        "--format",
        "-f",
        **Choice(RENDER_FORMATS).option,
        help="Which files (default: all with -o, docker without).",
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
    typer.Option("--pip-extra-index-url", metavar="URL", help="Extra pip index; repeatable."),
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
    typer.Option(
        "--image",
        help="Image to run (default: the spec's name:tag, pinned by the digest in "
        "stack.digest when `builder push` recorded one).",
    ),
]
RuntimeOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        "--runtime",
        **Choice(runtime_names()).option,
        help="Container runtime (default: the spec's).",
    ),
]
LauncherOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        "--launcher", **Choice(launcher_names()).option, help="Launcher (default: the spec's)."
    ),
]
KubernetesJobOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        "--job",
        **Choice(KUBERNETES_JOBS).option,
        help="trainjob (Kubeflow Trainer v2) or pytorchjob (default: launch.kubernetes.job).",
        show_default=False,
    ),
]
"""The Kubernetes job kind, for `builder kubernetes` and `builder preflight --scheduler
kubernetes`."""
OutputFileOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option("--output", "-o", help="File to write (default or -: print)."),
]
PROGRESS: tuple[Mode, ...] = ("auto", "tty", "plain", "quiet")
"""builder.engine.progress.Mode, spelt out: that module is the engine's, loaded by build."""
NodeDirOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        "--node-dir",
        metavar="PATH",
        help="Where every node sees the run's folder (absolute), when not at this machine's "
        "path of it: what the nodes run names it. Default: the path a bundle recorded "
        "there with --node-dir, else this machine's.",
        show_default=False,
    ),
]
NodesSshConfigOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(
        "--ssh-config", help="ssh -F file for reaching the nodes (default: your own ssh config)."
    ),
]


def ssh_config_file(path: Path | None) -> Path | None:
    """--ssh-config as given, refused unless it is a file ssh can read (a FIFO there would
    hang every ssh), before any node or engine is asked."""
    if path is not None:
        input_file(path, "--ssh-config", "name an ssh_config file (the bundle's, or your own)")
    return path


def input_file(path: Path, option: str, fix: str, *, limit: int | None = None) -> Path:
    """A file an option names, for another program or a later read: there, and a regular
    file (a symlink to one is fine) of at most limit bytes (``builder.files``); else a
    UsageError naming the option, what is wrong and fix."""
    if not check_input(path, what=option, fix=fix, field=option, limit=limit):
        raise UsageError(f"{_said(option, path)}: no such file; {fix}", field=option, path=path)
    return path


_LOOP = "a symlink on the way leads back to itself"


def folder_option(value: Path, option: str) -> Path:
    """A folder an option names (--cluster-dir, -o): not '-' (stdout takes one file; a
    folder made as '-' would hold the cluster's keys), no symlink loop on the way, not a
    file; refused before anything is read, asked or made."""
    if str(value) == "-":
        raise UsageError(
            f"{option} -: a folder is needed here, not stdout (-o - prints a single file); "
            "name a folder, e.g. cluster",
            field=option,
            value="-",
        )
    _reachable(value, option, [value, *value.parents])
    return value


def file_option(value: Path | None, option: str = "-o") -> Path | None:
    """A file an option names for writing (None and '-', stdout, pass): its folder can hold
    it, and nothing but a file is in its place; checked where the command asks the engine
    before it writes, so that a bad -o is refused first."""
    if value is None or value == DASH:
        return value
    _reachable(value, option, list(value.parents))
    if value.exists() and not value.is_file():
        what = "a folder" if value.is_dir() else "not a regular file"
        raise UsageError(
            f"{_said(option, value)} is {what}; give the path of the file to write",
            field=option,
            path=value,
        )
    return value


def _reachable(value: Path, option: str, folders: list[Path]) -> None:
    """No symlink loop on the way to value, and each of folders a folder (or missing)."""
    why = None
    try:
        value.resolve()
        value.stat()  # the loop Path.resolve lets pass (it does from Python 3.13)
    except (FileNotFoundError, NotADirectoryError):
        pass  # made later; a file on the way is named below
    except RuntimeError:  # a symlink loop (Python < 3.13)
        why = _LOOP
    except OSError as exc:
        why = _LOOP if exc.errno == errno.ELOOP else exc.strerror or str(exc)
    if why is not None:
        raise UsageError(
            f"{_said(option, value)}: {why}; remove or fix the link, or name another path",
            field=option,
            path=value,
        )
    for part in folders:
        if part.exists() and not part.is_dir():
            raise UsageError(
                f"{_said(option, value)}: {part} is a file, where a folder is needed; move it "
                "away or name another path",
                field=option,
                path=part,
            )


def _said(option: str, value: Path) -> str:
    """The option and its value, as a message shows them (quoted when not printable)."""
    text = str(value)
    return f"{option} {shown(text, quote=not text.isprintable())}"


class Bounded:
    """A number option within a range, given as ``typer.Option(..., **Bounded(3, 60).option)``
    and shown in --help as [3<=x<=60]: a value outside it, inf or nan is refused with exit
    2, naming the option, before anything is asked or run."""

    def __init__(
        self, low: float, high: float, *, low_open: bool = False, high_open: bool = False
    ) -> None:
        self.low, self.high = low, high
        self.low_open, self.high_open = low_open, high_open

    @property
    def option(self) -> dict[str, Any]:
        """The keywords of typer.Option that make it this range."""
        return {"parser": self.parse, "metavar": f"[{self.describe()}]"}

    def describe(self) -> str:
        low, high = ("<" if self.low_open else "<="), ("<" if self.high_open else "<=")
        return f"{self.low:g}{low}x{high}{self.high:g}"

    def parse(self, value: str | float) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        inside = (self.low < number if self.low_open else self.low <= number) and (
            number < self.high if self.high_open else number <= self.high
        )
        if not inside:  # nan compares false: refused with the rest
            raise typer.BadParameter(f"{shown(value)}: give a number in {self.describe()}")
        return number


ProgressOpt = Annotated[
    str,
    typer.Option(
        "--progress",
        **Choice(PROGRESS).option,
        help="auto, tty (live view), plain (CI logs) or quiet.",
    ),
]


def inputs_of(
    base_image: str | None,
    ca_bundle: Path | None,
    trust_ca: bool,
    pip_index_url: str | None,
    pip_extra_index_url: list[str] | None,
    wheelhouse: Path | None,
    platform_bases: tuple[str, ...] = (),
) -> BuildInputs:
    return load_inputs(
        platform_bases=platform_bases,
        base_image=base_image,
        ca_bundle=ca_bundle,
        trust_ca=trust_ca,
        pip_index_url=pip_index_url,
        pip_extra_index_urls=tuple(pip_extra_index_url or ()),
        wheelhouse=wheelhouse,
    )


def resolved_of(
    stack: Stack,
    inputs: BuildInputs | None = None,
    *,
    spec: Path | None = None,
    engine: Engine | None = None,
    runtime: str | None = None,
    launcher: str | None = None,
    scheduler: str = "ssh",
) -> Resolved:
    """The command's one resolve: stack with inputs, the lock beside spec (None: no lock,
    said on stderr when there is one), the runtime and launcher options. Without an
    engine (rendering) the locked base image is not checked."""
    resolved = resolve(
        stack,
        inputs,
        runtime_name=runtime,
        launcher_name=launcher,
        scheduler_name=scheduler,
        lock_of=spec_file(spec),
        engine=engine,
    )
    lock = resolved.inputs.lock
    if lock is not None:
        typer.echo(
            f"using the lock of {spec} ({len(lock.python)} Python, "
            f"{len(lock.apt)} Debian packages)",
            err=True,
        )
    return resolved


def stack_of(spec: Path | None, preset: str | None) -> Stack:
    """The spec file, the spec on stdin (-) or the preset: exactly one of them."""
    if spec != DASH:
        return load_stack(spec, preset)
    if preset is not None:
        raise UsageError("give either a spec (a file, or - for stdin) or --preset NAME, not both")
    raw = typer.get_binary_stream("stdin").read(MAX_SPEC_BYTES + 1)
    if len(raw) > MAX_SPEC_BYTES:
        raise UsageError(
            f"the spec on stdin is larger than {MAX_SPEC_BYTES // 1024 // 1024} MiB; "
            "a stack spec is a few dozen lines"
        )
    root = Path.cwd()  # what the spec names (requirements files) is found from here
    text = decode_spec(raw, STDIN_SOURCE)
    return Stack(parse_spec(text, STDIN_SOURCE, root), STDIN_SOURCE, root)


def spec_file(spec: Path | None) -> Path | None:
    """The spec's file, beside which its lock lies; None for a preset or stdin."""
    return None if spec == DASH else spec


def print_or_write(text: str, output: Path | None, *, force: bool) -> list[Path]:
    """text on stdout (no -o, or -o -) or in the file -o names; the files written."""
    if output is None or output == DASH:
        typer.echo(text, nl=False)
        return []
    write_files([OutputFile(output.name, 0o644, text)], output.parent, force=force)
    typer.echo(f"wrote {output}", err=True)
    return [output]


def format_of(value: str | None, *, has_output: bool) -> Format:
    fmt: Format = choice(value or ("all" if has_output else "docker"), "--format", RENDER_FORMATS)
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
    if value is not None:
        checked_reference(value, field=option)
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


def plan_image(resolved: Resolved, image: str | None, spec: Path | None) -> str:
    """The image a plan names: --image (checked); else the spec's name:tag, pinned by
    the digest `builder push` recorded beside the spec (stack.digest) for that tag where
    the runtime's nodes fetch the image (Apptainer's SIF is named after the tag)."""
    source = spec if spec is not None and str(spec) != "-" and resolved.runtime.pulls else None
    reference = image_for(resolved.spec, source, image_option(image))
    if image is None and "@" in reference:
        typer.echo(f"image pinned by {pin_path(spec or Path())}: {reference}", err=True)
    return reference


def with_set(resolved: Resolved, items: list[str] | None) -> Resolved:
    """The run with the command's --set values in launch.env."""
    return resolved.with_settings(parse_assignments(items or [], "--set"))


def spec_ref(spec: Path | None, preset: str | None) -> str:
    """The spec as the bundle's README names it in the commands it shows."""
    if spec is not None and str(spec) != "-":
        return shlex.quote(str(spec))
    return f"--preset {shlex.quote(preset)}" if preset else "stack.yaml"
