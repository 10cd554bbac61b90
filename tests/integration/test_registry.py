"""Push and pull by digest through a real registry (Debian's docker-registry, started
here as the engine is), a rehearsal whose nodes run the image by digest, and the
registry's refusals: down, credentials refused, a digest it does not have."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml
from typer.testing import CliRunner

from builder.cli.app import app
from builder.engine.push import pull_image, push_image
from builder.errors import RegistryRefused, RegistryUnreachable, UnknownDigest
from builder.rehearse.run import rehearse
from builder.spec.loader import load_stack
from tests.conftest import unavailable
from tests.daemons import Daemon, start_daemon
from tests.integration.images import IMAGE, OPENMPI_IMAGE

PRESETS = Path(__file__).parents[2] / "builder" / "spec" / "presets"

if TYPE_CHECKING:
    from collections.abc import Iterator

    from builder.engine import DockerEngine

CONFIG = """\
version: 0.1
storage:
  filesystem:
    rootdirectory: {root}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:{port}
{auth}"""
AUTH = """\
auth:
  htpasswd:
    realm: builder-test
    path: {path}
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serve(folder: Path, *, auth: bool) -> tuple[Daemon, str]:
    """A registry on a free port of this machine; its address as the engine names it."""
    exe = shutil.which("docker-registry")
    if exe is None:
        unavailable("docker-registry is missing: run scripts/ensure-tools.sh")
    port = free_port()
    extra = AUTH.format(path=folder / "htpasswd") if auth else ""
    config = folder / "config.yml"
    config.write_text(CONFIG.format(root=folder / "data", port=port, auth=extra))
    daemon = start_daemon("docker-registry", [exe, "serve", str(config)], folder / "registry.log")

    def answers() -> bool:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2)
        except urllib.error.HTTPError:
            return True  # 401: up, and asking for credentials
        except OSError:
            return False
        return True

    daemon.wait_until(answers, 30, "the registry did not answer")
    return daemon, f"localhost:{port}"


@pytest.fixture
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An empty registry for each test (a second of start-up): what one test pushed
    must not be there for another, whatever order they run in."""
    daemon, address = serve(tmp_path_factory.mktemp("registry"), auth=False)
    yield address
    daemon.stop()


@pytest.mark.usefixtures("clean")
def test_push_pin_pull_by_digest_and_rehearse_it(
    engine: DockerEngine, registry: str, tmp_path: Path
) -> None:
    name = f"{registry}/builder-test/cpu-deepspeed"
    remote = f"{name}:it"
    engine.tag(engine.image(IMAGE).id, remote)
    try:
        # the user's way: a stack whose image name starts with the registry, then push
        data = yaml.safe_load((PRESETS / "cpu-deepspeed.yaml").read_text())
        data["image"].update(name=name, tag="it")
        stack = tmp_path / "stack.yaml"
        stack.write_text(yaml.safe_dump(data))
        runner = CliRunner()
        result = runner.invoke(app, ["push", str(stack), "--json"])
        assert result.exit_code == 0, result.output
        pushed = json.loads(result.stdout)["result"]
        assert pushed["digest"].startswith("sha256:")
        assert pushed["pinned"] == f"{name}@{pushed['digest']}"
        assert "Pushed" in result.stderr
        assert (tmp_path / "stack.digest").is_file()
        # pushing again sends nothing new, and the digest is the same
        assert push_image(engine, remote).digest == pushed["digest"]
        # the plan now names the image by its digest
        plan = json.loads(runner.invoke(app, ["launch", str(stack), "--json"]).stdout)["result"]
        argvs = [" ".join(step["argv"]) for step in plan["commands"]]
        assert all(pushed["pinned"] in argv for argv in argvs if "docker run" in argv)
        # the nodes have nothing but the digest: the engine loses its tag, pulls by digest
        engine.remove_image(remote, force=False, prune=False)
        pull_image(engine, pushed["pinned"])
        assert engine.image(pushed["pinned"]).id == engine.image(IMAGE).id
        spec = load_stack(stack, None).spec
        outcome = rehearse(
            spec, image=pushed["pinned"], engine=engine, nodes=2, launcher="torchrun"
        )
        assert outcome.ok, [fault.text() for fault in outcome.faults]
    finally:
        if engine.exists(remote):
            engine.remove_image(remote, force=False, prune=False)


@pytest.mark.usefixtures("cpu_image")
def test_a_registry_that_is_down_is_named(engine: DockerEngine) -> None:
    remote = f"localhost:{free_port()}/builder-test/down:it"
    engine.tag(engine.image(IMAGE).id, remote)
    try:
        with pytest.raises(RegistryUnreachable, match="failed") as caught:
            push_image(engine, remote)
        assert caught.value.exit_code == 17
    finally:
        engine.remove_image(remote, force=False, prune=False)


@pytest.mark.usefixtures("cpu_image")
def test_refused_credentials_are_named(engine: DockerEngine, tmp_path: Path) -> None:
    daemon, address = serve(tmp_path, auth=True)
    remote = f"{address}/builder-test/auth:it"
    engine.tag(engine.image(IMAGE).id, remote)
    try:
        with pytest.raises(RegistryRefused, match="docker login") as caught:
            push_image(engine, remote)
        assert caught.value.exit_code == 18
    finally:
        engine.remove_image(remote, force=False, prune=False)
        daemon.stop()


def test_a_digest_the_registry_lacks_is_named(engine: DockerEngine, registry: str) -> None:
    missing = f"{registry}/builder-test/cpu-deepspeed@sha256:{'0' * 64}"
    with pytest.raises(UnknownDigest) as caught:
        pull_image(engine, missing)
    assert caught.value.exit_code == 19


@pytest.mark.usefixtures("cpu_image", "openmpi_image")
def test_verify_names_a_node_running_another_image_under_the_same_name(
    engine: DockerEngine, registry: str
) -> None:
    remote = f"{registry}/builder-test/verify:it"
    engine.tag(engine.image(IMAGE).id, remote)
    pinned = push_image(engine, remote).pinned
    names = ("builder-verify-good", "builder-verify-other")
    try:
        subprocess.run(
            ["docker", "run", "-d", "--name", names[0], "--entrypoint", "sleep", pinned, "300"],
            check=True,
            capture_output=True,
        )
        # the other node: the same name:tag, pointing at another image
        engine.tag(engine.image(OPENMPI_IMAGE).id, remote)
        subprocess.run(
            ["docker", "run", "-d", "--name", names[1], "--entrypoint", "sleep", remote, "300"],
            check=True,
            capture_output=True,
        )
        result = CliRunner().invoke(
            app, ["verify", "--containers", ",".join(names), "--image", pinned]
        )
        assert result.exit_code == 13, result.output
        assert "image" in result.stdout
        assert names[1] in result.stderr
    finally:
        subprocess.run(["docker", "rm", "-f", *names], check=False, capture_output=True)
        engine.remove_image(remote, force=False, prune=False)
        if engine.exists(pinned):
            engine.remove_image(pinned, force=False, prune=False)
