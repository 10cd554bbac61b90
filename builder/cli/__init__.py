"""The `builder` command line: parse options, call one library function, print.

The commands live in ``stack`` (presets to schema), ``lint``, ``image`` (build, inspect),
``cluster`` (keys to sif), ``rehearse`` and ``environment`` (lock to diff);
``app`` imports each module when one of its commands is asked for.
"""

from __future__ import annotations

from builder.cli.app import app, main

__all__ = ["app", "main"]
