"""Build inputs and what they do to the rendered files (pure; the engine tests build them)."""

from __future__ import annotations

import io
import tarfile
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.engine.build import context_tar
from builder.errors import SpecError, UsageError
from builder.image.context import DOCKERFILE, render_outputs
from builder.image.inputs import BuildInputs, load_inputs
from builder.image.steps import fetch_settings
from builder.resolved import resolve
from builder.spec.loader import load_preset

if TYPE_CHECKING:
    from pathlib import Path

CERT = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ0FfVEVTVA==\n-----END CERTIFICATE-----\n"
WHEEL = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"


@pytest.fixture
def ca(tmp_path: Path) -> Path:
    path = tmp_path / "ca.pem"
    path.write_text("# a comment\n" + CERT)
    return path


@pytest.fixture
def wheels(tmp_path: Path) -> Path:
    folder = tmp_path / "wheels"
    folder.mkdir()
    (folder / WHEEL).write_bytes(b"not really a wheel")
    (folder / "six-1.16.0-py2.py3-none-any.whl").write_bytes(b"six")
    return folder


def files(**options: object) -> dict[str, str]:
    inputs = load_inputs(**options)  # type: ignore[arg-type]
    return {
        f.path: f.text for f in render_outputs(resolve(load_preset("cpu-deepspeed"), inputs), "all")
    }


def stages(dockerfile: str) -> tuple[str, str, str]:
    system, rest = dockerfile.split("\nFROM system AS python\n")
    python, final = rest.split("\nFROM system\n")
    return system, python, final


def test_wheelhouse_is_read_by_pip_names(wheels: Path) -> None:
    inputs = load_inputs(wheelhouse=wheels)
    assert inputs.wheel_for("torch", "2.13.0") is not None
    assert inputs.wheel_for("Six", "1.16.0") is not None
    assert inputs.wheel_for("torch", "2.12.0") is None


def test_torch_comes_from_the_wheelhouse_and_no_wheel_reaches_the_final_stage(
    wheels: Path,
) -> None:
    out = files(wheelhouse=wheels)
    system, python, final = stages(out[DOCKERFILE])
    assert f"--target /opt/torch /tmp/builder/wheels/{WHEEL}" in python
    assert "download.pytorch.org" not in out[DOCKERFILE]
    assert "COPY wheels/ /tmp/builder/wheels/" in python
    assert 'PIP_FIND_LINKS="/tmp/builder/wheels"' in python
    assert "wheels" not in system + final
    assert f"wheels/{WHEEL}" in out
    assert "rm -rf /tmp/builder" in out["cpu-deepspeed.def"]


def test_the_ca_serves_the_build_stage_only(ca: Path) -> None:
    out = files(ca_bundle=ca)
    system, python, final = stages(out[DOCKERFILE])
    # nothing of the CA in the stage the final image is made of, not even a
    # build argument (the classic builder would record its value in the history)
    assert "builder-ca" not in system
    assert "CAInfo" not in system
    assert "ARG" not in system.replace("ARG DEBIAN_FRONTEND", "")
    assert "COPY builder-ca.pem /tmp/builder-ca.pem" in python
    assert 'PIP_CERT="/tmp/builder-ca.pem"' in python
    assert 'GIT_SSL_CAINFO="/tmp/builder-ca.pem"' in python
    assert "ca.pem" not in final
    assert "update-ca-certificates" not in out[DOCKERFILE]
    assert out["builder-ca.pem"] == CERT
    definition = out["cpu-deepspeed.def"]
    assert "builder-ca.pem /tmp/builder-ca.pem" in definition
    assert "rm -f /tmp/builder-ca.pem" in definition


def test_trust_ca_installs_it_where_apt_and_the_image_use_it(ca: Path) -> None:
    system, _, _ = stages(files(ca_bundle=ca, trust_ca=True)[DOCKERFILE])
    apt_step = system.split("# OS packages", 1)[1]
    assert apt_step.startswith(" (the build's CA is trusted in the image: --trust-ca)\n")
    ca_file = "/usr/local/share/ca-certificates/builder-build-ca.crt"
    assert f"COPY builder-ca.pem {ca_file}" in apt_step
    assert f"apt-get -o Acquire::https::CAInfo={ca_file} update" in apt_step
    assert "&& update-ca-certificates" in apt_step


def test_torch_and_its_dependencies_are_a_layer_of_their_own() -> None:
    _, python, final = stages(files()[DOCKERFILE])
    assert "--target /opt/torch --index-url https://download.pytorch.org/whl/cpu torch==" in python
    assert "/torch-layer.pth" in python
    assert final.index("COPY --from=python /opt/torch /opt/torch") < final.index(
        "COPY --from=python /opt/venv /opt/venv"
    )
    assert 'ENV PATH="/opt/venv/bin:/opt/torch/bin:$PATH"' in final


def test_pip_mirror_settings_are_build_stage_env() -> None:
    out = files(
        pip_index_url="https://mirror.example/simple", pip_extra_index_urls=("https://x.example/s",)
    )
    _, python, final = stages(out[DOCKERFILE])
    assert 'PIP_INDEX_URL="https://mirror.example/simple"' in python
    assert 'PIP_EXTRA_INDEX_URL="https://x.example/s"' in python
    assert "PIP_INDEX_URL" not in final
    assert (
        "export PIP_EXTRA_INDEX_URL=https://x.example/s PIP_INDEX_URL=" in out["cpu-deepspeed.def"]
    )


@pytest.mark.parametrize(
    "url",
    [
        "https://alice:pw9@mirror.example/simple",
        "https://s3cr3t-t0k@mirror.example/simple",
        "http://:pw8@mirror.example/simple",
        "https://u:p%40ss@mirror.example:8443/simple",
    ],
)
@pytest.mark.parametrize("option", ["--pip-index-url", "--pip-extra-index-url"])
def test_credentials_in_an_index_url_are_refused_before_anything_is_written(
    url: str, option: str, tmp_path: Path
) -> None:
    """They would land in the build stage's ENV (kept by the engine) and a .def's %post."""
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["render", "--preset", "cpu-deepspeed", "-o", str(out), option, url]
    )
    assert result.exit_code == 2, result.output
    assert "carries credentials" in result.output
    assert "--wheelhouse" in result.output  # what to do instead
    secret = url.split("//", 1)[1].rsplit("@", 1)[0]
    assert secret not in result.output  # not even echoed back
    assert not out.exists()
    with pytest.raises(UsageError, match="carries credentials"):
        fetch_settings(BuildInputs(pip_extra_index_urls=(url,)))  # made without load_inputs


def test_base_image_override_is_checked_like_the_spec() -> None:
    assert "FROM team/base:1 AS system" in files(base_image="team/base:1")[DOCKERFILE]
    with pytest.raises(SpecError, match=r"--base-image: .* is a cuda image"):
        files(base_image="nvidia/cuda:12.6.3-cudnn-devel-ubuntu22.04")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"pip_index_url": "mirror.example"}, "is not an index URL"),
        ({"trust_ca": True}, "--trust-ca needs --ca-bundle"),
        ({"ca_bundle": "missing"}, "cannot read it"),
        ({"ca_bundle": "empty"}, "no PEM certificate"),
        ({"wheelhouse": "missing"}, "not a folder"),
        ({"wheelhouse": "empty"}, "no .whl files"),
    ],
)
def test_bad_inputs_are_usage_errors(
    options: dict[str, object], message: str, tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty.pem").write_text("nothing\n")
    resolved = {
        key: (tmp_path / ("empty.pem" if value == "empty" and key == "ca_bundle" else str(value)))
        if key in ("ca_bundle", "wheelhouse")
        else value
        for key, value in options.items()
    }
    with pytest.raises(UsageError, match=message):
        load_inputs(**resolved)  # type: ignore[arg-type]


def test_context_tar_is_normalised_and_byte_stable(wheels: Path) -> None:
    inputs = load_inputs(wheelhouse=wheels)
    outputs = render_outputs(resolve(load_preset("cpu-deepspeed"), inputs), "docker")
    with context_tar(outputs) as tar_file:
        first = tar_file.read()
    (wheels / WHEEL).touch()  # a new mtime must not change the context
    with context_tar(outputs) as tar_file:
        assert tar_file.read() == first
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == sorted(m.name for m in members)
    assert {(m.uid, m.gid, m.uname, m.gname, m.mtime) for m in members} == {(0, 0, "", "", 0)}
    modes = {m.name: m.mode for m in members}
    assert modes["rootfs/usr/local/bin/builder-entrypoint"] == 0o755
    assert modes[f"wheels/{WHEEL}"] == 0o644


def test_every_input_variant_passes_hadolint_and_buildkit(ca: Path, wheels: Path) -> None:
    from builder.lint import lint_dockerfile

    for options in (
        {"ca_bundle": ca},
        {"ca_bundle": ca, "trust_ca": True, "wheelhouse": wheels},
        {"pip_index_url": "https://mirror.example/simple", "wheelhouse": wheels},
    ):
        dockerfile = files(**options)[DOCKERFILE]
        failing = [str(f) for f in lint_dockerfile(dockerfile) if f.level in ("error", "warning")]
        assert failing == [], options
