"""Nothing is dropped in silence: on every site builder writes for, every setting of the
spec and of the run commands is in the files the site runs, or the site refuses it with
its reason (builder.parity reads this off the schedulers themselves; the documentation's
table is generated from the same)."""

from __future__ import annotations

import pytest

from builder.parity import SETTINGS, SITES, Setting, Site, parity_markdown, parity_table, probe

TABLE = parity_table()


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.name)
def test_every_site_carries_or_refuses_each_setting(setting: Setting) -> None:
    dropped = {
        site: cell.detail for site, cell in TABLE[setting.name].items() if cell.outcome == "dropped"
    }
    assert not dropped, f"{setting.name} dropped in silence on {dropped}"


def test_a_refusal_names_the_setting() -> None:
    for name, row in TABLE.items():
        field = name.split(" ")[0]
        for site, cell in row.items():
            if cell.outcome == "refused":
                assert field in cell.detail or "launcher" in cell.detail, (name, site, cell)


def test_what_every_site_carries() -> None:
    """The settings every site carries as they are (no refusal anywhere)."""
    for name in (
        "launch.env",
        "launch.env (secret)",
        "--set",
        "launch.cache",
        "launch.logs",
        "launch.checkpoints",
        "launch.code",
        "launch.args",
        "launch.master_port",
    ):
        assert {cell.outcome for cell in TABLE[name].values()} == {"carried"}, name


def test_the_probe_sees_a_dropped_setting() -> None:
    """The probe itself can fail: a value the site does not write comes out as dropped,
    and a secret shown in a readable file too."""
    site = SITES[0]
    missing = Setting("launch.env", "x", r"never-written", launch={"env": {"A": "b"}})
    assert probe(site, missing).outcome == "dropped"
    shown = Setting(
        "launch.args", "x", r"hunter2-value", launch={"args": ["hunter2-value"]}, secret=True
    )
    cell = probe(site, shown)
    assert cell.outcome == "dropped"
    assert "shown in" in cell.detail


def test_the_markdown_table_has_a_row_per_setting_and_a_column_per_site() -> None:
    text = parity_markdown(TABLE)
    header, _rule, *rows = text.split("\n\n")[0].splitlines()
    assert header.count("|") == len(SITES) + 2
    assert len(rows) == len(SETTINGS)
    assert "DROPPED" not in text
    assert "Why a site refuses:" in text
    assert isinstance(SITES[0], Site)


@pytest.mark.parametrize("field", ["node_timeout", "last_call"])
def test_an_elastic_setting_without_an_elastic_run_is_refused(field: str) -> None:
    """node_timeout and last_call mean something only with min_nodes: refused, not dropped."""
    site = SITES[0]
    cell = probe(site, Setting(f"launch.{field}", "x", r"never", launch={field: 9}))
    assert cell.outcome == "refused"
    assert f"launch.{field}: only an elastic run (launch.min_nodes)" in cell.detail
