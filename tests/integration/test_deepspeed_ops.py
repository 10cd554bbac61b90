"""DeepSpeed's ops compiled into the cpu preset's image, for real: a fresh container
loads them without a compiler (the compilers are removed first, so a just-in-time
build could not succeed), and an op the image does not carry fails there, which shows
the compilers really were gone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.contract import DEEPSPEED_OPS_LABEL
from builder.fingerprint.sources import of_image
from tests.integration.conftest import run_in

if TYPE_CHECKING:
    from builder.engine import DockerEngine
    from builder.engine.build import BuildResult

NO_COMPILERS = (
    "rm -f /usr/bin/g++* /usr/bin/c++* /usr/bin/gcc* /usr/bin/cc /usr/bin/x86_64-linux-gnu-g*"
    " /opt/venv/bin/ninja"
)
USE_THEM = r"""
import os, sys, torch
from deepspeed.ops.adam import DeepSpeedCPUAdam
from deepspeed.ops.op_builder.cpu import ShareMemCommBuilder
param = torch.nn.Parameter(torch.ones(64)); param.grad = torch.full((64,), 0.5)
DeepSpeedCPUAdam([param], lr=0.1).step()
assert not torch.equal(param.detach(), torch.ones(64)), "the step changed nothing"
assert "deepspeed.ops.adam.cpu_adam_op" in sys.modules, "cpu_adam was not the prebuilt one"
ShareMemCommBuilder().load()
assert "deepspeed.ops.comm.deepspeed_shm_comm_op" in sys.modules, sorted(sys.modules)
root = os.path.expanduser("~/.cache/torch_extensions")
print("JIT-DIR", os.path.isdir(root) and sorted(os.listdir(root)))
try:
    from deepspeed.ops.lion import DeepSpeedCPULion  # not in the image: needs a compiler
    DeepSpeedCPULion([param], lr=0.1).step()
    print("LION compiled")
except Exception as exc:
    print("LION failed", type(exc).__name__)
print("OPS-OK")
"""


def test_the_cpu_image_carries_its_ops_and_compiles_nothing(
    cpu_image: BuildResult, engine: DockerEngine
) -> None:
    labels = engine.image(cpu_image.reference).labels
    assert labels[DEEPSPEED_OPS_LABEL] == "cpu_adam,deepspeed_shm_comm"
    script = f"{NO_COMPILERS} && python - <<'EOF'\n{USE_THEM}\nEOF"
    output = run_in(engine, cpu_image.reference, script)
    assert "OPS-OK" in output, output
    assert "LION failed" in output, output  # without a compiler nothing can be built
    assert "JIT-DIR False" in output or "JIT-DIR []" in output, output


def test_the_fingerprint_reads_the_ops_from_deepspeeds_own_record(
    cpu_image: BuildResult, engine: DockerEngine
) -> None:
    summary = of_image(engine, cpu_image.reference).summary()
    assert "prebuilt ops: cpu_adam, deepspeed_shm_comm (cpu)" in summary, summary


def test_the_debug_sections_are_stripped_and_no_build_tree_is_left(
    cpu_image: BuildResult, engine: DockerEngine
) -> None:
    output = run_in(
        engine,
        cpu_image.reference,
        "cd /opt/venv/lib/python3*/site-packages/deepspeed/ops && "
        "for so in adam/cpu_adam_op*.so comm/deepspeed_shm_comm_op*.so; do "
        "  python3 - \"$so\" <<'EOF'\n"
        "import sys\n"
        "data = open(sys.argv[1], 'rb').read()\n"
        "print(sys.argv[1], len(data), b'.debug_info' in data)\n"
        "EOF\n"
        "done; ls /tmp/builder 2>&1 | head -1",
    )
    lines = output.strip().splitlines()
    assert len(lines) == 3, output
    for line in lines[:2]:
        _, size, debug = line.split()
        assert debug == "False", output  # strip --strip-debug ran
        assert int(size) < 4 << 20, output
    assert "No such file" in lines[2], output
