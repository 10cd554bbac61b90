"""The README and the documentation's hand-written tables stay true to the code."""

from __future__ import annotations

import re
from pathlib import Path

from builder.errors import EXIT_CODES
from builder.model import field_names
from builder.spec import ImageSpec, LaunchSpec, Spec
from builder.spec.presets import preset_names

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"
TROUBLESHOOTING = (DOCS / "troubleshooting.md").read_text()
SPEC_PAGE = (DOCS / "reference" / "spec.md").read_text()
PAGES = {p: p.read_text() for p in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]}


def test_exit_code_table_matches_errors() -> None:
    table = dict(re.findall(r"^\| (\d+) \| [^|]*\(`(\w+)`\) \|", TROUBLESHOOTING, flags=re.M))
    assert {name: int(code) for code, name in table.items()} == EXIT_CODES


def test_the_readme_names_every_exit_code() -> None:
    codes = {
        int(c)
        for row in re.findall(r"^\| ([\d, ]+) \|", README, flags=re.M)
        for c in row.split(",")
    }
    assert codes == {0, *EXIT_CODES.values()}


def test_every_preset_is_described() -> None:
    listed = re.findall(r"^\| `([a-z0-9-]+)`", SPEC_PAGE, flags=re.M)
    assert [name for name in listed if name in preset_names()] == sorted(
        preset_names(), key=listed.index
    )
    assert set(preset_names()) <= set(listed)


def test_every_spec_key_is_documented() -> None:
    for model in (Spec, ImageSpec, LaunchSpec):
        for field in field_names(model):
            assert f"`{field}" in SPEC_PAGE, (
                f"{model.__name__}.{field} is not in docs/reference/spec.md"
            )


def test_make_targets_named_exist_in_the_makefile() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for path, text in PAGES.items():
        for target in re.findall(r"(?:^|^\$ |`)make (\w[\w-]*)", text, flags=re.M):
            assert re.search(rf"^{target}:", makefile, flags=re.M), f"{path.name}: make {target}"


def test_relative_links_in_the_readme_resolve() -> None:
    for link in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README):
        assert (ROOT / link).exists(), link


def test_the_readme_links_every_hand_written_page() -> None:
    for page in sorted(DOCS.rglob("*.md")):
        name = str(page.relative_to(ROOT))
        assert f"({name}" in README, f"the README's table of contents lacks {name}"


def test_no_page_says_to_install_the_unrelated_builder() -> None:
    pattern = re.compile(r"pip install\s+(-\S+\s+)*['\"]?builder\b")
    assert not [p.name for p, text in PAGES.items() if pattern.search(text)]
