"""Every command sequence in the README and the tutorials runs as written, in order.

The convention, for README.md and docs/tutorial*.md:

- A ```console block holds commands, each on a line starting with ``$ `` (a line
  ending in ``\\`` goes on on the next); the other lines are the output shown.
- A fence with ``title="NAME"`` (```yaml title="stack.yaml"```) is a file: it is
  written to NAME before the commands after it run.
- An HTML comment on the line before a block says how it runs:
  ``<!-- run -->`` (or none): here, with nothing but builder and the repository's
  .venv/bin on PATH, in a temporary folder, every command exiting 0;
  ``<!-- engine -->``: with a Docker engine, by tests/integration/test_docs_commands.py;
  ``<!-- fresh-clone -->``: in a copy of the repository without its .venv, by the same;
  ``<!-- cluster -->``: on a real cluster, not run;
  ``<!-- not run: REASON -->``: not run, for the reason given.
- Every console, bash or sh block in those files is one of these: a block that
  does not run here must say why.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"
RUN_FILES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("tutorial*.md")))
SHELL_LANGUAGES = {"console", "bash", "sh", "shell"}
KINDS = {"run", "engine", "fresh-clone", "cluster", "not run"}
COMMAND_TIMEOUT = 300

_FENCE = re.compile(
    r"(?:^<!-- (?P<marker>[^>]*?) -->\n)?^```(?P<info>[^\n]*)\n(?P<body>.*?)^```$",
    re.M | re.S,
)
_TITLE = re.compile(r'title="(?P<title>[^"]*)"')


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: commands to run, or a file to write."""

    page: str
    line: int
    kind: str
    reason: str
    language: str
    body: str
    file: str | None = None

    @property
    def commands(self) -> list[str]:
        """The block's commands, continuation lines joined (console blocks: the `$ `
        lines; a bash or sh block is one script)."""
        if self.language != "console":
            return [self.body]
        commands: list[str] = []
        lines = iter(self.body.splitlines())
        for line in lines:
            if not line.startswith("$ "):
                continue
            command = line[2:]
            while command.endswith("\\"):
                command = command + "\n" + next(lines, "")  # bash reads the continuation
            commands.append(command)
        return commands

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The page's shell blocks and files, in order."""
    text = path.read_text()
    found: list[Block] = []
    for match in _FENCE.finditer(text):
        info = match["info"].strip()
        language = info.split()[0] if info else ""
        title = _TITLE.search(info)
        marker = (match["marker"] or "run").strip()
        kind, _, reason = marker.partition(":")
        line = text.count("\n", 0, match.start("info")) + 1
        page = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
        if title is not None and re.fullmatch(r"[\w./-]+", title["title"]):
            found.append(
                Block(page, line, kind, reason.strip(), language, match["body"], title["title"])
            )
        elif language in SHELL_LANGUAGES:
            found.append(Block(page, line, kind, reason.strip(), language, match["body"]))
    return found


def environment(*, with_venv: bool = True) -> dict[str, str]:
    path = os.environ.get("PATH", "")
    if with_venv:
        path = f"{VENV_BIN}{os.pathsep}{path}"
    else:
        path = os.pathsep.join(p for p in path.split(os.pathsep) if Path(p) != VENV_BIN)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    return {**env, "PATH": path, "NO_COLOR": "1", "TERM": "dumb"}


def run_block(block: Block, folder: Path, env: dict[str, str]) -> float:
    """Write the block's file or run its commands in folder; the seconds it took."""
    if block.file is not None:
        target = folder / block.file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.body)
        return 0.0
    start = time.monotonic()
    # one shell for the block, as when its lines are pasted into one terminal: what a
    # line sets (`. .venv/bin/activate`, cd, a variable) holds for the next
    script = "\n".join(block.commands)
    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=folder,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT * max(1, len(block.commands)),
        check=False,
    )
    assert result.returncode == 0, (
        f"{block}: the block exited {result.returncode}\n{script}\n"
        f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"
    )
    return time.monotonic() - start


def steps(path: Path, kinds: set[str]) -> list[Block]:
    """The page's blocks of the given kinds, files always (later commands read them)."""
    return [b for b in blocks(path) if b.file is not None or b.kind in kinds]


# the convention itself ---------------------------------------------------------------


def test_the_pages_that_are_run_exist() -> None:
    names = {p.name for p in RUN_FILES}
    assert {"README.md", "tutorial.md", "tutorial-slurm.md"} <= names


@pytest.mark.parametrize("path", RUN_FILES, ids=lambda p: p.name)
def test_every_shell_block_says_how_it_runs(path: Path) -> None:
    for block in blocks(path):
        assert block.kind in KINDS, f"{block}: unknown marker {block.kind!r}"
        if block.kind == "not run":
            assert block.reason, f"{block}: `not run` without a reason"
        if block.file is None:
            assert block.language == "console" or block.kind != "run" or block.body.strip()
            assert block.commands, f"{block}: a shell block without a `$ ` command"


def test_the_markers_are_found() -> None:
    found = [b for path in RUN_FILES for b in blocks(path)]
    kinds = {b.kind for b in found}
    assert {"run", "engine", "fresh-clone", "cluster", "not run"} <= kinds
    assert any(b.file == "stack.yaml" for b in found)


def test_a_failing_unmarked_block_fails(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```console\n$ false\n```\n")
    (block,) = blocks(page)
    assert block.kind == "run"
    with pytest.raises(AssertionError, match="exited 1"):
        run_block(block, tmp_path, environment())


# the runs -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", RUN_FILES, ids=lambda p: p.name)
def test_the_engine_free_commands_run_as_written(path: Path, tmp_path: Path) -> None:
    """The blocks that need nothing but builder, in order, in an empty folder."""
    env = environment()
    for block in steps(path, {"run"}):
        run_block(block, tmp_path, env)


# every page: the builder commands it shows exist as written ----------------------------

ALL_PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))
GLOBAL_OPTIONS = {"--debug", "--version", "--install-completion", "--show-completion"}
HELP = {"-h", "--help"}


def builder_invocations(block: Block) -> list[list[str]]:
    """The words after `builder` of each builder command in the block (pipelines and
    `&&` lists split; comments dropped)."""
    found: list[list[str]] = []
    for command in block.commands:
        for line in command.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            segment: list[str] = []
            for word in [*words, "|"]:
                if word in {"|", "||", "&&", ";"}:
                    if segment and Path(segment[0]).name == "builder":
                        found.append(segment[1:])
                    elif segment[:3] in (["python", "-m", "builder"], ["python3", "-m", "builder"]):
                        found.append(segment[3:])
                    segment = []
                else:
                    segment.append(word)
    return found


def option_problems(words: list[str]) -> list[str]:
    """What click would refuse in `builder WORDS` before running it: an unknown command
    or an option the command does not take."""
    import typer.main

    from builder.cli.app import app

    group = typer.main.get_command(app)
    context = group.make_context("builder", [], resilient_parsing=True)
    while words and words[0] in GLOBAL_OPTIONS | HELP:
        words = words[1:]
    if not words:
        return []
    name, *rest = words
    command = group.get_command(context, name)  # type: ignore[attr-defined]
    if command is None:
        return [f"no command {name!r}"]
    taken = {opt for param in command.params for opt in [*param.opts, *param.secondary_opts]}
    problems = []
    for word in rest:
        if word == "--":
            break
        option = word.split("=", 1)[0]
        if option.startswith("-") and option != "-" and option not in taken | HELP | {"--debug"}:
            problems.append(f"builder {name} takes no {option}")
    return problems


@pytest.mark.parametrize("path", ALL_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_builder_command_shown_names_real_commands_and_options(path: Path) -> None:
    """Pages other than the run ones show commands for a real cluster, which cannot run
    here: their command names and options are checked against the CLI instead."""
    problems = [
        f"{block}: {problem}"
        for block in blocks(path)
        if block.file is None
        for words in builder_invocations(block)
        for problem in option_problems(words)
    ]
    assert problems == []


def test_the_option_check_finds_a_wrong_option() -> None:
    block = Block("page", 1, "run", "", "sh", "builder bundle stack.yaml --nodes a,b\n")
    (words,) = builder_invocations(block)
    assert option_problems(words) == ["builder bundle takes no --nodes"]
    assert option_problems(["rendr"]) == ["no command 'rendr'"]
    assert option_problems(["--debug", "render", "--preset", "x", "-o", "-"]) == []
