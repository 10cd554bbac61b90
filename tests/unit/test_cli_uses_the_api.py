"""The command line calls the public API (``import builder``) and nothing else of the
library: read from the source of every builder/cli module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import builder

CLI = Path(__file__).resolve().parents[2] / "builder" / "cli"
ALLOWED = {"builder", "builder.errors", "builder._version"}
"""The public API, its errors (exit codes) and the version; builder.cli.* is the CLI's own."""
EXEMPT: set[str] = set()
"""None: every command module goes through the public API."""


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
        assert module in ALLOWED or module.startswith("builder.cli."), (
            f"{where} imports {module}: add what it needs to builder/__init__.py (the "
            "public API) and import it from builder"
        )
        if module == "builder":
            private = [name for name in names if name not in builder.__all__]
            assert not private, f"{where}: {private} are not in builder.__all__"


def test_the_exemptions_exist() -> None:
    assert all((CLI / name).is_file() for name in EXEMPT)


def test_the_public_names_agree_in_their_three_places() -> None:
    """__all__, the lazy table and the TYPE_CHECKING imports (what mypy reads) name the
    same public API."""
    tree = ast.parse(Path(builder.__file__).read_text())
    typed: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            for statement in ast.walk(node):
                if isinstance(statement, ast.ImportFrom):
                    typed |= {alias.asname or alias.name for alias in statement.names}
    exports = set(builder._EXPORTS)
    assert set(builder.__all__) == exports | {"__version__"}
    assert typed == exports
    assert builder.__all__ == sorted(builder.__all__, key=lambda n: (not n.isupper(), n))
