"""torch: from-base (a framework base such as NGC's PyTorch image keeps its own torch);
the real build is tests/integration/test_framework_base.py."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from builder.image.recipe import image_recipe
from builder.lint import lint_stack
from builder.platforms import get
from builder.resolved import resolve
from builder.spec.check import check_spec
from builder.spec.loader import Stack, load_preset

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
