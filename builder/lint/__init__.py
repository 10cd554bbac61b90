"""Lint the rendered outputs: hadolint and BuildKit's parser on the Dockerfile,
Apptainer's definition-file grammar on each .def.

Each linter turns what it finds into ``Finding`` values (``findings``), so
the CLI prints one report and exits with one code whatever tool spoke.
``hadolint`` runs a binary and ``buildkit`` loads a Go extension on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.errors import UsageError
from builder.image.context import DOCKERFILE, FORMATS, render_outputs
from builder.lint.buildkit import check_dockerfile
from builder.lint.deffile import check_deffile
from builder.lint.findings import FAILING_LEVELS, Finding, LintReport, sort_key
from builder.lint.hadolint import run_hadolint

if TYPE_CHECKING:
    from builder.resolved import Resolved


def lint_dockerfile(text: str, file: str = "Dockerfile") -> list[Finding]:
    """hadolint's findings plus BuildKit-parser and classic-builder checks."""
    return sorted([*run_hadolint(text, file), *check_dockerfile(text, file)], key=sort_key)


def lint_deffile(text: str, file: str) -> list[Finding]:
    """Apptainer definition-file grammar checks (see ``builder.lint.deffile``)."""
    return sorted(check_deffile(text, file), key=sort_key)


def lint_stack(resolved: Resolved, fmt: str = "all") -> LintReport:
    """Render the resolved stack's outputs for fmt in memory and lint every Dockerfile and
    .def."""
    if fmt not in FORMATS:
        raise UsageError(
            f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}",
            field="--format",
            value=fmt,
        )
    findings: list[Finding] = []
    checked: list[str] = []
    for out in render_outputs(resolved, fmt):
        if out.path == DOCKERFILE:
            findings += lint_dockerfile(out.text, out.path)
            checked += [f"{out.path}: hadolint", f"{out.path}: buildkit"]
        elif out.path.endswith(".def"):
            findings += lint_deffile(out.text, out.path)
            checked.append(f"{out.path}: deffile")
    return LintReport(tuple(sorted(findings, key=sort_key)), tuple(checked))


__all__ = [
    "FAILING_LEVELS",
    "Finding",
    "LintReport",
    "lint_deffile",
    "lint_dockerfile",
    "lint_stack",
]
