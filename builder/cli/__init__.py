"""The `builder` command line: parse options, call one library function, print.

The commands live in ``image`` (presets to inspect), ``cluster`` (keys to
sif), ``rehearse`` and ``environment`` (lock to diff); they register
themselves on ``app.app`` when imported, in --help order.
"""

from __future__ import annotations

from builder.cli import cluster, environment, image, rehearse
from builder.cli.app import app, main

__all__ = ["app", "cluster", "environment", "image", "main", "rehearse"]
