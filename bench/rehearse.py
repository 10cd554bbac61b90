"""Wall time of `builder rehearse` per launcher and node count, with its phases.

Each run is the command a user types, `builder rehearse --image IMAGE
--nodes N --launcher L --json`, timed from start to exit (interpreter start,
containers up, ssh mesh, the probe job, teardown); its JSON gives the
phases. The image must already be built (the target is about rehearsing a
built image): by default builder-test/cpu-deepspeed:it, which the
integration tests build, else pass --image. The Slurm image (the user's
image plus slurmctld/slurmd/munge) is made once before the timed runs.

Targets on our 2-core machines: a 2-node deepspeed or torchrun rehearsal,
from nothing to torn down, under 25 s; a 2-node Slurm rehearsal of each
launcher a batch job runs (deepspeed --no_ssh, torchrun, srun: the spec's
launcher, through `builder rehearse SPEC --launcher slurm`), under 30 s.

The fault case: a 2-node torchrun rehearsal of a small DDP script with a
snapshot per epoch and launch.restarts 1, once as it is and once with one rank
killed after a snapshot (`--kill node2:1 --kill-after ...`), side by side; the
restart itself (from the kill until every rank runs its next attempt, the
rehearsal's restart_seconds) has a target of under 15 s.

    .venv/bin/python bench/rehearse.py [--image REF] [--runs N]

Exit status: 0 when the figures were measured (a missed target is a
figure); 1 when a rehearsal fails or the image is missing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _support import BenchError, add_built_image_options, built_image, run_main

CASES = (
    ("deepspeed", 2, None),
    ("deepspeed", 3, None),
    ("torchrun", 2, None),
    ("torchrun", 3, None),
    ("slurm", 2, "deepspeed"),
    ("slurm", 2, "torchrun"),
    ("slurm", 2, "srun"),
)
"""(--launcher, nodes, the spec's launcher for a Slurm job)."""
TARGET = 25.0
RESTART_TARGET = 15.0
SNAPSHOTS = """\
import os, time
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
dist.init_process_group("gloo")
rank = dist.get_rank()
model = DistributedDataParallel(torch.nn.Linear(8, 1))
snapshot, start = os.path.join(os.environ["BUILDER_CHECKPOINTS"], "snapshot.pt"), 0
if os.path.exists(snapshot):
    start = torch.load(snapshot)["epoch"] + 1
    print(f"resuming from epoch {start}", flush=True)
for epoch in range(start, 6):
    model(torch.randn(4, 8)).sum().backward()
    dist.barrier()
    if rank == 0:
        torch.save({"epoch": epoch}, snapshot + ".new")
        os.replace(snapshot + ".new", snapshot)
        print(f"epoch {epoch} saved", flush=True)
    time.sleep(0.5)
dist.destroy_process_group()
"""
"""The fault case's script: what the PyTorch multinode tutorial does, on CPU."""
SLURM_TARGET = 30.0
BUILDER = Path(sys.executable).with_name("builder")


def spec_with(launcher: str, scratch: Path) -> Path:
    """The cpu-deepspeed preset's spec with launch.launcher set (what a Slurm job runs)."""
    from builder.spec.presets import preset_text

    path = scratch / f"{launcher}.yaml"
    text = preset_text("cpu-deepspeed").replace("  launcher: deepspeed", f"  launcher: {launcher}")
    path.write_text(text)
    return path


def rehearse(
    image: str, launcher: str, nodes: int, spec: Path | None = None, *extra: str
) -> tuple[float, dict[str, Any]]:
    argv = [str(BUILDER), "rehearse", *([str(spec)] if spec else []), "--image", image]
    argv += ["--nodes", str(nodes)]
    argv += ["--launcher", launcher, "--json", *extra]
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise BenchError(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(proc.stdout)["result"]
    return wall, result


def faults(args: argparse.Namespace, scratch: Path) -> None:
    """The fault case beside the same run without a fault (median of --runs each)."""
    spec = spec_with("torchrun", scratch)
    spec.write_text(
        spec.read_text().replace(
            "  launcher: torchrun",
            "  launcher: torchrun\n  restarts: 1\n  checkpoints: /shared/ckpt",
        )
    )
    script = scratch / "snapshots.py"
    script.write_text(SNAPSHOTS)
    kill = ("--kill", "node2:1", "--kill-after", "epoch 2 saved")
    print("\n| torchrun, 2 nodes, a snapshotting script | wall | restart |")
    print("|---|---|---|")
    restarts = []
    for name, extra in (("as it is", ()), ("one rank killed, one restart", kill)):
        walls = []
        for _ in range(args.runs):
            wall, result = rehearse(
                args.image, "torchrun", 2, spec, "--script", str(script), *extra
            )
            walls.append(wall)
            if result["restart_seconds"] is not None:
                restarts.append(float(result["restart_seconds"]))
        shown = f"{statistics.median(restarts):.1f} s" if extra else "-"
        print(f"| {name} | {statistics.median(walls):.1f} s | {shown} |")
    restart = statistics.median(restarts)
    verdict = "OK" if restart < RESTART_TARGET else "MISSED"
    print(f"\nrestart: {restart:.1f} s (target < {RESTART_TARGET:.0f} s): {verdict}")


def measure(args: argparse.Namespace, scratch: Path) -> None:
    from builder.engine import connect

    built_image(connect(), args.image)
    print("warm-up: the Slurm image and the engine's caches", file=sys.stderr)
    if not args.faults_only:
        rehearse(args.image, "slurm", 2)
    rehearse(args.image, "deepspeed", 2)
    print(f"builder rehearse --image {args.image}: median of {args.runs} run(s)")
    if not args.faults_only:
        print("\n| launcher | nodes | wall | phases |")
        print("|---|---|---|---|")
    verdicts = []
    for launcher, nodes, batch in CASES if not args.faults_only else ():
        spec = spec_with(batch, scratch) if batch else None
        walls, phases = [], []
        for _ in range(args.runs):
            wall, result = rehearse(args.image, launcher, nodes, spec)
            walls.append(wall)
            phases.append(result["phases"])
        wall = statistics.median(walls)
        typical = phases[walls.index(min(walls, key=lambda w: abs(w - wall)))]
        shown = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in typical.items())
        name = f"{launcher} ({batch})" if batch else launcher
        print(f"| {name} | {nodes} | {wall:.1f} s | {shown} |")
        if nodes == 2:
            target = SLURM_TARGET if batch else TARGET
            verdict = "OK" if wall < target else "MISSED"
            verdicts.append(f"{name} 2 nodes: {wall:.1f} s (target < {target:.0f} s): {verdict}")
    print()
    for verdict in verdicts:
        print(verdict)
    faults(args, scratch)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_built_image_options(parser, runs=3)
    parser.add_argument("--faults-only", action="store_true", help="Only the fault case.")
    return run_main(parser, measure, argv, scratch_prefix="bench-rehearse-")


if __name__ == "__main__":
    sys.exit(main())
