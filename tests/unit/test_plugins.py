"""A new accelerator with a new collective library is two modules and nothing else: a
throwaway platform (an Intel XPU with oneCCL) in a temporary folder, added to the two
plug-in packages' paths, renders, checks its fabrics, launches and fingerprints."""

from __future__ import annotations

import json
import sys
import textwrap
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

import builder.collectives
import builder.platforms
from builder import platforms
from builder.errors import SpecError
from builder.fingerprint.sources import collector_request, of_image
from builder.image.recipe import image_recipe
from builder.image.render import render_dockerfile
from builder.launch.plan import launch_plan
from builder.resolved import resolve
from builder.spec.loader import spec_from_dict
from tests.fakes import FakeEngine, FakeImage

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

CCL = '''
    """Intel's oneCCL, through its torch bindings (backend ccl)."""
    from builder.collectives.base import Collective
    from builder.fabrics import NONE

    COLLECTIVE = Collective(
        name="ccl",
        title="oneCCL",
        torch_backend="ccl",
        socket_variable="CCL_SOCKET_IFNAME",
        fabrics=(NONE, "infiniband"),
        env_prefixes=("CCL_",),
        python_prefix="oneccl-bind-pt",
    )
'''
XPU = '''
    """Intel GPUs (Max series): a throwaway platform."""
    from builder.collectives import ccl
    from builder.platforms.base import Platform

    class Xpu(Platform):
        name = "xpu"
        collective = ccl.COLLECTIVE
        torch_device = "xpu"
        device_word = "GPU"
        env_prefixes = ("ZE_",)
        docker_flags = ("--device", "/dev/dri", "--ipc", "host")

        def default_base(self, image):
            return "intel/oneapi-basekit:2025.3.0-0-devel-ubuntu24.04"

        def torch_index(self, image):
            return image.torch_index or "https://example.invalid/whl/xpu"

    PLATFORM = Xpu()
'''


def clear_caches() -> None:
    for found in (
        platforms.names,
        platforms.get,
        platforms.version_keys,
        platforms.collectives,
        platforms.env_prefixes,
    ):
        found.cache_clear()


@pytest.fixture
def xpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    (tmp_path / "collectives").mkdir()
    (tmp_path / "platforms").mkdir()
    (tmp_path / "collectives" / "ccl.py").write_text(textwrap.dedent(CCL))
    (tmp_path / "platforms" / "xpu.py").write_text(textwrap.dedent(XPU))
    for package, folder in ((builder.collectives, "collectives"), (builder.platforms, "platforms")):
        monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path / folder)])
    clear_caches()
    yield
    clear_caches()
    for module in ("builder.platforms.xpu", "builder.collectives.ccl"):
        sys.modules.pop(module, None)


def xpu_stack(**image: object) -> object:
    return spec_from_dict(
        {
            "name": "xpu-train",
            "image": {"accelerator": "xpu", "torch": "2.9.0", **image},
            "launch": {"nodes": ["n1", "n2"], "slots": 4, "launcher": "torchrun"},
        }
    )


@pytest.mark.usefixtures("xpu")
def test_a_new_platform_with_a_new_collective_renders_launches_and_fingerprints() -> None:
    stack = xpu_stack(fabric="infiniband")
    dockerfile = render_dockerfile(image_recipe(resolve(stack)))  # type: ignore[arg-type]
    assert "FROM intel/oneapi-basekit:2025.3.0-0-devel-ubuntu24.04 AS " in dockerfile
    assert "libibverbs1" in dockerfile  # the fabric's userspace, for the new library

    spec = stack.spec  # type: ignore[attr-defined]
    spec = replace(spec, launch=replace(spec.launch, socket_ifname="ens5"))
    plan = launch_plan(resolve(spec), image="team/xpu:1", cluster_dir="/c")
    (first, *_) = plan.of_role("run")
    argv = first.argv
    assert "--device" in argv
    assert "/dev/infiniband" in argv  # the fabric's flags, through the library
    assert "CCL_SOCKET_IFNAME=ens5" in argv  # the library's socket variable
    assert "GLOO_SOCKET_IFNAME=ens5" in argv

    request = json.loads(collector_request())
    assert request["libraries"]["ccl"]["python"] == "oneccl-bind-pt"
    assert {"CCL_", "ZE_"} <= set(request["env_prefixes"])
    engine = FakeEngine(
        FakeImage("sha256:x", ("team/xpu:1",), packages={"oneccl-bind-pt": "2.9.0+xpu"})
    )
    found = of_image(engine, "team/xpu:1")
    assert found.data["ccl"] == "2.9.0+xpu"
    assert "ccl        2.9.0+xpu\n" in found.summary()


@pytest.mark.usefixtures("xpu")
def test_a_new_collectives_fabrics_are_checked_and_listed() -> None:
    with pytest.raises(SpecError) as caught:
        xpu_stack(fabric="efa")
    text = str(caught.value)
    assert "efa (AWS Elastic Fabric Adapter) is not for xpu images, only cuda, gaudi" in text
    assert "choose one of none, infiniband" in text


def test_what_a_launcher_needs_in_the_image_is_declared_once() -> None:
    """Its problems, the commands a rehearsal checks and the image's packages come from
    the launcher's needs (builder.image.tools), not from flags mirrored in three places."""
    from builder.image.steps import apt_packages
    from builder.image.tools import INSTALLED
    from builder.launch import launchers
    from builder.resolved import resolve

    spec = spec_from_dict(
        {
            "name": "bare",
            "image": {"accelerator": "cpu", "torch": "2.9.0"},
            "launch": {"launcher": "torchrun"},
        }
    ).spec
    bare = replace(spec.image, pdsh=False, openmpi=False, deepspeed=None)
    needing = [launcher for launcher in launchers.every() if launcher.needs]
    assert {launcher.name for launcher in needing} >= {"deepspeed", "mpirun"}
    for launcher in needing:
        problems = launcher.problems(bare, spec.launch)
        for tool in launcher.needs:
            assert ("launch.launcher", f"{launcher.name} {tool.lacking}") in problems
            assert set(tool.commands) <= set(launcher.tools)
    for tool in INSTALLED:
        changes: dict[str, Any] = {tool.key: True}
        image = replace(bare, **changes)
        packages = apt_packages(resolve(replace(spec, image=image)))
        assert set(tool.packages(platforms.get("cpu"))) <= set(packages)
