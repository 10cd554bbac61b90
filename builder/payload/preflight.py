"""The preflight probe: run by the launcher on every rank of the real nodes, in the
image's own Python (standard library and torch only; ``collect.py`` beside it
gives the node's fingerprint).

Each rank initialises its device and the platform's collective backend (gloo,
nccl, hccl), then, with every rank in step:

- what it sees: how many devices, their names, driver and runtime versions,
  and whether its own device initialises;
- a dense matrix multiply (bf16 where the device has it) and a device memory
  copy, all ranks at once, as in the run;
- an all-reduce over the world, inside each node and between the nodes'
  first ranks, over a size sweep: correctness (every element the sum of
  rank + 1) and bus bandwidth as nccl-tests defines it (busbw = algbw x
  2(n-1)/n);
- each node's link: its first rank sends to the next node's and receives from
  the previous one's, one pair at a time;
- which transport the collective library used (NCCL and RCCL: their own
  NCCL_DEBUG=INFO lines, ``via NET/IB`` or ``via NET/Socket``);
- its GPU's architecture, the accelerator DeepSpeed runs on, and the ops the
  image's DeepSpeed prebuilt, for which accelerator and architectures;
- on each node's first rank, the node's fingerprint and its digest.

It prints one line per rank, ``BUILDER_PREFLIGHT {json}``, and exits 0 when it
could measure (what the figures mean is judged by builder); non-zero only when
it could not run at all. Time per phase comes from ``--budget`` (seconds for
all measurements; ``--quick`` measures less).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from builder.payload.preflight_devices import Device
else:  # beside this script in the image, where builder is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    Device = importlib.import_module("preflight_devices").Device

MARK = "BUILDER_PREFLIGHT "
NCCL_LOG = "builder-preflight.%h.%p.nccl"
LINK_TRIES = 5
"""Transfers per link after the first (the median counts)."""


def identity() -> tuple[int, int, int]:
    env = os.environ
    if "RANK" in env:
        return int(env["RANK"]), int(env.get("LOCAL_RANK", "-1")), int(env["WORLD_SIZE"])
    if "OMPI_COMM_WORLD_RANK" in env:
        return (
            int(env["OMPI_COMM_WORLD_RANK"]),
            int(env["OMPI_COMM_WORLD_LOCAL_RANK"]),
            int(env["OMPI_COMM_WORLD_SIZE"]),
        )
    raise SystemExit("preflight: neither RANK nor OMPI_COMM_WORLD_RANK is set: no launcher ran me")


def timed(device: Device, work: object, seconds: float, windows: int) -> float:
    """Operations per second of work(), the median of windows equal windows that take
    about seconds in all (after a warm-up): each long enough for a throttled device to
    show, the median so that one disturbed window does not decide. Work is queued in
    batches of about 10 ms between waits for the device."""
    work()  # type: ignore[operator]
    device.sync()
    start = time.perf_counter()
    work()  # type: ignore[operator]
    device.sync()
    batch = max(1, int(0.01 / max(time.perf_counter() - start, 1e-7)))
    rates = []
    for _ in range(windows):
        count, start = 0, time.perf_counter()
        while True:
            for _ in range(batch):
                work()  # type: ignore[operator]
            count += batch
            device.sync()
            elapsed = time.perf_counter() - start
            if elapsed >= seconds / windows:
                rates.append(count / elapsed)
                break
    return sorted(rates)[len(rates) // 2]


def matmul_rate(device: Device, matmul: int, quick: bool, seconds: float) -> dict[str, object]:
    torch = device.torch
    size = matmul // (2 if quick else 1)
    dtype = device.matmul_type()
    a = torch.randn(size, size, device=device.device).to(dtype)
    b = torch.randn(size, size, device=device.device).to(dtype)
    c = torch.empty_like(a)  # the product is kept: a lazy device runs only what is used
    rate = timed(device, lambda: torch.mm(a, b, out=c), seconds, 3 if quick else 5)
    return {
        "tflops": 2 * size**3 * rate / 1e12,
        "dtype": str(dtype).replace("torch.", ""),
        "size": size,
    }


def copy_rate(device: Device, copy_bytes: int, quick: bool, seconds: float) -> dict[str, object]:
    torch = device.torch
    size = copy_bytes // (4 if quick else 1)
    src = torch.ones(size // 4, dtype=torch.float32, device=device.device)
    dst = torch.empty_like(src)
    rate = timed(device, lambda: dst.copy_(src), seconds, 3 if quick else 5)
    return {"gbps": 2 * size * rate / 1e9, "bytes": size}  # read + write


class Run:
    """One rank in the world: its groups, clock and budget."""

    def __init__(self, args: argparse.Namespace, rank: int, local_rank: int, world: int) -> None:
        import torch.distributed as dist

        self.dist = dist
        self.args = args
        self.rank, self.local_rank, self.world = rank, local_rank, world
        self.nodes = max(1, -(-world // args.slots))  # a last node may have fewer ranks
        self.node = rank // args.slots
        self.start = time.monotonic()

    def group_of(self, ranks: list[int]) -> object:
        return self.dist.new_group(ranks) if len(ranks) < self.world else None

    def agreed(self, device: Device, stop: bool, group: object) -> bool:
        """Whether any rank of group wants to stop (each of them gets the same answer)."""
        flag = device.torch.tensor([1.0 if stop else 0.0], device=device.device)
        self.dist.all_reduce(flag, op=self.dist.ReduceOp.MAX, group=group)
        return bool(flag.item() > 0)

    def timed_collective(
        self, device: Device, work: object, seconds: float, group: object
    ) -> tuple[int, float]:
        """timed() for a collective: every rank of group runs the same count of them (one
        op's time, measured after a warm-up, sets the count; the group agrees on it)."""
        work()  # type: ignore[operator]
        device.sync()
        start = time.perf_counter()
        work()  # type: ignore[operator]
        device.sync()
        once = max(time.perf_counter() - start, 1e-6)
        wanted = device.torch.tensor([min(1000.0, max(3.0, seconds / once))], device=device.device)
        self.dist.all_reduce(wanted, op=self.dist.ReduceOp.MIN, group=group)
        count = int(wanted.item())
        start = time.perf_counter()
        for _ in range(count):
            work()  # type: ignore[operator]
        device.sync()
        return count, time.perf_counter() - start

    def left(self) -> float:
        return float(self.args.budget) - (time.monotonic() - self.start)


def sweep(
    run: Run, device: Device, group: object, members: int, share: float
) -> list[dict[str, object]]:
    """All-reduce over group for growing sizes while the share of the budget lasts."""
    torch, dist = device.torch, run.dist
    low, high = run.args.sweep
    if run.args.quick:
        high = max(low, high // 64)
    results: list[dict[str, object]] = []
    deadline = time.monotonic() + share
    size = low
    while size <= high:
        tensor = torch.empty(size // 4, dtype=torch.float32, device=device.device)
        # correctness (judged by builder, which knows the members): every element the
        # sum of rank + 1 over them
        tensor.fill_(float(run.rank + 1))
        dist.all_reduce(tensor, group=group)
        device.sync()
        low_value, high_value = tensor.min().item(), tensor.max().item()
        count, elapsed = run.timed_collective(
            device, lambda t=tensor: dist.all_reduce(t, group=group), min(0.2, share / 10), group
        )
        seconds = elapsed / count
        algbw = size / seconds / 1e9
        results.append(
            {
                "bytes": size,
                "seconds": seconds,
                "algbw": algbw,
                "busbw": algbw * 2 * (members - 1) / members,
                "min": low_value,
                "max": high_value,
            }
        )
        size *= 4
        # the next size takes about 4x: stop when it would not fit (all ranks agree)
        late = time.monotonic() + 4 * seconds * (count + 2) > deadline
        if run.agreed(device, late, group):
            break
    return results


def link(run: Run, device: Device, leaders: list[int]) -> dict[str, float]:
    """This node's link, from its first rank: bytes/s it sends to the next node's first
    rank and receives from the previous one's, one pair at a time (the receiver times)."""
    torch, dist = device.torch, run.dist
    size = run.args.link_bytes
    buffer = torch.ones(size // 4, dtype=torch.float32, device=device.device)
    mine: dict[str, float] = {}
    count = len(leaders)
    for index, sender in enumerate(leaders):
        receiver = leaders[(index + 1) % count]
        rates = []
        for _ in range(LINK_TRIES + 1):  # the first sets the connection up
            dist.barrier()
            if run.rank == sender:
                dist.send(buffer, receiver)
            elif run.rank == receiver:
                start = time.perf_counter()
                dist.recv(buffer, sender)
                device.sync()
                rates.append(size / (time.perf_counter() - start) / 1e9)
        if rates:
            mine["in_gbps"] = sorted(rates[1:])[LINK_TRIES // 2]
    # what a node sends is what its next node received: shared through an all-gather
    shared = torch.zeros(run.world, dtype=torch.float32, device=device.device)
    if "in_gbps" in mine:
        shared[run.rank] = mine["in_gbps"]
    dist.all_reduce(shared)
    if run.rank in leaders:
        index = leaders.index(run.rank)
        mine["out_gbps"] = shared[leaders[(index + 1) % count]].item()
    return mine


def transport(log_dir: str) -> dict[str, object]:
    """NET and intra-node transports from this process's NCCL_DEBUG=INFO lines, and
    whether multi-node NVLink (MNNVL: "... MNNVL 1" on the communicator's line, channels
    "via P2P/MNNVL") and NVLink SHARP (NVLS: its "NVLS comm" line) carried any of it,
    as NCCL 2.30 prints them (src/init.cc, src/transport/p2p.cc, src/transport/nvls.cc)."""
    nets: set[str] = set()
    local: set[str] = set()
    using: set[str] = set()
    mnnvl = nvls = False
    for path in Path(log_dir).glob("builder-preflight.*.nccl"):
        text = path.read_text(errors="replace")
        nets.update(re.findall(r" via NET/([^/\n]+)/", text))  # "AWS Libfabric" has a blank
        local.update(re.findall(r" via (P2P|SHM|CollNet)\b", text))
        using.update(m.strip() for m in re.findall(r"Using network ([^\n]+)", text))
        mnnvl = mnnvl or bool(re.search(r" MNNVL [1-9]\b| via P2P/MNNVL\b", text))
        nvls = nvls or bool(re.search(r"\bNVLS comm \S+ headRank", text))
    return {
        "net": sorted(nets),
        "local": sorted(local),
        "using": sorted(using),
        "mnnvl": mnnvl,
        "nvls": nvls,
    }


def fingerprint() -> dict[str, object]:
    """The node's fingerprint (collect.py, beside this file) without the variables, which
    differ per rank, and its digest."""
    collect = importlib.import_module("collect")  # beside this script

    data: dict[str, object] = {
        "os": collect.os_release(),
        "python": sys.version.split()[0],
        "packages": collect.packages(),
        "apt": collect.apt(),
        "torch": collect.torch_build(),
        "tools": {"pdsh": collect.tool(["pdsh", "-V"]), "ssh": collect.tool(["ssh", "-V"])},
    }
    ops = collect.deepspeed_ops(bool((collect.torch_build() or {}).get("hip")))
    data.update({"deepspeed_ops": ops} if ops is not None else {})
    text = json.dumps(data, sort_keys=True).encode()
    return {"digest": hashlib.sha256(text).hexdigest(), "data": data}


def nccl_warnings(log_dir: str) -> str:
    """NCCL's own WARN lines (why it failed: no IB device, no NET plugin), last ones."""
    lines = [
        line.strip()
        for path in Path(log_dir).glob("builder-preflight.*.nccl")
        for line in path.read_text(errors="replace").splitlines()
        if "NCCL WARN" in line
    ]
    return " | ".join(lines[-3:])


def init(args: argparse.Namespace, device: Device, rank: int, local_rank: int, world: int) -> None:
    """The process group, from the launcher's variables (mpirun's OMPI_* too, with the
    MASTER_ADDR/PORT the plan exports), on this rank's own GPU from the start."""
    import torch.distributed as dist

    os.environ.setdefault("RANK", str(rank))
    os.environ.setdefault("LOCAL_RANK", str(local_rank))
    os.environ.setdefault("WORLD_SIZE", str(world))
    os.environ.setdefault("MASTER_PORT", "29500")
    timeout = timedelta(seconds=args.timeout)
    if device.indexed:
        try:  # torch 2.3+: the communicator is made on this GPU, not rank % count's
            dist.init_process_group(args.backend, timeout=timeout, device_id=device.device)
            return
        except TypeError:
            pass
    dist.init_process_group(args.backend, timeout=timeout)


def prepare(args: argparse.Namespace, report: dict[str, object], local_rank: int) -> Device:
    """This rank's device, what it sees, and whether it initialises."""
    import torch

    device = Device(args.device, local_rank)
    if args.device == "cpu":  # --threads, the run's OMP_NUM_THREADS, or the cores per rank
        cores = len(os.sched_getaffinity(0))
        omp = os.environ.get("OMP_NUM_THREADS", "")
        default = int(omp) if omp.isdigit() and int(omp) > 0 else cores // max(1, args.slots)
        torch.set_num_threads(args.threads or max(1, default))
    report["visible"] = device.visible()
    report["device_names"] = device.names()
    report["versions"] = device.versions()
    prebuilt(device, report)
    try:
        device.use()
        report["device_ok"] = True
    except Exception as exc:  # reported: the node is named for it
        report["device_ok"] = False
        report["device_error"] = f"{type(exc).__name__}: {exc}"
        raise
    return device


def prebuilt(device: Device, report: dict[str, object]) -> None:
    """What decides whether DeepSpeed uses the image's prebuilt ops here: the GPU's
    architecture, the accelerator DeepSpeed picks (DS_ACCELERATOR, else the device's),
    and what the image's DeepSpeed built (read by collect.py, without importing it)."""
    report["device_arch"] = device.arch()
    report["accelerator"] = os.environ.get("DS_ACCELERATOR") or device.kind
    hip = bool(getattr(device.torch.version, "hip", None))
    report["deepspeed_ops"] = importlib.import_module("collect").deepspeed_ops(hip)


def measure(args: argparse.Namespace, report: dict[str, object], log_dir: str) -> None:
    rank, local_rank, world = identity()
    device = prepare(args, report, local_rank)
    init(args, device, rank, local_rank, world)
    run = Run(args, rank, local_rank, world)
    dist = run.dist
    slots = args.slots
    nodes = [list(range(n * slots, min(world, (n + 1) * slots))) for n in range(run.nodes)]
    leaders = [members[0] for members in nodes]
    # every rank makes every group, in the same order (torch requires it)
    intra = [run.group_of(members) for members in nodes] if slots > 1 and run.nodes > 1 else []
    inter = run.group_of(leaders)
    budget = args.budget
    dist.barrier()
    report["matmul"] = matmul_rate(
        device, args.matmul, args.quick, 0.05 * budget if args.quick else 0.1 * budget
    )
    dist.barrier()
    report["memory"] = copy_rate(
        device, args.copy_bytes, args.quick, 0.05 * budget if args.quick else 0.1 * budget
    )
    dist.barrier()
    share = max(0.5, run.left() / 4)
    sweeps: dict[str, object] = {"world": sweep(run, device, None, world, share)}
    report["allreduce"] = sweeps
    if intra:  # on one node, the world is the node
        sweeps["intra"] = sweep(run, device, intra[run.node], len(nodes[run.node]), share)
    if run.nodes > 1:
        if rank in leaders:  # the others wait: a group's collective involves its members
            sweeps["inter"] = sweep(run, device, inter, len(leaders), share)
        dist.barrier()
        report.update(link(run, device, leaders))
    dist.barrier()
    if args.transport != "sockets":
        report["transport"] = transport(log_dir)
    if rank in leaders:
        report["fingerprint"] = fingerprint()
    report["seconds"] = time.monotonic() - run.start
    # a node's ranks share one output; a leader's line (its fingerprint) is longer than
    # a pipe writes at once, so they write one after the other
    for turn in range(slots):
        if local_rank == turn:
            emit(report)
        dist.barrier()
    dist.destroy_process_group()


EMITTED: list[bool] = []


def emit(report: dict[str, object]) -> None:
    """The report as one line, written once."""
    if not EMITTED:
        EMITTED.append(True)
        sys.stdout.flush()
        os.write(1, (MARK + json.dumps(report, sort_keys=True) + "\n").encode())


def sizes(text: str) -> tuple[int, int]:
    """--sweep's SMALLEST:LARGEST, in bytes."""
    low, _, high = text.partition(":")
    return int(low), int(high)


def arguments() -> argparse.ArgumentParser:
    """The probe's options (what ``builder.preflight.probe.probe_args`` writes)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    # what the platform and its collective library say (builder.preflight.probe_args)
    parser.add_argument("--device", required=True, help="torch's device type (cpu, cuda, hpu)")
    parser.add_argument("--backend", required=True, help="torch.distributed's backend")
    parser.add_argument(
        "--transport",
        choices=("sockets", "net", "unread"),
        default="sockets",
        help="net: the library logs the transport it uses (NCCL_DEBUG), read back",
    )
    parser.add_argument("--matmul", type=int, default=512)
    parser.add_argument("--copy-bytes", type=int, default=64 << 20)
    parser.add_argument("--sweep", type=sizes, default=(1 << 12, 1 << 26))
    parser.add_argument("--link-bytes", type=int, default=8 << 20)
    parser.add_argument("--slots", type=int, required=True)
    parser.add_argument("--budget", type=float, required=True)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads per rank")
    # DeepSpeed's launcher adds --local_rank (LOCAL_RANK says the same)
    parser.add_argument("--local_rank", "--local-rank", type=int, help=argparse.SUPPRESS)
    return parser


def main() -> None:
    args = arguments().parse_args()
    rank, local_rank, world = identity()
    log_dir = tempfile.mkdtemp(prefix="builder-preflight-")
    if args.transport == "net":  # NCCL and RCCL say which transport they use
        os.environ["NCCL_DEBUG"] = "INFO"
        os.environ["NCCL_DEBUG_SUBSYS"] = "INIT,NET"
        os.environ["NCCL_DEBUG_FILE"] = str(Path(log_dir) / NCCL_LOG)
        # a peer's timeout raises here (and is reported) instead of aborting the process
        os.environ["TORCH_NCCL_BLOCKING_WAIT"] = "1"
        os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0"
    report: dict[str, object] = {
        "rank": rank,
        "local_rank": local_rank,
        "world": world,
        "node": socket.gethostname(),
        "error": None,
    }
    try:
        measure(args, report, log_dir)
    except Exception as exc:  # reported per rank; the table names the node
        warnings = nccl_warnings(log_dir)
        report["error"] = f"{type(exc).__name__}: {exc}" + (
            f" (NCCL: {warnings})" if warnings else ""
        )
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
    emit(report)
    if report["error"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
