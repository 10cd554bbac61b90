"""Fingerprints: what an environment is, in one comparable record and a short digest.

``collect.py`` runs inside the environment (an image, a running container,
or a node reached over ssh) with that environment's own python3 and returns
OS release, Python, every Python package, Debian packages, the torch build,
DeepSpeed, NCCL/HCCL, launch-relevant variables and pdsh/ssh versions. The
spec hash label of the image is added from outside. ``differences`` compares
two records field by field; verify and diff are built on it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.errors import UsageError
from builder.recipe import LABEL_PREFIX

if TYPE_CHECKING:
    from collections.abc import Iterable

    from builder.engine import Engine

COLLECTOR = Path(__file__).with_name("collect.py")
SPEC_HASH = f"{LABEL_PREFIX}.spec-hash"


@dataclass(frozen=True)
class Fingerprint:
    """One environment's record; ``digest`` is over all of it."""

    source: str
    data: dict[str, Any]

    @property
    def digest(self) -> str:
        canonical = json.dumps(self.data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def as_data(self) -> dict[str, Any]:
        return {"source": self.source, "digest": self.digest, **self.data}

    def summary(self) -> str:
        """The human view: the few lines people ask about, then the counts."""
        d = self.data
        torch = d.get("torch") or {}
        if torch.get("cuda"):
            build = f"CUDA {torch['cuda']}"
        elif torch.get("hip"):
            build = f"ROCm {torch['hip']}"
        else:
            build = "HPU" if "habana-torch-plugin" in d["packages"] else "CPU"
        rows = [
            ("source", self.source),
            ("digest", self.digest),
            ("os", d["os"].get("pretty_name", "?")),
            ("python", d["python"]),
            ("torch", f"{torch.get('version')} ({build})" if torch else "-"),
            ("deepspeed", d.get("deepspeed") or "-"),
            ("nccl", d.get("nccl") or "-"),
            ("hccl", d.get("hccl") or "-"),
            ("pdsh", d["tools"].get("pdsh") or "-"),
            ("ssh", d["tools"].get("ssh") or "-"),
            ("spec hash", d.get("spec_hash") or "-"),
            ("packages", f"{len(d['packages'])} Python, {len(d['apt'])} Debian"),
            ("env", ", ".join(f"{k}={v}" for k, v in d["env"].items() if k != "PATH") or "-"),
        ]
        width = max(len(name) for name, _ in rows)
        return "".join(f"{name.ljust(width)}  {value}\n" for name, value in rows)


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


def of_image(engine: Engine, reference: str) -> Fingerprint:
    """An image's fingerprint, from a throwaway container (entrypoint bypassed)."""
    from builder.errors import BuildError

    info = engine.image(reference)
    try:
        output = engine.run(reference, ["-c", COLLECTOR.read_text()], entrypoint=["python3"])
    except BuildError as exc:
        raise UsageError(f"image {reference}: the fingerprint collector failed: {exc}") from None
    return parse_collected(reference, output, info.labels.get(SPEC_HASH))


def of_container(engine: Engine, container: str) -> Fingerprint:
    """A running container's fingerprint (docker exec, its own environment)."""
    try:
        image = engine.container_image(container)
    except KeyError:
        raise UsageError(f"there is no container {container!r}") from None
    code, output = engine.exec(container, ["python3", "-c", COLLECTOR.read_text()])
    if code != 0:
        raise UsageError(f"container {container}: the collector failed: {output.strip()[-300:]}")
    labels = engine.image(image).labels if image else {}
    return parse_collected(container, output, labels.get(SPEC_HASH))


def over_ssh(host: str, ssh_config: Path | None, spec_hash: str | None) -> Fingerprint:
    """A node's fingerprint over ssh (into its container's sshd)."""
    import shutil
    import subprocess

    ssh = shutil.which("ssh")
    if ssh is None:
        from builder.errors import ToolMissing

        raise ToolMissing("ssh is not installed (package openssh-client)")
    argv = [ssh, *(["-F", str(ssh_config)] if ssh_config else []), host, "python3", "-"]
    result = subprocess.run(
        argv, input=COLLECTOR.read_text(), capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise UsageError(
            f"{host}: ssh {host} python3 failed (exit {result.returncode}): "
            f"{result.stderr.strip()[-300:]}"
        )
    return parse_collected(host, result.stdout, spec_hash)


# -- comparing ----------------------------------------------------------------

SCALARS = ("arch", "python", "deepspeed", "nccl", "hccl", "spec_hash")
GROUPS = {
    "os": "os",
    "torch": "torch",
    "packages": "python package",
    "apt": "apt package",
    "env": "env",
    "tools": "tool",
}
PARTIAL = "partial"
"""Groups a record holds only some entries of (a lock's apt: what the image added)."""
NOT_COMPARED = "-"


def flatten(data: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Every comparable value under a readable key (`python package torch`), with its group."""
    flat: dict[str, tuple[str, str]] = {}
    for key in SCALARS:
        if key in data and data[key] is not None:
            flat[key.replace("_", " ")] = (key, str(data[key]))
    for group, label in GROUPS.items():
        for name, value in (data.get(group) or {}).items():
            flat[f"{label} {name}"] = (group, str(value))
    return flat


def _covers(data: dict[str, Any], group: str) -> bool:
    """Whether a record says anything about group (a missing key there is a difference)."""
    return group in data and data[group] is not None and group not in data.get(PARTIAL, ())


def differences(
    prints: Iterable[Fingerprint], reference: Fingerprint | None = None
) -> tuple[list[str], dict[str, list[str]]]:
    """(sources, {field: value per source}) for every field that is not the same everywhere.

    A record that covers a group but lacks a key there shows "missing"; one that
    does not cover it (a lock has no OS; a lock's apt is only what the image
    added) shows "-" and is left out. A reference image is compared on all but
    the environment variables, which containers get at run time.
    """
    records = list(prints)
    if reference is not None:
        data = {k: v for k, v in reference.data.items() if k != "env"}
        records.insert(0, Fingerprint(f"image {reference.source}", data))
    flats = [flatten(p.data) for p in records]
    keys = sorted(set().union(*flats)) if flats else []
    table = {}
    for key in keys:
        group = next(flat[key][0] for flat in flats if key in flat)
        values = []
        for record, flat in zip(records, flats, strict=True):
            if key in flat:
                values.append(flat[key][1])
            elif _covers(record.data, group):
                values.append("missing")
            else:
                values.append(NOT_COMPARED)
        compared = {value for value in values if value != NOT_COMPARED}
        if len(compared) > 1:
            table[key] = values
    return [p.source for p in records], table


def difference_table(sources: list[str], table: dict[str, list[str]], limit: int = 60) -> str:
    """The differing fields as an aligned table, one column per source."""
    header = ["field", *sources]
    rows = [header, *([key, *values] for key, values in list(table.items())[:limit])]
    widths = [min(48, max(len(row[i]) for row in rows)) for i in range(len(header))]
    text = "".join(
        "  ".join(cell[:48].ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        + "\n"
        for row in rows
    )
    if len(table) > limit:
        text += f"... and {len(table) - limit} more (--json has them all)\n"
    return text
