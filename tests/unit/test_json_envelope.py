"""`--json`: every command that reports something prints one envelope on stdout,
{schema, command, ok, exit_code, error, result}, on success, on a problem found and
on an error before any result; its human-readable lines go to stderr."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
import typer.main
from typer.testing import CliRunner

import builder.cli.environment
import builder.cli.lint
from builder.cli.app import COMMANDS, BuilderGroup, app
from builder.cli.envelope import SCHEMA, has_json_option
from builder.errors import EXIT_CODES
from builder.lint.findings import Finding, LintReport
from tests.fakes import FakeEngine, FakeImage

if TYPE_CHECKING:
    from pathlib import Path

IMAGE = "team/train:1"
WITHOUT_JSON = {"schema"}
"""schema prints a JSON Schema already: it has no envelope."""
KEYS = ["schema", "command", "ok", "exit_code", "error", "result"]


def envelope(*args: str, code: int = 0) -> dict[str, Any]:
    """Run the CLI; its stdout is exactly one envelope, with the exit code the run had."""
    done = CliRunner().invoke(app, list(args))
    assert done.exit_code == code, done.output
    data = json.loads(done.stdout)  # one document, nothing else
    assert isinstance(data, dict)
    assert list(data) == KEYS
    assert data["schema"] == SCHEMA == 1
    assert data["command"] == args[0]
    assert data["exit_code"] == code
    assert data["ok"] is (code == 0)
    return data


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeEngine:
    """An engine with IMAGE and two containers of it, a and b."""
    engine = FakeEngine(FakeImage("sha256:1", (IMAGE,), {}, {"numpy": "2.3.1"}, {"libc6": "2"}))
    for name in ("a", "b"):
        engine.start(IMAGE, name=name, environment={})
    monkeypatch.setattr(builder.cli.environment, "connect", lambda: engine)
    return engine


@pytest.fixture
def clean_lint(monkeypatch: pytest.MonkeyPatch) -> None:
    """lint without hadolint: a report with one advisory finding."""
    report = LintReport(
        (Finding("hadolint", "Dockerfile", 3, "style", "DL3059", "Consolidate RUN"),),
        ("Dockerfile: hadolint",),
    )
    monkeypatch.setattr(builder.cli.lint, "lint_stack", lambda *_: report)


def test_every_reporting_command_has_the_enveloped_json_option() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, BuilderGroup)
    for name in COMMANDS:
        command = group.get_command(None, name)  # type: ignore[arg-type]
        assert command is not None
        assert has_json_option(command.params) is (name not in WITHOUT_JSON), name


CASES = [
    (["presets"], lambda r, _: [row["name"] for row in r][:1] == ["cpu-deepspeed"]),
    (["launch", "--preset", "cpu-deepspeed"], lambda r, _: r["launcher"] == "deepspeed"),
    (["sif", IMAGE], lambda r, _: r["argv"][-1] == f"docker-daemon://{IMAGE}"),
    (
        ["preflight", "--preset", "cuda-deepspeed", "--cluster-dir", "{tmp}/c", "--dry-run"],
        lambda r, _: "commands" in r,
    ),
    (["lint", "--preset", "cpu-deepspeed"], lambda r, _: r["findings"][0]["code"] == "DL3059"),
    (
        ["init", "-p", "cpu-deepspeed", "-o", "{tmp}/s.yaml"],
        lambda r, t: r["files"] == [t + "/s.yaml"],
    ),
    (
        ["render", "--preset", "cpu-deepspeed", "-f", "docker", "-o", "{tmp}/r"],
        lambda r, t: t + "/r/Dockerfile" in r["files"],
    ),
    (["hostfile", "--nodes", "n1,n2", "-o", "{tmp}/h"], lambda r, t: r["files"] == [t + "/h"]),
    (["keys", "-o", "{tmp}/k"], lambda r, t: t + "/k/ssh_config" in r["files"]),
    (
        ["dsenv", "--preset", "cpu-deepspeed", "-o", "{tmp}/e"],
        lambda r, t: r["files"] == [t + "/e"],
    ),
    (["bundle", "--preset", "cpu-deepspeed", "-o", "{tmp}/b"], lambda r, _: len(r["files"]) > 3),
    (
        ["slurm", "--preset", "cpu-deepspeed", "--launcher", "torchrun", "-o", "{tmp}/j.sh"],
        lambda r, t: r["files"] == [t + "/j.sh"],
    ),
    (["fingerprint", IMAGE], lambda r, _: r["packages"] == {"numpy": "2.3.1"}),
    (["verify", "--containers", "a,b"], lambda r, _: r["same"] and r["sources"] == ["a", "b"]),
    (["diff", "container:a", IMAGE], lambda r, _: r["same"]),
]


@pytest.mark.usefixtures("fake", "clean_lint")
@pytest.mark.parametrize(("argv", "check"), CASES, ids=[case[0][0] for case in CASES])
def test_one_envelope_with_the_result(argv: list[str], check: Any, tmp_path: Path) -> None:
    data = envelope(*[arg.format(tmp=tmp_path) for arg in argv], "--json")
    assert data["error"] is None
    assert check(data["result"], str(tmp_path)), data["result"]


def test_a_bad_spec_gives_the_error_and_no_result(tmp_path: Path) -> None:
    spec = tmp_path / "stack.yaml"
    spec.write_text("name: x\nbogus: 1\n")
    done = CliRunner().invoke(app, ["launch", str(spec), "--json"])
    assert done.exit_code == EXIT_CODES["SpecError"]
    data = json.loads(done.stdout)
    assert data == {
        "schema": 1,
        "command": "launch",
        "ok": False,
        "exit_code": EXIT_CODES["SpecError"],
        "error": data["error"],
        "result": None,
    }
    assert "bogus" in data["error"]
    assert "bogus" in done.stderr  # the message a person reads, as without --json


def test_drift_found_keeps_the_comparison_as_the_result(fake: FakeEngine) -> None:
    fake.container("b").packages["numpy"] = "2.3.2"
    data = envelope("verify", "--containers", "a,b", "--json", code=EXIT_CODES["DriftFound"])
    assert "the nodes differ" in data["error"]
    assert data["result"]["same"] is False
    assert data["result"]["differences"]["python package numpy"] == ["2.3.1", "2.3.2"]


def test_lint_findings_fail_inside_the_envelope(monkeypatch: pytest.MonkeyPatch) -> None:
    report = LintReport(
        (Finding("hadolint", "Dockerfile", 12, "warning", "DL3008", "Pin versions"),),
        ("Dockerfile: hadolint",),
    )
    monkeypatch.setattr(builder.cli.lint, "lint_stack", lambda *_: report)
    data = envelope("lint", "--preset", "cpu-deepspeed", "--json", code=EXIT_CODES["LintError"])
    assert "DL3008" in data["error"]
    assert data["result"]["failing"] == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["hostfile", "--nodes", "n1"], "--json lists the files written"),
        (["init", "-o", "-"], "--json lists the files written"),
        (["render", "--preset", "cpu-deepspeed"], "--json lists the files written"),
        (["lock", "--preset", "cpu-deepspeed", "-o", "-"], "--json lists the files written"),
        (["lint", "--preset", "cpu-deepspeed", "--output-format", "sarif"], "pick one"),
        (["rehearse"], "say what to rehearse"),
        (["launch", "--preset", "cpu-deepspeed", "--runtime", "podman"], "choose one of"),
        (["launch", "--preset", "cpu-deepspeed", "--no-such-option"], "no option --no-such-option"),
    ],
)
def test_usage_errors_are_enveloped(argv: list[str], message: str) -> None:
    data = envelope(*argv, "--json", code=2)
    assert message in data["error"]
    assert data["result"] is None


def test_without_json_nothing_is_enveloped() -> None:
    done = CliRunner().invoke(app, ["sif", IMAGE])
    assert done.exit_code == 0
    assert done.stdout == f"apptainer build train-1.sif docker-daemon://{IMAGE}\n"
