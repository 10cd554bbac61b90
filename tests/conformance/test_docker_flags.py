"""Every docker command a plan holds (node starts, the launcher's exec, torchrun's runs and
their stops), for every preset and every fabric its platform takes, is read by the real
docker CLI's own option parser: pointed at an address where no engine answers, the CLI
parses all its options first and only then fails to connect (or, for a --device, to
ask the engine's OS). A flag it does not know,
or a value it cannot parse (`--ulimit memlock=abc`), stops it before that."""

from __future__ import annotations

import subprocess
from dataclasses import replace

import pytest

from builder import platforms
from builder.fabrics import FABRICS
from builder.launch.plan import launch_plan
from builder.resolved import resolve
from builder.spec.loader import load_preset
from builder.spec.presets import preset_names
from tests.conftest import real_tool

NOWHERE = {"DOCKER_HOST": "tcp://127.0.0.1:9", "PATH": "/usr/bin:/bin:/usr/local/bin"}
# past the parser: connecting, or asking the engine's OS to check a --device
PARSED = ("Cannot connect to the Docker daemon at tcp://127.0.0.1:9", "docker: unknown server OS")


def parsed(argv: tuple[str, ...]) -> tuple[bool, str]:
    result = subprocess.run(
        [real_tool("docker"), *argv[1:]],
        env=NOWHERE,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return any(line in result.stderr for line in PARSED), result.stderr


def test_the_parser_refuses_what_it_cannot_read() -> None:
    """The check can fail: a bad value and an unknown flag stop the CLI first."""
    assert not parsed(("docker", "run", "--ulimit", "memlock=abc", "i:1"))[0]
    assert not parsed(("docker", "run", "--infiniband", "i:1"))[0]
    assert parsed(("docker", "run", "--ulimit", "memlock=-1", "i:1"))[0]


def launchers_of(preset: str) -> tuple[str, ...]:
    """torchrun, and deepspeed where the preset's image has it."""
    return ("deepspeed", "torchrun") if load_preset(preset).spec.image.deepspeed else ("torchrun",)


CASES = [
    (preset, fabric, launcher)
    for preset in preset_names()
    for fabric, one in FABRICS.items()
    if platforms.get(load_preset(preset).spec.image.accelerator).collective.runs_over(one)
    for launcher in launchers_of(preset)
]


@pytest.mark.parametrize(("preset", "fabric", "launcher"), CASES)
def test_docker_reads_every_command_of_the_plan(preset: str, fabric: str, launcher: str) -> None:
    spec = load_preset(preset).spec
    spec = replace(spec, image=replace(spec.image, fabric=fabric))
    plan = launch_plan(
        resolve(spec, launcher_name=launcher), image="team/train:1", cluster_dir="/c"
    )
    commands = [s.argv for s in plan.steps] + [s.stop_argv for s in plan.steps if s.stop_argv]
    assert commands
    for argv in commands:
        ok, stderr = parsed(argv)
        assert ok, f"{' '.join(argv[:12])} ...: {stderr}"
