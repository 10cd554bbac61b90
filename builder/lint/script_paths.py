"""A script that uses a path it removed earlier: the .def rule DEF-removed.

``rm -rf /tmp/builder`` followed by ``chmod 644 /tmp/builder/x`` stops a
build run under ``-e`` (Apptainer runs %post as ``/bin/sh -ex``). Commands are
split the way a shell would (quotes, ``&&``, ``;``, ``\\`` continuations).
"""

from __future__ import annotations

import re
import shlex

_GLOB = re.compile(r"[*?\[$`]")
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")"})


def _commands(body: list[tuple[int, str]]) -> list[tuple[int, list[str]]]:
    """A script's simple commands as words, with the line each starts on."""
    logical: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, line in body:
        start, text = pending if pending is not None else (number, "")
        text += line
        if text.endswith("\\"):
            pending = (start, text[:-1] + " ")
            continue
        pending = None
        logical.append((start, text))
    commands: list[tuple[int, list[str]]] = []
    for number, text in logical:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError:  # an unfinished quote: not ours to judge here
            continue
        words: list[str] = []
        for token in [*tokens, ";"]:
            if token in _SEPARATORS:
                if words:
                    commands.append((number, words))
                words = []
            else:
                words.append(token)
    return commands


def removed_path_uses(section: str, body: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """(line, message) for each command that uses a path an earlier ``rm`` removed.

    Only literal absolute paths count (no globs, no variables); a later ``mkdir``
    of the folder makes it usable again.
    """
    found: list[tuple[int, str]] = []
    removed: dict[str, int] = {}
    for number, words in _commands(body):
        program = words[0].rsplit("/", 1)[-1] if words else ""
        paths = [w for w in words[1:] if w.startswith("/") and not _GLOB.search(w)]
        if program == "mkdir":
            for path in paths:
                for gone in [g for g in removed if path == g or path.startswith(g + "/")]:
                    del removed[gone]
            continue
        if program == "rm":
            for path in paths:
                removed.setdefault(path.rstrip("/") or "/", number)
            continue
        for word in words[1:]:
            for gone, where in removed.items():
                if word == gone or word.startswith(gone.rstrip("/") + "/"):
                    found.append(
                        (
                            number,
                            f"%{section} uses {word}, but line {where} removed {gone}; "
                            "under 'set -e' the build stops here. Move the command before the "
                            "removal (or drop it)",
                        )
                    )
                    break
    return found
