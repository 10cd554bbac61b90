"""Apptainer definition files, checked by the rules of Apptainer's own parser.

Apptainer is not installable here, so the rules are read from its source
and mirrored, line for line where it matters:

- ``pkg/build/types/parser/deffile.go`` (apptainer/apptainer, read at
  commit 037a725e): ``All``
  splits stages at every line matching ``(?mi)^bootstrap:``;
  ``scanDefinitionFile`` ends a section at ANY line whose first word starts
  with ``%``; ``getSectionName`` trims leading ``%`` and splits on a space;
  ``doHeader`` reads ``Key: value`` lines (comments cut at ``#``, trailing
  ``\\`` continues) against ``validHeaders``; ``validSections`` and
  ``appSections`` name the sections; ``GetLabels`` splits a %labels line at
  its first space; ``fileSplitter`` splits a %files line.
- ``internal/pkg/build/conveyorPacker.go``: the bootstrap agents.
- ``internal/pkg/build/stage.go``: ``%files from STAGE`` (exactly two words,
  or the section is skipped) and stage lookup by name.
- ``internal/pkg/build/args/reader.go``: Apptainer >= 1.2 replaces
  ``{{ name }}`` with a build argument and fails if it has no value.

One rule is ours, not the parser's: a script line that uses a path an earlier
line of the same script removed (``rm -rf /tmp/builder`` and then ``chmod ...
/tmp/builder/x``) fails the build under ``-e`` (DEF-removed).

Apptainer accepts a section twice and concatenates the bodies (its own
``multiplescripts`` test data does it); that is reported as a warning
(info for %files, whose merging is documented), because a renderer that
emits a section twice has a bug.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from builder.lint.findings import Finding
from builder.lint.script_paths import removed_path_uses

VALID_HEADERS = frozenset(
    {
        "bootstrap",
        "from",
        "includecmd",
        "mirrorurl",
        "updateurl",
        "osversion",
        "include",
        "library",
        "registry",
        "namespace",
        "stage",
        "product",
        "user",
        "regcode",
        "productpgp",
        "registerurl",
        "modules",
        "otherurl&n",
        "fingerprints",
        "confurl",
        "setopt",
    }
)
"""Apptainer's ``validHeaders``; ``&n`` stands for a trailing number (OtherURL0, ...)."""

VALID_SECTIONS = frozenset(
    {
        "help",
        "setup",
        "files",
        "labels",
        "environment",
        "pre",
        "post",
        "runscript",
        "test",
        "startscript",
        "arguments",
    }
)
"""Apptainer's ``validSections``."""

APP_SECTIONS = frozenset(
    {"appinstall", "applabels", "appfiles", "appenv", "apptest", "apphelp", "apprun", "appstart"}
)
"""Apptainer's ``appSections``: each needs an app name (``%appenv NAME``)."""

_OCI_AGENTS = frozenset({"docker", "docker-archive", "docker-daemon", "oci", "oci-archive"})

FROM_REQUIRED = _OCI_AGENTS | {"library", "oras", "shub", "localimage"}
"""Agents that start from an existing image, so ``From:`` must say which."""

AGENTS = FROM_REQUIRED | {"busybox", "debootstrap", "arch", "yum", "zypper", "scratch"}
"""Bootstrap agents ``conveyorPacker`` knows (the value is case-sensitive)."""

_SCRIPT_SECTIONS = frozenset({"setup", "pre", "post", "test"})
_STAGE_START = re.compile(r"^bootstrap:", re.IGNORECASE)
_TEMPLATE = re.compile(r"{{\s*(\w+)\s*}}")
_FILE_WORDS = re.compile(r"""([^\s"']*{{\s*\w+\s*}}*[^\s{}"']*)+|([^\s"']+|"([^"]*)"|'([^']*))""")


@dataclass
class _Section:
    name: str
    key: str
    args: str
    line: int
    body: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class _Stage:
    line: int
    header: dict[str, tuple[int, str]] = field(default_factory=dict)
    sections: list[_Section] = field(default_factory=list)


class _Checker:
    """Collects findings for one file."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.findings: list[Finding] = []

    def add(self, line: int | None, code: str, message: str, level: str = "error") -> None:
        self.findings.append(Finding("deffile", self.file, line, level, code, message))


def check_deffile(text: str, file: str) -> list[Finding]:
    """Every rule below, on one definition file's text."""
    check = _Checker(file)
    lines = [(n, line.removesuffix("\r")) for n, line in enumerate(text.split("\n"), start=1)]
    _check_templates(check, lines)
    starts = [i for i, (_, line) in enumerate(lines) if _STAGE_START.match(line)]
    if not starts:
        if any(_is_content(line) for _, line in lines):
            msg = "no 'Bootstrap:' line; the first header names the agent: 'Bootstrap: docker'"
            check.add(1, "DEF-header", msg)
            _check_stage(check, _parse_stage(check, lines), need_bootstrap=False)
        else:
            check.add(None, "DEF-empty", "the definition file is empty (only blanks and comments)")
        return check.findings
    for number, line in lines[: starts[0]]:
        if _is_content(line):
            check.add(
                number,
                "DEF-header",
                f"{line.strip()!r} comes before 'Bootstrap:'; "
                "Apptainer makes it a stage of its own, with no bootstrap agent. "
                "'Bootstrap:' must be the first header line",
            )
            break
    stages = []
    for begin, end in zip(starts, [*starts[1:], len(lines)], strict=True):
        stage = _parse_stage(check, lines[begin:end])
        _check_stage(check, stage, need_bootstrap=True)
        stages.append(stage)
    _check_stage_names(check, stages)
    return check.findings


@dataclass(frozen=True)
class DefSection:
    """One section as Apptainer reads it: name (lower case), arguments, body text."""

    name: str
    args: str
    body: str


def read_sections(text: str) -> tuple[dict[str, str], tuple[DefSection, ...]]:
    """Header values and sections of a one-stage definition file, split by the rules
    above (what a stand-in for ``apptainer build`` needs to run its scripts)."""
    check = _Checker("<text>")
    lines = [(n, line.removesuffix("\r")) for n, line in enumerate(text.split("\n"), start=1)]
    if sum(1 for _, line in lines if _STAGE_START.match(line)) != 1:
        raise ValueError("expected a definition file of one stage (one 'Bootstrap:' line)")
    stage = _parse_stage(check, lines)
    if check.findings:
        raise ValueError(f"not a valid definition file: {check.findings[0]}")
    header = {key: value for key, (_, value) in stage.header.items()}
    sections = tuple(
        DefSection(s.name, s.args, "\n".join(line for _, line in s.body) + "\n")
        for s in stage.sections
    )
    return header, sections


def _is_content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _check_templates(check: _Checker, lines: list[tuple[int, str]]) -> None:
    for number, line in lines:
        for match in _TEMPLATE.finditer(line):
            check.add(
                number,
                "DEF-template",
                f"{match.group(0)!r} is a build-argument "
                f"placeholder for Apptainer >= 1.2, which fails unless --build-arg "
                f"{match.group(1)}=... is given; generated files must contain none "
                "(resolve or escape it in the template)",
            )


def _is_section_line(line: str) -> bool:
    words = line.split()
    return bool(words) and words[0].startswith("%")


def _parse_stage(check: _Checker, lines: list[tuple[int, str]]) -> _Stage:
    """One stage's header and sections, split the way ``scanDefinitionFile`` does."""
    stage = _Stage(line=lines[0][0])
    first = next((i for i, (_, line) in enumerate(lines) if _is_section_line(line)), len(lines))
    _parse_header(check, stage, lines[:first])
    current: _Section | None = None
    for number, line in lines[first:]:
        if _is_section_line(line):
            current = _open_section(check, number, line)
            if current is not None:
                stage.sections.append(current)
        elif current is not None:
            current.body.append((number, line))
    return stage


def _parse_header(check: _Checker, stage: _Stage, lines: list[tuple[int, str]]) -> None:
    """``doHeader``: ``Key: value`` lines, ``#`` comments, ``\\`` continuations."""
    pending: tuple[int, str, str] | None = None
    for number, raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            if pending is not None:
                _set_header(check, stage, *pending)
                pending = None
            continue
        cut = line.split("#", 1)[0]
        if pending is not None:
            start, key, value = pending[0], pending[1], pending[2] + cut.strip()
        elif ":" not in cut:
            check.add(
                number,
                "DEF-header",
                f"header line {line!r} is not 'Key: value' (Apptainer: header key had no val)",
            )
            continue
        else:
            start = number
            key, value = (part.strip() for part in cut.split(":", 1))
            key = key.lower()
        if value.endswith("\\"):
            pending = (start, key, value.removesuffix("\\"))
            continue
        pending = None
        _set_header(check, stage, start, key, value)
    if pending is not None:
        _set_header(check, stage, *pending)


def _set_header(check: _Checker, stage: _Stage, number: int, key: str, value: str) -> None:
    if key not in VALID_HEADERS and re.sub(r"\d+$", "&n", key) not in VALID_HEADERS:
        check.add(
            number,
            "DEF-header",
            f"unknown header keyword {key!r}; Apptainer knows {', '.join(sorted(VALID_HEADERS))}",
        )
        return
    if key in stage.header:
        check.add(
            number,
            "DEF-header",
            f"header {key!r} is given twice (lines "
            f"{stage.header[key][0]} and {number}); Apptainer keeps the last",
            "warning",
        )
    stage.header[key] = (number, value)


def _open_section(check: _Checker, number: int, line: str) -> _Section | None:
    """``getSectionName`` and ``parseTokenSection``: name, key and arguments."""
    if line[0].isspace():
        check.add(
            number,
            "DEF-section",
            f"{line.strip()!r} is indented but its first word "
            "starts with '%': Apptainer ends the section here and starts an invalid one "
            "(a script line must not start with %)",
        )
        return None
    rest = line.lstrip("%")
    word, _, args = rest.partition(" ")
    name = word.lower()
    if name in VALID_SECTIONS:
        return _Section(name, name if name != "files" else f"files {_cut(args)}", args, number)
    if name in APP_SECTIONS:
        app = args.split(" ", 1)[0]
        if not app:
            check.add(number, "DEF-section", f"%{name} needs an app name: %{name} NAME")
            return None
        return _Section(name, f"{name} {app}", args.partition(" ")[2], number)
    check.add(
        number,
        "DEF-section",
        f"unknown section %{word} (Apptainer knows "
        f"{', '.join('%' + s for s in sorted(VALID_SECTIONS | APP_SECTIONS))})",
    )
    return None


def _cut(args: str) -> str:
    """Section arguments without a trailing ``#`` comment, as ``stage.go`` reads them."""
    return " ".join(args.split("#", 1)[0].split())


def _check_stage(check: _Checker, stage: _Stage, *, need_bootstrap: bool) -> None:
    _check_bootstrap(check, stage, need_bootstrap=need_bootstrap)
    seen: dict[str, int] = {}
    for section in stage.sections:
        if section.key in seen:
            merged = section.name == "files"
            check.add(
                section.line,
                "DEF-duplicate",
                f"%{section.key.rstrip()} again (first at "
                f"line {seen[section.key]}); Apptainer appends the bodies in order",
                "info" if merged else "warning",
            )
        seen.setdefault(section.key, section.line)
        if section.name == "labels":
            _check_labels(check, section)
        elif section.name == "files":
            _check_files(check, section)
        elif section.name == "arguments":
            _check_arguments(check, section)
        elif section.name in _SCRIPT_SECTIONS:
            _check_removed_paths(check, section)
            words = _cut(section.args).split()
            if words and words[-1] == "-c":
                check.add(
                    section.line,
                    "DEF-section",
                    f"%{section.name} -c needs a shell after it, e.g. '-c /bin/bash'",
                )


def _check_bootstrap(check: _Checker, stage: _Stage, *, need_bootstrap: bool) -> None:
    number, agent = stage.header.get("bootstrap", (stage.line, ""))
    if not agent:
        if need_bootstrap:
            check.add(
                number,
                "DEF-header",
                "'Bootstrap:' has no value; name the agent, e.g. 'Bootstrap: docker'",
            )
        return
    if agent not in AGENTS:
        check.add(
            number,
            "DEF-header",
            f"unknown bootstrap agent {agent!r} (it is "
            f"case-sensitive); Apptainer knows {', '.join(sorted(AGENTS))}",
        )
        return
    from_line, image = stage.header.get("from", (number, ""))
    if agent in FROM_REQUIRED and not image:
        check.add(number, "DEF-from", f"'Bootstrap: {agent}' needs 'From:' naming the image")
        return
    if agent in _OCI_AGENTS and "://" in image:
        check.add(
            from_line,
            "DEF-from",
            f"'From: {image}' has a scheme; Apptainer adds "
            f"'{agent}:' itself, so give the bare reference",
        )
    if agent == "docker-daemon" and image and not _has_tag(image):
        check.add(
            from_line,
            "DEF-from",
            f"'From: {image}' has no tag; docker-daemon needs "
            "an explicit tag or digest, e.g. name:tag",
        )


def _has_tag(reference: str) -> bool:
    return "@" in reference or ":" in reference.rsplit("/", 1)[-1]


def _content(section: _Section) -> list[tuple[int, str]]:
    return [(n, line.strip()) for n, line in section.body if _is_content(line)]


def _check_labels(check: _Checker, section: _Section) -> None:
    """``GetLabels``: key, one space, value; a tab is not a separator there."""
    keys: dict[str, int] = {}
    for number, line in _content(section):
        key, _, value = line.partition(" ")
        if any(c.isspace() for c in key):
            check.add(
                number,
                "DEF-labels",
                f"{line!r}: separate KEY and VALUE with a space; "
                "Apptainer splits on the first space only",
            )
            continue
        if not value.strip():
            check.add(
                number, "DEF-labels", f"label {key!r} has no value; a %labels line is 'KEY VALUE'"
            )
        if key in keys:
            check.add(
                number,
                "DEF-labels",
                f"label {key!r} again (first at line {keys[key]}); Apptainer keeps the last",
                "warning",
            )
        keys.setdefault(key, number)


def _check_files(check: _Checker, section: _Section) -> None:
    """``fileSplitter`` reads 'src [dst]'; ``stage.go`` reads the section's arguments."""
    args = _cut(section.args).split()
    if args and (len(args) != 2 or args[0] != "from"):
        check.add(
            section.line,
            "DEF-files",
            f"%files {' '.join(args)}: the only argument "
            "form is 'from STAGE'; Apptainer skips this section",
        )
    for number, line in _content(section):
        words = [m.group(0) for m in _FILE_WORDS.finditer(line)]
        if len(words) > 2:
            check.add(
                number,
                "DEF-files",
                f"{line!r}: a %files line is 'src [dst]'; Apptainer "
                f"ignores {' '.join(words[2:])!r} (quote paths with spaces)",
            )


def _check_arguments(check: _Checker, section: _Section) -> None:
    for number, line in _content(section):
        key, equals, _ = line.partition("=")
        if not equals or not key.strip():
            check.add(
                number,
                "DEF-arguments",
                f"{line!r} is not NAME=default; Apptainer skips it",
                "warning",
            )


def _check_stage_names(check: _Checker, stages: list[_Stage]) -> None:
    """Stage names are unique, and ``%files from`` names an earlier stage."""
    names: dict[str, int] = {}
    for stage in stages:
        for section in stage.sections:
            args = _cut(section.args).split()
            if (
                section.name == "files"
                and len(args) == 2
                and args[0] == "from"
                and args[1] not in names
            ):
                msg = f"%files from {args[1]}: no earlier stage has 'Stage: {args[1]}'"
                check.add(section.line, "DEF-stage", msg)
        if "stage" in stage.header:
            number, name = stage.header["stage"]
            if name in names:
                check.add(
                    number,
                    "DEF-stage",
                    f"stage name {name!r} is used twice (line "
                    f"{names[name]}); '%files from {name}' would copy from the first",
                )
            names.setdefault(name, number)


def _check_removed_paths(check: _Checker, section: _Section) -> None:
    for number, message in removed_path_uses(section.name, section.body):
        check.add(number, "DEF-removed", message)
