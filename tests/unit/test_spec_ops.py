"""image.deepspeed_ops and image.archs: what each platform accepts and refuses (with the
field, the line and the fix), the defaults, and what the Dockerfile runs for them."""

from __future__ import annotations

import json
import os
import re
import runpy
import shlex
import subprocess
import sys
from importlib import util
from typing import TYPE_CHECKING

import pytest

from builder.deepspeed_ops import NOT_BUILT, OPS
from builder.errors import SpecError
from builder.fingerprint.deepspeed_ops import HOST_OPS
from builder.image.context import render_outputs
from builder.payload import payload_path
from builder.platforms import every, get
from builder.rehearse.staging import PROBED_OPS
from builder.resolved import resolve
from builder.spec.loader import load_preset, parse_spec
from tests.conftest import unavailable

if TYPE_CHECKING:
    from pathlib import Path


def spec(accelerator: str, extra: str = "", *, deepspeed: bool = True) -> str:
    versions = {"cpu": 'torch: "2.13.0"', "cuda": 'torch: "2.15.0"', "rocm": 'torch: "2.13.0"'}
    lines = [f"name: t\nimage:\n  accelerator: {accelerator}"]
    if accelerator == "gaudi":
        lines.append('  synapse: "1.23.0"')
    else:
        lines.append(f"  {versions[accelerator]}")
    if deepspeed:
        lines.append('  deepspeed: "1.23.0"' if accelerator == "gaudi" else '  deepspeed: "0.19.8"')
    if extra:
        lines.append(extra)
    if not deepspeed:
        lines.append("launch:\n  launcher: torchrun")
    return "\n".join(lines) + "\n"


def refused(text: str) -> str:
    with pytest.raises(SpecError) as info:
        parse_spec(text, "stack.yaml")
    return str(info.value)


@pytest.mark.parametrize(
    ("accelerator", "ops", "archs", "variable"),
    [
        ("cpu", ("cpu_adam", "deepspeed_shm_comm"), (), None),
        ("cuda", ("cpu_adam", "fused_adam"), ("8.0", "9.0", "10.0"), "TORCH_CUDA_ARCH_LIST"),
        ("rocm", ("cpu_adam", "fused_adam"), ("gfx90a", "gfx942"), "PYTORCH_ROCM_ARCH"),
        ("gaudi", (), (), None),
    ],
)
def test_the_defaults_per_platform(
    accelerator: str, ops: tuple[str, ...], archs: tuple[str, ...], variable: str | None
) -> None:
    image = parse_spec(spec(accelerator), "stack.yaml").image
    resolved = get(accelerator).resolve(image)
    assert resolved.deepspeed_ops == ops
    assert resolved.archs == archs
    if variable:
        assert resolved.env[variable] == ";".join(archs)  # later just-in-time builds too
        assert resolved.ops_build_env[variable] == ";".join(archs)
    if ops:
        assert resolved.ops_build_env["DS_ACCELERATOR"] == get(accelerator).ds_accelerator
        assert all(resolved.ops_build_env[OPS[op].build_var] == "1" for op in ops)
    without = get(accelerator).resolve(parse_spec(spec(accelerator, deepspeed=False), "s").image)
    assert (without.deepspeed_ops, without.archs, without.ops_build_env) == ((), (), {})


def test_an_empty_list_compiles_nothing() -> None:
    image = parse_spec(spec("cuda", "  deepspeed_ops: []"), "stack.yaml").image
    resolved = get("cuda").resolve(image)
    assert resolved.deepspeed_ops == ()
    assert resolved.ops_build_env == {"DS_BUILD_OPS": "0", "TORCH_CUDA_ARCH_LIST": "8.0;9.0;10.0"}


@pytest.mark.parametrize(
    ("accelerator", "extra", "says"),
    [
        ("cpu", "  deepspeed_ops: [sparse_attn]", "image.deepspeed_ops[0] (line 6): sparse_attn"),
        ("cpu", "  deepspeed_ops: [fused_adam]", "is not built for cpu images"),
        ("cuda", "  deepspeed_ops: [async_io]", "needs libaio-dev"),
        ("cuda", "  deepspeed_ops: [evoformer_attn]", "CUTLASS"),
        ("cuda", "  deepspeed_ops: [deepspeed_shm_comm]", "is not built for cuda images"),
        ("rocm", "  deepspeed_ops: [transformer_inference]", "is not built for rocm images"),
        ("gaudi", "  deepspeed_ops: [cpu_adam]", "they can have none"),
        ("cpu", "  deepspeed_ops: [cpu_adam, cpu_adam]", "listed twice: cpu_adam"),
        ("cpu", "  deepspeed_ops: ['cpu_adam; id']", "image.deepspeed_ops[0]"),
        ("cpu", '  archs: ["8.0"]', "cpu images are not compiled for GPU architectures"),
        ("cuda", '  archs: ["9.0a"]', "invalid literal for int() with base 10: '0a'"),
        ("cuda", '  archs: ["9.0a"]', "use 9.0"),
        ("cuda", '  archs: ["10.0a+PTX"]', "use 10.0+PTX"),
        ("cuda", "  archs: []", "[] leaves the architectures of fused_adam"),
        ("rocm", "  archs: []", "[] leaves the architectures of fused_adam"),
        ("rocm", "  archs: [gfx940]", "ROCm 7.0 and newer no longer compile for gfx940"),
        ("rocm", '  rocm: "6.2.4"\n  torch: "2.6.0"\n  archs: [gfx950]', "needs ROCm 7.0"),
        ("rocm", "  archs: ['gfx90a:xnack']", "xnack is not a target feature"),
        ("cuda", "  archs: [Hopper]", "use 9.0"),
        ("cuda", '  archs: ["8.0 9.0"]', "image.archs[0]"),
        ("cuda", '  archs: ["9.0;id"]', "image.archs[0]"),
        ("cuda", '  archs: ["4.2"]', "no NVIDIA GPU of compute capability 4.2"),
        ("cuda", '  archs: ["7.0"]', "CUDA 13.0 and newer no longer compile for 7.0"),
        ("cuda", '  archs: ["8.0", "8.0"]', "listed twice: 8.0"),
        ("cuda", '  cuda: "12.6.3"\n  torch: "2.13.0"\n  archs: ["10.0"]', "needs CUDA 12.8"),
        ("cuda", "  env:\n    TORCH_CUDA_ARCH_LIST: '9.0'", "move them there"),
        ("rocm", "  archs: [gfx9000]", "not an AMD GPU target"),
        ("rocm", "  archs: [sm_90]", "not an AMD GPU target"),
        ("cpu", "  deepspeed_ops: [cpu_adam]\n  deepspeed: null", "no DeepSpeed in the image"),
    ],
)
def test_bad_ops_and_archs_are_refused_naming_the_field(
    accelerator: str, extra: str, says: str
) -> None:
    text = spec(accelerator, extra)
    if "torch:" in extra:  # the case sets its own torch
        text = text.replace('  torch: "2.15.0"\n', "", 1).replace('  torch: "2.13.0"\n', "", 1)
    if "deepspeed: null" in extra:
        text = text.replace('  deepspeed: "0.19.8"\n', "", 1).replace("\n  deepspeed: null", "")
    assert says in refused(text)


def test_targets_with_features_and_an_empty_list_without_gpu_ops_are_fine() -> None:
    parse_spec(spec("rocm", "  archs: ['gfx90a:xnack-', 'gfx942:sramecc+:xnack-']"), "s.yaml")
    parse_spec(spec("cuda", "  deepspeed_ops: [cpu_adam]\n  archs: []"), "s.yaml")


def test_the_payloads_tables_match_the_library() -> None:
    """The payload scripts run alone in the image (no builder there): their copies of the
    library's tables are held to them here."""
    collect = runpy.run_path(str(payload_path("collect.py")))
    variables = {p.name: p.arch_variable for p in every() if p.arch_variable}
    assert collect["ARCH_VARIABLES"] == variables
    check = runpy.run_path(str(payload_path("ds_ops_check.py")))
    assert check["ARCHS_FILE"] == collect["ARCHS_FILE"]
    assert {name for name, op in OPS.items() if not op.device} <= HOST_OPS


def test_a_cuda_toolkit_deepspeed_cannot_compile_with_is_refused() -> None:
    # torch 2.15 has cu130 and cu132 wheels; a 13.1 toolkit gets cu130's, and DeepSpeed's
    # op builder accepts no minor difference for CUDA 13
    text = spec("cuda", '  cuda: "13.1.2"')
    said = refused(text)
    assert "image.cuda" in said
    assert "CUDAMismatchException" in said
    assert "13.0" in said
    parse_spec(spec("cuda", '  cuda: "13.0.3"'), "stack.yaml")  # cu130 on 13.0: fine
    parse_spec(spec("cuda", '  cuda: "13.1.2"', deepspeed=False), "stack.yaml")  # no ops


def test_the_op_table_is_deepspeeds() -> None:
    """Every op's variable and every op name against DeepSpeed 0.19.8's own builders."""
    if util.find_spec("deepspeed") is None:
        unavailable("DeepSpeed is not in the venv (make install puts it there)")
    dump = (
        "import json; from deepspeed.ops.op_builder.all_ops import ALL_OPS; "
        "print(json.dumps({n: b.BUILD_VAR for n, b in ALL_OPS.items()}))"
    )
    variables: dict[str, str] = {}
    for accelerator in ("cpu", "cuda"):  # the ops DeepSpeed lists for each accelerator
        done = subprocess.run(
            [sys.executable, "-c", dump],
            env={**os.environ, "DS_ACCELERATOR": accelerator},
            capture_output=True,
            text=True,
            check=True,
        )
        variables |= json.loads(done.stdout.strip().splitlines()[-1])
    for name, op in OPS.items():
        assert variables.get(name) == op.build_var, name
    assert set(NOT_BUILT) <= set(variables), "an op DeepSpeed 0.19.8 lacks"
    for platform in every():
        assert set(platform.deepspeed_ops) <= set(OPS), platform.name
        assert set(platform.default_deepspeed_ops) <= set(platform.deepspeed_ops)


def test_the_probe_uses_the_ops_the_rehearsal_expects() -> None:
    probe = runpy.run_path(str(payload_path("probe.py")))
    assert set(probe["OPTIMIZERS"]) == set(PROBED_OPS)


def test_the_dockerfile_builds_and_checks_the_ops(tmp_path: Path) -> None:
    stack = load_preset("cuda-deepspeed")
    files = {f.path: f for f in render_outputs(resolve(stack), "docker")}
    text = files["Dockerfile"].text
    line = next(x for x in text.splitlines() if "--no-build-isolation deepspeed" in x)
    words = shlex.split(line.removeprefix(" && ").removesuffix(" \\"))
    assert "TORCH_CUDA_ARCH_LIST=8.0;9.0;10.0" in words  # one word: the ';' is quoted
    assert {"DS_ACCELERATOR=cuda", "DS_BUILD_FUSED_ADAM=1", "DS_BUILD_CPU_ADAM=1"} <= set(words)
    assert "ds-ops-check.py cpu_adam,fused_adam cuda" in text
    assert re.search(r'TORCH_CUDA_ARCH_LIST="8\.0;9\.0;10\.0"', text)  # the final image's ENV
    assert "io.github.builder.archs" in text
    assert files["ds-ops-check.py"].text == payload_path("ds_ops_check.py").read_text()


def _fake_deepspeed(root: Path, installed: str, accelerator: str) -> None:
    package = root / "deepspeed"
    (package / "ops" / "adam").mkdir(parents=True)
    (package / "__init__.py").write_text("raise SystemExit('deepspeed itself was imported')\n")
    (package / "git_version_info_installed.py").write_text(
        f"installed_ops = {installed}\naccelerator_name = {accelerator!r}\n"
    )


@pytest.mark.parametrize(
    ("installed", "accelerator", "code", "says"),
    [
        ("{'cpu_adam': 1, 'fused_adam': 1}", "cuda", 0, "compiled for cuda: cpu_adam,"),
        ("{'cpu_adam': 1, 'fused_adam': False}", "cuda", 1, "did not compile fused_adam"),
        ("{'cpu_adam': 1, 'fused_adam': 1}", "cpu", 1, "for accelerator 'cpu', not 'cuda'"),
    ],
)
def test_the_build_check_fails_on_a_skipped_op(
    tmp_path: Path, installed: str, accelerator: str, code: int, says: str
) -> None:
    _fake_deepspeed(tmp_path, installed, accelerator)
    done = subprocess.run(
        [sys.executable, str(payload_path("ds_ops_check.py")), "cpu_adam,fused_adam", "cuda"],
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == code, done.stderr
    assert says in done.stdout + done.stderr
    written = tmp_path / "deepspeed" / "builder-archs.txt"
    assert written.exists() is (code == 0)
