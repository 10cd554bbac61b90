"""Every emitted command carries any value once-quoted: random environment values,
paths and script arguments come back unchanged from a real bash given the command
as displayed (shlex.join), for every runtime and launcher; and the Slurm script's
exports give the values back in the batch shell."""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import replace

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from builder.launch.plan import launch_plan, supported
from builder.launch.secrets import is_secret_name
from builder.resolved import resolve
from builder.schedulers.slurm.script import sbatch_script
from builder.spec import Mount
from builder.spec.loader import Stack, load_preset

text = st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=20)
env_values = text.filter(lambda v: "\n" not in v and "\r" not in v)
names = st.from_regex(r"[A-Z][A-Z0-9_]{0,6}", fullmatch=True)
paths = st.from_regex(r"/[a-z ]{1,8}(/[a-zé $']{1,8})?", fullmatch=True)


def shell_argv(argv: tuple[str, ...]) -> list[str]:
    """What a real bash passes on when it runs the displayed command."""
    out = subprocess.run(
        ["bash", "-c", f'printf "%s\\0" {shlex.join(argv)}'], capture_output=True, check=True
    ).stdout
    return out.decode("utf-8", "surrogateescape").split("\0")[:-1]


@settings(max_examples=25, deadline=None)
@given(
    st.dictionaries(names, env_values, max_size=3),
    st.lists(text, max_size=3),
    paths,
)
def test_every_plan_survives_the_shell(env: dict[str, str], args: list[str], data: str) -> None:
    assume(args[:1] != ["--"])  # refused, for the launchers' parsers drop it (test_launchers)
    base = load_preset("cpu-deepspeed").spec
    spec = replace(
        base,
        image=replace(base.image, openmpi=True),
        launch=replace(
            base.launch,
            env=env,
            args=tuple(args),
            script="my train.py",
            mounts=(Mount(data, "/data", read_only=True),),
        ),
    )
    for runtime, launcher in supported():
        if launcher == "gaudi_spawn":
            continue  # Gaudi only, and refuses such values: see test_gaudi_spawn.py
        # a bare node binds nothing: its mount is the folder at its own path
        mounts = (Mount(data, data, read_only=True),) if runtime == "none" else spec.launch.mounts
        run = replace(spec, launch=replace(spec.launch, mounts=mounts))
        plan = launch_plan(
            resolve(run, runtime_name=runtime, launcher_name=launcher),
            image="team/t:1",
            cluster_dir="/c d",
        )
        for step in plan.steps:
            assert shell_argv(step.argv) == list(step.argv), (runtime, launcher)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(names, env_values, min_size=1, max_size=3))
def test_slurm_exports_give_the_values_back(env: dict[str, str]) -> None:
    base = load_preset("cuda-torchrun").spec
    spec = replace(base, launch=replace(base.launch, env=env))
    script = sbatch_script(
        resolve(Stack(spec, "s", None), runtime_name="none", scheduler_name="slurm"),
        image="t:1",
        cluster_dir="/c",
    )
    # bash reads lines at "\n" only (str.splitlines would also split at \x1e and kin)
    exports = "\n".join(line for line in script.split("\n") if line.startswith("export "))
    # secret names (KEY, *TOKEN*) travel in the bundle's 0600 files: tests/unit/test_secrets.py
    public = {name: value for name, value in env.items() if not is_secret_name(name)}
    show = "".join(f'printf "%s\\0" "${name}"; ' for name in public)
    out = subprocess.run(
        ["bash", "-c", f"{exports}\n{show}"], capture_output=True, check=True
    ).stdout.decode("utf-8", "surrogateescape")
    assert dict(zip(public, out.split("\0")[:-1], strict=True)) == public
