"""Pushing and pinning, pure parts: the engine's push stream read for its digest and its
errors (each its own exit code), and the digest record beside a spec that plans pin
the image by."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from builder.engine.push import pull_image, push_image, registry_of
from builder.errors import (
    BuilderError,
    RegistryRefused,
    RegistryUnreachable,
    UnknownDigest,
    UsageError,
)
from builder.image.pin import image_for, pin_path, read_pin, write_pin
from builder.image.registry import Pushed, split_reference
from builder.spec.loader import load_preset

if TYPE_CHECKING:
    from collections.abc import Iterator

DIGEST = "sha256:" + "ab" * 32
REFUSED_CONNECTION = (
    'Get "https://localhost:5999/v2/": dial tcp 127.0.0.1:5999: connect: connection refused'
)


class Stream:
    """An engine whose push and pull answer with given events."""

    def __init__(self, *events: dict[str, Any]) -> None:
        self.events = events

    def push(self, reference: str) -> Iterator[dict[str, Any]]:  # noqa: ARG002
        yield from self.events

    def pull(self, reference: str) -> Iterator[dict[str, Any]]:  # noqa: ARG002
        yield from self.events


def test_a_push_returns_the_registrys_digest_and_shows_its_steps() -> None:
    lines: list[str] = []
    engine = Stream(
        {"status": "The push refers to repository [localhost:5000/team/train]"},
        {"status": "Pushing", "id": "a1", "progressDetail": {"current": 1, "total": 9}},
        {"status": "Pushed", "id": "a1", "progressDetail": {}},
        {"status": "1.0: digest: " + DIGEST + " size: 529"},
        {"progressDetail": {}, "aux": {"Tag": "1.0", "Digest": DIGEST, "Size": 529}},
    )
    pushed = push_image(engine, "localhost:5000/team/train:1.0", lines.append)  # type: ignore[arg-type]
    assert pushed == Pushed("localhost:5000/team/train:1.0", DIGEST)
    assert pushed.pinned == f"localhost:5000/team/train@{DIGEST}"
    assert "a1: Pushed" in lines
    assert not any("Pushing" in line for line in lines)


@pytest.mark.parametrize(
    ("error", "raised", "code"),
    [
        (REFUSED_CONNECTION, RegistryUnreachable, 17),
        ("unauthorized: authentication required", RegistryRefused, 18),
        ("no basic auth credentials", RegistryRefused, 18),
        ("denied: requested access to the resource is denied", RegistryRefused, 18),
    ],
)
def test_push_errors_have_their_own_exit_codes(
    error: str, raised: type[BuilderError], code: int
) -> None:
    engine = Stream({"status": "preparing"}, {"error": error, "errorDetail": {"message": error}})
    with pytest.raises(raised) as caught:
        push_image(engine, "localhost:5999/team/train:1.0")  # type: ignore[arg-type]
    assert caught.value.exit_code == code
    assert "localhost:5999" in str(caught.value)


@pytest.mark.parametrize(
    ("error", "raised"),
    [
        ("unknown: filesystem: mkdir /var/lib/registry/x: permission denied", RegistryUnreachable),
        (
            "pull access denied for r:5000/t, repository does not exist or may require "
            "'docker login': denied: requested access to the resource is denied",
            UnknownDigest,
        ),
    ],
)
def test_storage_errors_and_missing_repositories_are_not_refusals(
    error: str, raised: type[BuilderError]
) -> None:
    with pytest.raises(raised):
        pull_image(Stream({"error": error}), f"r:5000/t@{DIGEST}")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("reference", "registry"),
    [
        ("team/train:1.0", "docker.io"),
        ("train", "docker.io"),
        ("localhost/t:1", "localhost"),
        ("localhost:5000/t:1", "localhost:5000"),
        ("registry.example.com/team/train:1", "registry.example.com"),
    ],
)
def test_the_registry_is_named_as_docker_reads_it(reference: str, registry: str) -> None:
    assert registry_of(reference) == registry
    with pytest.raises(RegistryRefused, match=f"docker login {registry}"):
        push_image(Stream({"error": "unauthorized: authentication required"}), reference)  # type: ignore[arg-type]


def test_an_unknown_digest_is_its_own_error() -> None:
    engine = Stream(
        {"error": f"manifest for localhost:5000/t@{DIGEST} not found: manifest unknown"}
    )
    with pytest.raises(UnknownDigest, match="has no image") as caught:
        pull_image(engine, f"localhost:5000/t@{DIGEST}")  # type: ignore[arg-type]
    assert caught.value.exit_code == 19


def test_a_push_without_a_digest_is_an_error() -> None:
    with pytest.raises(RegistryUnreachable, match="without the registry's digest"):
        push_image(Stream({"status": "done"}), "r:5000/a:1")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("reference", "split"),
    [
        ("team/train:1.0", ("team/train", "1.0")),
        ("localhost:5000/team/train:1.0", ("localhost:5000/team/train", "1.0")),
        ("localhost:5000/team/train", ("localhost:5000/team/train", "latest")),
        (f"localhost:5000/t@{DIGEST}", ("localhost:5000/t", DIGEST)),
        ("train", ("train", "latest")),
    ],
)
def test_references_split_as_docker_splits_them(reference: str, split: tuple[str, str]) -> None:
    assert split_reference(reference) == split


def test_plans_pin_the_image_by_the_recorded_digest(tmp_path: Path) -> None:
    spec = load_preset("cpu-deepspeed").spec
    stack = tmp_path / "stack.yaml"
    tag = f"{spec.image.name}:{spec.image.tag}"
    assert image_for(spec, stack, None) == tag  # nothing pushed yet
    write_pin(stack, Pushed(tag, DIGEST))
    assert pin_path(stack).name == "stack.digest"
    assert image_for(spec, stack, None) == f"{spec.image.name}@{DIGEST}"
    assert image_for(spec, stack, "other:1") == "other:1"  # --image wins
    # another tag in the spec now: the record is of an older image
    newer = replace(spec, image=replace(spec.image, tag="2.0"))
    assert image_for(newer, stack, None) == f"{spec.image.name}:2.0"
    assert image_for(spec, None, None) == tag  # a preset has no record


def test_apptainer_plans_name_the_sif_of_the_tag_not_the_digest(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from builder.cli.app import app

    stack = tmp_path / "stack.yaml"
    presets = Path(__file__).parents[2] / "builder" / "spec" / "presets"
    stack.write_text((presets / "cpu-deepspeed.yaml").read_text())
    spec = load_preset("cpu-deepspeed").spec
    write_pin(stack, Pushed(f"{spec.image.name}:{spec.image.tag}", DIGEST))
    runner = CliRunner()
    docker = runner.invoke(app, ["launch", str(stack)])
    assert f"@{DIGEST}" in docker.stdout
    assert "pinned by" in docker.stderr
    apptainer = runner.invoke(
        app, ["launch", str(stack), "--runtime", "apptainer", "--launcher", "torchrun"]
    )
    assert apptainer.exit_code == 0, apptainer.output
    assert "sha256" not in apptainer.stdout


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        json.dumps({"schema": 1, "reference": "a:1", "digest": "sha256:12"}),
        json.dumps({"schema": 1, "reference": "a:1;id", "digest": DIGEST}),
        json.dumps({"schema": 1, "reference": f"a@{DIGEST}", "digest": DIGEST}),
        json.dumps({"schema": 2, "reference": "a:1", "digest": DIGEST}),
        json.dumps({"schema": 1, "reference": "a:1\nb", "digest": DIGEST}),
    ],
)
def test_a_record_that_is_not_one_is_refused(tmp_path: Path, text: str) -> None:
    stack = tmp_path / "stack.yaml"
    pin_path(stack).write_text(text)
    with pytest.raises(UsageError, match=r"stack\.digest"):
        read_pin(stack)
