"""A lint report as SARIF 2.1.0, the JSON that CI code scanning reads (GitHub, GitLab).

One run per tool that was run (a clean tool still says it looked), its rules the codes it
reported; levels mapped to SARIF's (hadolint's info and style are notes). Sorted, no
timestamps: the same report gives the same bytes.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from builder._version import __version__

if TYPE_CHECKING:
    from builder.lint.findings import Finding, LintReport

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVELS = {"error": "error", "warning": "warning"}
"""Our levels that SARIF has; the rest (info, style) are notes."""
TOOL_URIS = {
    "hadolint": "https://github.com/hadolint/hadolint",
    "buildkit": "https://github.com/moby/buildkit",
}


def sarif_text(report: LintReport) -> str:
    """report as SARIF 2.1.0 JSON text."""
    tools = {checked.rpartition(": ")[2] for checked in report.checked}
    tools |= {finding.tool for finding in report.findings}
    runs = [_run(tool, [f for f in report.findings if f.tool == tool]) for tool in sorted(tools)]
    data = {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": runs}
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _run(tool: str, findings: list[Finding]) -> dict[str, Any]:
    driver: dict[str, Any] = {
        "name": tool,
        "rules": [{"id": code} for code in sorted({f.code for f in findings})],
    }
    if tool in TOOL_URIS:
        driver["informationUri"] = TOOL_URIS[tool]
    else:
        driver["version"] = __version__  # builder's own checks
    return {"tool": {"driver": driver}, "results": [_result(f) for f in findings]}


def _result(finding: Finding) -> dict[str, Any]:
    location: dict[str, Any] = {"artifactLocation": {"uri": finding.file}}
    if finding.line is not None and finding.line >= 1:
        location["region"] = {"startLine": finding.line}
    return {
        "ruleId": finding.code,
        "level": LEVELS.get(finding.level, "note"),
        "message": {"text": " ".join(finding.message.split())},
        "locations": [{"physicalLocation": location}],
    }
