"""The layer cache: nothing changed reuses every layer; a requirements change
rebuilds only what comes after the requirements."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest

from builder.engine.build import build_image
from builder.resolved import resolve
from builder.spec.loader import load_preset, load_spec
from builder.spec.presets import preset_text
from tests.integration.images import IMAGE

if TYPE_CHECKING:
    from pathlib import Path

    from builder.engine import Engine
    from builder.engine.build import BuildResult
    from builder.image.inputs import BuildInputs

pytestmark = pytest.mark.integration

CACHEABLE = ("RUN", "COPY")


def cacheable(result: BuildResult) -> list[tuple[str, bool]]:
    return [
        (step.instruction, step.cached)
        for step in result.steps
        if step.instruction.split()[0] in CACHEABLE
    ]


def test_a_rebuild_with_nothing_changed_reuses_every_layer(
    engine: Engine, inputs: BuildInputs, cpu_image: BuildResult
) -> None:
    again = build_image(
        resolve(load_preset("cpu-deepspeed"), inputs), reference=cpu_image.reference, engine=engine
    )
    assert again.image_id == cpu_image.image_id
    steps = cacheable(again)
    assert steps
    assert all(cached for _, cached in steps), [i for i, c in steps if not c]


def test_a_requirements_change_rebuilds_only_what_follows(
    engine: Engine, inputs: BuildInputs, cpu_image: BuildResult, tmp_path: Path
) -> None:
    spec = tmp_path / "stack.yaml"
    spec.write_text(
        preset_text("cpu-deepspeed").replace(
            "  workdir: /workspace\n", "  workdir: /workspace\n  requirements: requirements.txt\n"
        )
    )
    requirements = tmp_path / "requirements.txt"
    # a line of this run's own: an engine that keeps its cache between runs (an earlier
    # run stopped before its cleanup) must not hold these requirements' layers already
    run = f"# run {uuid.uuid4().hex}\n"
    requirements.write_text(run + "six==1.16.0\n")
    tag = "builder-test/cpu-deepspeed:reqs"
    first = build_image(resolve(load_spec(spec), inputs), reference=tag, engine=engine)
    requirements.write_text(run + "six==1.17.0\n")
    second = build_image(resolve(load_spec(spec), inputs), reference=tag, engine=engine)
    try:
        steps = cacheable(second)
        first_rebuilt = next(i for i, (_, cached) in enumerate(steps) if not cached)
        assert steps[first_rebuilt][0] == "COPY requirements.txt /tmp/builder/requirements.txt"
        # everything before the requirements came from the cache, torch and DeepSpeed included
        assert all(cached for _, cached in steps[:first_rebuilt])
        assert any("deepspeed==" in instruction for instruction, _ in steps[:first_rebuilt])
        assert second.image_id != first.image_id
        assert "six-1.17.0" in _venv_listing(engine, tag)
    finally:
        engine.remove_image(tag)


def test_a_no_cache_build_of_another_stack_costs_this_one_nothing(
    engine: Engine, inputs: BuildInputs, cpu_image: BuildResult, tmp_path: Path
) -> None:
    """The classic builder takes the newest matching layer: a --no-cache build of another
    stack from the same base must not become the cache of this one's first steps."""
    from dataclasses import replace

    from builder.engine.build import run_build
    from builder.image.context import DOCKERFILE, docker_context
    from builder.image.inputs import with_base
    from builder.image.recipe import image_recipe
    from builder.output import OutputFile

    stack = with_base(load_preset("cpu-deepspeed"), inputs)
    image = stack.spec.image
    other = replace(stack, spec=replace(stack.spec, image=replace(image, apt=(*image.apt, "less"))))
    files = docker_context(image_recipe(resolve(other, inputs)))
    dockerfile = next(f for f in files if f.path == DOCKERFILE)
    # its system stage up to the first RUN: the very layers its --no-cache build makes first
    head = dockerfile.text.split("\nRUN ", 1)[0] + "\n"
    assert "\nSHELL " in head
    prefix = run_build(
        [OutputFile(DOCKERFILE, 0o644, head)],
        "builder-test/other:head",
        engine=engine,
        nocache=True,
    )
    try:
        again = build_image(
            resolve(load_preset("cpu-deepspeed"), inputs), reference=IMAGE, engine=engine
        )
        assert again.image_id == cpu_image.image_id
        assert again.cached_steps == len(again.cacheable_steps)
    finally:
        engine.remove_image(prefix.reference)


def _venv_listing(engine: Engine, image: str) -> str:
    return engine.run(
        image, ["-c", "ls /opt/venv/lib/python3.11/site-packages"], entrypoint=["/bin/bash"]
    )
