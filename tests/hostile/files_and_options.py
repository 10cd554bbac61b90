"""Hostile inputs, third round: files and options (appended to the corpus's CASES).

The classes closed here (issue 25):
- a digest or version is matched whole: a trailing line break is no digest;
- every file builder reads (the spec, its requirements, stack.digest and stack.lock
  beside it, a CA bundle, wheels, keys kept in the cluster folder, an ssh config, a
  hostfile, a --script) that is a folder, a symlink loop or a link to nothing, a device
  or FIFO, oversized or nested too deep is refused, naming the file;
- every float option has a range, inf and nan included;
- every folder option refuses '-' and a symlink loop;
- every option naming a file is checked before the engine is asked.
"""

from __future__ import annotations

import json
from typing import TypedDict

from tests.hostile.corpus import GOOD, HOSTILE, SPEC, USAGE, case, lock, spec


class Extra(TypedDict, total=False):
    """What a case finds in its folder besides the spec."""

    files: dict[str, str | bytes]
    links: dict[str, str]
    dirs: dict[str, int]


def with_spec(extra: Extra, text: str = GOOD) -> Extra:
    """extra, with the spec beside it."""
    return {**extra, "files": {HOSTILE: text, **extra.get("files", {})}}


HEX = "1" * 64
OWN = "builder/stack:latest"
"""The name:tag of GOOD, which its push record pins."""


def record(digest: str = f"sha256:{HEX}", reference: str = OWN) -> str:
    return json.dumps({"schema": 1, "reference": reference, "digest": digest}) + "\n"


def nested_json(depth: int) -> str:
    return "[" * depth + "]" * depth


# --- a digest is matched whole: $ let a trailing line break through ------------------
PINNING = (  # plan_image: slurm's too, whose spec needs more than GOOD to get there
    ("launch", HOSTILE),
    ("bundle", HOSTILE, "-o", "cluster"),
    ("preflight", HOSTILE, "--dry-run"),
)
for command in PINNING:
    case(
        f"digest-trailing-newline-{command[0]}",
        command,
        USAGE,
        "stack.digest",
        files={HOSTILE: GOOD, "stack.digest": record(f"sha256:{HEX}\n")},
    )
case(
    "digest-trailing-crlf-launch",
    ("launch", HOSTILE),
    USAGE,
    "stack.digest",
    files={HOSTILE: GOOD, "stack.digest": record(f"sha256:{HEX}\r\n")},
)
case(
    "digest-leading-newline-launch",
    ("launch", HOSTILE),
    USAGE,
    "stack.digest",
    files={HOSTILE: GOOD, "stack.digest": record(f"\nsha256:{HEX}")},
)
case(
    "digest-reference-trailing-newline-launch",
    ("launch", HOSTILE),
    USAGE,
    "stack.digest",
    files={HOSTILE: GOOD, "stack.digest": record(reference=OWN + "\n")},
)
case("sif-digest-trailing-newline", ("sif", f"demo@sha256:{HEX}\n"), USAGE, "IMAGE")
case(
    "lock-base-digest-trailing-newline",
    ("render", HOSTILE),
    USAGE,
    "base.digest",
    files={HOSTILE: GOOD, "stack.lock": lock(digest=f'"debian@sha256:{HEX}\\n"')},
)
case(
    "lock-base-id-trailing-newline",
    ("render", HOSTILE),
    USAGE,
    "base.id",
    files={HOSTILE: GOOD, "stack.lock": lock(id_=f'"sha256:{HEX}\\n"')},
)
case(
    "lock-version-trailing-newline",
    ("render", HOSTILE),
    USAGE,
    "numpy",
    files={HOSTILE: GOOD, "stack.lock": lock(python='  numpy: "2.1.0\\n"\n')},
)

# --- stack.digest beside the spec: anything but the record is refused ----------------
DIGEST_FILES: list[tuple[str, Extra]] = [
    ("folder", {"dirs": {"stack.digest": 0o755}}),
    ("loop", {"links": {"stack.digest": "stack.digest"}}),
    ("dangling", {"links": {"stack.digest": "gone"}}),
    ("device", {"links": {"stack.digest": "/dev/zero"}}),
    ("oversized", {"files": {"stack.digest": " " * (65 * 1024) + record()}}),
    ("nested", {"files": {"stack.digest": nested_json(30_000)}}),
    ("huge-number", {"files": {"stack.digest": "1" * 50_000}}),
    ("not-json", {"files": {"stack.digest": "sha256:" + HEX + "\n"}}),
    ("non-utf8", {"files": {"stack.digest": b'{"schema": 1, "\xff": 2}'}}),
]
for name, extra in DIGEST_FILES:
    for command in PINNING:
        case(f"digest-{name}-{command[0]}", command, USAGE, "stack.digest", **with_spec(extra))
# a push replaces the record: what is there is checked before the engine is asked
for name, extra in DIGEST_FILES[:4]:
    case(f"digest-{name}-push", ("push", HOSTILE), USAGE, "stack.digest", **with_spec(extra))
    case(
        f"digest-{name}-build-push",
        ("build", HOSTILE, "--push"),
        USAGE,
        "stack.digest",
        **with_spec(extra),
    )

# --- stack.lock beside the spec ----------------------------------------------------
LOCK_FILES: list[tuple[str, Extra]] = [
    ("folder", {"dirs": {"stack.lock": 0o755}}),
    ("loop", {"links": {"stack.lock": "stack.lock"}}),
    ("dangling", {"links": {"stack.lock": "gone"}}),
    ("device", {"links": {"stack.lock": "/dev/zero"}}),
    ("nested-flow", {"files": {"stack.lock": nested_json(20_000)}}),
    ("nested-block", {"files": {"stack.lock": "".join("  " * i + "a:\n" for i in range(300))}}),
]
for name, extra in LOCK_FILES:
    for suffix, reading in (
        ("render", ("render", HOSTILE)),
        ("render-o", ("render", HOSTILE, "-o", "out")),
        ("build", ("build", HOSTILE)),
    ):
        case(f"stack-lock-{name}-{suffix}", reading, USAGE, "stack.lock", **with_spec(extra))
case(
    "stack-lock-oversized-render",
    ("render", HOSTILE),
    USAGE,
    "stack.lock",
    files={HOSTILE: GOOD, "stack.lock": b"#" * (16 * 1024 * 1024 + 1)},
)
for name, extra in LOCK_FILES[:4]:
    case(f"diff-lock-{name}", ("diff", "stack.lock", "other.lock"), USAGE, "stack.lock", **extra)

# --- the spec itself, and the requirements file it names ---------------------------
for name, spec_path, links in (
    ("loop", HOSTILE, {HOSTILE: HOSTILE}),
    ("dangling", HOSTILE, {HOSTILE: "gone.yaml"}),
    ("device", HOSTILE, {HOSTILE: "/dev/zero"}),
    ("loop-folder", "a/stack.yaml", {"a": "b", "b": "a"}),
):
    for reader in ("render", "launch", "build"):
        case(f"spec-file-{name}-{reader}", (reader, spec_path), USAGE, spec_path, links=links)
case(
    "spec-file-oversized-render",
    ("render", HOSTILE),
    USAGE,
    "4 MiB",
    files={HOSTILE: GOOD + "#" * (4 * 1024 * 1024)},
)
REQUIREMENTS: list[tuple[str, Extra]] = [
    ("loop", {"links": {"r.txt": "r.txt"}}),
    ("dangling", {"links": {"r.txt": "gone.txt"}}),
    ("oversized", {"files": {"r.txt": "#" * (1024 * 1024 + 1)}}),
    ("folder-link", {"links": {"r.txt": "."}}),
]
for name, extra in REQUIREMENTS:
    for reader in ("render", "build"):
        case(
            f"requirements-file-{name}-{reader}",
            (reader, HOSTILE),
            SPEC,
            "image.requirements",
            **with_spec(extra, spec(image='requirements: "r.txt"')),
        )

# --- files options name: CA bundle, wheels, ssh config, hostfile, script ------------
for pre in ("render", "build"):
    command = (pre, HOSTILE)
    case(
        f"{pre}-ca-loop",
        (*command, "--ca-bundle", "ca.pem"),
        USAGE,
        "--ca-bundle",
        files={HOSTILE: GOOD},
        links={"ca.pem": "ca.pem"},
    )
    case(
        f"{pre}-ca-device",
        (*command, "--ca-bundle", "ca.pem"),
        USAGE,
        "--ca-bundle",
        files={HOSTILE: GOOD},
        links={"ca.pem": "/dev/zero"},
    )
    case(
        f"{pre}-ca-oversized",
        (*command, "--ca-bundle", "ca.pem"),
        USAGE,
        "--ca-bundle",
        files={HOSTILE: GOOD, "ca.pem": b"#" * (16 * 1024 * 1024 + 1)},
    )
    case(
        f"{pre}-wheel-folder",
        (*command, "--wheelhouse", "wh"),
        USAGE,
        "--wheelhouse",
        files={HOSTILE: GOOD},
        dirs={"wh/numpy-2.1.0-py3-none-any.whl": 0o755},
    )
    case(
        f"{pre}-wheel-loop",
        (*command, "--wheelhouse", "wh"),
        USAGE,
        "--wheelhouse",
        files={HOSTILE: GOOD},
        dirs={"wh": 0o755},
        links={"wh/numpy-2.1.0-py3-none-any.whl": "numpy-2.1.0-py3-none-any.whl"},
    )
    case(
        f"{pre}-wheel-device",
        (*command, "--wheelhouse", "wh"),
        USAGE,
        "--wheelhouse",
        files={HOSTILE: GOOD},
        dirs={"wh": 0o755},
        links={"wh/numpy-2.1.0-py3-none-any.whl": "/dev/zero"},
    )
    case(
        f"{pre}-wheelhouse-loop",
        (*command, "--wheelhouse", "wh"),
        USAGE,
        "--wheelhouse",
        files={HOSTILE: GOOD},
        links={"wh": "wh"},
    )

SSH_CONFIGS: list[tuple[str, Extra]] = [
    ("folder", {"dirs": {"cfg": 0o755}}),
    ("loop", {"links": {"cfg": "cfg"}}),
    ("dangling", {"links": {"cfg": "gone"}}),
    ("device", {"links": {"cfg": "/dev/zero"}}),
]
for name, extra in SSH_CONFIGS:
    for ssh_user in (
        ("ship", HOSTILE, "--ssh-config", "cfg"),
        ("preflight", HOSTILE, "--ssh-config", "cfg", "--dry-run"),
        ("verify", "--hostfile", "h", "--ssh-config", "cfg"),
    ):
        case(
            f"ssh-config-{name}-{ssh_user[0]}",
            ssh_user,
            USAGE,
            "--ssh-config",
            **with_spec({**extra, "files": {"h": "n1 slots=1\n"}}),
        )
for name, target in (("loop", "h"), ("dangling", "gone"), ("device", "/dev/zero")):
    case(f"verify-hostfile-{name}", "verify --hostfile h", USAGE, "--hostfile", links={"h": target})
case(
    "verify-hostfile-oversized",
    ("verify", "--hostfile", "h"),
    USAGE,
    "--hostfile",
    files={"h": b"#" * (16 * 1024 * 1024 + 1)},
)

# --script: a file here, or the absolute path of one in the image; never the engine first
SCRIPTS: list[tuple[str, Extra]] = [
    ("missing", {}),
    ("folder", {"dirs": {"s.py": 0o755}}),
    ("loop", {"links": {"s.py": "s.py"}}),
    ("dangling", {"links": {"s.py": "gone.py"}}),
    ("device", {"links": {"s.py": "/dev/zero"}}),
]
for name, extra in SCRIPTS:
    for suffix, what in (("", (HOSTILE,)), ("-image", ("--image", "demo:latest"))):
        case(
            f"rehearse-script-{name}{suffix}",
            ("rehearse", *what, "--script", "s.py"),
            USAGE,
            "--script",
            **with_spec(extra),
        )
case(
    "rehearse-script-absolute-folder",
    ("rehearse", HOSTILE, "--script", "/"),
    USAGE,
    "--script",
    files={HOSTILE: GOOD},
)

# --- keys kept in the cluster folder --------------------------------------------------
for key in ("id_ed25519", "authorized_keys", "ssh_host_ed25519_key", "ssh_known_hosts"):
    case(
        f"bundle-kept-{key}-folder",
        ("bundle", HOSTILE, "-o", "cluster"),
        USAGE,
        f"cluster/{key}",
        files={HOSTILE: GOOD},
        dirs={"cluster": 0o700, f"cluster/{key}": 0o700},
    )
    case(
        f"bundle-kept-{key}-device",
        ("bundle", HOSTILE, "-o", "cluster"),
        USAGE,
        f"cluster/{key}",
        files={HOSTILE: GOOD},
        dirs={"cluster": 0o700},
        links={f"cluster/{key}": "/dev/zero"},
    )
    case(
        f"bundle-kept-{key}-loop",
        ("bundle", HOSTILE, "-o", "cluster"),
        USAGE,
        f"cluster/{key}",
        files={HOSTILE: GOOD},
        dirs={"cluster": 0o700},
        links={f"cluster/{key}": key},
    )
case(
    "bundle-kept-key-oversized",
    ("bundle", HOSTILE, "-o", "cluster"),
    USAGE,
    "cluster/id_ed25519",
    files={HOSTILE: GOOD, "cluster/id_ed25519": b"#" * (1024 * 1024 + 1)},
    dirs={"cluster": 0o700},
)

# --- float options: a range each, inf and nan included ----------------------------------
FLOATS = (
    ("preflight", "--budget", ("1e308", "86401", "-inf", "-1e308", "1e-320")),
    ("preflight", "--threshold", ("1e308", "inf", "-inf", "1", "-0.0")),
    ("rehearse", "--timeout", ("1e308", "604801", "-inf", "-0.0", "nan", "1e999")),
)
for taker, option, values in FLOATS:
    for value in values:
        case(
            f"{taker}-{option[2:]}-range-{value}",
            (taker, "--preset", "cpu-deepspeed", option, value),
            USAGE,
            option,
        )
for value in ("1e308", "nan", "inf"):
    case(
        f"preflight-rehearse-budget-{value}",
        ("preflight", "--preset", "cpu-deepspeed", "--rehearse", "--budget", value),
        USAGE,
        "--budget",
    )

# --- folder options: never '-', never a loop, never a file --------------------------
CLUSTER_FOLDER = (
    ("keys", "--cluster-dir"),
    ("keys", "-o"),
    ("bundle", "--cluster-dir"),
    ("bundle", "-o"),
    ("launch", "--cluster-dir"),
    ("slurm", "--cluster-dir"),
    ("preflight", "--cluster-dir"),
)
for taker, option in CLUSTER_FOLDER:
    flag = option.lstrip("-")
    given = (taker, "--preset", "cpu-deepspeed")
    dry = ("--dry-run",) if taker == "preflight" else ()
    case(f"{taker}-{flag}-dash", (*given, option, "-", *dry), USAGE, "--cluster-dir -")
    case(
        f"{taker}-{flag}-self-loop",
        (*given, option, "c", *dry),
        USAGE,
        "--cluster-dir c",
        links={"c": "c"},
    )
    case(
        f"{taker}-{flag}-loop-inside",
        (*given, option, "a/c", *dry),
        USAGE,
        "--cluster-dir a/c",
        links={"a": "b", "b": "a"},
    )
    case(
        f"{taker}-{flag}-file",
        (*given, option, "c", *dry),
        USAGE,
        "--cluster-dir c",
        files={"c": "a file\n"},
    )
    case(
        f"{taker}-{flag}-under-a-file",
        (*given, option, "f/c", *dry),
        USAGE,
        "--cluster-dir f/c",
        files={"f": "a file\n"},
    )
case(
    "preflight-rehearse-cluster-dir-dash",
    "preflight --preset cpu-deepspeed --rehearse --cluster-dir -",
    USAGE,
    "--cluster-dir",
)
for name, target, links in (
    ("self-loop", "out", {"out": "out"}),
    ("loop-inside", "a/out", {"a": "b", "b": "a"}),
):
    case(
        f"render-output-{name}",
        ("render", "--preset", "cpu-deepspeed", "-o", target),
        USAGE,
        f"-o {target}",
        links=links,
    )
# file outputs of commands that ask the engine first: checked before it is asked
OUTPUT_FILES: list[tuple[str, str, Extra]] = [
    ("loop", "x.lock", {"links": {"x.lock": "x.lock"}}),
    ("device", "x.lock", {"links": {"x.lock": "/dev/null"}}),
    ("under-a-file", "f/x.lock", {"files": {"f": "a file\n"}}),
]
for name, target, extra in OUTPUT_FILES:
    case(
        f"lock-output-{name}",
        ("lock", "--preset", "cpu-deepspeed", "-o", target),
        USAGE,
        "-o",
        **extra,
    )
    case(
        f"dsenv-image-output-{name}",
        ("dsenv", "--preset", "cpu-deepspeed", "--image", "demo:1", "-o", target),
        USAGE,
        "-o",
        **extra,
    )
case(
    "lock-beside-spec-loop",
    ("lock", HOSTILE),
    USAGE,
    "stack.lock",
    files={HOSTILE: GOOD},
    links={"stack.lock": "stack.lock"},
)
