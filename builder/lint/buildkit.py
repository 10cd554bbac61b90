"""BuildKit's own Dockerfile parser, plus the limits of the classic builder.

``dockerfile.parse_string`` is BuildKit's Go parser, so a Dockerfile it
rejects is one ``docker build`` rejects. It accepts any instruction name,
though, so names are checked against ``dockerfile.all_cmds()`` here.

We build through the Docker SDK, which drives the classic builder (no
BuildKit), so anything only BuildKit runs is an error too: flags such as
``RUN --mount`` or ``COPY --chmod``, heredocs, and the ``# syntax=``
directive (the classic builder ignores it, so the two builders would read
the file differently, and BuildKit would fetch a frontend image).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from builder.lint.findings import Finding

if TYPE_CHECKING:
    from collections.abc import Iterator

CLASSIC_FLAGS: dict[str, frozenset[str]] = {
    "from": frozenset({"platform"}),
    "copy": frozenset({"from", "chown"}),
    "add": frozenset({"chown"}),
    "healthcheck": frozenset({"interval", "timeout", "start-period", "start-interval", "retries"}),
}
"""Flags the classic builder accepts, by instruction; any other flag needs BuildKit."""

# BuildKit reads parser directives only in the leading comment lines.
_DIRECTIVE = re.compile(r"^#\s*([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.*?)\s*$")


def check_dockerfile(text: str, file: str = "Dockerfile") -> list[Finding]:
    """Parse with BuildKit's parser; report unknown instructions and BuildKit-only syntax."""
    import dockerfile

    findings = list(_syntax_directive(text, file))
    try:
        commands = dockerfile.parse_string(text)
    except dockerfile.GoParseError as exc:
        findings.append(_finding(file, None, "BK-parse", f"BuildKit cannot parse it: {exc}"))
        return findings
    known = frozenset(dockerfile.all_cmds())
    for command in commands:
        name = command.cmd.lower()
        line = command.start_line
        if name not in known:
            findings.append(_unknown(file, line, command.cmd, known))
            continue
        flags = command.flags
        if name == "onbuild":
            if command.sub_cmd is None or command.sub_cmd.lower() not in known:
                findings.append(_unknown(file, line, command.sub_cmd or "", known))
                continue
            # the parser keeps a trigger's flags only in the original text
            name = command.sub_cmd.lower()
            flags = tuple(_leading_flags(command.original.split()[2:]))
        findings += _buildkit_only(file, line, name, flags, bool(command.heredocs))
    return findings


def _syntax_directive(text: str, file: str) -> Iterator[Finding]:
    for number, line in enumerate(text.splitlines(), start=1):
        match = _DIRECTIVE.match(line)
        if match is None:
            return
        if match.group(1).lower() == "syntax":
            yield _finding(
                file,
                number,
                "BK-syntax-directive",
                f"`# syntax={match.group(2)}` selects a BuildKit frontend image; the classic "
                "builder ignores it, so the two builders would read this file differently",
            )


def _leading_flags(words: list[str]) -> Iterator[str]:
    for word in words:
        if not word.startswith("--"):
            return
        yield word


def _buildkit_only(
    file: str, line: int, name: str, flags: tuple[str, ...], heredoc: bool
) -> Iterator[Finding]:
    allowed = CLASSIC_FLAGS.get(name, frozenset())
    for flag in flags:
        flag_name = flag.removeprefix("--").split("=", 1)[0].lower()
        if flag_name not in allowed:
            yield _finding(
                file,
                line,
                "BK-buildkit-flag",
                f"{name.upper()} --{flag_name} needs BuildKit; the classic builder (Docker SDK) "
                f"fails with 'the --{flag_name} option requires BuildKit'",
            )
    if heredoc:
        yield _finding(
            file,
            line,
            "BK-heredoc",
            f"{name.upper()} uses a heredoc (<<WORD), which only BuildKit supports; "
            "write the script with && and line continuations",
        )


def _unknown(file: str, line: int, cmd: str, known: frozenset[str]) -> Finding:
    shown = cmd.upper() or "(none)"
    names = ", ".join(sorted(c.upper() for c in known))
    return _finding(
        file, line, "BK-unknown-instruction", f"unknown instruction {shown}; Docker knows {names}"
    )


def _finding(file: str, line: int | None, code: str, message: str) -> Finding:
    return Finding(tool="buildkit", file=file, line=line, level="error", code=code, message=message)
