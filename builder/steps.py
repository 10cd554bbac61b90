"""The install steps of an image: which packages, in which order, fetched how.

A ``Step`` is format-free: files it needs copied in, then shell commands.
Steps that download (``fetches``) get the build's network settings: a CA to
trust and pip indexes, exported inside the step only, so none of it is
left in the image's configuration. Every value from the user is quoted here.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.spec import Accelerator
from builder.stacks import BUILD_TOOLS, HABANA_DEEPSPEED, VENV

if TYPE_CHECKING:
    from builder.inputs import BuildInputs
    from builder.spec import ImageSpec
    from builder.stacks import ResolvedImage

PIP = f"{VENV}/bin/pip install --no-cache-dir"
BUILD_DIR = "/tmp/builder"
REQUIREMENTS_FILE = "requirements.txt"
REQUIREMENTS_TARGET = f"{BUILD_DIR}/requirements.txt"
WHEELS_DIR = "wheels"
WHEELS_TARGET = f"{BUILD_DIR}/wheels"
CA_FILE = "builder-ca.pem"
CA_ARG = "BUILDER_CA_PEM"
CA_TARGET = "/tmp/builder-ca.pem"
CA_CHUNK = 100_000
TRUSTED_CA = "/usr/local/share/ca-certificates/builder-build-ca.crt"


@dataclass(frozen=True)
class Step:
    """One install step: files it needs copied in, then shell commands in order.

    A newline inside a command marks where a long command (a package list)
    continues on the next line; each format writes its own continuation.
    """

    comment: str
    commands: tuple[str, ...]
    copies: tuple[tuple[str, str], ...] = ()
    fetches: bool = False


@dataclass(frozen=True)
class Fetch:
    """How downloading steps reach the network during this build.

    The python stage never reaches the final image, so there the CA is copied
    in and pip's settings are plain ENV. The system stage is the final
    image's base: its apt step gets the CA through build arguments, written
    and removed within that one step (the classic builder has no build
    secrets). One argument holds at most ``CA_CHUNK`` characters, as Linux
    caps each environment string at 128 KiB. The .def copies the CA in with
    %files and removes it at the end of %post.
    """

    env: tuple[tuple[str, str], ...]
    ca_chunks: int

    @property
    def ca_args(self) -> tuple[str, ...]:
        """Build-argument names carrying the CA, in order."""
        return tuple(f"{CA_ARG}_{i}" for i in range(self.ca_chunks))

    @property
    def exports(self) -> str | None:
        """The settings as one shell export (for the .def's %post)."""
        if not self.env:
            return None
        return "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env)

    def around(self, commands: tuple[str, ...]) -> tuple[str, ...]:
        """A system-stage step's commands, with the CA present only while they run."""
        if not self.ca_chunks:
            return commands
        parts = " ".join(f'"${name}"' for name in self.ca_args)
        return (f"printf '%s' {parts} > {CA_TARGET}", *commands, f"rm -f {CA_TARGET}")


def fetch_settings(inputs: BuildInputs) -> Fetch | None:
    """The CA handling and pip settings for steps that download, or None when defaults do."""
    env: dict[str, str] = {}
    if inputs.ca_pem:
        for name in ("GIT_SSL_CAINFO", "PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
            env[name] = CA_TARGET
    if inputs.pip_index_url:
        env["PIP_INDEX_URL"] = inputs.pip_index_url
    if inputs.pip_extra_index_urls:
        env["PIP_EXTRA_INDEX_URL"] = " ".join(inputs.pip_extra_index_urls)
    if inputs.wheels:
        env["PIP_FIND_LINKS"] = WHEELS_TARGET
    if not env:
        return None
    chunks = -(-len(inputs.ca_pem) // CA_CHUNK) if inputs.ca_pem else 0
    return Fetch(env=tuple(sorted(env.items())), ca_chunks=chunks)


def ca_chunks(pem: str) -> dict[str, str]:
    """The build arguments that carry pem to the system stage (see Fetch)."""
    return {
        f"{CA_ARG}_{i}": pem[start : start + CA_CHUNK]
        for i, start in enumerate(range(0, len(pem), CA_CHUNK))
    }


def apt_install(packages: list[str], *, ca: bool) -> tuple[str, ...]:
    """apt-get update + install without recommends, lists removed in the same step."""
    option = f" -o Acquire::https::CAInfo={CA_TARGET}" if ca else ""
    return (
        f"apt-get{option} update",
        f"apt-get{option} install -y --no-install-recommends\n" + "\n".join(packages),
        "rm -rf /var/lib/apt/lists/*",
    )


def apt_packages(image: ImageSpec, resolved: ResolvedImage) -> list[str]:
    """The OS packages of the image, sorted."""
    packages = {"ca-certificates", "python3", "python3-venv"}
    if resolved.deepspeed:
        # DeepSpeed compiles its ops just in time on first use (CPU shm, fused
        # Adam, ...): it needs a C++ compiler and Python headers at run time.
        packages |= {"g++", "python3-dev"}
    if image.ssh.enabled:
        packages |= {"openssh-client", "openssh-server"}
    if image.pdsh:
        packages.add("pdsh")
    if image.openmpi:
        packages |= {"openmpi-bin", "libopenmpi-dev"}
    packages |= set(image.apt)
    return sorted(packages)


def system_steps(image: ImageSpec, resolved: ResolvedImage, inputs: BuildInputs) -> list[Step]:
    """OS packages and the user account: the stage the final image starts from."""
    install = list(apt_install(apt_packages(image, resolved), ca=inputs.ca_pem is not None))
    if image.ssh.enabled:
        # openssh-server's postinst makes host keys: drop them in this same
        # layer, or every container of the image would share (and leak) them.
        install.append("rm -f /etc/ssh/ssh_host_*")
    steps = [Step("OS packages", tuple(install), fetches=True)]
    user, workdir = image.user, shlex.quote(image.workdir)
    if user.name != "root":
        steps.append(
            Step(
                f"the {user.name} account (login by key only)",
                (
                    f"useradd --create-home --uid {user.uid} --user-group --shell /bin/bash "
                    f"{user.name}",
                    # a locked account ('!') is refused by sshd without PAM
                    f"usermod --password '*' {user.name}",
                    f"mkdir -p {workdir}",
                    f"chown {user.name}:{user.name} {workdir}",
                ),
            )
        )
    return steps


def python_steps(
    image: ImageSpec, resolved: ResolvedImage, inputs: BuildInputs, *, requirements: bool
) -> list[Step]:
    """The venv, in order of how rarely each part changes; user requirements last."""
    steps = []
    if resolved.deepspeed and resolved.accelerator is Accelerator.gaudi:
        # pip clones the HabanaAI fork; git is needed only while building.
        steps.append(
            Step("build-only tools", apt_install(["git"], ca=bool(inputs.ca_pem)), fetches=True)
        )
    flags = " --system-site-packages" if resolved.system_site_packages else ""
    note = " (sees Habana's torch in the system site-packages)" if flags else ""
    # The wheelhouse lives in this stage only: no wheel reaches the final image.
    wheels = ((f"{WHEELS_DIR}/", f"{WHEELS_TARGET}/"),) if inputs.wheels else ()
    steps.append(
        Step(
            f"the virtual environment{note}",
            (f"python3 -m venv{flags} {VENV}",),
            copies=wheels,
        )
    )
    if resolved.torch:
        steps.append(_torch_step(resolved, inputs))
    if resolved.deepspeed:
        steps.append(_deepspeed_step(resolved))
    if image.pip:
        packages = " ".join(shlex.quote(p) for p in image.pip)
        steps.append(Step("extra pip packages", (f"{PIP} {packages}",), fetches=True))
    if requirements:
        steps.append(
            Step(
                "the stack's requirements (last: they change most)",
                (f"{PIP} -r {REQUIREMENTS_TARGET}",),
                copies=((REQUIREMENTS_FILE, REQUIREMENTS_TARGET),),
                fetches=True,
            )
        )
    return steps


def _torch_step(resolved: ResolvedImage, inputs: BuildInputs) -> Step:
    pin = f"torch=={resolved.torch}"
    wheel = inputs.wheel_for("torch", resolved.torch or "")
    if wheel is not None:
        # torch itself from the wheelhouse, never from an index (PyPI's Linux
        # torch is the multi-GB CUDA build); its small dependencies from the index.
        commands = (
            f"{PIP} --no-index --no-deps {WHEELS_TARGET}/{shlex.quote(wheel.filename)}",
            f"{PIP} {pin}",
        )
        return Step(f"torch {resolved.torch} (from the wheelhouse)", commands, fetches=True)
    command = f"{PIP} --index-url {shlex.quote(resolved.torch_index or '')} {pin}"
    return Step(f"torch {resolved.torch}", (command,), fetches=True)


def _deepspeed_step(resolved: ResolvedImage) -> Step:
    if resolved.accelerator is Accelerator.gaudi:
        target = HABANA_DEEPSPEED.format(tag=resolved.deepspeed)
    else:
        target = f"deepspeed=={resolved.deepspeed}"
    return Step(
        f"DeepSpeed {resolved.deepspeed} (ops are built just in time, not here)",
        (
            f"{PIP} {' '.join(BUILD_TOOLS)}",
            f"DS_BUILD_OPS=0 {PIP} --no-build-isolation {shlex.quote(target)}",
        ),
        fetches=True,
    )


def trust_step() -> Step:
    """Make the build's CA trusted in the final image too (only when asked)."""
    return Step(
        "trust the build's CA in the image (--trust-ca)",
        ("update-ca-certificates",),
        copies=((CA_FILE, TRUSTED_CA),),
    )
