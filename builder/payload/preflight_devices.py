"""The preflight probe's devices (beside preflight.py, which imports it): one rank's torch
device, what it sees (count, names, driver and runtime versions), and how to wait
for it. Standard library and torch only, like every payload script; ``kind`` is
torch's device type (cpu, cuda, hpu), which the platform names.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
from importlib import metadata
from pathlib import Path


def first_line(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = result.stdout.strip().splitlines()
    return lines[0].strip() if result.returncode == 0 and lines else None


def read(path: str | Path) -> str | None:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return None


def cpu_name() -> str:
    text = read("/proc/cpuinfo") or ""
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    return match.group(1).strip() if match else (os.uname().machine or "cpu")


def nvidia_driver() -> str | None:
    text = read("/proc/driver/nvidia/version") or ""
    match = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d[\w.-]*)", text)
    if match:
        return match.group(1)
    return first_line(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])


def version_of(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


class Device:
    """The torch device of one rank: what it sees, and how to wait for it.

    A CUDA (or ROCm) rank uses the GPU of its local rank, or the only one it sees
    where the launcher or Slurm gives each rank one. A Gaudi rank has one card,
    which Habana's bridge picks from LOCAL_RANK: it is always ``hpu`` (there is
    no ``hpu:N`` to choose), and in lazy mode its queued work runs at mark_step.
    """

    def __init__(self, kind: str, local_rank: int) -> None:
        import torch

        self.torch = torch
        self.kind = kind
        self.local_rank = max(local_rank, 0)
        self.module = None
        self.core = None
        if kind == "hpu":
            # Habana's torch plugin: the hpu device, the hccl backend, the device module
            self.core = importlib.import_module("habana_frameworks.torch.core")
            importlib.import_module("habana_frameworks.torch.distributed.hccl")
            self.module = importlib.import_module("habana_frameworks.torch.hpu")
            self.device = torch.device("hpu")
        elif kind != "cpu":  # cuda (and ROCm's), and torch's other indexed devices (xpu)
            self.module = getattr(torch, kind)
            count = self.module.device_count()
            self.index = 0 if count == 1 else self.local_rank
            self.device = torch.device(kind, self.index)
        else:
            self.device = torch.device("cpu")

    @property
    def indexed(self) -> bool:
        """The rank has a device of its own by index (cuda:N), for its communicator."""
        return self.device.index is not None

    def visible(self) -> int:
        if self.kind == "cpu":
            return len(os.sched_getaffinity(0))
        return int(self.module.device_count()) if self.module is not None else 0

    def names(self) -> list[str]:
        if self.kind == "cpu":
            return [cpu_name()]
        assert self.module is not None
        if self.kind == "hpu":  # one card per process: its name stands for the node's
            return [str(self.module.get_device_name())] * max(1, self.visible())
        return [str(self.module.get_device_name(i)) for i in range(self.visible())]

    def versions(self) -> dict[str, str | None]:
        torch = self.torch
        if self.kind == "cpu":
            return {"torch": torch.__version__}
        if self.kind == "hpu":
            driver = first_line(["hl-smi", "-Q", "driver_version", "-f", "csv,noheader"])
            runtime = version_of("habana-torch-plugin", "habana_frameworks")
            return {"torch": torch.__version__, "driver": driver, "runtime": runtime}
        hip = getattr(torch.version, "hip", None)
        if hip:
            driver = (read("/sys/module/amdgpu/version") or "").strip() or None
            return {"torch": torch.__version__, "driver": driver, "runtime": f"hip {hip}"}
        nccl = None
        try:
            nccl = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:  # a torch without NCCL says nothing here
            nccl = None
        return {
            "torch": torch.__version__,
            "driver": nvidia_driver(),
            "runtime": f"cuda {torch.version.cuda}",
            "nccl": nccl,
        }

    def arch(self) -> str | None:
        """This rank's GPU architecture as an image's arch list names it: a CUDA
        capability ("9.0"), a ROCm gfx target without its features ("gfx942"); None
        for a CPU or a Gaudi card (no such list), or where the device cannot say (use()
        then fails and says why)."""
        if self.kind != "cuda":
            return None
        torch = self.torch
        try:
            if getattr(torch.version, "hip", None):
                name = str(torch.cuda.get_device_properties(self.index).gcnArchName)
                return name.split(":", 1)[0]
            major, minor = torch.cuda.get_device_capability(self.index)
        except Exception:  # a broken device is reported by use()
            return None
        return f"{major}.{minor}"

    def use(self) -> None:
        """Make this rank's device current and touch it (it must initialise)."""
        if self.indexed and self.module is not None:
            self.module.set_device(self.index)
        self.torch.ones(1, device=self.device).sum().item()

    def sync(self) -> None:
        if self.core is not None:
            self.core.mark_step()  # lazy mode: run what is queued
        if self.module is not None:
            self.module.synchronize()

    def matmul_type(self) -> object:
        torch = self.torch
        if self.kind == "hpu":
            return torch.bfloat16
        if self.kind == "cuda":
            try:  # native bf16 only (Ampere and later); torch 2.3+ counts emulation too
                native = torch.cuda.is_bf16_supported(including_emulation=False)
            except TypeError:
                native = torch.cuda.is_bf16_supported()
            if native:
                return torch.bfloat16
        return torch.float32
