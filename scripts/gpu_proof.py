"""The CUDA paths of builder, proven on one GPU machine (scripts/gpu-proof.sh runs this).

Made for a lent machine with one NVIDIA GPU, torch with CUDA and NCCL, no Docker, no
sshd, no network. The tree that travels holds builder and, in ``--vendor``, what the
ops build installs (``--prepare`` fetches them here, through this machine's pip
configuration). Three parts, each timed, each writing its figures into OUT/gpu-proof.json
(and its raw output beside it), each run whether or not another failed:

1. **probe**: the preflight probe (builder/payload/preflight.py) with the arguments
   builder gives the platform (``probe_args``): device checks, matmul throughput,
   memory copy, and its collective library initialised in a world of one (NCCL on a
   GPU), the all-reduce checked; the report judged by builder's own judge.
2. **ops**: DeepSpeed installed by builder's own image step (the same ``pip`` line and
   variables as the Dockerfile's: ``ops_build_env`` for this GPU's architecture), into a
   venv that sees the machine's torch; the image's ops check; then each op loaded
   through DeepSpeed's op builder with JIT turned off, the load timed.
3. **fingerprint**: the collector (builder/payload/collect.py) with builder's request,
   and the digest builder computes of it.

``--device cpu`` runs the same on a CPU (gloo, no ops compiled unless asked): what the
test suite runs here. Standard library, torch and builder only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from builder import platforms  # noqa: E402 - the tree's own builder, not an installed one
from builder.deepspeed_ops import OPS  # noqa: E402
from builder.fingerprint.record import parse_collected  # noqa: E402
from builder.fingerprint.sources import collector_request  # noqa: E402
from builder.image.steps import BUILD_TOOLS  # noqa: E402
from builder.payload import payload_path  # noqa: E402
from builder.preflight.probe import Settings, expected_of, probe_args  # noqa: E402
from builder.preflight.report import MARK, judge, probe_reports  # noqa: E402

DEEPSPEED = "0.19.8"
"""The DeepSpeed the proof builds (the conformance tests' own)."""
PLATFORM_OF = {"cuda": "cuda", "cpu": "cpu"}
"""--device -> builder's platform."""


def main(argv: list[str] | None = None) -> int:
    args = arguments().parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.prepare:
        return prepare(Path(args.vendor))
    result: dict[str, Any] = {
        "schema": 1,
        "device": args.device,
        "host": platform.node(),
        "python": platform.python_version(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    parts = {"probe": probe, "ops": ops, "fingerprint": fingerprint}
    for name in args.parts.split(","):
        start = time.monotonic()
        try:
            figures = parts[name](args, out)
            figures["ok"] = bool(figures.get("ok", True))
        except Exception as exc:  # each part reports on its own: the others still run
            figures = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        figures["seconds"] = round(time.monotonic() - start, 2)
        result[name] = figures
        print(
            f"gpu-proof: {name}: {'ok' if figures['ok'] else 'FAILED'} ({figures['seconds']} s)",
            flush=True,
        )
    result["ok"] = all(result[name]["ok"] for name in args.parts.split(","))
    (out / "gpu-proof.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(f"gpu-proof: figures in {out / 'gpu-proof.json'}")
    return 0 if result["ok"] else 1


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", required=True, help="the folder the figures go to")
    parser.add_argument("--device", choices=sorted(PLATFORM_OF), default="cuda")
    parser.add_argument("--parts", default="probe,ops,fingerprint")
    parser.add_argument("--vendor", default=str(REPO / "build" / "gpu-proof-vendor"))
    parser.add_argument("--ops", default=None, help="ops to build (default: the platform's)")
    parser.add_argument("--arch", default=None, help="GPU architecture (default: the GPU's)")
    parser.add_argument("--plan", action="store_true", help="ops: say the build, run none")
    parser.add_argument("--prepare", action="store_true", help="fetch --vendor here, then stop")
    parser.add_argument("--budget", type=float, default=20.0, help="the probe's seconds")
    return parser


# -- 1. the preflight probe --------------------------------------------------------------


def probe(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """The probe in a world of one, judged as builder judges a node's reports."""
    platform_ = platforms.get(PLATFORM_OF[args.device])
    settings = Settings(budget=args.budget)
    env = {
        **os.environ,
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(29500 + os.getpid() % 1000),
    }
    argv = [sys.executable, str(payload_path("preflight.py")), *probe_args(platform_, 1, settings)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    (out / "probe.log").write_text(done.stdout + done.stderr)
    expected = expected_of(
        platform_, (platform.node(),), 1, fabric="none", env={}, settings=settings
    )
    result = judge(done.stdout, expected)
    report = next(iter(_reports(done.stdout)), {})
    failed = [f.text() for f in result.findings if f.severity == "fail"]
    return {
        "ok": done.returncode == 0 and not failed,
        "argv": shlex.join(argv[1:]),
        "exit": done.returncode,
        "findings": [f.text() for f in result.findings],
        "device_names": report.get("device_names"),
        "device_arch": report.get("device_arch"),
        "versions": report.get("versions"),
        "matmul": report.get("matmul"),
        "memory": report.get("memory"),
        "allreduce": report.get("allreduce"),
        "transport": report.get("transport"),
        "error": report.get("error"),
    }


def _reports(output: str) -> list[dict[str, Any]]:
    return probe_reports(output, MARK)


# -- 2. DeepSpeed's ops, built by builder's step, loaded without JIT ----------------------


def ops(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    platform_ = platforms.get(PLATFORM_OF[args.device])
    names = tuple(
        n for n in (args.ops or ",".join(platform_.default_deepspeed_ops)).split(",") if n
    )
    archs = (args.arch or gpu_arch(args.device),) if any(OPS[n].device for n in names) else ()
    archs = tuple(a for a in archs if a)
    env = platform_.ops_build_env(names, archs)
    venv = out / "venv"
    vendor = Path(args.vendor)
    pip = [
        str(venv / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "--no-index",
        "--find-links",
        str(vendor),
    ]
    steps = [
        [*pip, *BUILD_TOOLS],
        [*pip, "--no-build-isolation", f"deepspeed=={DEEPSPEED}"],
        [
            str(venv / "bin" / "python"),
            str(payload_path("ds_ops_check.py")),
            ",".join(names),
            env.get("DS_ACCELERATOR", ""),
            ";".join(archs),
        ],
    ]
    figures: dict[str, Any] = {
        "ops": list(names),
        "archs": list(archs),
        "build_env": env,
        "steps": [shlex.join(step) for step in steps],
    }
    if args.plan:
        return figures
    if not vendor.is_dir():
        raise RuntimeError(
            f"no {vendor}: run `scripts/gpu-proof.sh --prepare` where pip reaches an index"
        )
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    log = (out / "ops.log").open("w")
    start = time.monotonic()
    for step in steps:
        done = subprocess.run(step, env={**os.environ, **env}, stdout=log, stderr=log, check=False)
        if done.returncode != 0:
            figures |= {"ok": False, "error": f"{shlex.join(step)} exited {done.returncode}"}
            return figures
    figures["build_seconds"] = round(time.monotonic() - start, 1)
    loads = subprocess.run(
        [str(venv / "bin" / "python"), "-c", LOAD, ",".join(names)],
        env={**os.environ, "DS_BUILD_OPS": "0", "DS_SKIP_CUDA_CHECK": "0"},
        capture_output=True,
        text=True,
        check=False,
    )
    log.write(loads.stdout + loads.stderr)
    figures["loads"] = (
        json.loads(loads.stdout.strip().splitlines()[-1]) if loads.returncode == 0 else None
    )
    figures["ok"] = loads.returncode == 0 and all(v["prebuilt"] for v in figures["loads"].values())
    return figures


LOAD = """
import json, sys, time
import deepspeed
from deepspeed.ops.op_builder import ALL_OPS
from deepspeed.git_version_info import installed_ops
found = {}
for name in sys.argv[1].split(","):
    builder = ALL_OPS[name]
    start = time.perf_counter()
    builder.load(verbose=False)  # a prebuilt op is imported; no JIT where it is installed
    seconds = round(time.perf_counter() - start, 4)
    found[name] = {"seconds": seconds, "prebuilt": bool(installed_ops.get(name))}
print(json.dumps(found))
"""


def gpu_arch(device: str) -> str | None:
    """This GPU's architecture as TORCH_CUDA_ARCH_LIST writes it ("9.0"); None on a CPU."""
    if device != "cuda":
        return None
    import torch

    major, minor = torch.cuda.get_device_capability(0)
    return f"{major}.{minor}"


# -- 3. the fingerprint ----------------------------------------------------------------


def fingerprint(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    del args
    done = subprocess.run(
        [sys.executable, str(payload_path("collect.py")), collector_request()],
        capture_output=True,
        text=True,
        check=False,
    )
    (out / "fingerprint.json").write_text(done.stdout)
    found = parse_collected("this machine", done.stdout, None)
    data = found.data
    return {
        "ok": done.returncode == 0,
        "digest": found.digest,
        "torch": data.get("torch"),
        "nccl": data.get("nccl"),
        "python": data.get("python"),
        "deepspeed": data.get("deepspeed"),
    }


# -- what travels -----------------------------------------------------------------------


def prepare(vendor: Path) -> int:
    """Here, with an index: what the ops build installs on a machine without one, for the
    CPython releases such a machine has (3.10 to 3.13); numpy and torch are the
    machine's own (the venv sees them). About 15 MiB, inside what travels (64 MiB)."""
    vendor.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "download", "--dest", str(vendor)]
    subprocess.run(
        [*pip, "--no-deps", "--no-binary", "deepspeed", f"deepspeed=={DEEPSPEED}"], check=True
    )
    subprocess.run([*pip, "--no-deps", *BUILD_TOOLS, "ninja"], check=True)
    pure = [
        "hjson",
        "py-cpuinfo",
        "packaging",
        "einops",
        "tqdm",
        "nvidia-ml-py",
        "annotated-types",
        "typing-extensions",
        "typing-inspection",
        "pydantic",
    ]
    subprocess.run([*pip, "--no-deps", *pure], check=True)
    for version in ("3.10", "3.11", "3.12", "3.13"):
        subprocess.run(
            [
                *pip,
                "--no-deps",
                "--only-binary",
                ":all:",
                "--python-version",
                version,
                "--platform",
                "manylinux2014_x86_64",
                "pydantic-core",
                "psutil",
                "msgpack",
            ],
            check=True,
        )
    size = sum(p.stat().st_size for p in vendor.iterdir()) / 2**20
    print(f"gpu-proof: {len(list(vendor.iterdir()))} files, {size:.1f} MiB in {vendor}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
