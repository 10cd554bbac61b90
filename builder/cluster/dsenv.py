"""``.deepspeed_env``: the variables DeepSpeed's pdsh launcher exports on every node.

DeepSpeed reads the file with ``key, val = line.split('=', 1)`` for EVERY
line, so a blank line crashes the launcher and a ``#`` comment becomes a
bogus variable: only ``KEY=VALUE`` lines are written. It then strips the
value, wraps it in double quotes when it holds anything outside
``[\\w@%+=:,./-]`` (0.15 quoted every value), and pdsh hands
``export KEY=VAL; ...`` to the remote shell, substituting ``%h %u %n`` on
the way. So each value is escaped for a double-quoted shell word and its
``%`` doubled; what cannot survive (a newline, surrounding blanks) is refused.
The file is read only for multi-node pdsh runs, never with ``--no_ssh``.

Secret variables (``launch.secrets``) are left out, not written 0600: the
runner pastes every line into pdsh's command line (``export K=V; ...``),
which every user of every node can read in ``ps``. The ranks inherit them
from the node's container instead (its environment comes from the bundle's
0600 secrets.env, and sshd hands it to pdsh's sessions).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from builder.errors import UsageError
from builder.launch.plan import cache_environment
from builder.launch.secrets import is_secret_name, secret_names, without_secrets
from builder.spec.records import ENV_NAME

if TYPE_CHECKING:
    from collections.abc import Mapping

    from builder.resolved import Resolved

_SAFE = re.compile(r"[\w@%+=:,./-]*")
# DeepSpeed forwards these prefixes by itself (EXPORT_ENVS + CUDA's NCCL).
FORWARDED = ("PYTHON", "MV2", "UCX", "MLFLOW")


def deepspeed_env_text(env: Mapping[str, str]) -> str:
    """The file's text: sorted ``KEY=VALUE`` lines, each value escaped to arrive unchanged."""
    lines = []
    for key in sorted(env):
        if not re.fullmatch(ENV_NAME, key):
            raise UsageError(f"{key!r} is not a valid environment variable name", field=key)
        lines.append(f"{key}={escape_value(key, env[key])}\n")
    return "".join(lines)


def escape_value(key: str, value: str) -> str:
    """value written so that DeepSpeed's quoting, pdsh and the remote shell give it back."""
    if any(c in value for c in "\n\r\0"):
        raise UsageError(
            f"{key}: the value holds a line break, which .deepspeed_env cannot carry",
            field=key,
            value=value,
        )
    if value != value.strip():
        raise UsageError(
            f"{key}: the value starts or ends with blanks, which DeepSpeed strips; "
            "move them inside or drop them",
            field=key,
            value=value,
        )
    value = value.replace("%", "%%")  # pdsh substitutes %h, %u, %n in the command
    if _SAFE.fullmatch(value):
        return value
    return re.sub(r'([\\"$`])', r"\\\1", value)


def dsenv_for(
    resolved: Resolved, extra: Mapping[str, str], image_env: Mapping[str, str] | None
) -> str:
    """The .deepspeed_env of a stack: what its platform needs forwarded (variables DeepSpeed
    does not forward by itself, e.g. Gaudi's runtime), the run's environment (launch.cache's
    variables too) without its secrets, then extra (which may not name a secret). Ranks on
    a bare node (runtime none) get nothing else: its sshd is the host's."""
    spec = resolved.spec
    secret = sorted(k for k in extra if is_secret_name(k) or k in secret_names(spec.launch))
    if secret:
        raise UsageError(
            f"{', '.join(secret)}: a secret never goes into .deepspeed_env, whose lines "
            "DeepSpeed puts on pdsh's command line for every user to see; set it in "
            "launch.env (named in launch.secret if its name does not say so): the bundle "
            "carries it in its 0600 secrets files and the ranks inherit it",
            field=secret[0] if len(secret) == 1 else None,
            value=tuple(secret),
        )
    env = resolved.platform.forwarded_env(image_env)
    run = {**cache_environment(spec), **resolved.run_environment()}
    env.update(without_secrets(run, spec.launch))
    env.update(extra)
    return deepspeed_env_text(env)


def parse_assignments(items: list[str], option: str) -> dict[str, str]:
    """KEY=VALUE options into a mapping, with the option named in errors."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not re.fullmatch(ENV_NAME, key):
            raise UsageError(
                f"{option} {item!r}: write it as NAME=VALUE with a valid NAME",
                field=option,
                value=item,
            )
        out[key] = value
    return out
