"""Rendering: deterministic, launch-independent, quoted once and correctly."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from builder.errors import UsageError
from builder.image.context import render_outputs
from builder.image.recipe import image_recipe, spec_hash
from builder.image.render import render_apptainer, render_dockerfile
from builder.image.steps import apt_install
from builder.resolved import resolve
from builder.spec.loader import Stack, load_preset, load_spec, parse_spec
from builder.spec.presets import preset_names
from builder.templating import def_shell, docker_value
from tests.conftest import MINIMAL

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

TRICKY = "a b $HOME \"dq\" 'sq' back\\slash ;|&<> {{ arg }} ünï `tick`"


def stack_of(text: str) -> Stack:
    return Stack(parse_spec(text, "stack.yaml"), "stack.yaml", None)


def outputs(stack: Stack) -> dict[str, str]:
    return {f.path: f.text for f in render_outputs(resolve(stack), "all")}


@pytest.mark.parametrize("name", preset_names())
def test_rendering_is_deterministic(name: str) -> None:
    assert outputs(load_preset(name)) == outputs(load_preset(name))


def test_order_of_keys_and_packages_does_not_matter() -> None:
    one = stack_of(MINIMAL + "  apt: [vim, curl]\n  pip: [b==1, a==2]\n  env: {B: '2', A: '1'}\n")
    two = stack_of(
        "image:\n  env: {A: '1', B: '2'}\n  pip: [a==2, b==1]\n  apt: [curl, vim]\n"
        '  deepspeed: "0.19.8"\n  torch: "2.13.0"\n  accelerator: cpu\nname: demo\n'
    )
    assert outputs(one) == outputs(two)


@pytest.mark.parametrize("name", preset_names())
def test_launch_section_never_changes_the_image(name: str) -> None:
    import yaml

    from builder.spec.presets import preset_text

    data = yaml.safe_load(preset_text(name))
    data["launch"] = {
        "nodes": ["gpu[01-64]"],
        "slots": 4,
        "master_port": 1234,
        "env": {"NCCL_DEBUG": "INFO"},
        "script": "other.py",
        "launcher": data.get("launch", {}).get("launcher", "torchrun"),
    }
    changed = Stack(parse_spec(yaml.safe_dump(data), name), f"preset:{name}", None, name)
    assert outputs(changed) == outputs(load_preset(name))
    assert spec_hash(changed) == spec_hash(load_preset(name))


def test_image_changes_change_the_hash() -> None:
    base = stack_of(MINIMAL)
    assert spec_hash(base) != spec_hash(stack_of(MINIMAL + "  apt: [curl]\n"))


def test_docker_value_escapes_what_docker_would_expand() -> None:
    assert docker_value('a $B "c" d\\e') == '"a \\$B \\"c\\" d\\\\e"'


def test_env_and_labels_are_quoted_once() -> None:
    stack = stack_of(
        MINIMAL + f"  env: {{TRICKY: {json.dumps(TRICKY)}}}\n  labels: {{x.y: plain}}\n"
    )
    dockerfile = render_dockerfile(image_recipe(resolve(stack)))
    assert f"TRICKY={docker_value(TRICKY)}" in dockerfile
    assert 'x.y="plain"' in dockerfile


def test_def_environment_survives_a_real_shell_and_has_no_build_args() -> None:
    stack = stack_of(MINIMAL + f"  env: {{TRICKY: {json.dumps(TRICKY)}}}\n")
    text = render_apptainer(image_recipe(resolve(stack)))
    assert "{{" not in text
    (line,) = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("export TRICKY=")]
    result = subprocess.run(
        ["sh", "-c", f'{line}; printf %s "$TRICKY"'], capture_output=True, text=True, check=True
    )
    assert result.stdout == TRICKY


def test_def_shell_keeps_the_shell_value() -> None:
    line = "echo 'a{{b}}c'"
    result = subprocess.run(
        ["sh", "-c", def_shell(line)], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "a{{b}}c"
    assert "{{" not in def_shell(line)


@pytest.mark.parametrize("name", preset_names())
def test_no_private_key_and_host_keys_dropped_in_the_install_layer(name: str) -> None:
    files = outputs(load_preset(name))
    for path, text in files.items():
        assert "PRIVATE KEY" not in text, path
    dockerfile = files["Dockerfile"]
    if "openssh-server" in dockerfile:
        install_run = next(
            block for block in dockerfile.split("\nRUN ") if "openssh-server" in block
        )
        assert "rm -f /etc/ssh/ssh_host_*" in install_run
    assert "ssh-keygen" not in dockerfile


@pytest.mark.parametrize("name", preset_names())
def test_dockerfile_shape(name: str) -> None:
    dockerfile = outputs(load_preset(name))["Dockerfile"]
    assert dockerfile.count("\nFROM ") == 3
    assert 'SHELL ["/bin/bash", "-o", "pipefail", "-c"]' in dockerfile
    for run in re.findall(r"^RUN .*?(?<!\\)$", dockerfile, flags=re.S | re.M):
        if "apt-get install" in run:
            assert "--no-install-recommends" in run
            assert "rm -rf /var/lib/apt/lists/*" in run
        if "pip install" in run:
            assert "--no-cache-dir" in run
    assert "org.opencontainers.image.title=" in dockerfile
    assert "io.github.builder.spec-hash=" in dockerfile
    assert re.search(r'^ENV PATH="/opt/venv/bin:(/opt/torch/bin:)?\$PATH"', dockerfile, re.M)


def test_requirements_come_last_and_stay_out_of_the_final_stage(
    write_spec: Callable[[str], Path],
) -> None:
    path = write_spec(MINIMAL + "  requirements: reqs/train.txt\n  pip: [rich==13.7.1]\n")
    (path.parent / "reqs").mkdir()
    (path.parent / "reqs" / "train.txt").write_text("numpy==2.1.0\n")
    files = {f.path: f for f in render_outputs(resolve(load_spec(path)), "all")}
    assert files["requirements.txt"].text == "numpy==2.1.0\n"
    dockerfile = files["Dockerfile"].text
    python_stage, final_stage = dockerfile.split("FROM system AS python")[1].split(
        "\nFROM system\n"
    )
    assert python_stage.index("rich==13.7.1") < python_stage.index("-r /tmp/builder/requirements")
    assert "COPY requirements.txt /tmp/builder/requirements.txt" in python_stage
    assert "requirements" not in final_stage
    assert "rm -rf /tmp/builder" in files["demo.def"].text


def test_requirements_change_changes_the_hash(write_spec: Callable[[str], Path]) -> None:
    path = write_spec(MINIMAL + "  requirements: r.txt\n")
    (path.parent / "r.txt").write_text("numpy==2.1.0\n")
    before = spec_hash(load_spec(path))
    (path.parent / "r.txt").write_text("numpy==2.1.1\n")
    assert spec_hash(load_spec(path)) != before


def test_missing_requirements_file_names_the_field(write_spec: Callable[[str], Path]) -> None:
    path = write_spec(MINIMAL + "  requirements: nope.txt\n")
    with pytest.raises(UsageError, match=r"image\.requirements: cannot read .*nope\.txt"):
        render_outputs(resolve(load_spec(path)), "all")


def test_non_root_user() -> None:
    files = outputs(stack_of(MINIMAL + "  user: {name: trainer, uid: 1234}\n"))
    assert (
        "useradd --create-home --uid 1234 --user-group --shell /bin/bash trainer"
        in (files["Dockerfile"])
    )
    entry = files["rootfs/usr/local/bin/builder-entrypoint"]
    assert "/home/trainer/.ssh" in entry
    assert "exec setpriv --reuid=1234 --regid=1234 --init-groups" in entry


def test_no_ssh_means_no_sshd_and_no_entrypoint() -> None:
    stack = stack_of(
        MINIMAL + "  ssh: {enabled: false}\n  pdsh: false\nlaunch: {launcher: torchrun}\n"
    )
    files = outputs(stack)
    assert "openssh" not in files["Dockerfile"]
    assert "ENTRYPOINT" not in files["Dockerfile"]
    assert not any(path.startswith("rootfs/") for path in files)


def test_ssh_port_reaches_sshd_client_and_expose() -> None:
    files = outputs(stack_of(MINIMAL + "  ssh: {port: 2222}\n"))
    assert "\nPort 2222\n" in files["rootfs/etc/ssh/sshd_config"]
    # the client's port comes with the bundle's node_ssh_config, which the image includes
    assert "Include /etc/ssh/ssh_config.d/*.conf" in files["rootfs/etc/ssh/ssh_config"]
    assert "EXPOSE 2222" in files["Dockerfile"]


def test_docker_daemon_def_needs_a_tag() -> None:
    recipe = image_recipe(resolve(stack_of(MINIMAL)))
    with pytest.raises(ValueError, match="explicit name:tag"):
        render_apptainer(recipe, "docker-daemon", "team/train")
    text = render_apptainer(recipe, "docker-daemon", "team/train:1.0")
    assert text.splitlines()[:2] == ["Bootstrap: docker-daemon", "From: team/train:1.0"]
    assert "%post" not in text


@pytest.mark.parametrize("name", preset_names())
def test_def_script_lines_never_start_with_percent(name: str) -> None:
    for path, text in outputs(load_preset(name)).items():
        if path.endswith(".def"):
            sections = [ln for ln in text.splitlines() if ln.startswith("%")]
            assert all(re.fullmatch(r"%[a-z]+", ln) for ln in sections), sections


def test_the_system_stage_starts_with_a_line_of_its_own() -> None:
    """Its key follows the system stage (base and OS packages), nothing else."""
    from builder.image.render import system_stage_key

    def key(stack: Stack) -> str:
        recipe = image_recipe(resolve(stack))
        text = render_dockerfile(recipe)
        first = text.split(" AS system\n", 1)[1].splitlines()
        line = next(line for line in first if not line.startswith("#"))
        assert line == f'LABEL io.github.builder.system-stage="{system_stage_key(recipe)}"'
        return system_stage_key(recipe)

    cpu = load_preset("cpu-deepspeed")
    keys = {key(load_preset(name)) for name in preset_names()}
    # one key per system stage: the arm64 twin of a preset shares its stage (each
    # architecture's build has its own cache chain from its own base anyway)
    stages = {
        repr((recipe.base, recipe.system))
        for recipe in (image_recipe(resolve(load_preset(name))) for name in preset_names())
    }
    assert len(keys) == len(stages) >= len(preset_names()) - 1
    assert key(cpu) == key(load_preset("cpu-deepspeed"))
    image = cpu.spec.image
    more_apt = replace(cpu.spec, image=replace(image, apt=(*image.apt, "less")))
    assert key(replace(cpu, spec=more_apt)) != key(cpu)
    more_pip = replace(cpu.spec, image=replace(image, pip=(*image.pip, "six==1.17.0")))
    assert key(replace(cpu, spec=more_pip)) == key(cpu)


def test_apt_entries_are_one_shell_word_each() -> None:
    """An apt entry the spec pattern lets through (blanks, `<>`) cannot redirect or split
    the install line, in the Dockerfile's RUN or the .def's %post."""
    (_, install, _) = apt_install(["curl", "foo >/etc/x", "libstdc++6=1:12~x"])
    assert shlex.split(install)[-3:] == ["curl", "foo >/etc/x", "libstdc++6=1:12~x"]


def test_openmpi_images_get_mpi4py_built_against_their_own_mpi() -> None:
    """DeepSpeed's init_distributed under mpirun imports mpi4py (mpi_discovery): built
    from source with the image's mpicc, never a wheel carrying another MPI."""
    files = outputs(stack_of(MINIMAL + "  openmpi: true\n"))
    (line,) = [x for x in files["Dockerfile"].splitlines() if "mpi4py" in x and "pip" in x]
    assert 'MPICC="${MPICC:-mpicc}"' in line
    assert "--no-binary mpi4py mpi4py==" in line
    assert "mpi4py" not in outputs(stack_of(MINIMAL))["Dockerfile"]


def with_openmpi(preset: str) -> Stack:
    stack = load_preset(preset)
    image = replace(stack.spec.image, openmpi=True)
    return replace(stack, spec=replace(stack.spec, image=image))


def test_gaudi_keeps_habanas_own_openmpi() -> None:
    """Habana's images ship OpenMPI (with MPICC set): the distribution's is not added."""
    gaudi = outputs(with_openmpi("gaudi-deepspeed"))["Dockerfile"]
    assert "openmpi" not in gaudi
    assert "mpi4py" in gaudi
    assert "openmpi-bin" in outputs(with_openmpi("cpu-deepspeed"))["Dockerfile"]
