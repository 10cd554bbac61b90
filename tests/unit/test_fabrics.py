"""image.fabric and launch.socket_ifname: what each puts in the image, the containers'
flags and the ranks' environment, per platform (docker's own parser reads the flags in
tests/conformance/test_docker_flags.py; a built image in tests/integration/test_fabric.py)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.cluster.dsenv import dsenv_for
from builder.collectives import hccl
from builder.fabrics import FABRICS, RDMA_PACKAGES
from builder.image.recipe import _hashed_image, image_recipe
from builder.image.steps import apt_packages
from builder.launch.plan import launch_plan, network_warnings
from builder.lint import lint_stack
from builder.platforms import get
from builder.resolved import resolve
from builder.schedulers.slurm.script import sbatch_script
from builder.spec.check import check_spec
from builder.spec.loader import Stack, load_preset

if TYPE_CHECKING:
    from builder.spec.records import Spec

PRESETS = {
    "cpu": "cpu-deepspeed",
    "cuda": "cuda-deepspeed",
    "gaudi": "gaudi-deepspeed",
    "rocm": "rocm-deepspeed",
}


DL1 = "1.21.0"
"""The last SynapseAI release that runs DL1's first-gen Gaudi, the only Gaudi with EFA."""


def with_fabric(accelerator: str, fabric: str, **launch: Any) -> Spec:
    spec = load_preset(PRESETS[accelerator]).spec
    image = replace(spec.image, fabric=fabric)
    if accelerator == "gaudi" and fabric == "efa":
        image = replace(image, versions={**image.versions, "synapse": DL1}, deepspeed=DL1)
    return replace(spec, image=image, launch=replace(spec.launch, **launch))


def start_argv(spec: Spec) -> list[str]:
    return list(launch_plan(resolve(spec), image="i:1", cluster_dir="/c").of_role("start")[0].argv)


SUPPORTED = [
    (a, f) for f, one in FABRICS.items() for a in PRESETS if get(a).collective.runs_over(one)
]


@pytest.mark.parametrize(("accelerator", "fabric"), SUPPORTED)
def test_every_supported_pair_is_a_valid_spec(accelerator: str, fabric: str) -> None:
    assert check_spec(with_fabric(accelerator, fabric)) == []


@pytest.mark.parametrize(
    ("accelerator", "fabric"),
    [(a, f) for f in FABRICS for a in PRESETS if (a, f) not in SUPPORTED],
)
def test_a_fabric_on_a_platform_it_does_not_serve_is_refused(accelerator: str, fabric: str) -> None:
    (problem,) = check_spec(with_fabric(accelerator, fabric))
    assert problem[0] == "image.fabric"
    assert f"not for {accelerator} images" in problem[1]


@pytest.mark.parametrize("fabric", ["infiniband", "roce"])
@pytest.mark.parametrize("accelerator", ["cpu", "cuda", "rocm"])
def test_rdma_fabrics_bring_the_verbs_userspace_devices_and_locked_memory(
    accelerator: str, fabric: str
) -> None:
    spec = with_fabric(accelerator, fabric)
    assert set(RDMA_PACKAGES) <= set(apt_packages(resolve(spec)))
    joined = " ".join(start_argv(spec))
    assert "--device /dev/infiniband --cap-add IPC_LOCK --ulimit memlock=-1" in joined
    env = resolve(spec).run_environment()
    # NCCL (RCCL) must use the verbs transport or fail: never fall back to sockets quietly
    assert env.get("NCCL_NET") == ("IB" if accelerator != "cpu" else None)
    assert "NCCL_NET=IB" in dsenv_for(resolve(spec), {}, None) or accelerator == "cpu"


def test_efa_on_cuda_installs_aws_pieces_and_no_distribution_verbs() -> None:
    spec = with_fabric("cuda", "efa")
    packages = apt_packages(resolve(spec))
    assert "curl" in packages
    assert not set(RDMA_PACKAGES) & set(packages)  # the installer brings its own rdma-core
    recipe = image_recipe(resolve(Stack(spec, "test", None, None)))
    (step,) = [s for s in recipe.system if "efa" in s.comment]
    text = "\n".join(step.commands)
    assert "efa_installer.sh -y --skip-kmod --skip-limit-conf --no-verify" in text
    assert "aws-efa-installer-1.51.0.tar.gz" in text
    assert "libnccl-net-ofi.so" in text  # the build fails when the plugin is not there
    assert resolve(spec).run_environment()["NCCL_NET"] == "AWS Libfabric"
    assert resolve(spec).run_environment()["NCCL_NET_PLUGIN"] == "ofi"
    assert "--device /dev/infiniband --cap-add IPC_LOCK" in " ".join(start_argv(spec))


def test_efa_on_gaudi_builds_habanas_wrapper_and_runs_privileged() -> None:
    spec = with_fabric("gaudi", "efa", socket_ifname="ens32")
    assert check_spec(spec) == []
    recipe = image_recipe(resolve(Stack(spec, "test", None, None)))
    (step,) = [s for s in recipe.system if "efa" in s.comment]
    (command,) = step.commands
    # Habana's images ship the wrapper against their own libfabric: kept; else built
    assert command.startswith("if [ -e /usr/lib/habanalabs/libhccl_ofi_wrapper.so ]; then")
    assert (
        'make -C /tmp/hccl_ofi_wrapper LIBFABRIC_ROOT="${LIBFABRIC_ROOT:-/opt/amazon/efa}"'
        in command
    )
    # the wrapper's latest commit (its plugin version 1.2), not its second one of 2021
    assert f"git -C /tmp/hccl_ofi_wrapper checkout {hccl.WRAPPER}" in command
    assert hccl.WRAPPER.startswith("bea1d6f")
    # under the .def's `set -e` a failing `&&` list inside `if` would not stop the build
    assert command.endswith(" || exit 1; fi")
    env = resolve(spec).run_environment()
    assert env["HCCL_OVER_OFI"] == "1"
    assert env["HCCL_SOCKET_IFNAME"] == "ens32"
    assert "--privileged" in start_argv(spec)


@pytest.mark.parametrize("synapse", ["1.22.0", "1.23.0"])
def test_efa_on_gaudi_is_refused_where_synapseai_has_no_first_gen_gaudi(synapse: str) -> None:
    """DL1 is AWS's only Gaudi machine, with first-gen Gaudi; Habana's Support Matrix
    lists it up to 1.21.0 and Gaudi 2 and Gaudi 3 only from 1.22.0 on."""
    spec = load_preset("gaudi-deepspeed").spec
    image = replace(spec.image, fabric="efa", versions={"synapse": synapse}, deepspeed=synapse)
    problems = dict(check_spec(replace(spec, image=image)))
    assert "DL1" in problems["image.fabric"]
    assert "first-gen Gaudi" in problems["image.fabric"]
    assert "roce" in problems["image.fabric"]
    assert set(problems) == {"image.fabric"}


@pytest.mark.parametrize("fabric", ["roce", "infiniband"])
def test_host_nics_on_gaudi_build_libfabric_with_verbs_and_the_wrapper_against_it(
    fabric: str,
) -> None:
    """Habana's host-NIC scale-out (Gaudi 2 and Gaudi 3): libfabric >= 1.20 with verbs,
    configured --with-synapseai for Gaudi Direct, and hccl_ofi_wrapper built against it."""
    spec = with_fabric("gaudi", fabric, socket_ifname="ens1f0np0")
    assert check_spec(spec) == []
    stack = resolve(Stack(spec, "test", None, None))
    recipe = image_recipe(stack)
    (step,) = [s for s in recipe.system if s.comment.startswith(f"the fabric ({fabric})")]
    text = "\n".join(step.commands)
    assert f"libfabric-{hccl.LIBFABRIC}.tar.bz2" in text
    assert tuple(int(x) for x in hccl.LIBFABRIC.split(".")) >= (1, 20, 0)
    assert (
        "./configure --prefix=/opt/builder/libfabric --enable-verbs --with-synapseai=/usr" in text
    )
    assert (
        "make -C /tmp/hccl_ofi_wrapper LIBFABRIC_ROOT=/opt/builder/libfabric "
        'CC="g++ -Wl,--disable-new-dtags,-rpath,/opt/builder/libfabric/lib"' in text
    )
    assert "cp /tmp/hccl_ofi_wrapper/libhccl_ofi_wrapper.so /usr/lib/habanalabs/" in text
    # the verbs userspace: Habana's base carries AWS's rdma-core, so the build looks first
    (verbs,) = [s for s in recipe.system if s.comment.startswith("the verbs libraries")]
    assert "/usr/include/infiniband/verbs.h" in verbs.commands[0]
    assert not set(RDMA_PACKAGES) & set(apt_packages(stack))
    env = stack.run_environment()
    assert {k: env[k] for k in ("FI_PROVIDER", "MLX5_SCATTER_TO_CQE", "RDMAV_FORK_SAFE")} == {
        "FI_PROVIDER": "verbs",
        "MLX5_SCATTER_TO_CQE": "0",
        "RDMAV_FORK_SAFE": "1",
    }
    # forcing host memory would turn Gaudi Direct off; and no NCCL variable on Gaudi
    assert "HCCL_OVER_OFI" not in env
    assert "NCCL_NET" not in env
    assert env["HCCL_SOCKET_IFNAME"] == "ens1f0np0"
    joined = " ".join(start_argv(spec))
    assert "--device /dev/infiniband --cap-add IPC_LOCK --ulimit memlock=-1" in joined
    assert "--privileged" not in joined
    # DeepSpeed forwards no FI_/MLX5_/RDMAV_ variable itself: .deepspeed_env carries them
    dsenv = dsenv_for(stack, {}, None)
    assert "FI_PROVIDER=verbs" in dsenv
    assert "MLX5_SCATTER_TO_CQE=0" in dsenv


def test_no_fabric_changes_nothing_and_keeps_the_spec_hash() -> None:
    spec = load_preset("cuda-deepspeed").spec
    assert spec.image.fabric == "none"
    assert "fabric" not in _hashed_image(Stack(spec, "t", None, None))
    assert "NCCL_NET" not in resolve(spec).run_environment()
    assert "/dev/infiniband" not in start_argv(spec)
    chosen = Stack(with_fabric("cuda", "roce"), "t", None, None)
    assert _hashed_image(chosen)["fabric"] == "roce"


def test_apptainer_needs_no_flag_and_the_batch_script_checks_locked_memory() -> None:
    spec = with_fabric("cuda", "infiniband", socket_ifname="ib0")
    plan = launch_plan(
        resolve(spec, runtime_name="apptainer", launcher_name="torchrun"),
        image="i:1",
        cluster_dir="/c",
    )
    assert "/dev/infiniband" not in " ".join(plan.steps[0].argv)  # apptainer binds /dev
    script = sbatch_script(
        resolve(Stack(spec, "t", None), launcher_name="torchrun", scheduler_name="slurm"),
        image="i:1",
        cluster_dir="/c",
    )
    assert "ulimit -l" in script
    plain = sbatch_script(
        resolve(
            Stack(load_preset("cuda-deepspeed").spec, "t", None),
            launcher_name="torchrun",
            scheduler_name="slurm",
        ),
        image="i:1",
        cluster_dir="/c",
    )
    assert "ulimit -l" not in plain


@pytest.mark.parametrize(
    ("accelerator", "names"),
    [
        ("cpu", {"GLOO_SOCKET_IFNAME"}),
        ("cuda", {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"}),
        ("rocm", {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"}),
        ("gaudi", {"HCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"}),
    ],
)
def test_socket_ifname_names_the_interface_of_every_collective_library(
    accelerator: str, names: set[str]
) -> None:
    spec = with_fabric(accelerator, "none", socket_ifname="bond0", env={})
    env = resolve(spec).run_environment()
    assert {k for k, v in env.items() if v == "bond0"} == names
    assert network_warnings(resolve(spec)) == []
    # launch.env still has the last word
    override = with_fabric(
        accelerator, "none", socket_ifname="bond0", env={"GLOO_SOCKET_IFNAME": "lo"}
    )
    assert resolve(override).run_environment()["GLOO_SOCKET_IFNAME"] == "lo"


def test_an_unset_interface_is_a_warning_on_several_nodes_only() -> None:
    unset = with_fabric("cuda", "none", socket_ifname=None, env={})
    (warning,) = network_warnings(resolve(unset))
    assert "NCCL_SOCKET_IFNAME" in warning
    assert "launch.socket_ifname" in warning
    assert (
        network_warnings(resolve(replace(unset, launch=replace(unset.launch, nodes=("n1",))))) == []
    )
    result = CliRunner().invoke(app, ["launch", "--preset", "cpu-deepspeed", "--image", "i:1"])
    assert result.exit_code == 0
    assert "warning" not in result.stderr  # the presets name their interface


def test_the_old_launch_flags_say_where_the_fabric_went() -> None:
    result = CliRunner().invoke(
        app, ["launch", "--preset", "cpu-deepspeed", "--image", "i:1", "--infiniband"]
    )
    assert result.exit_code == 2
    assert "image.fabric" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_plan_json_carries_the_fabrics_flags() -> None:
    spec = with_fabric("rocm", "roce", socket_ifname="eth1")
    data = json.loads(
        json.dumps(launch_plan(resolve(spec), image="i:1", cluster_dir="/c").as_data())
    )
    assert "IPC_LOCK" in data["commands"][0]["argv"]


@pytest.mark.parametrize(("accelerator", "fabric"), [p for p in SUPPORTED if p[1] != "none"])
@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_every_install_command_is_shell(accelerator: str, fabric: str, shell: str) -> None:
    """Each command as Docker's RUN (bash) and Apptainer's %post (sh) parse it."""
    recipe = image_recipe(resolve(Stack(with_fabric(accelerator, fabric), "test", None, None)))
    for step in recipe.system:
        for command in step.commands:
            subprocess.run([shell, "-n", "-c", command], check=True)


@pytest.mark.parametrize(("accelerator", "fabric"), [p for p in SUPPORTED if p[1] != "none"])
def test_every_fabrics_image_renders_and_passes_lint(accelerator: str, fabric: str) -> None:
    """hadolint, BuildKit's parser and the .def grammar on what cannot be built here."""
    report = lint_stack(resolve(Stack(with_fabric(accelerator, fabric), "test", None, None)))
    assert report.failing() == (), report.text()
    assert len(report.checked) == 4
