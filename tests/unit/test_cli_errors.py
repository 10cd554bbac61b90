"""One error style for every failure, usage errors included; --debug keeps the exit code;
the whole help; typer's public API only (issue 29)."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import builder.cli.stack
from builder import errors
from builder.cli import app
from builder.cli.app import CLICK_USAGE_ERROR, COMMANDS, SUMMARIES
from builder.errors import EXIT_CODES

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()

USAGE_ERRORS = [
    # argv, what the message must say
    (["render", "--preset", "cpu-deepspeed", "--formt", "docker"], "no option --formt"),
    (["render", "--preset", "cpu-deepspeed", "--formt", "docker"], "did you mean --format?"),
    (["rendr", "--preset", "cpu-deepspeed"], "no command 'rendr' (did you mean render?)"),
    (["--verison"], "did you mean --version?"),
    (["sif"], "builder sif: IMAGE is missing"),
    (["hostfile", "--nodes", "n1", "--slots", "many"], "--slots"),
    (["hostfile", "--nodes"], "'--nodes' requires an argument"),
    (["render", "--preset", "cpu-deepspeed", "-f", "podman"], "-f"),
    (["render", "--preset", "cpu-deepspeed", "-f", "podman"], "choose one of docker"),
    (["rehearse", "--preset", "cpu-deepspeed", "--timeout", "inf"], "--timeout 'inf'"),
    (["rehearse", "--preset", "cpu-deepspeed", "--timeout", "0"], "give a number in 0<x<="),
    (["sif", "a:1", "b:2"], "unexpected extra argument"),
]


@pytest.mark.parametrize(("args", "says"), USAGE_ERRORS)
def test_usage_errors_are_one_paragraph_in_builders_style(args: list[str], says: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == EXIT_CODES["UsageError"] == 2
    assert result.stdout == ""
    err = result.stderr
    assert err.startswith("error: ")
    assert err.count("\n") == 1, "one line: no Usage: block, no second paragraph"
    assert says in err
    assert "Usage:" not in err
    assert "Try '" not in err
    assert "-h` lists " in err


@pytest.mark.parametrize(
    "args",
    [
        ["render", "--preset", "cpu-deepspeed", "--formt", "docker"],
        ["launch", "--preset", "cpu-deepspeed", "--runtime", "podman"],
        ["rehearse", "--preset", "cpu-deepspeed", "--timeout", "-1"],
        ["hostfile", "--nodes", "n1", "--slots", "many"],
    ],
)
def test_usage_errors_under_json_are_the_same_envelope(args: list[str]) -> None:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 2
    data = json.loads(result.stdout)
    assert list(data) == ["schema", "command", "ok", "exit_code", "error", "result"]
    assert data["command"] == args[0]
    assert data["exit_code"] == 2
    assert data["ok"] is False
    assert result.stderr == f"error: {data['error']}\n"


@pytest.mark.parametrize("name", sorted(EXIT_CODES))
@pytest.mark.parametrize("debug", [[], ["--debug"]], ids=["plain", "debug"])
def test_every_error_exits_with_its_code_debug_or_not(
    name: str, debug: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    error_class = getattr(errors, name)

    def failing() -> list[tuple[str, str]]:
        if name == "SpecError":
            raise error_class("stack.yaml", [errors.Problem("image", "required key is missing")])
        raise error_class(f"the {name} happened")

    monkeypatch.setattr(builder.cli.stack, "preset_summaries", failing)
    result = runner.invoke(app, [*debug, "presets", "--json"])
    assert result.exit_code == EXIT_CODES[name]
    assert json.loads(result.stdout)["exit_code"] == EXIT_CODES[name]
    assert ("Traceback (most recent call last)" in result.stderr) is bool(debug)
    assert "\nerror: " in f"\n{result.stderr}"


def test_debug_after_the_command_keeps_the_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable() -> list[tuple[str, str]]:
        raise errors.EngineUnavailable("no engine")

    monkeypatch.setattr(builder.cli.stack, "preset_summaries", unreachable)
    result = runner.invoke(app, ["presets", "--debug"])
    assert result.exit_code == 10
    assert "builder.errors.EngineUnavailable: no engine" in result.stderr


def test_debug_exit_code_in_a_real_process(tmp_path: Path) -> None:
    """Not only under CliRunner: the process's own status is the documented code."""
    spec = tmp_path / "stack.yaml"
    spec.write_text("name: x\n")
    for debug in ([], ["--debug"]):
        done = subprocess.run(
            [sys.executable, "-m", "builder", *debug, "render", str(spec)],
            capture_output=True,
            text=True,
            check=False,
            env=_clean_env(),
        )
        assert done.returncode == EXIT_CODES["SpecError"], done.stderr
        assert ("Traceback" in done.stderr) is bool(debug)


def test_the_top_level_help_shows_every_description_whole() -> None:
    for columns in ("80", "60"):
        result = runner.invoke(app, ["--help"], env={"COLUMNS": columns})
        assert result.exit_code == 0
        flat = " ".join(result.stdout.split())
        for name, summary in SUMMARIES.items():
            assert f"{name} {summary}" in flat, (columns, name)
        assert "..." not in result.stdout.split("Commands:")[1]


def test_a_summary_fits_one_line_of_help() -> None:
    assert set(SUMMARIES) == set(COMMANDS)
    assert all(len(line) <= 60 and not line.endswith("...") for line in SUMMARIES.values())


def test_no_arguments_prints_the_help() -> None:
    """`builder` alone asks what there is: the help on stdout, and success."""
    result = runner.invoke(app, [])
    assert result.exit_code == 0
    assert "Commands:" in result.stdout


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}


def test_completion_imports_no_command_module() -> None:
    """A tab press lists commands from SUMMARIES: no command module, no pydantic."""
    code = (
        "import os, sys\n"
        "os.environ.update(_BUILDER_COMPLETE='complete_bash', COMP_WORDS='builder re',"
        " COMP_CWORD='1')\n"
        "from builder.cli import app\n"
        "try:\n    app(prog_name='builder')\nexcept SystemExit:\n    pass\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('builder.cli.') or"
        " m.split('.')[0] in ('pydantic', 'yaml', 'jinja2', 'docker'))\n"
        "print('LOADED', loaded)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=_clean_env()
    )
    assert done.stdout.splitlines()[:2] == ["render", "rehearse"]
    loaded = done.stdout.split("LOADED ")[1].strip()
    expected = ["builder.cli.app", "builder.cli.envelope"]
    if _typer_needs_pydantic():  # typer 0.29+ coerces even the app's flags through pydantic
        loaded = repr([m for m in ast.literal_eval(loaded) if m.split(".")[0] != "pydantic"])
    assert loaded == repr(expected)


def _typer_needs_pydantic() -> bool:
    return any(r.startswith("pydantic") for r in importlib.metadata.requires("typer") or [])


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            found.append(node.module)
    return found


def test_only_typers_public_api() -> None:
    """No typer._private module and no click: typer bundles its own click from 0.26, and
    only what typer exports is stable across the supported range."""
    private = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted((ROOT / "builder").rglob("*.py"))
        for name in _imports(path)
        if name.startswith("typer._") or name.split(".")[0] == "click"
    }
    assert not private


def test_clicks_usage_error_is_found_through_typers_bad_parameter() -> None:
    """BuilderGroup catches click's UsageError as BadParameter's base: still so here."""
    assert CLICK_USAGE_ERROR is not typer.BadParameter
    assert CLICK_USAGE_ERROR.__name__ == "UsageError"
    assert issubclass(typer.BadParameter, CLICK_USAGE_ERROR)
