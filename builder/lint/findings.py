"""What a linter found, whichever tool it was, and the report of one stack's outputs."""

from __future__ import annotations

from dataclasses import dataclass

from builder.errors import LintError

FAILING_LEVELS = frozenset({"error", "warning"})
"""Levels that make a report fail; hadolint's ``info`` and ``style`` are advice."""


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


def sort_key(finding: Finding) -> tuple[str, int, str, str, str]:
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
        tools = {f.tool for f in failing}
        raise LintError(
            "\n".join([head, *(f"  - {f}" for f in failing)]),
            tool=tools.pop() if len(tools) == 1 else None,
            paths=files,
            findings=failing,
        )
