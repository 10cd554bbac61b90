"""scripts/gpu-proof.sh, proven here on the CPU: the probe in a world of one and the
fingerprint run as they will on a lent GPU machine (device cpu, backend gloo), and the
ops build it plans for a GPU is builder's own image step for that architecture."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from builder import platforms
from builder.image.steps import BUILD_TOOLS
from tests.conftest import real_tool, unavailable

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu-proof.sh"


def proof(out: Path, *options: str) -> dict[str, object]:
    try:
        import torch  # noqa: F401 - the probe and the collector read it
    except ImportError:
        unavailable("torch is not in the test venv: run `make conformance`")
    done = subprocess.run(
        [str(SCRIPT), str(out), *options],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert (out / "gpu-proof.json").is_file(), done.stdout + done.stderr
    return dict(json.loads((out / "gpu-proof.json").read_text()))


def test_the_probe_and_the_fingerprint_run_and_write_their_figures(tmp_path: Path) -> None:
    found = proof(tmp_path, "--device", "cpu", "--parts", "probe,fingerprint", "--budget", "4")
    assert found["ok"] is True, found
    probe = found["probe"]
    assert isinstance(probe, dict)
    assert probe["findings"] == []
    assert probe["matmul"]["tflops"] > 0
    assert {p["min"] for p in probe["allreduce"]["world"]} == {1.0}  # rank 0 + 1, alone
    assert "--device cpu --backend gloo" in probe["argv"]
    print_ = found["fingerprint"]
    assert isinstance(print_, dict)
    assert len(print_["digest"]) == 16
    assert print_["torch"]["version"]


def test_the_ops_build_for_a_gpu_is_builders_image_step_for_its_architecture(
    tmp_path: Path,
) -> None:
    found = proof(tmp_path, "--device", "cuda", "--parts", "ops", "--plan", "--arch", "9.0")
    ops = found["ops"]
    assert isinstance(ops, dict)
    cuda = platforms.get("cuda")
    assert ops["ops"] == list(cuda.default_deepspeed_ops)
    assert ops["build_env"] == cuda.ops_build_env(cuda.default_deepspeed_ops, ("9.0",))
    assert ops["build_env"]["TORCH_CUDA_ARCH_LIST"] == "9.0"
    install, deepspeed, check = ops["steps"]
    assert install.endswith(" ".join(BUILD_TOOLS))
    assert "--no-index" in deepspeed  # the machine has no network: only what travels
    assert deepspeed.endswith("--no-build-isolation deepspeed==0.19.8")
    assert "ds_ops_check.py cpu_adam,fused_adam cuda 9.0" in check


def test_a_part_that_fails_is_named_and_the_others_still_run(tmp_path: Path) -> None:
    found = proof(
        tmp_path, "--device", "cpu", "--parts", "ops,fingerprint", "--vendor", "/nonexistent"
    )
    assert found["ok"] is False
    assert "--prepare" in str(found["ops"]["error"])  # type: ignore[index]
    assert found["fingerprint"]["ok"] is True  # type: ignore[index]


def test_the_wrapper_is_valid_sh() -> None:
    subprocess.run([real_tool("shellcheck"), str(SCRIPT)], check=True)
