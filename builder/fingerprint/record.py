"""A fingerprint: what an environment is, in one comparable record and a short digest.

The collector (``payload/collect.py``) runs inside the environment (an image,
a running container, or a node reached over ssh) with that environment's
own python3 and returns OS release, Python, every Python package, Debian
packages, the torch build, DeepSpeed and the ops it prebuilt (for which
accelerator and GPU architectures), the collective libraries (NCCL, RCCL, HCCL),
launch-relevant variables
and pdsh/ssh versions. The spec hash label of the image is added from outside.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from builder import platforms
from builder.errors import UsageError
from builder.fingerprint import deepspeed_ops

if TYPE_CHECKING:
    from builder.collectives import Collective


@dataclass(frozen=True)
class Fingerprint:
    """One environment's record; ``digest`` is over all of it."""

    source: str
    data: dict[str, Any]

    @property
    def digest(self) -> str:
        """Of the environment's contents: the same for a container wherever it is
        fingerprinted (verify adds the image it runs, which is not contents)."""
        contents = {key: value for key, value in self.data.items() if key != "image"}
        canonical = json.dumps(contents, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def as_data(self) -> dict[str, Any]:
        return {"source": self.source, "digest": self.digest, **self.data}

    def summary(self) -> str:
        """The human view: the few lines people ask about, then the counts."""
        d = self.data
        torch = d.get("torch") or {}
        builds = (p.torch_build(torch, d["packages"]) for p in platforms.every())
        build = next((b for b in builds if b), "CPU")
        rows = [
            ("source", self.source),
            ("digest", self.digest),
            ("os", d["os"].get("pretty_name", "?")),
            ("python", d["python"]),
            ("torch", f"{torch.get('version')} ({build})" if torch else "-"),
            ("deepspeed", _deepspeed(d)),
            *((c.name, d.get(c.name) or "-") for c in _libraries(d)),
            ("pdsh", d["tools"].get("pdsh") or "-"),
            ("ssh", d["tools"].get("ssh") or "-"),
            ("spec hash", d.get("spec_hash") or "-"),
            ("packages", f"{len(d['packages'])} Python, {len(d['apt'])} Debian"),
            ("env", ", ".join(f"{k}={v}" for k, v in d["env"].items() if k != "PATH") or "-"),
        ]
        width = max(len(name) for name, _ in rows)
        return "".join(f"{name.ljust(width)}  {value}\n" for name, value in rows)


def _libraries(data: dict[str, Any]) -> list[Collective]:
    """The collective libraries a record shows: those it holds, and those always kept."""
    return [
        c
        for c in platforms.collectives()
        if c.versioned and (c.recorded_when_absent or c.name in data)
    ]


def _deepspeed(data: dict[str, Any]) -> str:
    """DeepSpeed's version and, where recorded, its prebuilt ops, on one line (the
    summary's names stay as wide as they were)."""
    version = data.get("deepspeed") or "-"
    ops = data.get(deepspeed_ops.KEY)
    if ops is None:
        return str(version)
    return f"{version}, prebuilt ops: {deepspeed_ops.summary(ops)}"


def parse_collected(source: str, output: str, spec_hash: str | None) -> Fingerprint:
    """The collector's JSON (the last line of output) as a Fingerprint."""
    lines = output.strip().splitlines()
    try:
        data = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        raise UsageError(
            f"{source}: no fingerprint came back (is python3 installed there?): "
            f"{output.strip()[-300:]}"
        ) from None
    data["spec_hash"] = spec_hash
    return Fingerprint(source, data)
