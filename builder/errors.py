"""The exception tree and the one place that maps it to exit codes.

Every error a user can cause is a ``BuilderError`` whose message is a short
paragraph saying what is wrong and what to do; the CLI prints it without a
traceback. Anything else escaping the library is a bug and keeps its
traceback.

Errors come in families, and each carries the context a caller needs as
attributes (keyword-only, None where it is not known), so that a caller acts on
the node, the image or the field without parsing the message::

    BuilderError                    exit code  context
    ├── InputError                             what the user gave
    │   ├── SpecError                   1      .source, .problems (.path, .value, .line)
    │   ├── UsageError                  2      .field, .value, .path (InvalidReference: .reason)
    │   └── OutputExists                3      .path, .paths
    ├── LintError                       4      .tool, .path, .paths, .findings
    ├── ToolMissing                     5      .tool
    ├── EngineError                            .image
    │   ├── EngineUnavailable          10      .address
    │   ├── BuildError                 11      .created
    │   └── NotInEngine                14      .container
    ├── ClusterError                           .node, .nodes
    │   ├── RehearsalFailed            12
    │   ├── DriftFound                 13
    │   ├── PreflightFailed            15
    │   ├── NodeUnreachable            16
    │   ├── TransferFailed             20
    │   └── WrongArchitecture          21
    ├── RegistryError                          .registry, .reference
    │   ├── RegistryUnreachable        17
    │   ├── RegistryRefused            18
    │   └── UnknownDigest              19
    └── Interrupted                   130

The families are for catching (``except ClusterError as exc: exc.node``); only
the leaves are raised, and only they have documented exit codes (EXIT_CODES).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

SHOWN = 60
"""How much of a value a message shows: a 1 MB value is named, not repeated."""


def shown(value: object, *, quote: bool = True, limit: int = SHOWN) -> str:
    """value for a message: its repr (or str), cut to limit characters with '...'."""
    text = repr(value) if quote else str(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


_LONG_WORD = re.compile(rf"\S{{{4 * SHOWN},}}")
MAX_LINE = 2000
_CONTROL = dict.fromkeys([*range(9), *range(11, 32), 127, *range(128, 160)], "?")
"""What a terminal acts on (ESC, BEL, a carriage return, C1 codes) but a line break and
a tab: shown as '?'."""


def terminal_text(text: str) -> str:
    """text as it may reach a terminal: what a rank or a node wrote (an error, a log's
    tail) cannot move the cursor, retitle the window or ring."""
    return text.translate(_CONTROL)


def clipped(message: str) -> str:
    """message with any long run of text cut (and every line held to MAX_LINE), and no
    control character: the one backstop, where messages are shown, for a value nobody
    shortened or a rank's output."""
    message = terminal_text(message)
    short = _LONG_WORD.sub(lambda m: f"{m[0][:SHOWN]}... ({len(m[0])} characters)", message)
    return "\n".join(
        line if len(line) <= MAX_LINE else f"{line[:MAX_LINE]}... ({len(line)} characters)"
        for line in short.split("\n")
    )


class BuilderError(Exception):
    """Base of every user-facing error; ``exit_code`` is what the CLI returns."""

    exit_code = 1


def _one(many: tuple[str, ...]) -> str | None:
    return many[0] if len(many) == 1 else None


# what the user gave ---------------------------------------------------------------


class InputError(BuilderError):
    """What the user gave (a spec, options, an input or output file) is wrong."""


@dataclass(frozen=True)
class Problem:
    """One problem in a spec: where it is and what to do about it; value is what the
    spec holds at path, where it is known (never shown: the message says enough)."""

    path: str
    message: str
    line: int | None = None
    value: object = dataclasses.field(default=None, compare=False, repr=False, kw_only=True)

    @property
    def field(self) -> str:
        """The dotted field path (``launch.nodes[0]``): the same as path."""
        return self.path

    def __str__(self) -> str:
        where = f"{self.path} (line {self.line})" if self.line else self.path
        return f"{where}: {self.message}"


class SpecError(InputError):
    """The spec (YAML or preset) is malformed, incomplete or contradictory."""

    exit_code = 1

    def __init__(self, source: str, problems: list[Problem]) -> None:
        self.source = source
        """The spec file's name, ``preset NAME`` or the Python API's label."""
        self.problems = tuple(problems)
        """Every problem found, each with its field path, line and value."""
        count = len(problems)
        head = f"{source}: {count} problem{'s' if count != 1 else ''} in the spec"
        super().__init__("\n".join([head, *(f"  - {p}" for p in problems)]))


class UsageError(InputError):
    """Options that do not fit together, or a missing input file."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        value: object = None,
        path: Path | str | None = None,
    ) -> None:
        super().__init__(message)
        self.field = field
        """The option, variable or spec field at fault (``--slots``, ``launch.nodes``)."""
        self.value = value
        """The value it was given, where one is at fault."""
        self.path = Path(path) if path is not None else None
        """The input file at fault (a hostfile, a lock, a spec file)."""


class OutputExists(InputError):
    """Refusing to overwrite a file the user did not ask us to replace."""

    exit_code = 3

    def __init__(
        self, message: str, *, path: Path | str | None = None, paths: Iterable[Path | str] = ()
    ) -> None:
        super().__init__(message)
        self.paths = tuple(Path(p) for p in paths) or ((Path(path),) if path is not None else ())
        """Every file that would have been overwritten."""
        self.path = Path(path) if path is not None else _one_path(self.paths)
        """The file, when there is one."""


def _one_path(paths: tuple[Path, ...]) -> Path | None:
    return paths[0] if len(paths) == 1 else None


# the rendered output and the tools ------------------------------------------------


class LintError(BuilderError):
    """Rendered output failed a linter (hadolint, BuildKit parser, def-file rules)."""

    exit_code = 4

    def __init__(
        self,
        message: str,
        *,
        tool: str | None = None,
        path: str | None = None,
        paths: Iterable[str] = (),
        findings: Iterable[object] = (),
    ) -> None:
        super().__init__(message)
        self.tool = tool
        """The linter that failed or found something, when it was one."""
        self.paths = tuple(paths) or ((path,) if path is not None else ())
        """The rendered files at fault (``Dockerfile``, ``Singularity.def``)."""
        self.path = path if path is not None else _one(self.paths)
        """The rendered file, when there is one."""
        self.findings = tuple(findings)
        """The failing findings (``builder.lint.findings.Finding``), when the linter ran."""


class ToolMissing(BuilderError):
    """An optional external tool (e.g. hadolint) is not installed."""

    exit_code = 5

    def __init__(self, message: str, *, tool: str | None = None) -> None:
        super().__init__(message)
        self.tool = tool
        """The command that is missing or cannot run (``hadolint``, ``ssh``, ``docker``)."""


# the container engine ---------------------------------------------------------------


class EngineError(BuilderError):
    """The container engine is missing, failed, or does not have what was asked for."""

    def __init__(self, message: str, *, image: str | None = None) -> None:
        super().__init__(message)
        self.image = image
        """The image concerned (a reference or an id), where one is."""


class EngineUnavailable(EngineError):
    """No Docker engine answers at DOCKER_HOST or the default socket."""

    exit_code = 10

    def __init__(
        self, message: str, *, address: str | None = None, image: str | None = None
    ) -> None:
        super().__init__(message, image=image)
        self.address = address
        """Where the engine was looked for (DOCKER_HOST or the default socket)."""


class NotInEngine(EngineError):
    """An image or container the command names is not in the engine."""

    exit_code = 14

    def __init__(
        self, message: str, *, image: str | None = None, container: str | None = None
    ) -> None:
        super().__init__(message, image=image)
        self.container = container
        """The container that is missing, when it is a container."""


class BuildError(EngineError):
    """The engine ran the build (or started a container) and a step failed."""

    exit_code = 11

    def __init__(
        self, message: str, created: tuple[str, ...] = (), *, image: str | None = None
    ) -> None:
        super().__init__(message, image=image)
        self.created = created
        """Images the failed build made before it stopped (its caller may remove them)."""


# the nodes ----------------------------------------------------------------------------


class ClusterError(BuilderError):
    """Something on the nodes (hosts, or the containers a rehearsal runs as nodes) is
    unreachable, failed or differs."""

    def __init__(self, message: str, *, node: str | None = None, nodes: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.nodes = tuple(nodes) or ((node,) if node is not None else ())
        """Every node at fault."""
        self.node = node if node is not None else _one(self.nodes)
        """The node at fault, when there is one."""


class RehearsalFailed(ClusterError):
    """A rehearsal ran and found a fault: a node, a rank, the environment or a timeout."""

    exit_code = 12


class DriftFound(ClusterError):
    """verify or diff found environments that differ."""

    exit_code = 13


class PreflightFailed(ClusterError):
    """preflight ran on the nodes and named a problem: a node, device, rate, link,
    transport or environment."""

    exit_code = 15


class NodeUnreachable(ClusterError):
    """A node did not answer over ssh; nothing was started."""

    exit_code = 16


class TransferFailed(ClusterError):
    """A node did not get the image (builder ship): its load failed, or what arrived is
    another image."""

    exit_code = 20


class WrongArchitecture(ClusterError):
    """A node's CPU architecture is one the image was not built for (ship, preflight):
    nothing was sent or started there."""

    exit_code = 21


# the registries -----------------------------------------------------------------------


class RegistryError(BuilderError):
    """A registry did not answer, refused, or lacks the image asked for."""

    def __init__(
        self, message: str, *, registry: str | None = None, reference: str | None = None
    ) -> None:
        super().__init__(message)
        self.registry = registry
        """The registry's host (``registry.example.com:5000``, ``docker.io``)."""
        self.reference = reference
        """The image reference pushed or pulled (name:tag or name@sha256:...)."""


class RegistryUnreachable(RegistryError):
    """The registry of an image does not answer (or refused it for another reason)."""

    exit_code = 17


class RegistryRefused(RegistryError):
    """The registry refused the credentials (or there were none)."""

    exit_code = 18


class UnknownDigest(RegistryError):
    """The registry has no image with the digest that was asked for."""

    exit_code = 19


# the user -------------------------------------------------------------------------------


class Interrupted(BuilderError):
    """The user pressed Ctrl-C; whatever was under way was stopped cleanly."""

    exit_code = 130


EXIT_CODES: dict[str, int] = {
    cls.__name__: cls.exit_code
    for cls in (
        SpecError,
        UsageError,
        OutputExists,
        LintError,
        ToolMissing,
        EngineUnavailable,
        BuildError,
        NotInEngine,
        RehearsalFailed,
        DriftFound,
        PreflightFailed,
        NodeUnreachable,
        RegistryUnreachable,
        RegistryRefused,
        UnknownDigest,
        TransferFailed,
        WrongArchitecture,
        Interrupted,
    )
}
"""Documented exit codes by error class (README's table is checked against it)."""
