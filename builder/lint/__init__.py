"""Lint the rendered outputs: hadolint and BuildKit's parser on the Dockerfile,
Apptainer's definition-file grammar on each .def.

Each linter turns what it finds into ``Finding`` values, so the CLI prints
one report and exits with one code whatever tool spoke. The linters are
imported on first use: ``hadolint`` runs a binary, ``buildkit`` loads a Go
extension, and neither belongs in ``builder --help``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from builder.errors import LintError, UsageError

if TYPE_CHECKING:
    from builder.context import Format
    from builder.loader import Stack

FAILING_LEVELS = frozenset({"error", "warning"})
"""Levels that make a report fail; hadolint's ``info`` and ``style`` are advice."""

_FORMATS = ("docker", "apptainer", "all")


@dataclass(frozen=True)
class Finding:
    """One problem a linter found, located in one rendered file."""

    tool: str
    file: str
    line: int | None
    level: str
    code: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        message = " ".join(self.message.split())
        return f"{where}: {self.level} {self.code}: {message} [{self.tool}]"


def _sort_key(finding: Finding) -> tuple[str, int, str, str, str]:
    line = finding.line if finding.line is not None else 0
    return (finding.file, line, finding.tool, finding.code, finding.message)


@dataclass(frozen=True)
class LintReport:
    """Everything found in one stack's outputs, and what was checked."""

    findings: tuple[Finding, ...]
    checked: tuple[str, ...]

    def failing(self) -> tuple[Finding, ...]:
        """Findings at warning level or above: these fail `builder lint`."""
        return tuple(f for f in self.findings if f.level in FAILING_LEVELS)

    def text(self) -> str:
        """One line per finding, then a one-line verdict."""
        lines = [str(f) for f in self.findings]
        checks = f"{len(self.checked)} check{'s' if len(self.checked) != 1 else ''}"
        failing = self.failing()
        if not failing:
            lines.append(f"ok: {checks}, no findings at warning level or above")
        else:
            errors = sum(f.level == "error" for f in failing)
            warnings = len(failing) - errors
            lines.append(
                f"failed: {checks}, {errors} error{'s' if errors != 1 else ''} and "
                f"{warnings} warning{'s' if warnings != 1 else ''}"
            )
        return "\n".join(lines)

    def raise_for_findings(self) -> None:
        """Raise LintError naming every failing finding; do nothing if there is none."""
        failing = self.failing()
        if not failing:
            return
        files = sorted({f.file for f in failing})
        count = len(failing)
        head = (
            f"{count} lint finding{'s' if count != 1 else ''} at warning level or above in "
            f"{', '.join(files)}. The rendered files come from the spec and builder's "
            "templates: change the spec if a finding points at your values, otherwise "
            "report it as a builder bug."
        )
        raise LintError("\n".join([head, *(f"  - {f}" for f in failing)]))


def lint_dockerfile(text: str, file: str = "Dockerfile") -> list[Finding]:
    """hadolint's findings plus BuildKit-parser and classic-builder checks."""
    from builder.lint.buildkit import check_dockerfile
    from builder.lint.hadolint import run_hadolint

    return sorted([*run_hadolint(text, file), *check_dockerfile(text, file)], key=_sort_key)


def lint_deffile(text: str, file: str) -> list[Finding]:
    """Apptainer definition-file grammar checks (see ``builder.lint.deffile``)."""
    from builder.lint.deffile import check_deffile

    return sorted(check_deffile(text, file), key=_sort_key)


def lint_stack(stack: Stack, fmt: str = "all") -> LintReport:
    """Render the stack's outputs for fmt in memory and lint every Dockerfile and .def."""
    from builder.context import DOCKERFILE, render_outputs

    if fmt not in _FORMATS:
        raise UsageError(f"unknown format {fmt!r}; choose one of: {', '.join(_FORMATS)}")
    findings: list[Finding] = []
    checked: list[str] = []
    for out in render_outputs(stack, cast("Format", fmt)):
        if out.path == DOCKERFILE:
            findings += lint_dockerfile(out.text, out.path)
            checked += [f"{out.path}: hadolint", f"{out.path}: buildkit"]
        elif out.path.endswith(".def"):
            findings += lint_deffile(out.text, out.path)
            checked.append(f"{out.path}: deffile")
    return LintReport(tuple(sorted(findings, key=_sort_key)), tuple(checked))


__all__ = [
    "FAILING_LEVELS",
    "Finding",
    "LintReport",
    "lint_deffile",
    "lint_dockerfile",
    "lint_stack",
]
