"""The command line calls the public API (``import builder``) and nothing else of the
library, but for its own helpers module: read from the source of every builder/cli module.
And `builder --help` lists the commands without loading them."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import typer.main

import builder

CLI = Path(__file__).resolve().parents[2] / "builder" / "cli"
ALLOWED = {"builder", "builder.errors", "builder._version"}
"""The public API, its errors (exit codes) and the version; builder.cli.* is the CLI's own."""
EXEMPT: set[str] = set()
"""None: every command module goes through the public API."""
HELPERS = "options.py"
"""The CLI's own helpers module: what only the command line needs (the stdin size limit,
the patterns options are checked against) it takes from the library's modules, so that
the public API is what a program needs, not what the CLI happened to use."""
HELPERS_MAY_IMPORT = {
    "builder.spec.loader": {"MAX_SPEC_BYTES", "decoded"},
    "builder.spec.records": {"ENV_NAME", "IMAGE_REF"},
}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def library_imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every import of builder's that runs: those under
    `if TYPE_CHECKING:` are types for the checker only."""
    found: list[tuple[int, str, list[str]]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for statement in node.orelse:
                visit(statement)
            return
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: a relative import"
            found.append((node.lineno, node.module or "", [a.name for a in node.names]))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return [item for item in found if item[1].split(".")[0] == "builder"]


FILES = sorted(path for path in CLI.glob("*.py") if path.name not in EXEMPT)


@pytest.mark.parametrize("path", FILES, ids=[path.name for path in FILES])
def test_the_cli_imports_only_the_public_api(path: Path) -> None:
    for line, module, names in library_imports(path):
        where = f"builder/cli/{path.name}:{line}"
        if path.name == HELPERS and module in HELPERS_MAY_IMPORT:
            assert set(names) <= HELPERS_MAY_IMPORT[module], f"{where}: {names}"
            continue
        assert module in ALLOWED or module.startswith("builder.cli."), (
            f"{where} imports {module}: add what it needs to builder/__init__.py (the "
            "public API) and import it from builder"
        )
        if module == "builder":
            private = [name for name in names if name not in builder.__all__]
            assert not private, f"{where}: {private} are not in builder.__all__"


def test_the_exemptions_exist() -> None:
    assert all((CLI / name).is_file() for name in EXEMPT)


def test_help_lists_the_commands_without_loading_them() -> None:
    """Shell completion runs `builder --help`'s machinery at every tab press: the list
    comes from SUMMARIES, and no command's module (or the library behind it) is imported."""
    code = (
        "import sys; sys.argv = ['builder', '--help']\n"
        "from builder.cli import app\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('builder')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = out.stdout.strip().splitlines()[-1]
    expected = ["builder", "builder._version", "builder.cli", "builder.cli.app"]
    assert loaded == str([*expected, "builder.cli.envelope", "builder.errors"])


def test_every_command_has_a_one_line_summary() -> None:
    from builder.cli.app import COMMANDS, SUMMARIES

    assert list(SUMMARIES) == list(COMMANDS)
    long = {name: text for name, text in SUMMARIES.items() if len(text) > 60}
    assert not long, f"{long}: at most 60 characters, so that --help shows them whole"


def test_a_loaded_command_keeps_its_summary() -> None:
    """Listed before or after the command is loaded, a command shows the same line."""
    from builder.cli.app import SUMMARIES, app

    group = typer.main.get_command(app)
    with typer.Context(group) as ctx:
        command = group.get_command(ctx, "render")  # type: ignore[attr-defined]
    assert command.get_short_help_str() == SUMMARIES["render"]
