"""What a wrong spec is told: the field, the value given (shortened, never a secret),
what the field takes, and what to write, with "did you mean" wherever a name is looked
up in a fixed set (keys, presets, platforms, fabrics, launchers, runtimes, OSes, ...)."""

from __future__ import annotations

import pytest

from builder.errors import SpecError, UsageError
from builder.fabrics import fabric
from builder.resolved import resolve
from builder.spec.loader import load_preset, parse_spec
from tests.conftest import MINIMAL


def messages(text: str) -> dict[str, str]:
    with pytest.raises(SpecError) as info:
        parse_spec(text, "stack.yaml")
    return {problem.path: problem.message for problem in info.value.problems}


def spec(image: str = "{accelerator: cpu}", launch: str = "{}") -> str:
    return f"name: x\nimage: {image}\nlaunch: {launch}\n"


def test_a_node_list_given_as_a_string_says_how_to_write_the_list() -> None:
    found = messages("name: x\nimage: {accelerator: cpu}\nlaunch:\n  nodes: gpu[01-04]\n")
    assert found == {
        "launch.nodes": (
            "expected a list of host names or Slurm node lists (gpu[01-04]), got the string "
            "'gpu[01-04]'; write it as a list of one item: `nodes: ['gpu[01-04]']`, or e.g. "
            "`nodes: [gpu01, gpu02]`"
        )
    }
    # and the fix it offers is a spec that loads, to the hosts meant
    fixed = parse_spec(f"{MINIMAL}launch:\n  nodes: ['gpu[01-04]']\n", "stack.yaml")
    assert fixed.launch.nodes == ("gpu[01-04]",)


@pytest.mark.parametrize(
    ("text", "path", "expected"),
    [
        (spec(launch="{slots: '8'}"), "launch.slots", "write it without quotes: `slots: 8`"),
        (spec(launch="{slots: many}"), "launch.slots", "got the string 'many'; write e.g."),
        (spec("{accelerator: cpu, pdsh: 'no'}"), "image.pdsh", "write `pdsh: false`"),
        (spec("{accelerator: cpu, ssh: false}"), "image.ssh", "write `ssh: {enabled: false}`"),
        (spec("{accelerator: cpu, apt: curl}"), "image.apt", "`apt: [curl]`"),
        (spec("{accelerator: cpu, tag: }"), "image.tag", "give a value, e.g. `tag: latest`"),
        (spec("{accelerator: cpu, os: [a]}"), "image.os", "write e.g. `os: ubuntu22.04`"),
        (spec(launch="{mounts: /a}"), "launch.mounts", "`mounts: [{source: /shared/data,"),
        (spec(launch="{mounts: [/a]}"), "launch.mounts[0]", "`- {source: /shared/data, target"),
        (spec(launch="{slurm: gpu}"), "launch.slurm", "got the string 'gpu'; write its keys"),
        ("name: x\nimage: cpu\n", "image", "e.g. `image: {accelerator: cuda, name:"),
        ("name: x\nversion: 2\nimage: {accelerator: cpu}\n", "version", "write `version: 1`"),
    ],
)
def test_every_type_mismatch_names_the_value_and_the_fix(
    text: str, path: str, expected: str
) -> None:
    assert expected in messages(text)[path]


def test_an_env_given_as_text_is_never_echoed() -> None:
    found = messages(spec(launch="{env: 'HF_TOKEN=hf_secret'}"))["launch.env"]
    assert "hf_secret" not in found
    assert '`env: {HF_TOKEN: "..."}`' in found
    found = messages(spec(launch="{env: {PIN: 123456}}"))["launch.env.PIN"]
    assert "123456" not in found
    assert 'write the value in quotes: `PIN: "..."`' in found


@pytest.mark.parametrize(
    ("text", "path", "expected"),
    [
        (spec("{acelerator: cpu}"), "image.acelerator", "did you mean 'accelerator'?"),
        (spec(launch="{node: [a]}"), "launch.node", "did you mean 'nodes'?"),
        (spec("{accelerator: cpu, cuda12: '12'}"), "image.cuda12", "did you mean 'cuda'?"),
        (spec("{accelerator: cdua}"), "image.accelerator", "did you mean 'cuda'?"),
        (spec("{accelerator: CUDA}"), "image.accelerator", "did you mean 'cuda'?"),
        (spec("{accelerator: cpu, fabric: infiniband2}"), "image.fabric", "'infiniband'?"),
        (spec(launch="{launcher: torchrn}"), "launch.launcher", "did you mean 'torchrun'?"),
        (spec(launch="{runtime: dokcer}"), "launch.runtime", "did you mean 'docker'?"),
        (spec(launch="{slurm: {runtime: pixys}}"), "launch.slurm.runtime", "'pyxis'?"),
        (spec("{accelerator: cpu, os: ubuntu22.4}"), "image.os", "did you mean 'ubuntu22.04'?"),
        (spec("{accelerator: cpu, platforms: [arm64]}"), "image.platforms", "'linux/arm64'?"),
        (
            spec("{accelerator: gaudi, synapse: '1.21'}"),
            "image.synapse",
            "did you mean '1.21.0'?",
        ),
        (
            spec("{accelerator: cpu, deepspeed: '0.15.4', deepspeed_ops: [cpu_adm]}"),
            "image.deepspeed_ops[0]",
            "did you mean 'cpu_adam'?",
        ),
    ],
)
def test_did_you_mean_for_every_name_from_a_fixed_set(text: str, path: str, expected: str) -> None:
    assert expected in messages(text)[path]


def test_an_unknown_key_with_no_near_name_says_only_to_check_its_spelling() -> None:
    found = messages(spec("{accelerator: cpu, zzzz: 1}"))["image.zzzz"]
    assert found == "unknown key 'zzzz'; check its spelling (see `builder schema`)"


def test_preset_and_lookup_by_name_offer_the_close_match() -> None:
    with pytest.raises(
        UsageError, match=r"no preset named 'cuda-deepsped' \(did you mean 'cuda-deepspeed'\?\)"
    ):
        load_preset("cuda-deepsped")
    with pytest.raises(UsageError, match=r"did you mean 'roce'\?"):
        fabric("rocee")
    stack = load_preset("cpu-deepspeed")
    with pytest.raises(UsageError, match=r"did you mean 'torchrun'\?"):
        resolve(stack, launcher_name="torchrn")
