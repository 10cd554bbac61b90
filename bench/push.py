"""Push and pull of the cpu image through a local registry, and a push with nothing new.

A registry (Debian's docker-registry) is started on a free port for the run. The
figures, each the median of --runs:
- push: the image under a fresh repository name (every layer is sent);
- no-op push: the same image again (the registry has every layer; only the
  manifest is checked). Target: under 2 s;
- pull by digest: after the engine's tag of it is removed, `repo@sha256:...`
  (the layers are in the engine already, as on a node that ran an earlier
  version; what is timed is the registry round trip and the manifest).

    .venv/bin/python bench/push.py [--image REF] [--runs N]

Exit status: 0 when the figures were measured (a missed target is a figure);
1 when the registry, the image or a push fails.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import TYPE_CHECKING

from _support import BenchError, add_built_image_options, built_image, run_main

if TYPE_CHECKING:
    from pathlib import Path

TARGET = 2.0
CONFIG = """\
version: 0.1
storage:
  filesystem:
    rootdirectory: {root}
http:
  addr: 127.0.0.1:{port}
"""


def start_registry(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    exe = shutil.which("docker-registry")
    if exe is None:
        raise BenchError("docker-registry is missing: run scripts/ensure-tools.sh")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    config = folder / "config.yml"
    config.write_text(CONFIG.format(root=folder / "data", port=port))
    with (folder / "registry.log").open("wb") as log:
        process = subprocess.Popen([exe, "serve", str(config)], stdout=log, stderr=log)
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2)
            return process, f"localhost:{port}"
        except urllib.error.HTTPError:
            return process, f"localhost:{port}"
        except OSError as exc:
            if process.poll() is not None or time.monotonic() > deadline:
                raise BenchError(f"the registry did not start: {exc}") from None
            time.sleep(0.2)


def timed(action: object) -> float:
    start = time.perf_counter()
    action()  # type: ignore[operator]
    return time.perf_counter() - start


def measure(args: argparse.Namespace, scratch: Path) -> None:
    from builder.engine import connect
    from builder.engine.push import pull_image, push_image

    engine = connect()
    image_id = engine.image(built_image(engine, args.image)).id
    pushes, noops, pulls = [], [], []
    for run in range(args.runs):
        folder = scratch / f"registry-{run}"  # an empty registry each run: every layer is new
        folder.mkdir()
        process, registry = start_registry(folder)
        remote = f"{registry}/bench/push:it"
        made = [remote]
        try:
            engine.tag(image_id, remote)
            pushes.append(timed(lambda r=remote: push_image(engine, r)))
            pinned = ""

            def again(r: str = remote) -> None:
                nonlocal pinned
                pinned = push_image(engine, r).pinned

            noops.append(timed(again))
            made.append(pinned)
            engine.remove_image(remote, force=False, prune=False)
            pulls.append(timed(lambda d=pinned: pull_image(engine, d)))
        finally:
            for reference in made:
                if reference and engine.exists(reference):
                    engine.remove_image(reference, force=False, prune=False)
            process.terminate()
            process.wait(10)
    size = engine.image(image_id).size / 1e9
    print(f"{args.image} ({size:.2f} GB) to an empty registry on this machine, per run")
    print(f"runs: {args.runs}; medians (each run's figures: push, no-op push, pull)")
    for figures in zip(pushes, noops, pulls, strict=True):
        print("  " + ", ".join(f"{f:.2f} s" for f in figures))
    print(f"  push, every layer new: {statistics.median(pushes):.1f} s")
    print(f"  push, nothing new:     {statistics.median(noops):.2f} s")
    print(f"  pull by digest:        {statistics.median(pulls):.2f} s")
    noop = statistics.median(noops)
    verdict = "OK" if noop < TARGET else "MISSED"
    print(f"\nno-op push: {noop:.2f} s (target < {TARGET:.0f} s): {verdict}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_built_image_options(parser, runs=3)
    return run_main(parser, measure, argv, scratch_prefix="bench-push-")


if __name__ == "__main__":
    sys.exit(main())
