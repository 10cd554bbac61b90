"""Run in the image's python stage after DeepSpeed's install: every op asked for
(argv[1], comma-separated) is in DeepSpeed's record of what it compiled, for the
accelerator asked for (argv[2]). DeepSpeed skips an op it finds incompatible without
failing (silently, when the op's own DS_BUILD_ variable is set), and a run would then
compile it just in time on every node, so this fails the build instead. It strips the
debug sections DeepSpeed compiles in (-g) from the compiled shared objects, and records
the GPU architectures they were compiled for (argv[3], as the build's variable had them)
beside DeepSpeed's own record, in ARCHS_FILE: the fingerprint reads that, not a run's
environment. Standard library only: importing deepspeed would import torch.
"""

from __future__ import annotations

import importlib.util
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

ARCHS_FILE = "builder-archs.txt"


def main() -> None:
    wanted = [name for name in sys.argv[1].split(",") if name]
    accelerator = sys.argv[2]
    archs = sys.argv[3] if len(sys.argv) > 3 else ""
    spec = importlib.util.find_spec("deepspeed")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("ds-ops-check: DeepSpeed is not installed in this environment")
    root = Path(next(iter(spec.submodule_search_locations)))
    record = root / "git_version_info_installed.py"
    if not record.is_file():
        sys.exit(f"ds-ops-check: {record} is missing: DeepSpeed recorded no compiled ops")
    info = runpy.run_path(str(record))
    installed = info.get("installed_ops") or {}
    built_for = info.get("accelerator_name")
    missing = [name for name in wanted if not installed.get(name)]
    if missing:
        sys.exit(
            f"ds-ops-check: DeepSpeed did not compile {', '.join(missing)}: it skips an op it "
            "finds incompatible, without a word when the op's DS_BUILD_ variable is set (or "
            "pip took a prebuilt deepspeed wheel from a wheelhouse or mirror). Ask DeepSpeed "
            f"why: DS_ACCELERATOR={accelerator} python -c 'from deepspeed.ops.op_builder.all_ops "
            f'import ALL_OPS; print(ALL_OPS["{missing[0]}"].is_compatible(True))\'. Compiled: '
            f"{', '.join(sorted(n for n, on in installed.items() if on)) or 'none'}"
        )
    if built_for != accelerator:
        sys.exit(
            f"ds-ops-check: DeepSpeed compiled the ops for accelerator {built_for!r}, not "
            f"{accelerator!r}: on the nodes it would compile them again at every start"
        )
    strip = shutil.which("strip")
    objects = sorted(str(path) for path in root.rglob("*.so"))  # inference ops are not in ops/
    if strip and objects:
        subprocess.run([strip, "--strip-debug", *objects], check=True)
    (root / ARCHS_FILE).write_text(archs + "\n")
    where = f" ({archs})" if archs else ""
    print(f"ds-ops-check: compiled for {accelerator}{where}: {', '.join(wanted)}")


if __name__ == "__main__":
    main()
