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
    """The torch device of one rank: what it sees, and how to wait for it."""

    def __init__(self, kind: str, local_rank: int) -> None:
        import torch

        self.torch = torch
        self.kind = kind
        self.local_rank = max(local_rank, 0)
        self.module = None
        if kind == "hpu":
            # Habana's torch plugin: the hpu device, the hccl backend, the device module
            importlib.import_module("habana_frameworks.torch.core")
            importlib.import_module("habana_frameworks.torch.distributed.hccl")
            self.module = importlib.import_module("habana_frameworks.torch.hpu")
        elif kind == "cuda":
            self.module = torch.cuda
        self.device = torch.device("cpu") if kind == "cpu" else torch.device(kind, self.local_rank)

    def visible(self) -> int:
        if self.kind == "cpu":
            return len(os.sched_getaffinity(0))
        return int(self.module.device_count()) if self.module is not None else 0

    def names(self) -> list[str]:
        if self.kind == "cpu":
            return [cpu_name()]
        assert self.module is not None
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

    def use(self) -> None:
        """Make this rank's device current and touch it (it must initialise)."""
        if self.kind == "cuda":
            self.torch.cuda.set_device(self.local_rank)
        elif self.kind == "hpu":
            assert self.module is not None
            self.module.set_device(self.local_rank)
        self.torch.ones(1, device=self.device).sum().item()

    def sync(self) -> None:
        if self.module is not None:
            self.module.synchronize()

    def matmul_type(self) -> object:
        torch = self.torch
        if self.kind == "hpu":
            return torch.bfloat16
        if self.kind == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
