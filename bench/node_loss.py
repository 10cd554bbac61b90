"""How long a node's loss stops an elastic run: from the kill to every surviving rank
training again, builder's rendezvous settings beside torch's own, in one run.

Each case is the command a user types: `builder rehearse SPEC --script snapshots.py
--kill node2 --kill-after "epoch 2 saved" --json` on 2 nodes x 2 ranks, torchrun
with launch.min_nodes 1 and launch.restarts 1; node2's container is killed after a
snapshot and stays lost, node1 regroups alone and resumes from the snapshot. The
rehearsal's restart_seconds is the figure: the kill to every rank of the next attempt
running. The two cases differ only in the rendezvous settings:

- builder's defaults for an elastic run: a node is given up after 6 s without a
  heartbeat (keep_alive_interval 2 s x keep_alive_max_attempt 3), then the last call
  waits 3 s for more nodes (launch.node_timeout, launch.last_call);
- torch's own defaults (5 s x 3, then a 30 s last call): launch.node_timeout 15 and
  launch.last_call 30 give exactly those.

Target: under 20 s with builder's settings. What they cost: a node silent for 6 s (a
long GC pause, a hung filesystem) is taken for lost, and a node that starts more than
3 s after launch.min_nodes have joined waits for the next regroup (which restarts every
rank); launch.node_timeout and launch.last_call trade that back.

    .venv/bin/python bench/node_loss.py [--image REF] [--runs N]

Exit status: 0 when the figures were measured (a missed target is a figure); 1 when a
rehearsal fails or the image is missing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from _support import BenchError, add_built_image_options, built_image, run_main

TARGET = 20.0
BUILDER = Path(sys.executable).with_name("builder")
CASES = (
    ("builder's settings (6 s heartbeat, 3 s last call)", ""),
    ("torch's defaults (15 s heartbeat, 30 s last call)", "  node_timeout: 15\n  last_call: 30\n"),
)
SNAPSHOTS = """\
import os, time
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
model = DistributedDataParallel(torch.nn.Linear(8, 1))
snapshot, start = os.path.join(os.environ["BUILDER_CHECKPOINTS"], "snapshot.pt"), 0
if os.path.exists(snapshot):
    start = torch.load(snapshot)["epoch"] + 1
print(f"rank {rank} of {world} training from epoch {start}", flush=True)
for epoch in range(start, 8):
    model(torch.randn(4, 8)).sum().backward()
    dist.barrier()
    if rank == 0:
        torch.save({"epoch": epoch}, snapshot + ".new")
        os.replace(snapshot + ".new", snapshot)
        print(f"epoch {epoch} saved", flush=True)
    time.sleep(0.5)
dist.destroy_process_group()
"""


def spec_for(scratch: Path, settings: str, index: int) -> Path:
    """The cpu-deepspeed preset as an elastic torchrun run, with the case's settings."""
    from builder.spec.presets import preset_text

    elastic = (
        "  launcher: torchrun\n  restarts: 1\n  min_nodes: 1\n  rendezvous_timeout: 120\n"
        "  checkpoints: /shared/ckpt\n" + settings
    )
    path = scratch / f"elastic-{index}.yaml"
    path.write_text(preset_text("cpu-deepspeed").replace("  launcher: deepspeed\n", elastic))
    return path


def lost_node(image: str, spec: Path, script: Path) -> dict[str, Any]:
    argv = [str(BUILDER), "rehearse", str(spec), "--image", image, "--nodes", "2"]
    argv += ["--launcher", "torchrun", "--script", str(script), "--timeout", "240"]
    argv += ["--kill", "node2", "--kill-after", "epoch 2 saved", "--json"]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BenchError(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(proc.stdout)["result"]
    if result.get("restart_seconds") is None:
        raise BenchError(f"node1 did not train again after node2's loss:\n{proc.stderr[-2000:]}")
    return result


def measure(args: argparse.Namespace, scratch: Path) -> None:
    from builder.engine import connect

    built_image(connect(), args.image)
    script = scratch / "snapshots.py"
    script.write_text(SNAPSHOTS)
    print(f"node2 lost after a snapshot, 2 nodes x 2 ranks: median of {args.runs} run(s)\n")
    print("| rendezvous | kill to every surviving rank training again |")
    print("|---|---|")
    figures = []
    for index, (name, settings) in enumerate(CASES):
        spec = spec_for(scratch, settings, index)
        seconds = [float(lost_node(args.image, spec, script)["restart_seconds"])]
        seconds += [
            float(lost_node(args.image, spec, script)["restart_seconds"])
            for _ in range(args.runs - 1)
        ]
        figure = statistics.median(seconds)
        figures.append(figure)
        print(f"| {name} | {figure:.1f} s |")
    ratio = figures[1] / figures[0]
    verdict = "OK" if figures[0] < TARGET else "MISSED"
    print(f"\nbuilder's settings: {figures[0]:.1f} s (target < {TARGET:.0f} s): {verdict}; ")
    print(f"torch's defaults take {ratio:.1f}x as long")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_built_image_options(parser, runs=1)
    return run_main(parser, measure, argv, scratch_prefix="bench-node-loss-")


if __name__ == "__main__":
    sys.exit(main())
