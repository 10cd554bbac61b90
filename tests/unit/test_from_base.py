"""torch: from-base (a framework base such as NGC's PyTorch image keeps its own torch);
the real build is tests/integration/test_framework_base.py."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from builder.fabrics import RDMA_PACKAGES
from builder.image.recipe import image_recipe
from builder.image.steps import apt_packages
from builder.lint import lint_stack
from builder.platforms import get
from builder.resolved import resolve
from builder.spec.check import check_spec
from builder.spec.loader import Stack, load_preset
from builder.templating import continued
from tests.conftest import real_tool

if TYPE_CHECKING:
    from pathlib import Path

NGC = "nvcr.io/nvidia/pytorch:25.10-py3"


def stack(preset: str = "cuda-deepspeed", **image: Any) -> Stack:
    spec = load_preset(preset).spec
    return Stack(replace(spec, image=replace(spec.image, **image)), "test", None, None)


def test_a_framework_base_keeps_its_torch_and_pins_it() -> None:
    framework = stack(base=NGC, torch="from-base", os=None, python=None)
    assert check_spec(framework.spec) == []
    resolved = get("cuda").resolve(framework.spec.image)
    assert resolved.torch is None
    assert resolved.torch_index is None
    assert resolved.system_site_packages
    recipe = image_recipe(resolve(framework))
    assert recipe.base == NGC
    commands = [c for step in recipe.python for c in step.commands]
    assert not any("--index-url" in c or "torch==" in c.split("-c")[0] for c in commands)
    assert commands[0] == "python3 -m venv --system-site-packages /opt/venv"
    assert "base-torch.txt" in commands[1]
    # every install after the venv is held to the base's torch
    installs = [c for c in commands[2:] if "pip install" in c]
    assert installs
    assert all("-c /opt/venv/base-torch.txt" in c for c in installs)
    assert recipe.layers == ("/opt/venv",)  # no torch layer of builder's own
    assert lint_stack(resolve(framework)).failing() == ()


@pytest.mark.parametrize(
    ("image", "field", "says"),
    [
        ({"torch": "from-base"}, "image.torch", "set image.base"),
        (
            {"torch": "from-base", "base": NGC, "torch_index": "https://x/whl"},
            "image.torch_index",
            "from the base",
        ),
    ],
)
def test_from_base_needs_a_base_and_no_index(image: dict[str, Any], field: str, says: str) -> None:
    problems = dict(check_spec(stack(**image).spec))
    assert says in problems[field]


def test_a_version_still_installs_from_the_wheel_index() -> None:
    resolved = get("cuda").resolve(stack().spec.image)
    assert resolved.torch is not None
    assert not resolved.system_site_packages


# -- what a framework base carries: looked for by the build, never installed twice -------
#
# NGC's PyTorch images carry rdma-core, HPC-X's OpenMPI and (up to 26.03) libfabric with
# aws-ofi-nccl. Which of them a base has is only known inside the build, so the fabric's
# userspace and OpenMPI each get a step that looks first. The steps run here for real
# under sh, with ldconfig, mpirun and apt-get stood in for on a PATH of their own.

FRAMEWORK = {"base": NGC, "torch": "from-base", "os": None, "python": None}


def framework(
    fabric: str = "none", *, openmpi: bool = False, preset: str = "cuda-deepspeed"
) -> Stack:
    return stack(preset, fabric=fabric, openmpi=openmpi, **FRAMEWORK)


def guarded(built: Stack, starts: str) -> str:
    recipe = image_recipe(resolve(built))
    (step,) = [s for s in recipe.system if s.comment.startswith(starts)]
    assert step.comment.endswith("unless the base has it")
    (command,) = step.commands  # one command: its `;` would not hold in a `&&` chain
    return command


def run_guarded(
    command: str, tmp_path: Path, *, libraries: tuple[str, ...] = (), tools: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """command under sh -eu (as the .def's %post runs it) on a PATH holding only grep, rm,
    an ldconfig that lists libraries, the tools given and an apt-get that logs its calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    for real in ("grep", "rm", "sed", "sort"):
        (bin_dir / real).symlink_to(shutil.which(real) or real)
    listing = "".join(
        f"\\t{name} (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/{name}\\n" for name in libraries
    )
    scripts = {
        "ldconfig": f"#!/bin/sh\nprintf '{listing}'\n",
        "apt-get": f'#!/bin/sh\necho "$*" >> {tmp_path}/apt.log\n',
        **dict.fromkeys(tools, "#!/bin/sh\nexit 0\n"),
    }
    for name, text in scripts.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return subprocess.run(
        ["/bin/sh", "-euc", continued(command, 8)],  # as both formats write it
        env={"PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        check=False,
    )


def apt_log(tmp_path: Path) -> str:
    log = tmp_path / "apt.log"
    return log.read_text() if log.exists() else ""


@pytest.mark.parametrize("fabric", ["infiniband", "roce"])
def test_rdma_on_a_framework_base_is_looked_for_not_installed_over_it(fabric: str) -> None:
    built = framework(fabric)
    assert not set(RDMA_PACKAGES) & set(apt_packages(resolve(built)))
    command = guarded(built, "the verbs libraries (rdma-core)")
    assert "ldconfig -p | grep 'libibverbs\\.so\\.1 ' >/dev/null" in command
    # the platform's own base is known to have none: installed with the OS packages
    plain = stack(fabric=fabric)
    assert set(RDMA_PACKAGES) <= set(apt_packages(resolve(plain)))
    assert not [s for s in image_recipe(resolve(plain)).system if "unless" in s.comment]


def test_the_verbs_step_keeps_the_bases_installs_into_a_bare_one_and_stops_at_half(
    tmp_path: Path,
) -> None:
    command = guarded(framework("infiniband"), "the verbs libraries")
    both = run_guarded(command, tmp_path / "both", libraries=("libibverbs.so.1", "librdmacm.so.1"))
    assert both.returncode == 0, both.stderr
    assert "the base has libibverbs.so.1 librdmacm.so.1; none installed" in both.stdout
    assert apt_log(tmp_path / "both") == ""
    bare = run_guarded(command, tmp_path / "bare")
    assert bare.returncode == 0, bare.stderr
    assert "install -y --no-install-recommends" in apt_log(tmp_path / "bare")
    assert all(package in apt_log(tmp_path / "bare") for package in RDMA_PACKAGES)
    half = run_guarded(command, tmp_path / "half", libraries=("libibverbs.so.1",))
    assert half.returncode == 1
    assert "the base has libibverbs.so.1 but not librdmacm.so.1" in half.stderr
    assert apt_log(tmp_path / "half") == ""


def test_openmpi_on_a_framework_base_uses_its_mpi(tmp_path: Path) -> None:
    """NGC's images carry HPC-X's OpenMPI (HPC-X 2.26 in 26.03): mpi4py is built with its
    mpicc, and the distribution's OpenMPI is not put beside it."""
    built = framework(openmpi=True)
    packages = apt_packages(resolve(built))
    assert "openmpi-bin" not in packages
    assert "libopenmpi-dev" not in packages
    assert {"g++", "python3-dev"} <= set(packages)  # mpi4py still compiles
    command = guarded(built, "an MPI")
    has = run_guarded(command, tmp_path / "has", tools=("mpirun", "mpicc"))
    assert has.returncode == 0, has.stderr
    assert "the base has mpirun mpicc; none installed" in has.stdout
    assert apt_log(tmp_path / "has") == ""
    bare = run_guarded(command, tmp_path / "bare")
    assert bare.returncode == 0, bare.stderr
    assert "openmpi-bin" in apt_log(tmp_path / "bare")
    half = run_guarded(command, tmp_path / "half", tools=("mpirun",))
    assert half.returncode == 1
    assert "the base has mpirun but not mpicc" in half.stderr
    # the platform's own base: the distribution's OpenMPI with the OS packages
    assert "openmpi-bin" in apt_packages(resolve(stack(openmpi=True)))


def test_efa_on_a_framework_base_keeps_its_libfabric_and_plugin(tmp_path: Path) -> None:
    """NGC 26.03 lists AWS OFI NCCL 1.17.0 and rdma-core 56.0; AWS's installer over them
    would put a second libfabric and rdma-core in the image."""
    built = framework("efa")
    command = guarded(built, "the EFA userspace")
    assert "efa_installer.sh" in command  # only where the base has none of it
    # all there: the base's plugin made loadable under the name NCCL_NET_PLUGIN=ofi opens
    kept = command.split("\nelif ", 1)[0]
    assert 'ln -sf "$plugin" /opt/builder/ofi-nccl/libnccl-net-ofi.so' in kept
    assert "efa_installer.sh" not in kept
    assert "/opt/hpcx" not in command  # HPC-X's SHARP plugin is a libnccl-net.so too
    # libfabric and rdma-core without the plugin (later NGC images): stopped, not layered
    half = run_guarded(command, tmp_path, libraries=("libfabric.so.1", "libibverbs.so.1"))
    assert half.returncode == 1
    assert "the base has libfabric.so.1 libibverbs.so.1 but not aws-ofi-nccl" in half.stderr
    assert "efa" not in apt_log(tmp_path)
    env = resolve(built).run_environment()
    assert env["NCCL_NET"] == "AWS Libfabric"
    assert env["NCCL_NET_PLUGIN"] == "ofi"
    # the platform's own base: AWS's installer as before, in the fabric's step
    recipe = image_recipe(resolve(stack(fabric="efa")))
    (step,) = [s for s in recipe.system if s.comment.startswith("the fabric (efa)")]
    assert any("efa_installer.sh" in c for c in step.commands)


@pytest.mark.parametrize(
    ("fabric", "openmpi"), [("infiniband", True), ("roce", False), ("efa", True)]
)
@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_every_looking_step_passes_shellcheck(fabric: str, openmpi: bool, shell: str) -> None:
    shellcheck = real_tool("shellcheck")
    recipe = image_recipe(resolve(framework(fabric, openmpi=openmpi)))
    for step in recipe.system:
        if "unless the base has it" not in step.comment:
            continue
        script = f"#!/bin/{shell}\n{continued(step.commands[0], 8)}\n"
        subprocess.run(
            [shellcheck, f"--shell={shell}", "--severity=style", "-"],
            input=script,
            text=True,
            check=True,
        )


@pytest.mark.parametrize(("fabric", "openmpi"), [("infiniband", True), ("efa", False)])
def test_a_framework_base_with_a_fabric_renders_and_passes_lint(fabric: str, openmpi: bool) -> None:
    report = lint_stack(resolve(framework(fabric, openmpi=openmpi)))
    assert report.failing() == (), report.text()


def test_which_bases_are_looked_into() -> None:
    """A framework base is one whose torch is kept: NGC's (from-base) and Habana's. The
    platforms' own bases (nvidia/cuda devel, rocm/dev, Debian) carry no rdma-core, MPI or
    libfabric: what a fabric needs is installed there with the OS packages."""
    assert resolve(framework()).image.framework_base
    assert resolve(load_preset("gaudi-deepspeed")).image.framework_base
    assert not resolve(stack()).image.framework_base
    # Habana's images bring their own OpenMPI: nothing to look for, nothing installed
    gaudi = stack("gaudi-deepspeed", openmpi=True)
    recipe = image_recipe(resolve(gaudi))
    assert not [s for s in recipe.system if s.comment.startswith("an MPI")]
    assert "openmpi-bin" not in apt_packages(resolve(gaudi))
