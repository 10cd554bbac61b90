"""The install steps of an image: which packages, in which order, fetched how.

A ``Step`` is format-free: files it needs copied in, then shell commands.
Every value from the user is quoted here. How downloads reach the network
(a CA, indexes, a wheelhouse) is ``Fetch``: settings of the build stage only.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.contract import TORCH_DIR, VENV
from builder.image.inputs import check_index_url
from builder.image.tools import COMPILERS, INSTALLED

if TYPE_CHECKING:
    from builder.fabrics import Userspace
    from builder.image.inputs import BuildInputs
    from builder.platforms.base import ResolvedImage
    from builder.resolved import Resolved
    from builder.spec.records import ImageSpec

# Pinned so that `--no-build-isolation` builds (DeepSpeed) find them in the
# venv: Python 3.12 venvs no longer ship setuptools.
BUILD_TOOLS = ("setuptools==80.9.0", "wheel==0.45.1")
PIP = f"{VENV}/bin/pip install --no-cache-dir"
BUILD_DIR = "/tmp/builder"
REQUIREMENTS_FILE = "requirements.txt"
REQUIREMENTS_TARGET = f"{BUILD_DIR}/requirements.txt"
WHEELS_DIR = "wheels"
WHEELS_TARGET = f"{BUILD_DIR}/wheels"
LOCK_FILE = "lock.txt"
LOCK_TARGET = f"{BUILD_DIR}/lock.txt"
LOCK_CHECK_FILE = "lock-check.py"
LOCK_CHECK_TARGET = f"{BUILD_DIR}/lock-check.py"
DS_OPS_CHECK_FILE = "ds-ops-check.py"
DS_OPS_CHECK_TARGET = f"{BUILD_DIR}/ds-ops-check.py"
CA_FILE = "builder-ca.pem"
CA_TARGET = "/tmp/builder-ca.pem"
TRUSTED_CA = "/usr/local/share/ca-certificates/builder-build-ca.crt"
BASE_TORCH = f"{VENV}/base-torch.txt"
"""The base image's torch as a pip constraint (torch==VERSION), kept in the venv."""
BASE_TORCH_PIN = 'import importlib.metadata as m; print("torch==" + m.version("torch"))'


@dataclass(frozen=True)
class Step:
    """One install step: files it needs copied in, then shell commands in order.

    A newline inside a command marks where a long command (a package list)
    continues on the next line; each format writes its own continuation.
    """

    comment: str
    commands: tuple[str, ...]
    copies: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Fetch:
    """How the python stage's downloads reach the network: a CA, indexes, a wheelhouse.

    That stage never reaches the final image, so the CA is copied in there
    and these are plain ENV. The OS-package step gets no build-only CA: the
    classic builder has no build secrets, and a CA passed as a build argument
    would be recorded in the image's history. apt uses the distributions'
    http mirrors; behind an intercepting proxy for https, ``--trust-ca``
    installs the CA in the image for apt (and everyone after it) to use.
    """

    env: tuple[tuple[str, str], ...]
    ca: bool

    @property
    def exports(self) -> str:
        """The settings as one shell export (for the .def's %post)."""
        return "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env)


def fetch_settings(inputs: BuildInputs) -> Fetch | None:
    """The pip/git settings of the python stage, or None when the defaults do."""
    # inputs made without load_inputs are checked too: no credentials in an ENV line
    for url in filter(None, (inputs.pip_index_url, *inputs.pip_extra_index_urls)):
        check_index_url(url, "pip index URL")
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
    return Fetch(env=tuple(sorted(env.items())), ca=inputs.ca_pem is not None)


def apt_install(packages: list[str], *, ca_file: str | None = None) -> tuple[str, ...]:
    """apt-get update + install without recommends, lists removed in the same step."""
    option = f" -o Acquire::https::CAInfo={ca_file}" if ca_file else ""
    return (
        f"apt-get{option} update",
        f"apt-get{option} install -y --no-install-recommends\n"
        + "\n".join(shlex.quote(p) for p in packages),
        "rm -rf /var/lib/apt/lists/*",
    )


def userspaces(stack: Resolved) -> tuple[Userspace, ...]:
    """What the fabric and the launchers' tools need that a framework base may carry
    already: its rdma-core, libfabric and NCCL plugin, its MPI."""
    found = list(stack.network.userspace)
    for tool in INSTALLED:
        userspace = tool.userspace(stack.platform) if tool.present(stack.spec.image) else None
        if userspace is not None:
            found.append(userspace)
    return tuple(found)


def apt_packages(stack: Resolved) -> list[str]:
    """The OS packages of the image, sorted. On a framework base, those of a userspace the
    base may carry are left to a step of their own that looks for it first."""
    image, resolved = stack.spec.image, stack.image
    packages = {"ca-certificates", "python3", "python3-venv", *resolved.system_packages}
    if resolved.deepspeed:
        # DeepSpeed compiles its ops just in time on first use (CPU shm, fused
        # Adam, ...): it needs a C++ compiler and Python headers at run time
        packages |= set(COMPILERS)
    if image.ssh.enabled:
        packages |= {"openssh-client", "openssh-server"}
    for tool in INSTALLED:  # what launchers need: pdsh, OpenMPI (and its compilers)
        if tool.present(image):
            packages |= set(tool.packages(stack.platform))
    packages |= set(stack.network.packages)
    looked_for = {name for userspace in userspaces(stack) for name in userspace.packages}
    if resolved.framework_base:
        packages -= looked_for
    else:
        packages |= looked_for
    packages |= set(image.apt)
    return sorted(packages)


def kept_or_installed(userspace: Userspace, *, ca_file: str | None = None) -> Step:
    """One step that looks for userspace in the base before installing it (POSIX sh, for
    the Dockerfile's bash and the .def's sh alike): all of its signs there, nothing is
    installed; none, it is installed; some, the build stops and says which, rather than
    put a second copy beside part of the base's. One command: its ``;`` would not hold
    inside a ``&&`` chain."""
    lines = ['have=""; lack=""']
    for name, test in userspace.signs:
        word = shlex.quote(f" {name}")
        lines.append(f'if {test}; then have="$have"{word}; else lack="$lack"{word}; fi')
    found = f"echo {shlex.quote(f'{userspace.what}: the base has')}\"$have\"'; none installed'"
    kept = " &&\n".join((found, *userspace.adopt))
    install = apt_install(sorted(userspace.packages), ca_file=ca_file) if userspace.packages else ()
    install += userspace.install
    partial = (
        f'echo {shlex.quote(f"{userspace.what}: the base has")}"$have"'
        f'{shlex.quote(" but not")}"$lack"{shlex.quote(f"; {userspace.instead}")} >&2'
    )
    lines += [
        f'if [ -z "$lack" ]; then {kept}' + (" || exit 1" if userspace.adopt else ""),
        f'elif [ -n "$have" ]; then {partial}; exit 1',
        "else " + " &&\n".join(install) + " || exit 1",
        "fi",
    ]
    return Step(f"{userspace.what}, unless the base has it", (";\n".join(lines),))


def system_steps(stack: Resolved) -> list[Step]:
    """OS packages and the user account: the stage the final image starts from."""
    image, inputs = stack.spec.image, stack.inputs
    trust = inputs.trust_ca and inputs.ca_pem is not None
    packages = apt_packages(stack)
    if inputs.lock is not None:  # exactly the locked set, at the locked versions
        packages = [f"{name}={version}" for name, version in sorted(inputs.lock.apt.items())]
    install = list(apt_install(packages, ca_file=TRUSTED_CA if trust else None))
    if image.ssh.enabled:
        # openssh-server's postinst makes host keys: drop them in this same
        # layer, or every container of the image would share (and leak) them.
        install.append("rm -f /etc/ssh/ssh_host_*")
    if trust:
        install.append("update-ca-certificates")
    copies = ((CA_FILE, TRUSTED_CA),) if trust else ()
    note = " (the build's CA is trusted in the image: --trust-ca)" if trust else ""
    note += " (versions from the lock)" if inputs.lock is not None else ""
    steps = [Step(f"OS packages{note}", tuple(install), copies=copies)]
    network, looked_for = stack.fabric, userspaces(stack)
    fabric_install = stack.network.install
    if stack.image.framework_base:
        ca_file = TRUSTED_CA if trust else None
        steps += [kept_or_installed(userspace, ca_file=ca_file) for userspace in looked_for]
    else:
        fabric_install = (*(c for u in looked_for for c in u.install), *fabric_install)
    if fabric_install:
        steps.append(Step(f"the fabric ({network.name}): {network.summary}", fabric_install))
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


def venv_layers(resolved: ResolvedImage) -> tuple[str, ...]:
    """The folders the final image copies from the python stage, one layer each."""
    return (TORCH_DIR, VENV) if resolved.torch else (VENV,)


def python_steps(
    image: ImageSpec, resolved: ResolvedImage, inputs: BuildInputs, *, requirements: bool
) -> list[Step]:
    """The venv, in order of how rarely each part changes; user requirements last."""
    steps = []
    locked = inputs.lock is not None
    pip = f"{PIP} -c {LOCK_TARGET}" if locked else PIP
    if resolved.build_packages:
        # only while building (git to clone a fork): never in the final image
        steps.append(Step("build-only tools", apt_install(list(resolved.build_packages))))
    flags = " --system-site-packages" if resolved.system_site_packages else ""
    note = " (sees the base image's packages)" if flags else ""
    # The wheelhouse lives in this stage only: no wheel reaches the final image.
    copies: tuple[tuple[str, str], ...] = ()
    if inputs.wheels:
        copies += ((f"{WHEELS_DIR}/", f"{WHEELS_TARGET}/"),)
    if locked:  # pip is held to the lock from the first install on
        copies += ((LOCK_FILE, LOCK_TARGET), (LOCK_CHECK_FILE, LOCK_CHECK_TARGET))
        note += " (pip constrained to the lock)"
    commands = [f"python3 -m venv{flags} {VENV}"]
    if resolved.torch is None:
        # the base's torch is kept: pinned for every install after this one, so that a
        # package asking for another torch fails the build instead of replacing it (and
        # a base without torch fails here)
        commands.append(f"{VENV}/bin/python -c {shlex.quote(BASE_TORCH_PIN)} > {BASE_TORCH}")
        pip = f"{pip} -c {BASE_TORCH}"
        note = " (sees the base image's packages, its torch pinned)"
    steps.append(Step(f"the virtual environment{note}", tuple(commands), copies=copies))
    if resolved.torch:
        steps.append(_torch_step(resolved, inputs, pip))
    if resolved.deepspeed:
        steps.append(_deepspeed_step(resolved, pip))
    for tool in INSTALLED:
        step = tool.pip_step(pip) if tool.present(image) else None
        if step is not None:
            steps.append(Step(*step))
    if image.pip:
        packages = " ".join(shlex.quote(p) for p in image.pip)
        steps.append(Step("extra pip packages", (f"{pip} {packages}",)))
    if requirements:
        steps.append(
            Step(
                "the stack's requirements (last: they change most)",
                (f"{pip} -r {REQUIREMENTS_TARGET}",),
                copies=((REQUIREMENTS_FILE, REQUIREMENTS_TARGET),),
            )
        )
    if locked:
        steps.append(
            Step(
                "exactly the locked Python packages, or the build fails",
                (f"{VENV}/bin/python {LOCK_CHECK_TARGET} {LOCK_TARGET}",),
            )
        )
    return steps


def _torch_step(resolved: ResolvedImage, inputs: BuildInputs, pip: str) -> Step:
    """torch and its dependencies in a folder of their own, seen by the venv through a .pth.

    They are most of the venv's size (GBs with CUDA), so the final image
    copies them as a layer of their own: a change to the stack's requirements
    then rewrites only the small venv layer, and nodes pull only that.
    """
    wheel = inputs.wheel_for("torch", resolved.torch or "")
    if wheel is not None:
        # the wheelhouse's file itself, never an index's torch (PyPI's Linux
        # torch is the multi-GB CUDA build); dependencies from the indexes
        install = f"{pip} --target {TORCH_DIR} {WHEELS_TARGET}/{shlex.quote(wheel.filename)}"
        comment = f"torch {resolved.torch} from the wheelhouse, in its own layer"
    else:
        index = shlex.quote(resolved.torch_index or "")
        install = f"{pip} --target {TORCH_DIR} --index-url {index} torch=={resolved.torch}"
        comment = f"torch {resolved.torch} and its dependencies, in their own layer"
    purelib = f"{VENV}/bin/python -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])'"
    link = f'echo {TORCH_DIR} > "$({purelib})/torch-layer.pth"'
    # The wheel ships torch's C++ unit-test executables (~80 MB); nothing
    # imports them, and they go in the same step, so no layer keeps them.
    trim = f"rm -rf {TORCH_DIR}/torch/test"
    return Step(comment, (install, trim, link))


def _deepspeed_step(resolved: ResolvedImage, pip: str) -> Step:
    """DeepSpeed, with the ops the image carries compiled in (then checked: DeepSpeed skips
    an op it finds incompatible without failing), or none (each compiled at first use)."""
    target = resolved.deepspeed_requirement or f"deepspeed=={resolved.deepspeed}"
    env = " ".join(f"{key}={shlex.quote(value)}" for key, value in resolved.ops_build_env.items())
    commands = [
        f"{pip} {' '.join(BUILD_TOOLS)}",
        f"{env} {pip} --no-build-isolation {shlex.quote(target)}",
    ]
    ops = resolved.deepspeed_ops
    if not ops:
        return Step(
            f"DeepSpeed {resolved.deepspeed} (ops are built just in time, not here)",
            tuple(commands),
        )
    accelerator = resolved.ops_build_env["DS_ACCELERATOR"]
    archs = shlex.quote(";".join(resolved.archs))
    commands.append(
        f"{VENV}/bin/python {DS_OPS_CHECK_TARGET} {','.join(ops)} {accelerator} {archs}"
    )
    targets = f" for {', '.join(resolved.archs)}" if resolved.archs else ""
    return Step(
        f"DeepSpeed {resolved.deepspeed} with {', '.join(ops)} compiled in{targets}",
        tuple(commands),
        copies=((DS_OPS_CHECK_FILE, DS_OPS_CHECK_TARGET),),
    )
