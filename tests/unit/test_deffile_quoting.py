"""Hostile values on their way into an Apptainer .def: kept exactly, or refused.

Each value is put straight into the recipe (past any spec check), so what is
tested is the .def's own filters (builder/templating.py): a value must never
start a section, become a build argument, or run as shell code.
"""

from __future__ import annotations

import subprocess
from dataclasses import replace

import pytest

from builder.errors import UsageError
from builder.image.recipe import Recipe, image_recipe
from builder.image.render import render_apptainer
from builder.image.rootfs import ContextFile
from builder.lint.deffile import check_deffile, read_sections
from builder.resolved import resolve
from builder.spec.loader import load_preset
from builder.templating import def_comment, def_shell

SECTIONS = ["help", "files", "post", "environment", "runscript", "test", "labels"]
DAEMON_SECTIONS = ["help", "environment", "runscript", "test", "labels"]

KEPT = [
    "back\\slash \\n \\",
    "quotes \"dq\" 'sq' ''",
    "$(rm -rf /) `id` $HOME ${X:-y}",
    "a ; rm -rf / | cat & true",
    "{ x } {{x y}} {{ x-y }} }}{{",
    "50% of %post",
    "ünï cödé ☃",
]
REFUSED = [
    "x\n%post\n    rm -rf /",
    "x\r\n%post",
    "x\rmore",
    "line\u2028break",
    "{{ x }}",
    "{{x}}",
    "a {{{ x }}} b",
    "%post",
    "%environment rm -rf /",
]


def recipe() -> Recipe:
    return image_recipe(resolve(load_preset("cpu-deepspeed")))


def labels_of(text: str) -> dict[str, str]:
    _, sections = read_sections(text)
    (labels,) = [s for s in sections if s.name == "labels"]
    pairs = (line.strip().partition(" ") for line in labels.body.splitlines() if line.strip())
    return {key: value for key, _, value in pairs}


def help_of(text: str) -> list[str]:
    _, sections = read_sections(text)
    (section,) = [s for s in sections if s.name == "help"]
    return [line.removeprefix("    ") for line in section.body.splitlines() if line.strip()]


def names(text: str) -> list[str]:
    return [s.name for s in read_sections(text)[1]]


@pytest.mark.parametrize("value", KEPT)
@pytest.mark.parametrize("bootstrap", ["docker", "docker-daemon"])
def test_a_kept_label_and_help_line_come_back_unchanged(value: str, bootstrap: str) -> None:
    hostile = replace(
        recipe(), labels=(("x.hostile", value),), help=(f"demo: {value}", value.lstrip())
    )
    text = render_apptainer(hostile, bootstrap, "team/x:1")  # type: ignore[arg-type]
    assert names(text) == (SECTIONS if bootstrap == "docker" else DAEMON_SECTIONS)
    assert labels_of(text) == {"x.hostile": value}
    assert help_of(text) == [f"demo: {value}", value.lstrip()]
    assert [f for f in check_deffile(text, "x.def") if f.level == "error"] == []


@pytest.mark.parametrize("value", REFUSED)
def test_a_label_that_would_change_the_file_is_refused(value: str) -> None:
    with pytest.raises(UsageError, match=r"label x\.hostile .*Apptainer \.def"):
        render_apptainer(replace(recipe(), labels=(("x.hostile", value),)))


@pytest.mark.parametrize("value", REFUSED)
def test_a_help_line_that_would_change_the_file_is_refused(value: str) -> None:
    with pytest.raises(UsageError, match=r"%help line"):
        render_apptainer(
            replace(recipe(), help=(f"demo: {value}",) if value[0] != "%" else (value,))
        )


@pytest.mark.parametrize("key", ["a b", "%post", "k\nv", "", "-x"])
def test_a_label_name_that_is_not_one_word_is_refused(key: str) -> None:
    with pytest.raises(UsageError, match="label name"):
        render_apptainer(replace(recipe(), labels=((key, "v"),)))


def run_sh(line: str) -> str:
    return subprocess.run(["sh", "-c", line], capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize(
    "workdir",
    ["/work dir", "/w/$(touch /tmp/deftest-pwned)`id`", "/w/'q'\"dq\"\\", "/w/{{ x }}/{{{y}}}"],
)
def test_the_workdir_reaches_mkdir_as_one_word_unchanged(workdir: str) -> None:
    text = render_apptainer(replace(recipe(), workdir=workdir))
    assert names(text) == SECTIONS
    assert not [f for f in check_deffile(text, "x.def") if f.code == "DEF-template"]
    (line,) = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("mkdir -p ")]
    assert run_sh("printf '%s|' " + line.removeprefix("mkdir -p ")) == workdir + "|"


@pytest.mark.parametrize("value", [*KEPT, "two\nlines", "tab\there"])
def test_an_environment_value_is_kept(value: str) -> None:
    text = render_apptainer(replace(recipe(), env=(("HOSTILE", value),)))
    assert names(text) == SECTIONS
    _, sections = read_sections(text)
    (env,) = [s.body for s in sections if s.name == "environment"]
    assert run_sh(env + 'printf %s "$HOSTILE"') == value


@pytest.mark.parametrize("value", ["x\n%post\nrm -rf /", "x\n  %test"])
def test_an_environment_value_that_starts_a_section_is_refused(value: str) -> None:
    with pytest.raises(UsageError, match="starts a new section"):
        render_apptainer(replace(recipe(), env=(("HOSTILE", value),)))


@pytest.mark.parametrize("name", ["A;rm -rf /", "1X", "X\n%post", "A-B"])
def test_an_environment_name_that_is_not_a_shell_name_is_refused(name: str) -> None:
    with pytest.raises(UsageError, match="variable name"):
        render_apptainer(replace(recipe(), env=((name, "v"),)))


@pytest.mark.parametrize(
    ("path", "target"),
    [
        ("wheels/$(id).whl", "/tmp/builder/wheels/x.whl"),
        ("wheels/a b.whl", "/tmp/builder/wheels/a.whl"),
        ("wheels/*.whl", "/tmp/builder/wheels/a.whl"),
        ("wheels/a.whl", "/tmp/builder/wheels/a\n%post"),
        ("wheels/a.whl", "/tmp/'x'"),
        ("%post", "/x"),
    ],
)
def test_a_files_path_outside_the_safe_set_is_refused(path: str, target: str) -> None:
    files = (ContextFile(path, target, 0o644, ""),)
    with pytest.raises(UsageError, match="%files path"):
        render_apptainer(replace(recipe(), files=files))


@pytest.mark.parametrize("image", ["debian:12\n%post", "debian:12 #x", "a:{{ x }}", ""])
def test_a_from_image_that_is_not_one_word_is_refused(image: str) -> None:
    with pytest.raises(UsageError, match="From: image"):
        render_apptainer(recipe(), "docker-daemon", image + ":1" if image else "team/x:1\n")


def test_a_source_with_a_newline_stays_in_its_comment() -> None:
    text = render_apptainer(replace(recipe(), source="/tmp/x\n%post\nrm -rf /\n.yaml"))
    assert names(text) == SECTIONS
    assert "# Generated by builder from /tmp/x\\n%post\\nrm -rf /\\n.yaml." in text
    assert def_comment("a\r\nb\x00") == "a\\r\\nb\\x00"


@pytest.mark.parametrize("line", ["echo '{{{ x }}}'", "echo {{x}}{{ y }}", "echo '{{{{'"])
def test_def_shell_breaks_every_placeholder_and_keeps_the_word(line: str) -> None:
    out = def_shell(line)
    assert not check_deffile(f"Bootstrap: docker\nFrom: x:1\n%post\n    {out}\n", "x.def")
    assert run_sh(out) == run_sh(line)
