"""The fingerprint collector: sent to a container (or a node, over ssh) and run by
its own ``python3``, so: standard library only, nothing from builder, and
Python 3.8 syntax. It prints one JSON object on stdout.

It never imports torch (seconds, and a GPU probe): the torch build is read
from ``torch/version.py``, Debian packages from dpkg's database. What else to
record comes as one JSON argument from builder (``builder.fingerprint.sources``):
the collective libraries, each found by its wheel, its Debian package or its
shared library's name, and the prefixes of the platforms' and libraries'
variables. Nor DeepSpeed (its package imports
torch): the ops it prebuilt are read from the file its setup wrote,
``deepspeed/git_version_info_installed.py``, as literals.
"""

from __future__ import annotations

import ast
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from importlib import metadata, util
from pathlib import Path
from typing import Any

ENV_PREFIXES = ("OMPI_", "FI_", "UCX_", "TORCH_", "DS_", "OMP_")
"""Variables recorded on every node (MPI, libfabric, UCX, torch, DeepSpeed, OpenMP); the
request adds the platforms' and collective libraries'."""
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


ARCH_VARIABLES = {"cuda": "TORCH_CUDA_ARCH_LIST", "rocm": "PYTORCH_ROCM_ARCH"}
ARCHS_FILE = "builder-archs.txt"
"""Beside DeepSpeed's record: the architectures the build compiled the ops for
(written by ds_ops_check.py)."""
"""The image's GPU architectures for compiled ops (torch's and DeepSpeed's builders read them)."""


def arch_list(value: str) -> list[str]:
    """An architecture variable's entries ("8.0;9.0+PTX", or blank-separated), in order."""
    found: list[str] = []
    for entry in re.split(r"[;\s]+", value.strip()):
        if entry and entry not in found:
            found.append(entry)
    return found


def installed_info(path: Path) -> dict[str, object]:
    """The literal assignments of DeepSpeed's git_version_info_installed.py (installed_ops,
    accelerator_name, torch_info, version), read without running or importing it."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return {}
    found: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                try:
                    found[target.id] = ast.literal_eval(node.value)
                except ValueError:
                    continue
    return found


def deepspeed_ops(hip: bool) -> dict[str, object] | None:
    """The ops DeepSpeed prebuilt at install (it uses them only on the accelerator they
    were built for; others it compiles just in time), that accelerator, and the GPU
    architectures the image targets. None without DeepSpeed; no ops where its install
    recorded none (an old DeepSpeed has no such file)."""
    spec = util.find_spec("deepspeed")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    info = installed_info(folder / "git_version_info_installed.py")
    installed = info.get("installed_ops")
    ops = sorted(str(k) for k, v in installed.items() if v) if isinstance(installed, dict) else []
    accelerator = info.get("accelerator_name")
    try:  # what the build compiled for (ds_ops_check.py's record), not a run's variable
        archs = (folder / ARCHS_FILE).read_text()
    except OSError:  # built without builder's record: the image's variable says it
        archs = os.environ.get(ARCH_VARIABLES["rocm" if hip else "cuda"], "")
    return {
        "ops": ops,
        "accelerator": str(accelerator) if accelerator else None,
        "arch": arch_list(archs),
    }


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


def library_of(how: dict[str, Any], pkgs: dict[str, str], debs: dict[str, str]) -> str | None:
    """A collective library's version: from its wheel, its Debian package, its .so."""
    prefix = how.get("python")
    if isinstance(prefix, str):
        found = next((v for k, v in pkgs.items() if k.startswith(prefix)), None)
        if found:
            return found
    for name in how.get("debian") or []:
        if debs.get(name):
            return debs[name]
    stem = how.get("library")
    return library_version(stem) if isinstance(stem, str) else None


def main(argv: list[str]) -> None:
    request = json.loads(argv[0]) if argv else {}
    prefixes = ENV_PREFIXES + tuple(request.get("env_prefixes") or ())
    pkgs = packages()
    debs = apt()
    torch = torch_build()
    report: dict[str, object] = {
        "os": os_release(),
        "arch": platform.machine(),
        "python": platform.python_version(),
        "packages": pkgs,
        "apt": debs,
        "torch": torch,
        "deepspeed": pkgs.get("deepspeed"),
        "env": {
            key: value
            for key, value in sorted(os.environ.items())
            if key in ENV_NAMES or key.startswith(prefixes)
        },
        "tools": {"pdsh": tool(["pdsh", "-V"]), "ssh": tool(["ssh", "-V"])},
    }
    for name, how in sorted((request.get("libraries") or {}).items()):
        version = library_of(how, pkgs, debs)
        if version is not None or how.get("always"):
            report[name] = version
    ops = deepspeed_ops(bool(torch and torch.get("hip")))
    if ops is not None:  # absent without DeepSpeed: such an image's digest stays as it was
        report["deepspeed_ops"] = ops
    json.dump(report, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
