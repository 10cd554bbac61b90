"""The cpu-deepspeed preset built for real: what is in the image, and what must not be."""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.contract import LABEL_PREFIX
from builder.image.context import DOCKERFILE, docker_context
from builder.image.inputs import with_base
from builder.image.recipe import image_recipe, spec_hash
from builder.resolved import resolve
from builder.spec.loader import load_preset
from tests.integration.conftest import run_in, saved_layers
from tests.integration.images import CA_BUNDLE, IMAGE, TORCH

if TYPE_CHECKING:
    from builder.engine import Engine
    from builder.engine.build import BuildResult
    from builder.image.inputs import BuildInputs

pytestmark = pytest.mark.integration


def test_the_stack_runs(engine: Engine, cpu_image: BuildResult) -> None:
    out = run_in(
        engine,
        IMAGE,
        "python -c 'import torch, deepspeed; print(torch.__version__, deepspeed.__version__)'"
        " 2>/dev/null | tail -1; deepspeed --help 2>&1 | grep -m1 '^usage:';"
        " torchrun --help | head -1;"
        " pdsh -V 2>&1 | head -1; command -v python",
    )
    versions, ds_usage, torchrun_usage, pdsh, python = out.strip().splitlines()
    assert versions == f"{TORCH}+cpu 0.19.8"
    assert ds_usage.startswith("usage: deepspeed")
    assert torchrun_usage.startswith("usage: torchrun")
    assert pdsh.startswith("pdsh-")
    assert python == "/opt/venv/bin/python"


def test_sshd_accepts_the_image_config(engine: Engine, cpu_image: BuildResult) -> None:
    out = run_in(
        engine,
        IMAGE,
        "ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key && mkdir -p /run/sshd"
        " && /usr/sbin/sshd -t && /usr/sbin/sshd -T | grep -E '^(port|passwordauthentication) '"
        " && ssh -G node2 2>/dev/null | grep -E '^port '",
    )
    # without a bundle mounted, the client keeps ssh's defaults (the bundle's node
    # config brings the port for the cluster's hosts only: test_node_ssh)
    assert out.split() == ["port", "3022", "passwordauthentication", "no", "port", "22"]


def test_labels_trace_the_image_to_its_spec(
    engine: Engine, cpu_image: BuildResult, inputs: BuildInputs
) -> None:
    stack = with_base(load_preset("cpu-deepspeed"), inputs)
    dockerfile = next(
        f.text for f in docker_context(image_recipe(resolve(stack, inputs))) if f.path == DOCKERFILE
    )
    labels = engine.image(IMAGE).labels
    assert labels[f"{LABEL_PREFIX}.spec-hash"] == spec_hash(stack)
    assert (
        labels[f"{LABEL_PREFIX}.dockerfile-sha256"]
        == hashlib.sha256(dockerfile.encode()).hexdigest()
    )
    assert labels[f"{LABEL_PREFIX}.preset"] == "cpu-deepspeed"
    assert labels["org.opencontainers.image.title"] == "cpu-deepspeed"
    assert labels["org.opencontainers.image.base.name"] == inputs.base_image


def test_inspect_reports_the_spec(cpu_image: BuildResult) -> None:
    result = CliRunner().invoke(app, ["inspect", IMAGE])
    assert result.exit_code == 0, result.stderr
    assert re.search(r"^spec-hash\s+[0-9a-f]{64}$", result.stdout, flags=re.M)
    assert re.search(r"^preset\s+cpu-deepspeed$", result.stdout, flags=re.M)
    assert "1.5 GB" in result.stdout or "GB" in result.stdout


def test_a_missing_image_or_container_is_not_a_failed_build(engine: Engine) -> None:
    """Exit 14 (NotInEngine), not 11: nothing was built, the name points at nothing."""
    runner = CliRunner()
    for args in (
        ["inspect", "builder-test/missing:tag"],
        ["fingerprint", "builder-test/missing:tag"],
        ["fingerprint", "--container", "builder-test-no-such-container"],
        ["diff", "builder-test/missing:tag", "builder-test/missing:other"],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 14, (args, result.stderr)
        assert "Traceback" not in result.stderr


# A real PEM key: header, a base64 body, the matching footer. (ssh-keygen and
# libssl carry the header strings themselves, with no key between them.)
PRIVATE = re.compile(
    rb"-----BEGIN ([A-Z ]*)PRIVATE KEY-----\s+[A-Za-z0-9+/=\s]{40,}?-----END \1PRIVATE KEY-----"
)
LEFTOVERS = re.compile(
    r"(^|/)(torch-[^/]*\.whl|builder-ca\.pem)$|^tmp/builder/|^root/\.cache/pip/|"
    r"^var/lib/apt/lists/[^/]+_(Packages|Release|InRelease|Sources)"
)


def test_no_private_key_no_deletions_no_build_leftovers(
    engine: Engine, cpu_image: BuildResult, base_image: str
) -> None:
    """Scan every file of every layer the image is made of (as `docker save` gives them).

    A whiteout (a deletion) is a fault when it removes what one of our own
    earlier layers added: that file still sits in the image, just hidden.
    """
    keys, deleted, leftovers = [], [], []
    ours_from = len(engine.image(base_image).layers)
    added: set[str] = set()
    for index, (name, layer) in enumerate(saved_layers(engine, IMAGE)):
        for member in layer:
            path = member.name.lstrip("./")
            folder, _, base = path.rpartition("/")
            if base.startswith(".wh.") and base != ".wh..wh..opq":
                target = f"{folder}/{base[4:]}".lstrip("/")
                if any(p == target or p.startswith(f"{target}/") for p in added):
                    deleted.append(f"{name}: {target}")
            elif index >= ours_from:
                added.add(path)
            if LEFTOVERS.search(path):
                leftovers.append(f"{name}: {path}")
            if member.isfile() and member.size < 2**20:
                handle = layer.extractfile(member)
                if handle is not None and PRIVATE.search(handle.read()):
                    keys.append(f"{name}: {path}")
    assert keys == [], "private keys in the image"
    assert deleted == [], "files added in one layer and deleted in a later one"
    assert leftovers == [], "build-only files or caches in the image"


def test_the_build_ca_is_not_trusted_by_the_image(engine: Engine, cpu_image: BuildResult) -> None:
    pattern = r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----"
    custom = re.findall(pattern, CA_BUNDLE.read_text(), flags=re.S)
    image_bundle = run_in(engine, IMAGE, "cat /etc/ssl/certs/ca-certificates.crt")
    not_in_image = [block for block in custom if block not in image_bundle]
    # The host bundle has CAs Debian does not ship (e.g. a proxy's); none of them
    # may be trusted by the image, which only used the bundle while building.
    assert not_in_image, "test precondition: the host bundle must hold a non-Debian CA"
    assert run_in(engine, IMAGE, "ls /tmp; env | grep -c PIP_CERT || true").split() == ["0"]
    # not in the image's metadata either: build arguments would sit in its history
    history = "\n".join(created_by for created_by, _ in engine.history(IMAGE))
    assert "BEGIN CERTIFICATE" not in history
    assert "builder-ca" not in history


def test_torch_is_its_own_layer_without_its_test_binaries(
    engine: Engine, cpu_image: BuildResult
) -> None:
    out = run_in(
        engine,
        IMAGE,
        "python -c 'import torch; print(torch.__file__)';"
        " test -e /opt/torch/torch/test || echo trimmed; command -v torchrun",
    )
    assert out.split() == ["/opt/torch/torch/__init__.py", "trimmed", "/opt/torch/bin/torchrun"]
    copies = [c for c, _ in engine.history(IMAGE) if "COPY" in c or "copy" in c]
    assert any("/opt/torch" in c for c in copies)
