"""Scripts that run inside containers and on nodes, with the environment's own python3.

They are sent as text (``payload_text``) and must stay standard library only:
the probe every rehearsal rank runs, the fingerprint collector, and the lock
check a locked build runs in its python stage.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).parent


def payload_text(name: str) -> str:
    """The source of one payload script (``probe.py``, ``collect.py``, ``lock_check.py``)."""
    return (_HERE / name).read_text(encoding="utf-8")


def payload_path(name: str) -> Path:
    return _HERE / name
