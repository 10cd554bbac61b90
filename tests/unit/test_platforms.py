"""The platforms behind their one protocol, ROCm's included: what each decides for the
image, the containers, Apptainer, Slurm, the run's environment and a rehearsal."""

from __future__ import annotations

from dataclasses import replace

import pytest

from builder import platforms
from builder.cluster.dsenv import dsenv_for
from builder.errors import SpecError
from builder.fingerprint.record import Fingerprint
from builder.launch.actions import ApptainerExec, ContainerStart
from builder.launch.plan import launch_plan
from builder.platforms.cuda import (
    CUDA_DEVEL_TAGS,
    DEFAULT_CUDA,
    TORCH_CUDA_INDEXES,
    torch_cuda_index,
)
from builder.platforms.rocm import torch_rocm_index
from builder.resolved import resolve
from builder.schedulers.slurm.script import sbatch_script
from builder.spec.loader import Stack, load_preset, parse_spec

ROCM = """\
name: r
image:
  accelerator: rocm
  torch: "2.14.1"
"""
TORCHRUN = "launch: {launcher: torchrun}\n"
CUDA = """\
name: c
image:
  accelerator: cuda
"""


def rocm(extra: str = "") -> str:
    return ROCM + extra + TORCHRUN


def problems(text: str) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as info:
        parse_spec(text, "stack.yaml")
    return [(p.path, p.message) for p in info.value.problems]


def test_every_platform_module_is_found_by_its_name() -> None:
    assert platforms.names() == ("cpu", "cuda", "gaudi", "rocm")
    for name in platforms.names():
        assert platforms.get(name).name == name
    with pytest.raises(KeyError):
        platforms.get("tpu")


@pytest.mark.parametrize(
    ("preset", "docker", "apptainer", "gpus"),
    [
        ("cpu-deepspeed", ("--ipc", "host"), (), None),
        ("cuda-deepspeed", ("--gpus", "all", "--ipc", "host"), ("--nv",), "8"),
        ("gaudi-deepspeed", ("--runtime", "habana"), (), None),
        (
            "rocm-deepspeed",
            (
                "--device",
                "/dev/kfd",
                "--device",
                "/dev/dri",
                "--group-add",
                "video",
                "--security-opt",
                "seccomp=unconfined",
                "--ipc",
                "host",
            ),
            ("--rocm",),
            "8",
        ),
    ],
)
def test_each_platform_starts_its_containers_its_way(
    preset: str, docker: tuple[str, ...], apptainer: tuple[str, ...], gpus: str | None
) -> None:
    spec = load_preset(preset).spec
    start = (
        launch_plan(resolve(spec, launcher_name="torchrun"), image="t:1", cluster_dir="/c")
        .steps[0]
        .action
    )
    assert isinstance(start, ContainerStart)
    assert start.flags[: len(docker)] == docker
    assert start.network == "host"
    run = launch_plan(
        resolve(spec, runtime_name="apptainer", launcher_name="torchrun"),
        image="t:1",
        cluster_dir="/c",
    ).steps[0]
    assert isinstance(run.action, ApptainerExec)
    assert run.action.flags == apptainer
    script = sbatch_script(
        resolve(Stack(spec, "s", None), launcher_name="torchrun", scheduler_name="slurm"),
        image="t:1",
        cluster_dir="/c",
    )
    found = [line for line in script.splitlines() if line.startswith("#SBATCH --gpus-per-node")]
    assert found == ([f"#SBATCH --gpus-per-node={gpus}"] if gpus else [])


@pytest.mark.parametrize(
    ("torch", "rocm", "index"),
    [
        ("2.14.1", "7.2", "rocm7.2"),
        ("2.14.1", "7.14.0", "rocm7.14"),
        ("2.9.1", "6.4.1", "rocm6.4"),
        ("2.6.0", "6.2.4", "rocm6.2.4"),
        ("2.6.0", "6.2.2", "rocm6.2.4"),  # the same major.minor: torch's HIP matches hipcc's
        ("2.6.0", "6.1.2", "rocm6.1"),
        ("2.14.1", "6.4.1", None),  # no 6.x wheels of 2.14
        ("2.1.0", "5.6", None),  # not in the table
    ],
)
def test_rocm_index_matches_the_bases_rocm(torch: str, rocm: str, index: str | None) -> None:
    assert torch_rocm_index(torch, rocm) == index


@pytest.mark.parametrize(
    ("torch", "cuda", "index"),
    [
        ("2.15.0", "13.2.1", "cu132"),
        ("2.15.0", "13.1.2", "cu130"),
        ("2.15.0", "13.0.3", "cu130"),
        ("2.15.0", "12.9.1", None),  # 2.15 publishes no CUDA 12 wheels
        ("2.14.1", "12.6.3", "cu126"),  # 2.14 still has the legacy line
        ("2.14.1", "13.2.1", "cu132"),
    ],
)
def test_torch_2_15_resolves_to_the_indexes_pytorch_publishes(
    torch: str, cuda: str, index: str | None
) -> None:
    assert TORCH_CUDA_INDEXES["2.15"] == ("cu130", "cu132")
    assert torch_cuda_index(torch, cuda) == index


def test_torch_2_15_on_a_cuda_12_base_is_refused() -> None:
    found = problems(CUDA + '  cuda: "12.9.1"\n  torch: "2.15.0"\n' + TORCHRUN)
    assert found == [
        (
            "image.torch",
            "torch 2.15.0 has no wheels for CUDA 12.9.1 (it is built for cu130, cu132): "
            "change image.cuda or image.torch",
        )
    ]


def test_cuda_default_base_is_devel_without_cudnn() -> None:
    """The torch wheels bring their own cuDNN; devel stays for nvcc (DeepSpeed's JIT ops)."""
    cuda = platforms.get("cuda")
    plain = cuda.resolve(parse_spec(CUDA + '  torch: "2.14.1"\n' + TORCHRUN, "s").image)
    assert plain.base == f"nvidia/cuda:{DEFAULT_CUDA}-devel-ubuntu24.04"
    assert plain.torch_index == "https://download.pytorch.org/whl/cu132"
    for preset in ("cuda-deepspeed", "cuda-torchrun"):
        resolved = cuda.resolve(load_preset(preset).spec.image)
        assert resolved.base == "nvidia/cuda:13.2.1-devel-ubuntu24.04"
        assert "cudnn" not in resolved.base
        assert resolved.torch == "2.15.0"
        assert resolved.python == "3.12"
        assert resolved.torch_index == "https://download.pytorch.org/whl/cu132"
    assert DEFAULT_CUDA in CUDA_DEVEL_TAGS


def test_a_cuda_release_without_a_devel_image_is_refused() -> None:
    found = problems(CUDA + '  cuda: "12.5.1"\n  torch: "2.14.1"\n' + TORCHRUN)
    assert found[0] == (
        "image.cuda",
        f"nvidia/cuda has no 12.5.1-devel image (any more); use one of "
        f"{', '.join(CUDA_DEVEL_TAGS)} or set image.base",
    )
    found = problems(CUDA + '  cuda: "12.4.1"\n  os: ubuntu24.04\n  torch: "2.5.1"\n' + TORCHRUN)
    assert ("image.os", "nvidia/cuda 12.4.1-devel exists for ubuntu22.04") in found


def test_rocm_spec_defaults_and_its_torch() -> None:
    spec = parse_spec(rocm(), "s")
    resolved = platforms.get("rocm").resolve(spec.image)
    assert resolved.base == "rocm/dev-ubuntu-22.04:7.2"
    assert resolved.python == "3.10"
    assert resolved.torch_index == "https://download.pytorch.org/whl/rocm7.2"
    mirror = "  torch_index: https://mirror.example/rocm\n"
    on_24 = parse_spec(rocm('  os: ubuntu24.04\n  rocm: "6.4.1"\n' + mirror), "s")
    assert platforms.get("rocm").resolve(on_24.image).base == "rocm/dev-ubuntu-24.04:6.4.1"


@pytest.mark.parametrize(
    ("extra", "path", "message"),
    [
        ('  rocm: "5.7"\n', "image.rocm", "knows no rocm/dev image for ROCm 5.7"),
        ('  rocm: "6.3.4"\n  os: ubuntu24.04\n', "image.os", "6.3.4 exists for ubuntu22.04"),
        ('  rocm: "6.4.1"\n', "image.torch", "no wheels for ROCm 6.4.1"),
        ('  cuda: "12.6.3"\n', "image.cuda", "cuda is only for accelerator: cuda (this is rocm)"),
        (
            "  base: nvidia/cuda:12.6.3-devel-ubuntu22.04\n",
            "image.base",
            "is a cuda image but accelerator is rocm",
        ),
    ],
)
def test_what_cannot_work_on_rocm(extra: str, path: str, message: str) -> None:
    found = problems(rocm(extra))
    assert any(p == path and message in m for p, m in found), found


def test_a_rocm_key_on_another_platform_names_its_owner() -> None:
    cpu = 'name: c\nimage:\n  accelerator: cpu\n  torch: "2.13.0"\n'
    found = problems(cpu + '  rocm: "7.2"\n' + TORCHRUN)
    assert found == [("image.rocm", "rocm is only for accelerator: rocm (this is cpu)")]
    found = problems(cpu + "  base: rocm/dev-ubuntu-22.04:7.2\n" + TORCHRUN)
    assert found == [
        (
            "image.base",
            "'rocm/dev-ubuntu-22.04:7.2' is a rocm image but accelerator is cpu; use a cpu "
            "base or leave base unset",
        )
    ]


def test_rccl_advice_reaches_every_rank_and_the_user_has_the_last_word() -> None:
    spec = load_preset("rocm-deepspeed").spec
    assert "HSA_FORCE_FINE_GRAIN_PCIE=1\n" in dsenv_for(resolve(spec), {}, None)
    start = launch_plan(resolve(spec), image="t:1", cluster_dir="/c").steps[0].action
    assert isinstance(start, ContainerStart)
    assert ("HSA_FORCE_FINE_GRAIN_PCIE", "1") in start.env
    mine = replace(spec, launch=replace(spec.launch, env={"HSA_FORCE_FINE_GRAIN_PCIE": "0"}))
    assert "HSA_FORCE_FINE_GRAIN_PCIE=0\n" in dsenv_for(resolve(mine), {}, None)
    # nothing is added for the platforms whose vendors advise nothing at run time
    cuda = load_preset("cuda-deepspeed").spec
    assert "HSA_" not in dsenv_for(resolve(cuda), {}, None)


@pytest.mark.parametrize(
    ("torch", "packages", "shown"),
    [
        ({"version": "2.14.1+rocm7.2", "cuda": None, "hip": "7.2.1"}, {}, "ROCm 7.2.1"),
        ({"version": "2.14.1+cu126", "cuda": "12.6", "hip": None}, {}, "CUDA 12.6"),
        ({"version": "2.9.0", "cuda": None, "hip": None}, {"habana-torch-plugin": "1"}, "HPU"),
        ({"version": "2.13.0+cpu", "cuda": None, "hip": None}, {}, "CPU"),
    ],
)
def test_a_fingerprint_names_the_torch_build(
    torch: dict[str, object], packages: dict[str, str], shown: str
) -> None:
    data = {
        "os": {},
        "python": "3.10",
        "packages": packages,
        "apt": {},
        "torch": torch,
        "tools": {},
        "env": {},
    }
    assert f"({shown})" in Fingerprint("x", data).summary()
