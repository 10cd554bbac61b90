"""The rehearsal's probe job: copied into the cluster folder and run by the
launcher on every rank, in the image's own Python (so: standard library and
torch only, nothing from builder).

Each rank checks what a multi-node run relies on and prints one line,
``BUILDER_PROBE {json}``: its rank and local rank (from the launcher's
variables: torchrun and DeepSpeed set RANK/LOCAL_RANK/WORLD_SIZE, OpenMPI
sets OMPI_COMM_WORLD_*), the world size, the master address, a gloo
all-reduce of rank + 1 over the world, every expected environment variable
as it arrived, and the installed Python packages (so the rehearsal can name
a node whose environment differs). The expectations come from
``probe.json`` next to this file. It exits non-zero when its own checks fail.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import sys
from datetime import timedelta
from importlib import metadata, util
from pathlib import Path

MARK = "BUILDER_PROBE "
OPTIMIZERS = {
    "cpu_adam": ("deepspeed.ops.adam", "DeepSpeedCPUAdam"),
    "cpu_adagrad": ("deepspeed.ops.adagrad", "DeepSpeedCPUAdagrad"),
    "cpu_lion": ("deepspeed.ops.lion", "DeepSpeedCPULion"),
}
"""DeepSpeed op -> the optimizer that loads it; its compiled module, when DeepSpeed loads
the prebuilt one rather than compiling it, is deepspeed.ops.<family>.<op>_op."""


def _identity() -> tuple[int, int, int]:
    env = os.environ
    if "RANK" in env:
        return int(env["RANK"]), int(env.get("LOCAL_RANK", "-1")), int(env["WORLD_SIZE"])
    if "OMPI_COMM_WORLD_RANK" in env:
        return (
            int(env["OMPI_COMM_WORLD_RANK"]),
            int(env["OMPI_COMM_WORLD_LOCAL_RANK"]),
            int(env["OMPI_COMM_WORLD_SIZE"]),
        )
    raise SystemExit("probe: neither RANK nor OMPI_COMM_WORLD_RANK is set: no launcher ran me")


def _has(module: str) -> bool:
    return util.find_spec(module) is not None


def _packages() -> dict[str, str]:
    found = {}
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name:
            found[name] = dist.version
    return dict(sorted(found.items()))


def _use_ops(names: list[str]) -> dict[str, str]:
    """Take one step of each op's optimizer: "prebuilt" when DeepSpeed loaded the op the
    image carries, "compiled just in time" when it built it here, else the error."""
    import torch

    used = {}
    for name in names:
        module, cls = OPTIMIZERS[name]
        try:
            param = torch.nn.Parameter(torch.ones(16))
            param.grad = torch.full((16,), 0.5)
            getattr(importlib.import_module(module), cls)([param], lr=0.1).step()
            if torch.equal(param.detach(), torch.ones(16)):
                used[name] = "its optimizer step changed nothing"
            elif f"{module}.{name}_op" in sys.modules:
                used[name] = "prebuilt"
            else:
                used[name] = "compiled just in time (the image was to carry it)"
        except Exception as exc:  # reported per op
            used[name] = f"{type(exc).__name__}: {exc}"
    return used


def main() -> None:
    expect = json.loads((Path(__file__).parent / "probe.json").read_text())
    rank, local_rank, world = _identity()
    report: dict[str, object] = {
        "rank": rank,
        "local_rank": local_rank,
        "world": world,
        "node": socket.gethostname(),
        "master": os.environ.get("MASTER_ADDR"),
        "env": {key: os.environ.get(key) for key in expect["env"]},
        "packages": _packages(),
        "sum": None,
        "error": None,
        "ops": {},
    }
    try:
        import torch
        import torch.distributed as dist

        timeout = timedelta(seconds=expect["timeout"])
        if "RANK" not in os.environ and _has("deepspeed"):
            # mpirun: the way a DeepSpeed script starts there, through DeepSpeed's own
            # init_distributed and its mpi_discovery (mpi4py: built against the image's MPI)
            import deepspeed

            port = int(os.environ.get("MASTER_PORT", "29500"))
            deepspeed.init_distributed("gloo", distributed_port=port, timeout=timeout)
        else:
            os.environ.setdefault("RANK", str(rank))
            os.environ.setdefault("WORLD_SIZE", str(world))
            dist.init_process_group("gloo", timeout=timeout)
        total = torch.tensor([float(rank + 1)])
        dist.all_reduce(total)
        report["sum"] = total.item()
        dist.destroy_process_group()
        if local_rank == 0 and expect.get("ops"):  # once per node: the ops the image carries
            report["ops"] = _use_ops(list(expect["ops"]))
    except Exception as exc:  # reported, not raised: the table shows it per rank
        report["error"] = f"{type(exc).__name__}: {exc}"
    # one write of the whole line: ranks share the output, which may be unbuffered
    sys.stdout.flush()
    os.write(1, (MARK + json.dumps(report, sort_keys=True) + "\n").encode())
    failed_ops = any(value != "prebuilt" for value in report["ops"].values())  # type: ignore[attr-defined]
    if report["error"] or failed_ops or report["sum"] != world * (world + 1) / 2:
        sys.exit(1)


if __name__ == "__main__":
    main()
