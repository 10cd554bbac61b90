"""The .def rules, each shown on a small good or bad file with its exact findings.

The rules mirror Apptainer's parser (see builder/lint/deffile.py); every
preset's rendered .def files must pass them without a finding.
"""

from __future__ import annotations

import textwrap

import pytest

from builder.image.context import render_outputs
from builder.lint import Finding, lint_deffile
from builder.lint.deffile import APP_SECTIONS, VALID_SECTIONS, check_deffile
from builder.resolved import resolve
from builder.spec.loader import load_preset
from builder.spec.presets import preset_names

HEAD = "Bootstrap: docker\nFrom: debian:bookworm-slim\n"
BODIES = {"arguments": "TAG=12", "files": "a.txt /opt/a.txt", "labels": "maintainer someone"}


def found(text: str) -> list[tuple[int | None, str, str]]:
    """(line, level, code) of every finding, in order."""
    return [(f.line, f.level, f.code) for f in lint_deffile(textwrap.dedent(text), "x.def")]


def messages(text: str) -> list[str]:
    return [f.message for f in lint_deffile(textwrap.dedent(text), "x.def")]


GOOD = {
    "minimal": HEAD,
    "comments and blanks before Bootstrap": "# generated\n\n" + HEAD,
    "header keys are case-insensitive, comments are cut": (
        "BootStrap: docker\nFROM: debian:12  # the base\n"
    ),
    "header value continued with a backslash": "Bootstrap: docker\nFrom: debian:\\\n  12\n",
    "crlf line endings": "Bootstrap: docker\r\nFrom: debian:12\r\n%post\r\n    true\r\n",
    "every standard section once": HEAD
    + "".join(f"%{name}\n    {BODIES.get(name, 'true')}\n" for name in sorted(VALID_SECTIONS)),
    "every app section": HEAD + "".join(f"%{app} tool\n    true\n" for app in sorted(APP_SECTIONS)),
    "section names are case-insensitive": HEAD + "%POST\n    true\n",
    "script section with a shell": HEAD + "%post -c /bin/bash\n    set -o pipefail\n",
    "percent inside a script line": HEAD + "%post\n    printf '%s\\n' ok\n    date +%F\n",
    "labels with spaces in the value": HEAD
    + "%labels\n    org.opencontainers.image.description A CPU image, with sshd\n",
    "files: src only, src dst, quoted": HEAD
    + '%files\n    a.txt\n    b.txt /opt/b.txt\n    "with space.txt" /opt/w.txt\n    # c\n',
    "scratch needs no From": "Bootstrap: scratch\n%setup\n    true\n",
    "numbered header key": "Bootstrap: yum\nMirrorURL: http://m/os\nOtherURL0: http://m/x\n",
    "docker-daemon with a tag": "Bootstrap: docker-daemon\nFrom: localhost:5000/b/x:1.0\n",
    "docker-daemon with a digest": "Bootstrap: docker-daemon\nFrom: b/x@sha256:" + "0" * 64 + "\n",
    "a brace that is no template": HEAD + "%post\n    echo '{{ not-a-name }}' ${HOME}\n",
    "two stages with %files from": """\
        Bootstrap: docker
        From: golang:1.22
        Stage: build

        %post
            go build -o /hello .

        Bootstrap: docker
        From: debian:12
        Stage: final

        %files from build
            /hello /usr/local/bin/hello
        """,
}


@pytest.mark.parametrize("text", GOOD.values(), ids=GOOD.keys())
def test_good_files_have_no_findings(text: str) -> None:
    assert found(text) == []


BAD = {
    "empty": ("", [(None, "error", "DEF-empty")]),
    "only comments": ("# nothing\n\n", [(None, "error", "DEF-empty")]),
    "no Bootstrap line": ("From: debian:12\n%post\n    true\n", [(1, "error", "DEF-header")]),
    "header before Bootstrap": (
        "From: debian:12\nBootstrap: docker\n",
        [(1, "error", "DEF-header"), (2, "error", "DEF-from")],
    ),
    "Bootstrap without a value": ("Bootstrap:\n", [(1, "error", "DEF-header")]),
    "agent is case-sensitive": ("Bootstrap: Docker\nFrom: x:1\n", [(1, "error", "DEF-header")]),
    "unknown agent": ("Bootstrap: podman\nFrom: x:1\n", [(1, "error", "DEF-header")]),
    "unknown header keyword": (HEAD + "Base: debian\n", [(3, "error", "DEF-header")]),
    "header line without a colon": (
        "Bootstrap: docker\nFrom debian:12\n",
        [(1, "error", "DEF-from"), (2, "error", "DEF-header")],
    ),
    "header given twice": (HEAD + "From: ubuntu:24.04\n", [(3, "warning", "DEF-header")]),
    "docker without From": ("Bootstrap: docker\n%post\n    true\n", [(1, "error", "DEF-from")]),
    "docker-daemon without a tag": (
        "Bootstrap: docker-daemon\nFrom: localhost:5000/builder/x\n",
        [(2, "error", "DEF-from")],
    ),
    "From with a scheme": (
        "Bootstrap: docker\nFrom: docker://debian:12\n",
        [(2, "error", "DEF-from")],
    ),
    "unknown section": (HEAD + "%install\n    make\n", [(3, "error", "DEF-section")]),
    "indented percent line ends the section": (
        HEAD + "%post\n    echo start\n    %s is printf's\n    echo end\n",
        [(5, "error", "DEF-section")],
    ),
    "app section without a name": (HEAD + "%appinstall\n    make\n", [(3, "error", "DEF-section")]),
    "-c without a shell": (HEAD + "%post -c\n    true\n", [(3, "error", "DEF-section")]),
    "section twice": (
        HEAD + "%post\n    a\n%runscript\n    b\n%post\n    c\n",
        [(7, "warning", "DEF-duplicate")],
    ),
    "files twice is merged": (
        HEAD + "%files\n    a\n%files\n    b\n",
        [(5, "info", "DEF-duplicate")],
    ),
    "label without a value": (HEAD + "%labels\n    maintainer\n", [(4, "error", "DEF-labels")]),
    "label separated by a tab": (HEAD + "%labels\n    k\tv\n", [(4, "error", "DEF-labels")]),
    "label twice": (
        HEAD + "%labels\n    k v\n    k w\n",
        [(5, "warning", "DEF-labels")],
    ),
    "files line with three words": (
        HEAD + "%files\n    a b c\n",
        [(4, "error", "DEF-files")],
    ),
    "files with bad arguments": (HEAD + "%files into x\n    a\n", [(3, "error", "DEF-files")]),
    "files from a missing stage": (
        HEAD + "%files from build\n    /a\n",
        [(3, "error", "DEF-stage")],
    ),
    "stage name twice": (
        HEAD + "Stage: a\n\n" + HEAD + "Stage: a\n",
        [(7, "error", "DEF-stage")],
    ),
    "bad arguments line": (HEAD + "%arguments\n    TAG\n", [(4, "warning", "DEF-arguments")]),
    "template in the header": (
        "Bootstrap: docker\nFrom: debian:{{ tag }}\n",
        [(2, "error", "DEF-template")],
    ),
    "template in a script, no spaces": (
        HEAD + "%post\n    pip install torch=={{torch}}\n",
        [(4, "error", "DEF-template")],
    ),
    "chmod of a file in a folder removed before": (
        HEAD + "%post\n    pip install -r /tmp/b/r.txt\n    rm -rf /tmp/b && rm -f /tmp/ca.pem\n"
        "    chmod 644 /tmp/b/r.txt\n    chmod 644 /tmp/ca.pem\n",
        [(6, "error", "DEF-removed"), (7, "error", "DEF-removed")],
    ),
    "a removed path used on a continued line": (
        HEAD + "%test\n    rm -r /opt/x/\n    ls \\\n        /opt/x/y\n",
        [(5, "error", "DEF-removed")],
    ),
    "Bootstrap at column 0 in a section starts a stage": (
        HEAD + "%help\nBootstrap: is how it starts\n",
        [(4, "error", "DEF-header")],
    ),
}


def test_removed_paths_made_again_or_globbed_are_fine() -> None:
    text = HEAD + (
        "%post\n    rm -rf /tmp/b /var/lib/apt/lists/*\n    mkdir -p /tmp/b\n"
        "    touch /tmp/b/x /var/lib/apt/lists/y\n    rm -f /etc/ssh/ssh_host_*\n"
        "    ls /etc/ssh  # /tmp/b/x\n    echo /tmp/bx\n"
    )
    assert found(text) == []


@pytest.mark.parametrize(("text", "expected"), BAD.values(), ids=BAD.keys())
def test_bad_files_have_exact_findings(
    text: str, expected: list[tuple[int | None, str, str]]
) -> None:
    assert found(text) == expected


def test_findings_name_the_tool_and_file() -> None:
    assert check_deffile("Bootstrap: docker\n", "a.def") == [
        Finding(
            tool="deffile",
            file="a.def",
            line=1,
            level="error",
            code="DEF-from",
            message="'Bootstrap: docker' needs 'From:' naming the image",
        )
    ]


def test_messages_say_what_to_do() -> None:
    [indented] = messages(HEAD + "%post\n    %prog --help\n")
    assert "a script line must not start with %" in indented
    [template] = messages(HEAD + "%post\n    echo {{ x }}\n")
    assert "--build-arg x=" in template
    [daemon] = messages("Bootstrap: docker-daemon\nFrom: builder/x\n")
    assert "explicit tag" in daemon
    [unknown] = messages(HEAD + "%enviroment\n    export A=1\n")
    assert "unknown section %enviroment" in unknown
    assert "%environment" in unknown


def test_every_problem_is_reported_not_just_the_first() -> None:
    text = "Bootstrap: docker\nFrom: x:{{ v }}\nColour: red\n%bogus\n%labels\n    lonely\n"
    assert found(text) == [
        (2, "error", "DEF-template"),
        (3, "error", "DEF-header"),
        (4, "error", "DEF-section"),
        (6, "error", "DEF-labels"),
    ]


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_def_file_is_clean(name: str) -> None:
    defs = [
        f
        for f in render_outputs(resolve(load_preset(name)), "apptainer")
        if f.path.endswith(".def")
    ]
    assert len(defs) == 2
    for out in defs:
        assert lint_deffile(out.text, out.path) == [], out.path
