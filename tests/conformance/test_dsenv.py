"""`.deepspeed_env` values through DeepSpeed's own reader and quoting, real pdsh and a
real shell: what we write is what every rank gets."""

from __future__ import annotations

import base64
import subprocess
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from builder.cluster.dsenv import deepspeed_env_text
from tests.conftest import real_tool


class _Exports:
    """Just the state DeepSpeed's MultiNodeRunner.add_export writes to."""

    def __init__(self) -> None:
        self.exports: dict[str, str] = {}


def delivered(runner_module: Any, env: dict[str, str]) -> dict[str, str]:
    """What each variable is on a node after DeepSpeed's pdsh launch path."""
    from deepspeed.launcher.multinode_runner import MultiNodeRunner

    holder = _Exports()
    for line in deepspeed_env_text(env).splitlines(keepends=True):
        key, val = line.split("=", maxsplit=1)  # runner.main's own reading of the file
        MultiNodeRunner.add_export(holder, key, val)
    exports = "".join(f"export {k}={v}; " for k, v in holder.exports.items())  # PDSHRunner.get_cmd
    # each value back base64-encoded on a line of its own (pdsh relays output by line)
    script = exports + "".join(f'printf "%s" "${k}" | base64 -w0; echo; ' for k in env)
    pdsh = real_tool("pdsh")
    # rcmd/exec substitutes %h %u %n in the command as rcmd/ssh does, then runs it.
    result = subprocess.run(
        [pdsh, "-N", "-R", "exec", "-w", "localhost", "bash", "-c", script],
        capture_output=True,
        check=True,
    )
    lines = result.stdout.decode().splitlines()
    return dict(zip(env, (base64.b64decode(line).decode() for line in lines), strict=True))


TRICKY = {
    "NCCL_SOCKET_IFNAME": "^docker0,lo",
    "SPACES": "a b  c",
    "DOLLAR": "$HOME and ${PATH}",
    "QUOTES": 'it\'s "quoted"',
    "BACKSLASH": "C:\\path\\n",
    "BACKTICK": "`uname`",
    "PERCENT": "50% of %h and %n, %%",
    "SEMI": "a; rm -rf /tmp/x; b",
    "UNICODE": "ünïcødé ✓",
    "EMPTY": "",
}


def test_tricky_values_arrive_unchanged(deepspeed_runner: Any) -> None:
    assert delivered(deepspeed_runner, TRICKY) == TRICKY


values = st.text(
    st.characters(blacklist_characters="\n\r\0", blacklist_categories=("Cs", "Cc", "Zl", "Zp")),
    max_size=30,
).map(str.strip)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.from_regex(r"[A-Z][A-Z0-9_]{0,8}", fullmatch=True), values, max_size=4))
def test_random_values_arrive_unchanged(deepspeed_runner: Any, env: dict[str, str]) -> None:
    assert delivered(deepspeed_runner, env) == env


def test_no_line_deepspeed_would_misread(deepspeed_runner: Any) -> None:
    text = deepspeed_env_text(TRICKY)
    assert all(line and not line.startswith("#") and "=" in line for line in text.splitlines())
    assert text.endswith("\n")
