"""Loading specs: every problem reported with field path and YAML line."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import pytest

from builder.errors import Problem, SpecError, UsageError
from builder.model import field_names
from builder.platforms.cuda import torch_cuda_index
from builder.spec import Spec, spec_json_schema
from builder.spec.loader import load_preset, load_spec, load_stack, parse_spec
from builder.spec.presets import preset_names, preset_text
from tests.conftest import MINIMAL

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def problems(text: str) -> list[Problem]:
    with pytest.raises(SpecError) as info:
        parse_spec(text, "stack.yaml")
    return list(info.value.problems)


def test_minimal_spec_fills_defaults() -> None:
    spec = parse_spec(MINIMAL, "stack.yaml")
    assert spec.image.accelerator == "cpu"
    assert spec.image.ssh.port == 3022
    assert spec.launch.launcher == "deepspeed"
    assert spec.launch.nodes == ("node1", "node2")


def test_spec_is_frozen() -> None:
    spec = parse_spec(MINIMAL, "stack.yaml")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "other"  # type: ignore[misc]


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_loads(name: str) -> None:
    stack = load_preset(name)
    assert stack.spec.name == name
    assert stack.preset == name


def test_unknown_key_names_path_and_line() -> None:
    found = problems(MINIMAL + "  sshd_port: 2222\n")
    assert found == [
        Problem(
            "image.sshd_port",
            "unknown key 'sshd_port'; check its spelling (see `builder schema`)",
            6,
        )
    ]


def test_missing_required_key() -> None:
    found = problems("name: demo\nimage:\n  torch: '2.13.0'\n")
    assert [(p.path, p.message, p.line) for p in found] == [
        ("image.accelerator", "required key is missing", 2)
    ]


def test_unquoted_version_gets_a_quoting_hint() -> None:
    found = problems(MINIMAL + "  python: 3.10\n")
    assert len(found) == 1
    assert found[0].path == "image.python"
    assert found[0].line == 6
    assert found[0].message == (
        'YAML read 3.10 as a number; write it in quotes: python: "3.10" (unquoted, 3.10 became 3.1)'
    )
    # a number written as itself needs no note
    (plain,) = problems(MINIMAL + "  python: 3.11\n")
    assert plain.message == 'YAML read 3.11 as a number; write it in quotes: python: "3.11"'


def test_several_problems_reported_at_once() -> None:
    text = MINIMAL.replace("accelerator: cpu", "accelerator: tpu") + "launch:\n  slots: 0\n"
    found = problems(text)
    assert [(p.path, p.line) for p in found] == [("image.accelerator", 3), ("launch.slots", 7)]
    assert found[0].message.startswith("'tpu' is not one of 'cpu', 'cuda'")


def test_duplicate_key_is_an_error() -> None:
    found = problems(MINIMAL + "  torch: '2.12.0'\n")
    assert [(p.path, p.line) for p in found] == [("image.torch", 6)]
    assert "given twice" in found[0].message


def test_broken_yaml_names_the_line() -> None:
    found = problems("name: demo\nimage:\n  accelerator: [cpu\n")
    assert found[0].path == "(yaml)"
    assert found[0].line == 4
    assert "not valid YAML" in found[0].message


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "just a string\n"])
def test_top_level_must_be_a_mapping(text: str) -> None:
    assert problems(text)[0].path == "(top level)"


def test_list_items_have_index_paths() -> None:
    found = problems(MINIMAL + "  apt: [curl, 'bad package;rm']\n")
    assert [(p.path, p.line) for p in found] == [("image.apt[1]", 6)]


def test_env_names_are_checked() -> None:
    found = problems(MINIMAL + "  env:\n    OK: x\n    1BAD: x\n")
    assert [(p.path, p.line) for p in found] == [("image.env.1BAD", 8)]


def test_path_is_not_settable() -> None:
    (found,) = problems(MINIMAL + "  env:\n    PATH: /x\n")
    assert found.path == "image.env"
    assert "PATH is managed by builder" in found.message


def test_multiline_env_value_is_rejected() -> None:
    found = problems(MINIMAL + '  env:\n    A: "one\\ntwo"\n')
    assert "line break" in found[0].message


@pytest.mark.parametrize(
    ("extra", "path", "fragment"),
    [
        ("  base: nvidia/cuda:12.8.1-cudnn-devel-ubuntu22.04\n", "image.base", "is a cuda image"),
        ("  cuda: '12.8.1'\n", "image.cuda", "only for accelerator: cuda"),
        ("  synapse: '1.22.0'\n", "image.synapse", "only for accelerator: gaudi"),
        ("  python: '3.12'\n", "image.python", "bookworm ships Python 3.11"),
        ("  os: centos7\n", "image.os", "not one of"),
        ("  ssh: {enabled: false}\n", "image.pdsh", "pdsh reaches nodes over ssh"),
    ],
)
def test_impossible_combinations(extra: str, path: str, fragment: str) -> None:
    found = problems(MINIMAL + extra)
    assert [p.path for p in found] == [path]
    assert fragment in found[0].message
    assert found[0].line is not None


def test_gaudi_on_a_cuda_base() -> None:
    text = """\
name: g
image:
  accelerator: gaudi
  base: nvidia/cuda:12.8.1-cudnn-devel-ubuntu22.04
"""
    found = problems(text + "launch: {launcher: torchrun}\n")
    assert [(p.path, p.line) for p in found] == [("image.base", 4)]
    assert "is a cuda image but accelerator is gaudi" in found[0].message


def test_gaudi_rules() -> None:
    text = """\
name: g
image:
  accelerator: gaudi
  synapse: "1.23.0"
  torch: "2.5.1"
  deepspeed: "0.16.0"
"""
    found = {p.path: p.message for p in problems(text)}
    assert "ships Habana's torch 2.9.0" in found["image.torch"]
    assert 'set deepspeed: "1.23.0"' in found["image.deepspeed"]


def test_torch_missing_from_the_cuda_index() -> None:
    text = """\
name: c
image:
  accelerator: cuda
  cuda: "13.0.3"
  torch: "2.4.1"
  deepspeed: "0.19.8"
"""
    (problem,) = problems(text)
    assert problem.path == "image.torch"
    assert problem.line == 5
    assert "no wheels for CUDA 13.0.3 (it is built for cu118, cu121, cu124)" in problem.message


def test_cuda_without_a_published_devel_image() -> None:
    text = 'name: c\nimage:\n  accelerator: cuda\n  cuda: "12.8.1"\n  torch: "2.9.1"\n'
    (problem,) = problems(text + "launch: {launcher: torchrun}\n")
    assert (problem.path, problem.line) == ("image.cuda", 4)
    assert "12.6.3" in problem.message
    ok = text + "  base: registry.example/cuda:12.8.1-devel\nlaunch: {launcher: torchrun}\n"
    assert parse_spec(ok, "s").image.versions == {"cuda": "12.8.1"}


@pytest.mark.parametrize(
    ("torch", "cuda", "index"),
    [
        ("2.14.1", "12.6.3", "cu126"),
        ("2.14.1", "12.9.1", "cu126"),
        ("2.14.1", "13.1.2", "cu130"),
        ("2.14.1", "13.2.1", "cu132"),
        ("2.8.0", "12.9.1", "cu129"),
        ("2.7.1", "13.0.3", None),
        ("2.5.1", "12.4.1", "cu124"),
        ("1.13.1", "12.4.1", None),
    ],
)
def test_torch_cuda_index_same_major_newest_fitting_minor(
    torch: str, cuda: str, index: str | None
) -> None:
    assert torch_cuda_index(torch, cuda) == index


def test_gaudi_os_must_exist_for_the_release() -> None:
    text = 'name: g\nimage:\n  accelerator: gaudi\n  synapse: "1.20.0"\n  os: ubuntu24.04\n'
    (problem,) = problems(text + "launch: {launcher: torchrun}\n")
    assert (problem.path, problem.line) == ("image.os", 5)


def test_explicit_torch_index_skips_the_table() -> None:
    text = """\
name: c
image:
  accelerator: cuda
  torch: "2.4.1"
  torch_index: https://mirror.example/whl/cu128
"""
    spec = parse_spec(text + "launch: {launcher: torchrun}\n", "s")
    assert spec.image.torch_index == "https://mirror.example/whl/cu128"


def test_launcher_needs_what_the_image_lacks() -> None:
    text = MINIMAL.replace('  deepspeed: "0.19.8"\n', "") + "launch:\n  launcher: mpirun\n"
    assert [p.path for p in problems(text)] == ["launch.launcher"]
    text = MINIMAL.replace('  deepspeed: "0.19.8"\n', "")
    assert "needs DeepSpeed" in problems(text)[0].message


def test_load_spec_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        load_spec(tmp_path / "nope.yaml")


def test_load_stack_needs_exactly_one_source(write_spec: Callable[[str], Path]) -> None:
    with pytest.raises(UsageError):
        load_stack(None, None)
    with pytest.raises(UsageError):
        load_stack(write_spec(MINIMAL), "cpu-deepspeed")
    assert load_stack(write_spec(MINIMAL), None).root is not None


def test_unknown_preset_lists_the_known_ones() -> None:
    with pytest.raises(UsageError, match="cpu-deepspeed"):
        load_preset("nope")


def test_spec_error_text_is_one_block() -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(MINIMAL + "  bogus: 1\n", "stack.yaml")
    assert str(info.value).splitlines() == [
        "stack.yaml: 1 problem in the spec",
        "  - image.bogus (line 6): unknown key 'bogus'; check its spelling (see `builder schema`)",
    ]


def test_schema_validates_every_preset() -> None:
    import jsonschema
    import yaml

    from builder.spec import spec_json_schema
    from builder.spec.presets import preset_text

    schema = spec_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    for name in preset_names():
        jsonschema.validate(yaml.safe_load(preset_text(name)), schema)
    assert set(schema["properties"]) == set(field_names(Spec))


def test_a_very_long_version_is_refused_quickly() -> None:
    """A pattern that could split its input two ways would take hours on a 10^6 input."""
    import time

    value = "1" + ".1" * 500_000 + "!"
    start = time.perf_counter()
    found = problems(MINIMAL.replace('torch: "2.13.0"', f'torch: "{value}"'))
    assert time.perf_counter() - start < 5
    assert [p.path for p in found] == ["image.torch"]


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("kubernetes", "claim_size", "100Gi of disk"),
        ("kubernetes", "shm_size", "x64Gi"),
        ("slurm", "mem", "500G please"),
        ("slurm", "gpu_bind", "closest; rm"),
    ],
)
def test_the_schema_refuses_what_parse_refuses(section: str, key: str, value: str) -> None:
    """An editor's JSON Schema check matches a pattern anywhere in the value; builder's
    parse the whole value: the schema's patterns are anchored, so both refuse."""
    import jsonschema
    import yaml

    data = yaml.safe_load(preset_text("cpu-deepspeed"))
    data["launch"][section] = {key: value}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, spec_json_schema())
    assert problems(yaml.safe_dump(data))
