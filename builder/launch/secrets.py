"""Secret launch variables: which they are, and the 0600 files that carry them.

A secret value (a hub token, a password) must never be printed on a command
line (argv is visible to every user in ``ps``, and builder prints its plans)
nor written to a file others can read. So the plan, launch.sh, plan.json,
.deepspeed_env and the sbatch script name only where the values are: one of
two files in the bundle, both mode 0600, read on the host by whoever starts
the node's runtime.

- ``secrets.env`` for ``docker run --env-file``: docker's CLI reads each
  ``NAME=value`` line literally (no quotes, no escapes; ``#`` lines and blank
  lines skipped), so the value is written as it is; a line break cannot be
  carried and launch.env refuses one.
- ``secrets.sh`` for everything that reads shell: ``export NAME='value'``
  lines, each value quoted for a POSIX shell. ``apptainer exec --env-file``
  evaluates its file with an embedded shell interpreter (mvdan/sh), the bare
  runtime sources it (``. secrets.sh``) before the launcher, and so would a
  user's own job script.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING

from builder.errors import UsageError
from builder.output import OutputFile

if TYPE_CHECKING:
    from collections.abc import Mapping

    from builder.spec.records import LaunchSpec, Spec

SECRETS_ENV = "secrets.env"
"""docker run --env-file: literal NAME=value lines."""
SECRETS_SH = "secrets.sh"
"""Shell-quoted exports: apptainer --env-file, `. secrets.sh`."""
SECRET_MODE = 0o600
_SECRET_NAME = re.compile(r"TOKEN(?!IZER)|SECRET|PASSWORD|PASSWD|CREDENTIAL|KEY\Z")
"""TOKENIZERS_PARALLELISM (Hugging Face's switch, in many launch envs) is not a token."""


def is_secret_name(name: str) -> bool:
    """A name that holds a secret whether or not launch.secret lists it."""
    return _SECRET_NAME.search(name.upper()) is not None


def secret_names(launch: LaunchSpec) -> frozenset[str]:
    """The launch.env names whose values are secret: listed in launch.secret, or named
    like one (TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL anywhere; KEY at the end)."""
    listed = set(launch.secret)
    return frozenset(name for name in launch.env if name in listed or is_secret_name(name))


def secret_env(launch: LaunchSpec) -> dict[str, str]:
    """The secret variables of launch.env, sorted by name."""
    names = secret_names(launch)
    return {name: launch.env[name] for name in sorted(names)}


def without_secrets(env: Mapping[str, str], launch: LaunchSpec) -> dict[str, str]:
    """env without launch's secret names: what may be printed or written 0644."""
    names = secret_names(launch)
    return {name: value for name, value in env.items() if name not in names}


def docker_env_text(env: Mapping[str, str]) -> str:
    """``docker run --env-file``: one literal ``NAME=value`` line each."""
    _check(env)
    head = "# builder: secret launch.env values for `docker run --env-file` (read literally)\n"
    return head + "".join(f"{name}={value}\n" for name, value in sorted(env.items()))


def shell_env_text(env: Mapping[str, str]) -> str:
    """``export NAME='value'`` lines for sh, bash and apptainer --env-file."""
    _check(env)
    head = "# builder: secret launch.env values; `. secrets.sh` or apptainer --env-file\n"
    lines = (f"export {name}={shlex.quote(value)}\n" for name, value in sorted(env.items()))
    return head + "".join(lines)


def secret_files(spec: Spec) -> list[OutputFile]:
    """The bundle's secret files (mode 0600), or none when launch.env holds no secret."""
    env = secret_env(spec.launch)
    if not env:
        return []
    return [
        OutputFile(SECRETS_ENV, SECRET_MODE, docker_env_text(env)),
        OutputFile(SECRETS_SH, SECRET_MODE, shell_env_text(env)),
    ]


def _check(env: Mapping[str, str]) -> None:
    # launch.env refuses these already; a file that silently split a value would be worse
    for name, value in env.items():
        if any(c in value for c in "\n\r\0"):
            raise UsageError(f"launch.env.{name}: a secret value cannot hold a line break or NUL")
