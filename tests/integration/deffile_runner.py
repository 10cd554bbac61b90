"""A stand-in for `apptainer build`: a rendered .def's sections run in one Docker container.

Apptainer cannot be installed on our machines, so a .def is executed the way
Apptainer's build runs it (internal/pkg/build/stage.go, files/copy.go,
sources/test.sh, read at apptainer/apptainer main), in a container of the
def's ``From:`` image:

- %files: each ``src [dst]`` with the parent of dst made and ``cp -fLr``, the
  source globbed by /bin/sh and relative to the folder the def was rendered
  into (``CopyFromHost``);
- %post: written to a file and run as ``/bin/sh -ex FILE`` from ``/`` with a
  cleaned environment (``runPostScript``: ``exec --pwd / --writable
  --cleanenv``; ``getSectionScriptArgs`` gives ``/bin/sh -ex``);
- %environment goes to /.singularity.d/env/90-environment.sh, %test to
  /.singularity.d/test and %runscript to /.singularity.d/runscript, each
  ``#!/bin/sh`` + body; the test runs as ``apptainer test`` does: every env
  script sourced, then the test script executed.

What it does not do: no SIF is assembled, %labels and %help are not stored,
%setup/%pre (which builder never emits) are refused, and Docker's ENV of the
base image stands in for Apptainer's docker2singularity environment.
"""

from __future__ import annotations

import shlex
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from builder.lint.deffile import read_sections

if TYPE_CHECKING:
    from builder.engine import Engine

MARK = "== deftest:"
"""Each phase the driver finishes prints MARK and its name (files, post, test, runscript)."""
_RUN = "/.deftest/run"
_SRC = "/.deftest/src"
_CLEANENV = (
    'env -i PATH="$PATH" HOME=/root LANG=C '
    "APPTAINER_ENVIRONMENT=/.singularity.d/env/91-environment.sh "
    "APPTAINER_LABELS=/.build.labels"
)


@dataclass(frozen=True)
class DefRun:
    """What one run of a .def gave: the exit code (None: killed at the timeout),
    the output, and the phases that finished."""

    code: int | None
    output: str

    @property
    def phases(self) -> list[str]:
        return [line.split(MARK, 1)[1].strip() for line in self.output.splitlines() if MARK in line]

    @property
    def ok(self) -> bool:
        return self.code == 0


def driver_script(text: str) -> tuple[str, str, dict[str, str]]:
    """(From: image, the driver script, the files it needs beside it) for a .def's text."""
    header, sections = read_sections(text)
    bootstrap = header.get("bootstrap", "")
    if bootstrap not in ("docker", "docker-daemon"):
        raise ValueError(f"only docker and docker-daemon bootstraps run here, not {bootstrap!r}")
    body: dict[str, str] = {}
    for section in sections:
        if section.name in ("setup", "pre", "startscript", "arguments") or section.name.startswith(
            "app"
        ):
            raise ValueError(f"%{section.name} is not run by this stand-in")
        if section.args.strip() and section.name != "files":
            raise ValueError(f"%{section.name} {section.args}: section arguments are not run here")
        if section.name == "files" and section.args.strip():
            raise ValueError("%files from STAGE is not run here (one stage only)")
        body[section.name] = body.get(section.name, "") + section.body
    lines = ["set -e"]
    for line in body.get("files", "").splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        src, dst = words[0], (words[1] if len(words) > 1 else words[0])
        make = dst if dst.endswith("/") else str(Path(dst).parent)
        lines.append(
            f"for n in {src.replace(' ', chr(92) + ' ')}; do mkdir -p {shlex.quote(make)}; "
            f'cp -fLr "$n" {shlex.quote(dst)}; done'
        )
    lines.append(f'echo "{MARK} files"')
    files: dict[str, str] = {}
    if "post" in body:
        files["post.script"] = body["post"]
        lines.append(f"cd / && {_CLEANENV} /bin/sh -ex {_RUN}/post.script")
        lines.append(f'echo "{MARK} post"')
    lines.append("mkdir -p /.singularity.d/env")
    for name, target in (
        ("environment", "/.singularity.d/env/90-environment.sh"),
        ("test", "/.singularity.d/test"),
        ("runscript", "/.singularity.d/runscript"),
    ):
        if name in body:
            files[name] = f"#!/bin/sh\n\n{body[name]}\n"
            lines.append(f"cp {_RUN}/{name} {target} && chmod 755 {target}")
    sourced = 'for s in /.singularity.d/env/*.sh; do [ -f "$s" ] && . "$s"; done'
    if "test" in body:
        lines.append(
            f"cd / && {_CLEANENV} /bin/sh -c {shlex.quote(sourced + '; exec /.singularity.d/test')}"
        )
        lines.append(f'echo "{MARK} test"')
    if "runscript" in body:
        run = sourced + "; exec /.singularity.d/runscript /bin/sh -c 'echo \"$0\"' runscript-args"
        lines.append(f"cd / && {_CLEANENV} /bin/sh -c {shlex.quote(run)}")
        lines.append(f'echo "{MARK} runscript"')
    files["driver.sh"] = "\n".join(lines) + "\n"
    return header["from"], files["driver.sh"], files


def run_deffile(engine: Engine, deffile: Path, *, timeout: float) -> DefRun:
    """Run the .def at deffile (its %files relative to its folder) in one container of its
    From: image; the container is removed whatever happens."""
    image, _, files = driver_script(deffile.read_text(encoding="utf-8"))
    name = f"deftest-{uuid.uuid4().hex[:12]}"
    with tempfile.TemporaryDirectory(prefix="deftest-") as staging:
        for file_name, content in files.items():
            (Path(staging) / file_name).write_text(content, encoding="utf-8")
        argv = [
            "docker",
            "run",
            "--rm",
            "--name",
            name,
            "--network",
            "bridge",
            "--entrypoint",
            "/bin/sh",
            "-v",
            f"{deffile.parent.resolve()}:{_SRC}:ro",
            "-v",
            f"{Path(staging).resolve()}:{_RUN}:ro",
            "-w",
            _SRC,
            image,
            f"{_RUN}/driver.sh",
        ]
        try:
            code, output = engine.cli(argv, timeout)
        finally:
            engine.remove_container(name)  # a run killed at the timeout leaves it
    return DefRun(code, output)
