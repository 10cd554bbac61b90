"""Judging the preflight probe's reports: per-node figures, and the problems they name.

Every rank prints ``BUILDER_PREFLIGHT {json}`` (``builder/payload/preflight.py``).
A node is named when one of its ranks failed or never reported, when fewer
devices are visible than it has slots, when a device did not initialise, when
its devices, driver or runtime differ from the first node's, when its matrix
multiply, memory copy or link is more than the threshold below the median of
the other nodes, when an all-reduce gave a wrong sum, when the collective
library used another transport than the spec's fabric, when its
fingerprint differs from the first node's, and when the image's prebuilt
DeepSpeed ops do not suit its devices (``fingerprint.deepspeed_ops``).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal

from builder.errors import UsageError, terminal_text
from builder.files import read_input
from builder.fingerprint import deepspeed_ops
from builder.fingerprint.compare import differences
from builder.fingerprint.record import Fingerprint

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from builder.collectives import Collective

MARK = "BUILDER_PREFLIGHT "
SCHEMA = 1
MAX_LOG = 256 * 1024 * 1024
"""The largest saved log ``--from-log`` reads (the probe's and NCCL's lines, many nodes)."""
Severity = Literal["fail", "warn"]
NET_WORDS = {"Socket": "sockets", "IB": "InfiniBand verbs"}


MAX_RANK = 1 << 20
"""More ranks than any run has: a report claiming a higher rank is not one."""
MAX_TEXT = 2000
"""The longest text of a report that is shown (an error, a device's name)."""
MAX_DEPTH = 16
"""How deep a report nests (its fingerprint); deeper is not a report."""


def probe_reports(output: str, mark: str) -> list[dict[str, Any]]:
    """Every report after mark in output, wherever it starts on its line (pdsh puts
    `node: ` before it), in linear time: each report is one line, read within that line.
    A line cut by another process's output, or that is not a report (JSON that is not
    one, a rank that is not a whole number from 0), is left out: that rank shows as
    missing. What is kept is scrubbed: text without control characters, cut at MAX_TEXT;
    nothing nested deeper than MAX_DEPTH, no whole number beyond 18 digits."""
    decoder = json.JSONDecoder()
    reports = []
    for line in output.splitlines():
        at = line.find(mark)
        while at >= 0:
            report = _decoded(decoder, line, at + len(mark))
            if report is not None:
                reports.append(report)
            at = line.find(mark, at + len(mark))
    return reports


def _decoded(decoder: json.JSONDecoder, line: str, start: int) -> dict[str, Any] | None:
    try:
        found, _ = decoder.raw_decode(line, start)
    except (ValueError, RecursionError):  # cut, not JSON, nested past the stack, huge ints
        return None
    report = _scrub(found, 0)
    if not isinstance(report, dict):
        return None
    rank = report.get("rank")
    if type(rank) is not int or not 0 <= rank < MAX_RANK:
        return None
    return report


def _scrub(value: Any, depth: int) -> Any:  # noqa: PLR0911 - one branch per JSON kind
    """A report's value as the judge may read it (see probe_reports)."""
    if depth > MAX_DEPTH:
        return None
    if isinstance(value, str):
        return terminal_text(value[:MAX_TEXT])
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if abs(value) < 10**18 else None
    if isinstance(value, float):
        return value
    if isinstance(value, list):
        return [_scrub(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {
            terminal_text(str(key)[:MAX_TEXT]): _scrub(item, depth + 1)
            for key, item in value.items()
        }
    return None


@dataclass(frozen=True)
class Finding:
    """What is wrong (fail) or worth knowing (warn), on which node (None: the run)."""

    node: str | None
    what: str
    severity: Severity = "fail"
    log_tail: str = ""

    def text(self) -> str:
        where = f"{self.node}: " if self.node else ""
        tail = "".join(f"\n    | {line}" for line in self.log_tail.splitlines())
        return terminal_text(f"{where}{self.what}{tail}")


@dataclass(frozen=True)
class Expected:
    """What the run should look like, from the spec and its plan."""

    nodes: tuple[str, ...]
    slots: int
    device_word: str | None
    """GPU, HPU; None where there are no devices to count (cpu)."""
    library: Collective
    """The collective library: its name in messages, how its transport is read."""
    net: str | None
    """The NET transport the library must use (NCCL_NET: IB, Libfabric); None: any."""
    fabric: str
    threshold: float
    mnnvl: bool = False
    """The run asks NCCL for multi-node NVLink (launch.mnnvl: NCCL_MNNVL_ENABLE=1)."""
    rates_judged: bool = True
    """False where the nodes share one machine's cores (a rehearsal with more ranks than
    cores): matmul, memory and link figures then vary by scheduling, and are warnings."""

    @property
    def world(self) -> int:
        return len(self.nodes) * self.slots


@dataclass
class NodeRow:
    """One node's figures (the slowest of its ranks where ranks measure)."""

    node: str
    ranks: int = 0
    visible: int | None = None
    device: str = "-"
    arch: str | None = None
    """Its GPUs' architecture (9.0, gfx942); None for CPUs and Gaudi cards."""
    versions: dict[str, str | None] = field(default_factory=dict)
    tflops: float | None = None
    dtype: str = ""
    memory_gbps: float | None = None
    out_gbps: float | None = None
    in_gbps: float | None = None
    intra_busbw: float | None = None
    nets: tuple[str, ...] = ()
    mnnvl: bool | None = None
    """Whether NCCL's lines showed multi-node NVLink (None: no NCCL lines came back)."""
    nvls: bool | None = None
    """Whether they showed NVLink SHARP (NVLS) communicators."""
    digest: str | None = None
    problems: list[str] = field(default_factory=list)


@dataclass
class Preflight:
    """The whole judgement: rows per node, the all-reduce sweep, the findings."""

    expected: Expected
    nodes: list[NodeRow]
    sweep: dict[str, list[dict[str, float]]]
    findings: list[Finding]
    settings: dict[str, Any] = field(default_factory=dict)
    phases: list[tuple[str, float]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(f.severity == "fail" for f in self.findings)

    def as_data(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "ok": self.ok,
            "nodes": [vars(row) for row in self.nodes],
            "allreduce": self.sweep,
            "findings": [vars(f) for f in self.findings],
            "settings": self.settings,
            "phases": {name: round(seconds, 2) for name, seconds in self.phases},
        }


def judge(output: str, expected: Expected, launch: Sequence[Finding] = ()) -> Preflight:
    """The preflight's rows and findings from the ranks' output; launch: what the launch
    itself found (a node that did not start, a launcher that failed), said first."""
    reports = sorted(probe_reports(output, MARK), key=lambda r: int(r["rank"]))
    rows = {node: NodeRow(node) for node in expected.nodes}
    findings: list[Finding] = []
    seen: dict[int, str] = {}
    judged = []
    for report in reports:
        rank = int(report["rank"])
        node = _node_of(rank, str(report.get("node")), expected)
        row = rows.setdefault(node, NodeRow(node))
        row.ranks += 1
        if rank in seen:
            findings.append(Finding(node, f"rank {rank} reported twice"))
        seen[rank] = node
        try:  # on a copy first: a malformed report changes no row
            _take(report, replace(row))
            found = _rank_findings(report, row, expected)
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:
            findings.append(Finding(node, f"rank {rank}: its report is malformed ({_why(exc)})"))
            continue
        findings += found
        _take(report, row)
        judged.append(report)
    reports = judged
    findings += _missing(seen, expected)
    ordered = [rows[node] for node in expected.nodes] + [
        row for name, row in rows.items() if name not in expected.nodes
    ]
    findings += _visibility(ordered, expected)
    findings += _same_as_first(ordered)
    rates: list[Finding] = []
    for metric, what, unit in (
        ("tflops", "matmul", "TFLOP/s"),
        ("memory_gbps", "memory copy", "GB/s"),
    ):
        rates += _stragglers(ordered, metric, what, unit, expected.threshold)
    rates += _links(ordered, expected.threshold, {f.node for f in rates if f.node})
    if not expected.rates_judged:
        rates = [replace(f, severity="warn") for f in rates]
    findings += rates
    findings += _transport(ordered, expected)
    findings += _guarded("the nodes' environments", lambda: _drift(reports, expected))
    findings += _guarded("the prebuilt ops", lambda: _prebuilt(reports, expected))
    known = {(f.node, f.what) for f in findings}
    findings[:0] = [f for f in launch if (f.node, f.what) not in known]
    for finding in findings:
        if finding.node in rows and finding.severity == "fail":
            rows[finding.node].problems.append(finding.what)
    first = next((r for r in reports if int(r["rank"]) == 0), None)
    sweep: dict[str, list[dict[str, float]]] = {}
    if first:
        try:
            sweep = _sweep(first, expected)
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:
            findings.append(
                Finding(None, f"rank 0's all-reduce figures are malformed ({_why(exc)})")
            )
    return Preflight(expected, ordered, sweep, findings)


def _why(exc: BaseException) -> str:
    """What was wrong in a report, in a few words."""
    return terminal_text(f"{type(exc).__name__}: {str(exc)[:200]}")


def _guarded(what: str, judging: Callable[[], list[Finding]]) -> list[Finding]:
    """A judgement across the reports; malformed figures are a finding, not a crash."""
    try:
        return judging()
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:
        return [Finding(None, f"{what} could not be compared: a report is malformed ({_why(exc)})")]


def judge_log(text: str, expected: Expected, settings: dict[str, Any]) -> Preflight:
    """The preflight of a saved log (the pods' logs, a launch's output): every rank's
    report in it, wherever its line starts, judged against expected; settings: the
    probe's, with where it ran."""
    result = judge(text, expected)
    result.settings = settings
    return result


def read_log(path: Path) -> str:
    """A saved log (``--from-log``), read as text (bytes that are not UTF-8 are replaced: a
    report's JSON is ASCII)."""
    data = read_input(
        path,
        what="--from-log",
        limit=MAX_LOG,
        fix="give the file the pods' logs (or launch.sh's output) were saved to",
        field="--from-log",
    )
    if data is None:
        raise UsageError(
            f"--from-log {path}: no such file; save the probe's output first (kubectl logs "
            "... > FILE)",
            field="--from-log",
            path=path,
        )
    return data.decode("utf-8", errors="replace")


def _node_of(rank: int, host: str, expected: Expected) -> str:
    """The plan's name for the node of rank (ranks follow the hostfile's order)."""
    index = rank // expected.slots
    return expected.nodes[index] if 0 <= index < len(expected.nodes) else host


def _rank_findings(report: dict[str, Any], row: NodeRow, expected: Expected) -> list[Finding]:
    rank = int(report["rank"])
    found = []
    if report.get("device_ok") is False:
        error = report.get("device_error", "")
        word = expected.device_word or "device"
        found.append(Finding(row.node, f"rank {rank}: its {word} did not initialise: {error}"))
    elif report.get("error"):
        found.append(Finding(row.node, f"rank {rank}: {report['error']}"))
    if report.get("world") != expected.world:
        what = f"rank {rank}: world size {report.get('world')}, expected {expected.world}"
        found.append(Finding(row.node, what))
    for group, values in (report.get("allreduce") or {}).items():
        total = _group_sum(group, rank, expected)
        for point in values:
            if not point["min"] == point["max"] == total:
                found.append(
                    Finding(
                        row.node,
                        f"rank {rank}: all-reduce of {size_text(point['bytes'])} {GROUPS[group]} "
                        f"gave {count_text(point['min'])}..{count_text(point['max'])}, "
                        f"expected {count_text(total)}",
                    )
                )
                break
    return found


GROUPS = {"world": "over the world", "intra": "within its node", "inter": "between the nodes"}


def _group_sum(group: str, rank: int, expected: Expected) -> float:
    """The all-reduce sum of rank + 1 over the members of rank's group."""
    slots, world = expected.slots, expected.world
    if group == "world":
        members = range(world)
    elif group == "intra":
        start = rank // slots * slots
        members = range(start, min(world, start + slots))
    else:
        members = range(0, world, slots)
    return float(sum(member + 1 for member in members))


def _take(report: dict[str, Any], row: NodeRow) -> None:
    """Fold one rank's figures into its node's row (the slowest rank counts)."""

    def lowest(now: float | None, value: Any) -> float | None:
        if not isinstance(value, (int, float)):
            return now
        return float(value) if now is None else min(now, float(value))

    if isinstance(report.get("visible"), int):
        row.visible = (
            report["visible"] if row.visible is None else min(row.visible, report["visible"])
        )
    names = report.get("device_names") or []
    if names:
        row.device = ", ".join(sorted(set(map(str, names))))
    row.arch = str(report["device_arch"]) if report.get("device_arch") else row.arch
    row.versions = {k: v for k, v in (report.get("versions") or {}).items() if v} or row.versions
    matmul = report.get("matmul") or {}
    row.tflops = lowest(row.tflops, matmul.get("tflops"))
    row.dtype = matmul.get("dtype", row.dtype)
    row.memory_gbps = lowest(row.memory_gbps, (report.get("memory") or {}).get("gbps"))
    row.out_gbps = lowest(row.out_gbps, report.get("out_gbps"))
    row.in_gbps = lowest(row.in_gbps, report.get("in_gbps"))
    intra = (report.get("allreduce") or {}).get("intra") or []
    if intra:
        row.intra_busbw = lowest(row.intra_busbw, intra[-1]["busbw"])
    used = report.get("transport") or {}
    nets = used.get("net") or []
    row.nets = tuple(sorted({*row.nets, *map(str, nets)}))
    if "mnnvl" in used:
        row.mnnvl = bool(row.mnnvl) or bool(used["mnnvl"])
        row.nvls = bool(row.nvls) or bool(used.get("nvls"))
    digest = (report.get("fingerprint") or {}).get("digest")
    if digest:
        row.digest = str(digest)


def _missing(seen: dict[int, str], expected: Expected) -> list[Finding]:
    found = []
    for index, node in enumerate(expected.nodes):
        ranks = range(index * expected.slots, (index + 1) * expected.slots)
        lost = [str(rank) for rank in ranks if rank not in seen]
        if lost:
            found.append(Finding(node, f"rank(s) {', '.join(lost)} never reported"))
    return found


def _visibility(rows: list[NodeRow], expected: Expected) -> list[Finding]:
    word = expected.device_word
    if word is None:
        return []
    return [
        Finding(row.node, f"{row.visible} of {expected.slots} {word}s visible")
        for row in rows
        if row.visible is not None and row.visible < expected.slots
    ]


def _same_as_first(rows: list[NodeRow]) -> list[Finding]:
    """Device names and driver/runtime versions against the first reporting node's."""
    reporting = [row for row in rows if row.ranks]
    if len(reporting) < 2:
        return []
    first = reporting[0]
    found = []
    for row in reporting[1:]:
        changes = []
        if row.device != first.device:
            changes.append(f"devices {row.device!r} (on {first.node}: {first.device!r})")
        for key in sorted(first.versions.keys() | row.versions.keys()):
            mine, theirs = row.versions.get(key), first.versions.get(key)
            if mine != theirs:
                changes.append(
                    f"{key} {mine or 'missing'} (on {first.node}: {theirs or 'missing'})"
                )
        if changes:
            found.append(Finding(row.node, "devices or versions differ: " + ", ".join(changes)))
    return found


def below(value: float, others: list[float], threshold: float) -> float | None:
    """How far below the median of others value is (0.41: 41%), when that is more than
    threshold; else None."""
    if not others:
        return None
    median = statistics.median(others)
    if median <= 0:
        return None
    short = 1.0 - value / median
    return short if short > threshold else None


def _stragglers(
    rows: list[NodeRow], metric: str, what: str, unit: str, threshold: float
) -> list[Finding]:
    measured = [(row, getattr(row, metric)) for row in rows if getattr(row, metric) is not None]
    found = []
    for row, value in measured:
        others = [v for r, v in measured if r is not row]
        short = below(value, others, threshold)
        if short is not None:
            median = statistics.median(others)
            found.append(
                Finding(
                    row.node,
                    f"{what} {short:.0%} below the median of the other nodes "
                    f"({rate(value)} vs {rate(median)} {unit})",
                )
            )
    return found


def _links(rows: list[NodeRow], threshold: float, stragglers: set[str]) -> list[Finding]:
    """Slow links. A node's out rate is what the next node received from it, its in rate
    what it received from the one before. A link slow both ways makes two neighbours'
    rates slow too: the node slow both ways is named, and a node slow to send is named
    unless the node it sends to is one slow both ways, or a straggler (slow to compute
    or copy memory: it cannot take in what it is sent) while the sender is not."""
    measured = [row for row in rows if row.out_gbps is not None and row.in_gbps is not None]
    if len(measured) < 2:
        return []

    def slow(row: NodeRow, metric: str) -> float | None:
        others = [getattr(r, metric) for r in measured if r is not row]
        return below(getattr(row, metric), others, threshold)

    sends = {row.node: slow(row, "out_gbps") for row in measured}
    both = {row.node for row in measured if sends[row.node] and slow(row, "in_gbps")}
    found = []
    for index, row in enumerate(measured):
        receiver = measured[(index + 1) % len(measured)].node
        if not sends[row.node] or (row.node not in both and receiver in both):
            continue
        if receiver in stragglers and row.node not in stragglers:
            continue
        others = statistics.median(r.out_gbps or 0.0 for r in measured if r is not row)
        way = "both ways" if row.node in both else f"sending to {receiver}"
        found.append(
            Finding(
                row.node,
                f"link {sends[row.node]:.0%} below the median of the other nodes, slow {way} "
                f"({rate(row.out_gbps)} vs {rate(others)} GB/s sent to the next node)",
            )
        )
    return found


def _transport(rows: list[NodeRow], expected: Expected) -> list[Finding]:
    library = expected.library
    if library.transport == "sockets":
        if expected.fabric == "none":
            return []
        return [
            Finding(
                None,
                f"{library.title} runs over TCP sockets: the spec's fabric {expected.fabric} "
                "carries none of this run's collectives",
                "warn",
            )
        ]
    if library.transport == "unread":
        return [Finding(None, f"{library.title}'s transport is not read by preflight", "warn")]
    found = _multinode_nvlink(rows) if expected.mnnvl else []
    for row in rows:
        # NCCL matches NCCL_NET without regard to case
        other = [net for net in row.nets if net.casefold() != (expected.net or "").casefold()]
        if expected.net is not None and other:
            used = ", ".join(f"{NET_WORDS.get(net, net)} (NET/{net})" for net in other)
            found.append(
                Finding(
                    row.node,
                    f"{library.title} used {used}, the spec says {expected.fabric} "
                    f"(NET/{expected.net})",
                )
            )
    return found


def _multinode_nvlink(rows: list[NodeRow]) -> list[Finding]:
    """launch.mnnvl: every node's NCCL used multi-node NVLink; NVLS is reported either way
    (NCCL picks it by size and topology, so its absence is a note, not a fault)."""
    found = []
    for row in rows:
        if row.mnnvl is False:
            found.append(
                Finding(
                    row.node,
                    "NCCL did not use multi-node NVLink (no MNNVL in its lines) though the "
                    "spec asks for it (launch.mnnvl): check the node's IMEX channel "
                    "(/dev/nvidia-caps-imex-channels in the container, `nvidia-imex-ctl -N` "
                    "on the node) and that NCCL is 2.25.2 or newer",
                )
            )
    unused = [row.node for row in rows if row.nvls is False]
    if unused:
        found.append(
            Finding(
                None,
                f"NCCL used no NVLink SHARP (NVLS) communicator on {', '.join(unused)} "
                "(it picks NVLS by size and topology; NCCL_NVLS_ENABLE=1 forces it)",
                "warn",
            )
        )
    return found


def _drift(reports: list[dict[str, Any]], expected: Expected) -> list[Finding]:
    """Nodes whose fingerprint differs from the first reporting node's."""
    prints: dict[str, dict[str, Any]] = {}
    for report in reports:
        data = (report.get("fingerprint") or {}).get("data")
        if isinstance(data, dict):
            node = _node_of(int(report["rank"]), str(report.get("node")), expected)
            prints.setdefault(node, data)
    order = [node for node in expected.nodes if node in prints]
    if len(order) < 2:
        return []
    first = order[0]
    found = []
    for node in order[1:]:
        _, table = differences([Fingerprint(first, prints[first]), Fingerprint(node, prints[node])])
        if table:
            shown = [
                f"{key} {mine} (on {first}: {theirs})" for key, (theirs, mine) in table.items()
            ]
            more = f", and {len(shown) - 8} more" if len(shown) > 8 else ""
            found.append(Finding(node, "environment differs: " + ", ".join(shown[:8]) + more))
    return found


def _prebuilt(reports: list[dict[str, Any]], expected: Expected) -> list[Finding]:
    """Nodes where DeepSpeed cannot use the image's prebuilt ops (one finding per node
    and cause, from whichever of its ranks say so)."""
    found: dict[tuple[str, str], Finding] = {}
    for report in reports:
        names = ", ".join(sorted(set(map(str, report.get("device_names") or []))))
        said = deepspeed_ops.unsuited(
            report.get("deepspeed_ops"),
            runs=report.get("accelerator"),
            arch=report.get("device_arch"),
            device=names,
            word=expected.device_word,
        )
        if said is not None:
            node = _node_of(int(report["rank"]), str(report.get("node")), expected)
            found.setdefault((node, said[1]), Finding(node, said[1], said[0]))
    return list(found.values())


def _sweep(first: dict[str, Any], expected: Expected) -> dict[str, list[dict[str, float]]]:
    """Rank 0's all-reduce figures: over the world and between the nodes' first ranks."""
    found = {}
    for group in ("world", "inter", "intra"):
        values = (first.get("allreduce") or {}).get(group) or []
        if values and not (group == "inter" and len(expected.nodes) < 2):
            found[group] = [
                {key: point[key] for key in ("bytes", "seconds", "algbw", "busbw")}
                for point in values
            ]
    return found


def rate(value: float | None) -> str:
    """A measured rate as people read it: three significant figures, written out in
    full (2040, 45.2, 0.0123; never 2.04e+03); "-" when it was not measured."""
    if value is None:
        return "-"
    if not math.isfinite(value):
        return str(value)
    return format(Decimal(f"{value:.3g}"), "f")


def count_text(value: float) -> str:
    """An exact figure (an all-reduce sum) written out whole: 2098176, not 2.09818e+06."""
    if math.isfinite(value) and float(value).is_integer():
        return f"{value:.0f}"
    return repr(float(value))


def size_text(count: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:g} {unit}"
    return f"{count:g} B"
