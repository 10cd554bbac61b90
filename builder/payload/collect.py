"""The fingerprint collector: sent to a container (or a node, over ssh) and run by
its own ``python3``, so: standard library only, nothing from builder, and
Python 3.8 syntax. It prints one JSON object on stdout.

It never imports torch (seconds, and a GPU probe): the torch build is read
from ``torch/version.py``, NCCL from its wheel or the shared library's name,
Debian packages from dpkg's database.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
from importlib import metadata, util
from pathlib import Path

ENV_PREFIXES = (
    "NCCL_", "HCCL_", "HABANA_", "PT_HPU_", "PT_HCCL_", "CUDA_", "NVIDIA_", "GLOO_",
    "OMPI_", "FI_", "UCX_", "TORCH_", "DS_", "OMP_",
)  # fmt: skip
ENV_NAMES = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV", "LANG", "TZ")


def _name(raw: str) -> str:
    return re.sub(r"[-_.]+", "-", raw).lower()


def os_release() -> dict[str, str]:
    found: dict[str, str] = {}
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return found
    for line in text.splitlines():
        key, _, value = line.strip().partition("=")
        if key in ("ID", "VERSION_ID", "PRETTY_NAME"):
            found[key.lower()] = value.strip('"')
    return found


def packages() -> dict[str, str]:
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(_name(name), dist.version)
    return dict(sorted(found.items()))


def torch_build() -> dict[str, object] | None:
    spec = util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    version_file = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        text = version_file.read_text()
    except OSError:
        return None

    def value(name: str) -> str | None:
        match = re.search(rf"^{name}\s*(?::[^=]*)?=\s*['\"]([^'\"]*)['\"]", text, re.M)
        return match.group(1) if match else None

    return {"version": value("__version__"), "cuda": value("cuda"), "hip": value("hip")}


DPKG_QUERY = ["dpkg-query", "-W", "-f", "${db:Status-Abbrev} ${Package} ${Version}\n"]


def parse_dpkg(out: str) -> dict[str, str]:
    """Installed packages ("ii") from DPKG_QUERY's output: name -> version."""
    found: dict[str, str] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "ii":
            found[parts[1]] = parts[2]
    return dict(sorted(found.items()))


def apt() -> dict[str, str]:
    if shutil.which("dpkg-query") is None:
        return {}
    out = subprocess.run(DPKG_QUERY, capture_output=True, text=True, check=False).stdout
    return parse_dpkg(out)


def library_version(stem: str) -> str | None:
    """x.y.z of the newest lib<stem>.so.x.y.z the dynamic loader knows."""
    if shutil.which("ldconfig") is None:
        return None
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        if f"lib{stem}.so" in line and "=>" in line:
            real = os.path.realpath(line.split("=>")[1].strip())
            match = re.search(rf"lib{stem}\.so\.(\d+(?:\.\d+)*)$", real)
            if match:
                return match.group(1)
    return None


def tool(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    lines = (result.stdout + result.stderr).strip().splitlines()
    return lines[0] if lines else ""


def main() -> None:
    pkgs = packages()
    debs = apt()
    nccl = next((v for k, v in pkgs.items() if k.startswith("nvidia-nccl-")), None)
    report = {
        "os": os_release(),
        "arch": platform.machine(),
        "python": platform.python_version(),
        "packages": pkgs,
        "apt": debs,
        "torch": torch_build(),
        "deepspeed": pkgs.get("deepspeed"),
        "nccl": nccl or library_version("nccl"),
        "hccl": debs.get("habanalabs-graph") or library_version("hccl"),
        "env": {
            key: value
            for key, value in sorted(os.environ.items())
            if key in ENV_NAMES or key.startswith(ENV_PREFIXES)
        },
        "tools": {"pdsh": tool(["pdsh", "-V"]), "ssh": tool(["ssh", "-V"])},
    }
    json.dump(report, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
