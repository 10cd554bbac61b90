"""The hostile-input corpus: about 400 bad or tricky inputs across every command.

Each case is a command line, the files it finds in its (fresh, otherwise
empty) folder, the exit code the README documents for it and a fragment the
one-paragraph message must hold: the field path or the option at fault.
``tests/unit/test_hostile.py`` runs them all through the real CLI; every
case must pass (none is marked as expected to fail).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

SPEC = 1
USAGE = 2
EXISTS = 3

HOSTILE = "stack.yaml"


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str, ...]
    code: int
    says: str
    files: Mapping[str, str | bytes] = field(default_factory=dict)
    links: Mapping[str, str] = field(default_factory=dict)
    dirs: Mapping[str, int] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    stdin: str | bytes | None = None


CASES: list[Case] = []


def case(
    id: str,
    args: str | tuple[str, ...],
    code: int,
    says: str,
    **extra: object,
) -> None:
    argv = tuple(args.split()) if isinstance(args, str) else args
    CASES.append(Case(id, argv, code, says, **extra))  # type: ignore[arg-type]


def spec(image: str = "", launch: str = "", top: str = "", name: str = "demo") -> str:
    """A valid minimal spec with extra lines under image:, launch: and at the top."""
    text = f'name: {name}\nimage:\n  accelerator: cpu\n  torch: "2.13.0"\n  deepspeed: "0.19.8"\n'
    text += "".join(f"  {line}\n" for line in image.splitlines())
    if launch:
        text += "launch:\n" + "".join(f"  {line}\n" for line in launch.splitlines())
    return text + top


GOOD = spec()
DIGEST = "sha256:" + "1" * 64


def lock(
    *,
    reference: str = "debian:bookworm-slim",
    id_: str = DIGEST,
    digest: str = "debian@sha256:" + "2" * 64,
    python: str = '  numpy: "2.1.0"\n',
    apt: str = '  libgomp1: "12.2.0-14"\n',
    head: str = "version: 1\nstack: demo\nspec-hash: '" + "3" * 64 + "'\nimage: demo:latest\n",
) -> str:
    return (
        f"{head}base:\n  reference: {reference}\n  id: {id_}\n  digest: {digest}\n"
        f"python:\n{python}apt:\n{apt}"
    )


# Commands that read a spec; the spec-level cases are spread over them.
SPEC_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("render", HOSTILE),
    ("lint", HOSTILE),
    ("build", HOSTILE),
    ("hostfile", HOSTILE),
    ("keys", HOSTILE, "-o", "keys"),
    ("dsenv", HOSTILE),
    ("launch", HOSTILE),
    ("bundle", HOSTILE, "-o", "cluster"),
    ("slurm", HOSTILE),
    ("rehearse", HOSTILE),
    ("preflight", HOSTILE),
    ("push", HOSTILE),
    ("ship", HOSTILE),
    ("lock", HOSTILE),
    ("render", HOSTILE, "-o", "out"),
)

# --- the spec itself: YAML, types, patterns, single-line strings -------------------
ALIAS_BOMB = (
    'a: &a ["x","x","x","x","x","x","x","x","x"]\n'
    "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
    "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
)
MEGA = "x" * 1_000_000

SPEC_CASES: list[tuple[str, str | bytes, int, str]] = [
    ("alias-bomb", ALIAS_BOMB, SPEC, "alias"),
    ("alias-bomb-in-spec", GOOD + ALIAS_BOMB.replace("a: &a", "zz: &a"), SPEC, "alias"),
    ("one-alias", spec(launch="env: &e {A: '1'}") + "x: *e\n", SPEC, "alias"),
    ("alias-of-a-scalar", "x: &n demo\n" + spec(name="*n"), SPEC, "alias"),
    ("merge-key", spec(launch="env:\n  <<: {A: '1'}"), SPEC, "launch.env"),
    ("deep-list-nesting", "[" * 10_000 + "]" * 10_000, SPEC, "nest"),
    ("deep-map-nesting", "a: " + "{a: " * 10_000 + "1" + "}" * 10_000, SPEC, "nest"),
    ("deep-block-nesting", "".join("  " * i + "a:\n" for i in range(1000)), SPEC, "nest"),
    ("non-utf8", b"name: d\xe9mo\nimage:\n  accelerator: cpu\n", SPEC, "line 1"),
    ("non-utf8-late", GOOD.encode() + b"description: \xff\xfe\n", SPEC, "line 6"),
    ("utf16-bom", "\ufeffname: demo\n".encode("utf-16"), SPEC, "UTF-8"),
    ("nul-byte", GOOD + "description: a\x00b\n", SPEC, "(yaml)"),
    ("empty-file", "", SPEC, "(top level)"),
    ("top-level-list", "- a\n- b\n", SPEC, "(top level)"),
    ("top-level-string", "hello\n", SPEC, "(top level)"),
    ("yaml-syntax", "name: [demo\n", SPEC, "(yaml)"),
    ("yaml-tab-indent", "name: demo\nimage:\n\taccelerator: cpu\n", SPEC, "(yaml)"),
    (
        "yaml-python-tag",
        GOOD + "description: !!python/object/apply:os.system ['id']\n",
        SPEC,
        "(yaml)",
    ),
    ("two-documents", GOOD + "---\n" + GOOD, SPEC, "(yaml)"),
    ("duplicate-key", GOOD + "name: other\n", SPEC, "name"),
    ("unknown-top-key", GOOD + "imagee: {}\n", SPEC, "imagee"),
    ("unknown-image-key", spec(image="cuda_version: '12'"), SPEC, "image.cuda_version"),
    ("missing-image", "name: demo\n", SPEC, "image"),
    ("missing-accelerator", "name: demo\nimage: {}\n", SPEC, "image.accelerator"),
    ("bad-accelerator", "name: demo\nimage:\n  accelerator: tpu\n", SPEC, "image.accelerator"),
    ("version-2", GOOD + "version: 2\n", SPEC, "version"),
    ("name-uppercase", spec(name="Demo"), SPEC, "name"),
    ("name-trailing-newline", spec(name='"demo\\n"'), SPEC, "name"),
    ("name-shell", spec(name='"demo;rm -rf /"'), SPEC, "name"),
    ("name-number", spec(name="12"), SPEC, "name"),
    ("name-huge", spec(name=MEGA), SPEC, "name"),
    ("description-newline", GOOD + 'description: "one\\n%post\\nrm -rf /"\n', SPEC, "description"),
    ("description-cr", GOOD + 'description: "one\\rtwo"\n', SPEC, "description"),
    ("description-escape", GOOD + 'description: "one\\x1b[2Jtwo"\n', SPEC, "description"),
    ("description-line-separator", GOOD + 'description: "one\\u2028two"\n', SPEC, "description"),
    ("description-nel", GOOD + 'description: "one\\x85two"\n', SPEC, "description"),
    ("description-block", GOOD + "description: |\n  one\n  two\n", SPEC, "description (line 6)"),
    ("description-huge", GOOD + f"description: {MEGA}\n", SPEC, "description"),
    ("description-list", GOOD + "description: [a]\n", SPEC, "description"),
    ("label-value-newline", spec(image='labels: {a: "x\\n%post\\nid"}'), SPEC, "image.labels.a"),
    ("label-key-newline", spec(image='labels: {"a\\nb": x}'), SPEC, "image.labels"),
    ("label-key-space", spec(image='labels: {"a b": x}'), SPEC, "image.labels"),
    ("label-value-number", spec(image="labels: {a: 1}"), SPEC, "image.labels.a"),
    ("label-value-huge", spec(image=f"labels: {{a: {MEGA}}}"), SPEC, "image.labels.a"),
    ("tag-trailing-newline", spec(image='tag: "v1\\n"'), SPEC, "image.tag"),
    ("tag-too-long", spec(image="tag: " + "t" * 200), SPEC, "image.tag"),
    ("image-name-upper", spec(image="name: Team/Train"), SPEC, "image.name"),
    ("base-run", spec(image='base: "debian\\nRUN id"'), SPEC, "image.base"),
    ("base-space", spec(image='base: "debian AS x"'), SPEC, "image.base"),
    (
        "base-cuda-on-cpu",
        spec(image="base: nvidia/cuda:12.4.1-devel-ubuntu22.04"),
        SPEC,
        "image.base",
    ),
    ("os-bogus", spec(image="os: windows"), SPEC, "image.os"),
    ("os-newline", spec(image='os: "bookworm\\n"'), SPEC, "image.os"),
    ("python-float", spec(image="python: 3.10"), SPEC, "image.python"),
    ("python-wrong", spec(image='python: "3.12"'), SPEC, "image.python"),
    ("torch-shell", spec().replace('"2.13.0"', '"2.13.0; id"', 1), SPEC, "image.torch"),
    ("torch-newline", spec().replace('"2.13.0"', '"2.13.0\\n"', 1), SPEC, "image.torch"),
    ("deepspeed-int", spec().replace('"0.19.8"', "19", 1), SPEC, "image.deepspeed"),
    (
        "torch-index-newline",
        spec(image='torch_index: "https://x\\nRUN id"'),
        SPEC,
        "image.torch_index",
    ),
    ("torch-index-ftp", spec(image="torch_index: ftp://x"), SPEC, "image.torch_index"),
    ("cuda-on-cpu", spec(image='cuda: "12.4"'), SPEC, "image.cuda"),
    ("apt-shell", spec(image='apt: ["vim; rm -rf /"]'), SPEC, "image.apt[0]"),
    ("apt-newline", spec(image='apt: ["vim\\nRUN id"]'), SPEC, "image.apt[0]"),
    ("apt-twice", spec(image="apt: [vim, vim]"), SPEC, "image.apt"),
    ("apt-not-list", spec(image="apt: vim"), SPEC, "image.apt"),
    ("apt-number", spec(image="apt: [1]"), SPEC, "image.apt[0]"),
    ("pip-newline", spec(image='pip: ["numpy\\n--index-url http://evil"]'), SPEC, "image.pip[0]"),
    ("pip-dollar", spec(image='pip: ["numpy$(id)"]'), SPEC, "image.pip[0]"),
    ("env-path", spec(image="env: {PATH: /x}"), SPEC, "image.env"),
    ("env-newline", spec(image='env: {A: "x\\nRUN id"}'), SPEC, "image.env"),
    ("env-bad-name", spec(image='env: {"1A": x}'), SPEC, "image.env"),
    ("env-name-newline", spec(image='env: {"A\\n": x}'), SPEC, "image.env"),
    ("env-number", spec(image="env: {A: 1}"), SPEC, "image.env.A"),
    ("env-null", spec(image="env: {A: null}"), SPEC, "image.env.A"),
    ("workdir-relative", spec(image="workdir: workspace"), SPEC, "image.workdir"),
    ("workdir-space", spec(image="workdir: /a b"), SPEC, "image.workdir"),
    ("workdir-newline", spec(image='workdir: "/a\\n"'), SPEC, "image.workdir"),
    ("workdir-dollar", spec(image="workdir: /w$HOME"), SPEC, "image.workdir"),
    ("workdir-percent", spec(image="workdir: /w%h"), SPEC, "image.workdir"),
    ("workdir-quote", spec(image="workdir: /w'x"), SPEC, "image.workdir"),
    ("user-root-uppercase", spec(image="user: {name: Root}"), SPEC, "image.user.name"),
    ("user-name-newline", spec(image='user: {name: "ann\\n"}'), SPEC, "image.user.name"),
    ("user-uid-zero", spec(image="user: {name: ann, uid: 0}"), SPEC, "image.user.uid"),
    ("user-uid-huge", spec(image="user: {name: ann, uid: 99999999999}"), SPEC, "image.user.uid"),
    ("ssh-port-zero", spec(image="ssh: {port: 0}"), SPEC, "image.ssh.port"),
    ("ssh-port-big", spec(image="ssh: {port: 70000}"), SPEC, "image.ssh.port"),
    ("ssh-port-string", spec(image="ssh: {port: '22'}"), SPEC, "image.ssh.port"),
    ("ssh-enabled-yes-string", spec(image="ssh: {enabled: 'yes'}"), SPEC, "image.ssh.enabled"),
    ("pdsh-without-ssh", spec(image="ssh: {enabled: false}"), SPEC, "image.pdsh"),
    ("pdsh-int", spec(image="pdsh: 1"), SPEC, "image.pdsh"),
    ("requirements-empty", spec(image='requirements: ""'), SPEC, "image.requirements"),
    (
        "torch-index-credentials",
        spec(image="torch_index: https://me:pw@mirror.example/whl/cpu"),
        SPEC,
        "image.torch_index",
    ),
    (
        "pip-url-credentials",
        spec(image="pip: ['x @ https://tok@git.example/x.whl']"),
        SPEC,
        "image.pip[0]",
    ),
    ("requirements-newline", spec(image='requirements: "r.txt\\n"'), SPEC, "image.requirements"),
    ("launch-not-mapping", GOOD + "launch: []\n", SPEC, "launch"),
    ("launcher-bogus", spec(launch="launcher: horovodrun"), SPEC, "launch.launcher"),
    ("runtime-bogus", spec(launch="runtime: podman"), SPEC, "launch.runtime"),
    ("sif-relative", spec(launch="sif: images/t.sif"), SPEC, "launch.sif"),
    ("sif-not-a-sif", spec(launch="sif: /shared/images/"), SPEC, "launch.sif"),
    ("sif-newline", spec(launch='sif: "/shared/t.sif\\n; id #.sif"'), SPEC, "launch.sif"),
    ("sif-colon", spec(launch="sif: /shared/a:b.sif"), SPEC, "launch.sif"),
    ("nodes-empty", spec(launch="nodes: []"), SPEC, "launch.nodes"),
    ("nodes-newline", spec(launch='nodes: ["node1\\n"]'), SPEC, "launch.nodes[0]"),
    ("nodes-space", spec(launch='nodes: ["node1 n[1 ]"]'), SPEC, "launch.nodes[0]"),
    ("nodes-huge-product", spec(launch='nodes: ["n[0-65535]x[0-65535]"]'), SPEC, "launch.nodes"),
    ("nodes-long-digits", spec(launch=f'nodes: ["n[1-{"9" * 5000}]"]'), SPEC, "launch.nodes"),
    ("nodes-unclosed", spec(launch='nodes: ["n[1-3"]'), SPEC, "launch.nodes"),
    ("nodes-duplicate", spec(launch="nodes: [n1, 'n[1-2]']"), SPEC, "launch.nodes"),
    ("nodes-bad-host", spec(launch="nodes: [-n1]"), SPEC, "launch.nodes"),
    ("slots-zero", spec(launch="slots: 0"), SPEC, "launch.slots"),
    ("slots-bool", spec(launch="slots: true"), SPEC, "launch.slots"),
    ("slots-huge", spec(launch="slots: 100000"), SPEC, "launch.slots"),
    ("master-port-zero", spec(launch="master_port: 0"), SPEC, "launch.master_port"),
    ("socket-ifname-shell", spec(launch='socket_ifname: "eth0;id"'), SPEC, "launch.socket_ifname"),
    (
        "socket-ifname-long",
        spec(launch="socket_ifname: a234567890123456"),
        SPEC,
        "launch.socket_ifname",
    ),
    ("socket-ifname-dotdot", spec(launch='socket_ifname: ".."'), SPEC, "launch.socket_ifname"),
    (
        "socket-ifname-exclude",
        spec(launch='socket_ifname: "^docker0,lo"'),
        SPEC,
        "launch.socket_ifname",
    ),
    (
        "socket-ifname-newline",
        spec(launch='socket_ifname: "eth0\\nid"'),
        SPEC,
        "launch.socket_ifname",
    ),
    ("socket-ifname-dollar", spec(launch='socket_ifname: "$(id)"'), SPEC, "launch.socket_ifname"),
    ("socket-ifname-percent", spec(launch='socket_ifname: "e%h"'), SPEC, "launch.socket_ifname"),
    ("socket-ifname-quote", spec(launch='socket_ifname: "e\'0"'), SPEC, "launch.socket_ifname"),
    (
        "socket-ifname-huge",
        spec(launch="socket_ifname: " + "e" * 1_000_000),
        SPEC,
        "launch.socket_ifname",
    ),
    ("torch-from-base-shell", spec(image='torch: "from-base;id"'), SPEC, "image.torch"),
    ("fabric-unknown", spec(image="fabric: omnipath"), SPEC, "image.fabric"),
    ("fabric-efa-on-cpu", spec(image="fabric: efa"), SPEC, "image.fabric"),
    ("master-addr-newline", spec(launch='master_addr: "n1\\nx"'), SPEC, "launch.master_addr"),
    # DeepSpeed's pdsh runner pastes the master into the remote shell line: an address only
    ("master-addr-shell", spec(launch='master_addr: "$(id)"'), SPEC, "launch.master_addr"),
    ("master-addr-blank", spec(launch='master_addr: "my host"'), SPEC, "launch.master_addr"),
    ("master-addr-percent", spec(launch='master_addr: "fe80::1%eth0"'), SPEC, "launch.master_addr"),
    ("script-option", spec(launch='script: "-x.py"'), SPEC, "launch.script"),
    ("launch-env-newline", spec(launch='env: {A: "x\\ny"}'), SPEC, "launch.env"),
    ("launch-env-path", spec(launch="env: {PATH: /x}"), SPEC, "launch.env"),
    ("secret-not-in-env", spec(launch="secret: [TOKEN]"), SPEC, "launch.secret"),
    ("secret-bad-name", spec(launch="secret: ['A B']"), SPEC, "launch.secret[0]"),
    ("script-empty", spec(launch='script: ""'), SPEC, "launch.script"),
    ("script-newline", spec(launch='script: "train.py\\nid"'), SPEC, "launch.script"),
    ("args-not-list", spec(launch="args: --x"), SPEC, "launch.args"),
    ("args-newline", spec(launch='args: ["--x\\nid"]'), SPEC, "launch.args[0]"),
    ("args-ambiguous-option", spec(launch='args: [x, "--master"]'), SPEC, "launch.args[1]"),
    ("args-empty-option", spec(launch='args: ["--="]'), SPEC, "launch.args[0]"),
    (
        "mount-relative",
        spec(launch="mounts: [{source: /d, target: data}]"),
        SPEC,
        "launch.mounts[0].target",
    ),
    (
        "mount-newline-source",
        spec(launch='mounts: [{source: "/d\\n", target: /d}]'),
        SPEC,
        "launch.mounts[0].source",
    ),
    (
        "mount-missing-target",
        spec(launch="mounts: [{source: /d}]"),
        SPEC,
        "launch.mounts[0].target",
    ),
    (
        "mount-unknown-key",
        spec(launch="mounts: [{source: /d, target: /d, mode: ro}]"),
        SPEC,
        "launch.mounts[0].mode",
    ),
    (
        "slurm-partition-newline",
        spec(launch='slurm: {partition: "gpu\\n#SBATCH --uid=0"}'),
        SPEC,
        "launch.slurm.partition",
    ),
    (
        "slurm-account-newline",
        spec(launch='slurm: {account: "a\\nrm -rf /"}'),
        SPEC,
        "launch.slurm.account",
    ),
    ("slurm-time-newline", spec(launch='slurm: {time: "1:00\\nid"}'), SPEC, "launch.slurm.time"),
    (
        "slurm-extra-newline",
        spec(launch='slurm: {extra: ["--comment=a\\nid"]}'),
        SPEC,
        "launch.slurm.extra[0]",
    ),
    (
        "slurm-gpus-negative",
        spec(launch="slurm: {gpus_per_node: -1}"),
        SPEC,
        "launch.slurm.gpus_per_node",
    ),
    (
        "slurm-cpus-zero",
        spec(launch="slurm: {cpus_per_task: 0}"),
        SPEC,
        "launch.slurm.cpus_per_task",
    ),
    ("gaudi-key-on-deepspeed", spec(launch="gaudi_spawn: {}"), SPEC, "launch.gaudi_spawn"),
]
for index, (name, text, code, says) in enumerate(SPEC_CASES):
    command = SPEC_COMMANDS[index % len(SPEC_COMMANDS)]
    case(f"spec-{name}-{command[0]}", command, code, says, files={HOSTILE: text})

# The same bomb and depth through every spec-reading command: none may hang or crash.
for command in SPEC_COMMANDS[:-1]:
    case(f"alias-bomb-{command[0]}", command, SPEC, "alias", files={HOSTILE: ALIAS_BOMB})
    case(f"missing-spec-{command[0]}", (command[0], "nope.yaml", *command[2:]), USAGE, "nope.yaml")
    case(
        f"spec-and-preset-{command[0]}",
        (*command, "--preset", "cpu-deepspeed"),
        USAGE,
        "--preset",
        files={HOSTILE: GOOD},
    )
case("spec-is-a-folder-render", "render stack.yaml", USAGE, "stack.yaml", dirs={HOSTILE: 0o755})
case(
    "spec-unreadable-render",
    "render stack.yaml",
    USAGE,
    "stack.yaml",
    links={HOSTILE: "/proc/self/mem"},
)
case("spec-dev-zero", "render /dev/zero", USAGE, "/dev/zero")
case("unknown-preset-render", "render --preset tpu", USAGE, "tpu")
case("unknown-preset-newline", ("render", "--preset", "cpu-deepspeed\n"), USAGE, "preset")
case("no-spec-render", "render", USAGE, "--preset")
case("no-spec-launch", "launch", USAGE, "--preset")
case("no-spec-dsenv", "dsenv", USAGE, "--preset")
case("no-spec-bundle", "bundle", USAGE, "--preset")
case("no-spec-slurm", "slurm", USAGE, "--preset")
case("no-spec-lock", "lock", USAGE, "--preset")
case("no-spec-build", "build", USAGE, "--preset")
case("no-spec-lint", "lint", USAGE, "--preset")
case("nothing-to-rehearse", "rehearse", USAGE, "--image")

# --- requirements: paths outside the spec's folder, odd files ------------------------
REQ = "image.requirements"
REQUIREMENT_CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("traversal", "../../../../etc/shadow", {}),
    ("traversal-passwd", "../../../../../../etc/passwd", {}),
    ("absolute", "/etc/passwd", {}),
    ("absolute-proc", "/proc/self/environ", {}),
    ("symlink-out", "r.txt", {"links": {"r.txt": "/etc/passwd"}}),
    ("symlink-dir-out", "etc/passwd", {"links": {"etc": "/etc"}}),
    ("folder", "reqs", {"dirs": {"reqs": 0o755}}),
    ("non-utf8", "r.txt", {"files": {"r.txt": b"numpy==1.0 \xff\n"}}),
    (
        "credentials",
        "r.txt",
        {"files": {"r.txt": "--index-url https://me:pw@pypi.example/simple\nnumpy==1.0\n"}},
    ),
    ("fifo-like-dev", "../../../../dev/zero", {}),
    ("dot", ".", {}),
]
for name, rel, extra in REQUIREMENT_CASES:
    files: dict[str, str | bytes] = {HOSTILE: spec(image=f'requirements: "{rel}"')}
    files.update(extra.get("files", {}))
    for command in (("render", HOSTILE), ("render", HOSTILE, "-o", "out"), ("build", HOSTILE)):
        case(
            f"requirements-{name}-{command[0]}{'-o' if '-o' in command else ''}",
            command,
            SPEC,
            f"{REQ} (line 6)",
            files=files,
            links=extra.get("links", {}),
            dirs=extra.get("dirs", {}),
        )
for command in (("render", HOSTILE), ("render", HOSTILE, "-o", "out")):
    case(
        f"requirements-missing-{command[0]}{'-o' if '-o' in command else ''}",
        command,
        USAGE,
        f"{REQ}: cannot read",
        files={HOSTILE: spec(image='requirements: "r.txt"')},
    )

# --- the lock beside the spec --------------------------------------------------------
LOCK_CASES: list[tuple[str, str | bytes, str]] = [
    ("non-utf8", lock().encode() + b"# \xff\n", "stack.lock"),
    ("not-yaml", "version: [1\n", "stack.lock"),
    ("not-mapping", "- 1\n", "stack.lock"),
    ("version-2", lock().replace("version: 1", "version: 2"), "version"),
    ("no-base", lock().split("base:")[0], "base"),
    ("digest-run", lock(digest="'debian@sha256:" + "2" * 64 + "\\nRUN id'"), "base.digest"),
    ("digest-short", lock(digest="debian@sha256:abc"), "base.digest"),
    ("digest-semicolon", lock(digest="'debian@sha256:" + "2" * 64 + ";id'"), "base.digest"),
    ("id-run", lock(id_="'sha256:1\\nRUN id'"), "base.id"),
    ("reference-newline", lock(reference="'debian\\nRUN id'"), "base.reference"),
    ("apt-version-semicolon", lock(apt='  vim: "1.0;id"\n'), "apt.vim"),
    ("apt-version-newline", lock(apt='  vim: "1.0\\nRUN id"\n'), "apt.vim"),
    ("apt-version-space", lock(apt='  vim: "1.0 curl"\n'), "apt.vim"),
    ("apt-name-shell", lock(apt='  "vim;id": "1.0"\n'), "apt"),
    ("apt-name-newline", lock(apt='  "vim\\n": "1.0"\n'), "apt"),
    ("apt-not-mapping", lock(apt="  - vim\n"), "apt"),
    ("python-version-semicolon", lock(python='  numpy: "1.0;id"\n'), "python.numpy"),
    (
        "python-version-newline",
        lock(python='  numpy: "1.0\\n--index-url http://evil"\n'),
        "python.numpy",
    ),
    ("python-version-dollar", lock(python='  numpy: "1.0$(id)"\n'), "python.numpy"),
    ("python-name-option", lock(python='  "--index-url": "1"\n'), "python"),
    ("python-name-newline", lock(python='  "numpy\\n": "1.0"\n'), "python"),
    (
        "spec-hash-bad",
        lock(head="version: 1\nstack: demo\nspec-hash: x\nimage: demo:latest\n"),
        "spec-hash",
    ),
    ("alias-bomb", ALIAS_BOMB, "alias"),
    ("huge-version", lock(python=f'  numpy: "{MEGA}"\n'), "python.numpy"),
]
for name, text, says in LOCK_CASES:
    case(
        f"lock-{name}-render",
        ("render", HOSTILE),
        USAGE,
        says,
        files={HOSTILE: GOOD, "stack.lock": text},
    )
for name, text, says in LOCK_CASES[:6]:
    case(
        f"lock-{name}-build",
        ("build", HOSTILE),
        USAGE,
        says,
        files={HOSTILE: GOOD, "stack.lock": text},
    )
for name, text, _ in LOCK_CASES[:4] + LOCK_CASES[5:8]:
    case(
        f"diff-lock-{name}",
        ("diff", "a.lock", "b.lock"),
        USAGE,
        "a.lock",
        files={"a.lock": text, "b.lock": lock()},
    )
case(
    "diff-missing-lock",
    "diff a.lock b.lock",
    USAGE,
    "a.lock",
)

# --- node lists and hostfiles ------------------------------------------------------------
NODELISTS: list[tuple[str, str]] = [
    ("huge-product", "n[0-65535]x[0-65535]"),
    ("huge-product-three", "a[0-999]b[0-999]c[0-999]"),
    ("huge-range", "n[0-99999999]"),
    ("long-digits", "n[1-" + "9" * 5000 + "]"),
    ("long-digits-start", "n[" + "1" * 5000 + "]"),
    ("trailing-newline", "node1\n"),
    ("newline-inside", "node1\nnode2"),
    ("newline-in-range", "n[1-2\n]"),
    ("vertical-tab", "node1\x0bnode2"),
    ("blank-after-last-number", "n[1-2 ]"),
    ("nul", "node1\x00"),
    ("escape", "node\x1b[2J"),
    ("unclosed", "n[1-3"),
    ("unopened", "n1-3]"),
    ("nested", "n[1-[2-3]]"),
    ("empty-item-in-brackets", "n[1,,2]"),
    ("empty-brackets", "n[]"),
    ("backwards", "n[5-1]"),
    ("text-after-bracket-bad-name", "n[1-2]-"),
    ("letters-in-range", "n[a-c]"),
    ("dash-start", "-n1"),
    ("dot-end", "n1."),
    ("unicode-digits", "n[\u0661-\u0663]"),
    ("duplicates", "n1,n1"),
    ("duplicates-range", "n[1-3],n2"),
    ("huge-name", "n" * 100_000),
    ("many-items", ",".join(f"n{i}" for i in range(70_000))),
]
for name, text in NODELISTS:
    case(f"nodes-{name}", ("hostfile", "--nodes", text), USAGE, "--nodelist")
case(
    "nodes-huge-product-spec",
    ("hostfile", HOSTILE),
    SPEC,
    "launch.nodes",
    files={HOSTILE: spec(launch='nodes: ["n[0-65535]x[0-65535]"]')},
)
case(
    "slurm-nodelist-newline",
    "hostfile --from-slurm",
    USAGE,
    "SLURM_JOB_NODELIST",
    env={"SLURM_JOB_NODELIST": "n[1-2]\nevil", "SLURM_GPUS_ON_NODE": "1"},
)
case(
    "slurm-nodelist-product",
    "hostfile --from-slurm",
    USAGE,
    "SLURM_JOB_NODELIST",
    env={"SLURM_JOB_NODELIST": "n[0-65535]x[0-65535]", "SLURM_GPUS_ON_NODE": "1"},
)
case(
    "slurm-tasks-newline",
    "hostfile --from-slurm",
    USAGE,
    "--slots",
    env={"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "4\n"},
)
case(
    "slurm-gpus-huge",
    "hostfile --from-slurm",
    USAGE,
    "slots",
    env={"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_GPUS_ON_NODE": "9" * 5000},
)
case("slurm-no-env", "hostfile --from-slurm", USAGE, "SLURM_JOB_NODELIST")
case(
    "slurm-and-nodes",
    "hostfile --from-slurm --nodes n1",
    USAGE,
    "--nodelist",
    env={"SLURM_JOB_NODELIST": "n1", "SLURM_GPUS_ON_NODE": "1"},
)
case("hostfile-slots-zero", "hostfile --nodes n1 --slots 0", USAGE, "--slots")
case("hostfile-slots-negative", "hostfile --nodes n1 --slots -3", USAGE, "--slots")
case("hostfile-slots-huge", "hostfile --nodes n1 --slots 99999", USAGE, "--slots")
case("hostfile-slots-text", "hostfile --nodes n1 --slots four", USAGE, "--slots")
case(
    "hostfile-slots-digits", ("hostfile", "--nodes", "n1", "--slots", "9" * 5000), USAGE, "--slots"
)
case("hostfile-no-nodes", "hostfile", USAGE, "--nodelist")
case(
    "hostfile-output-exists",
    "hostfile --nodes n1 -o hosts",
    EXISTS,
    "--force",
    files={"hosts": "mine\n"},
)
case(
    "hostfile-output-in-missing-dir-file",
    "hostfile --nodes n1 -o f/hosts",
    USAGE,
    "f",
    files={"f": "a file\n"},
)
case(
    "hostfile-output-folder-force",
    "hostfile --nodes n1 -o d --force",
    USAGE,
    "d",
    dirs={"d": 0o755},
)
case("hostfile-unknown-option", "hostfile --node n1", USAGE, "--node")

# --- dsenv --set ---------------------------------------------------------------------------
for name, value, says in [
    ("newline-in-name", "FOO\n=1", "--set"),
    ("no-equals", "FOO", "--set"),
    ("empty-name", "=1", "--set"),
    ("digit-name", "1FOO=1", "--set"),
    ("space-name", "FO O=1", "--set"),
    ("newline-value", "FOO=a\nb", "FOO"),
    ("cr-value", "FOO=a\rb", "FOO"),
    ("nul-value", "FOO=a\x00b", "FOO"),
    ("blank-value", "FOO= a", "FOO"),
    ("dash-name", "FOO-BAR=1", "--set"),
    ("huge-name", "F" * 100_000 + "\n=1", "--set"),
]:
    case(
        f"dsenv-set-{name}",
        ("dsenv", "--preset", "cpu-deepspeed", "--set", value),
        USAGE,
        says,
    )
case(
    "dsenv-output-exists",
    "dsenv --preset cpu-deepspeed -o .deepspeed_env",
    EXISTS,
    "--force",
    files={".deepspeed_env": "A=1\n"},
)
case(
    "dsenv-output-folder-force",
    "dsenv --preset cpu-deepspeed -o d --force",
    USAGE,
    "d",
    dirs={"d": 0o755},
)

# --- kubernetes ------------------------------------------------------------------------
case(
    "kubernetes-job-bogus",
    "kubernetes --preset cpu-deepspeed --job mpijob -o k.yaml",
    USAGE,
    "--job",
)
case(
    "kubernetes-pytorchjob-deepspeed",
    "kubernetes --preset cpu-deepspeed --job pytorchjob -o k.yaml",
    SPEC,
    "--job",
)
case("kubernetes-secrets-to-stdout", "kubernetes --preset cpu-deepspeed", USAGE, "-o FILE")
case(
    "kubernetes-namespace-not-a-label",
    "kubernetes stack.yaml -o k.yaml",
    SPEC,
    "launch.kubernetes.namespace",
    files={"stack.yaml": spec(launch="kubernetes:\n  namespace: 'Team_A\\n'")},
)
case(
    "kubernetes-resource-not-qualified",
    "kubernetes stack.yaml -o k.yaml",
    SPEC,
    "launch.kubernetes.rdma_resource",
    files={"stack.yaml": spec(launch="kubernetes:\n  rdma_resource: 'rdma/a b;x'")},
)
case(
    "kubernetes-secret-in-args",
    "kubernetes stack.yaml -o k.yaml",
    SPEC,
    "launch.env.HF_TOKEN",
    files={
        "stack.yaml": spec(
            launch="launcher: torchrun\nenv: {HF_TOKEN: hf_abcdefgh}\nargs: [--t, hf_abcdefgh]"
        )
    },
)
case(
    "kubernetes-other-content",
    "kubernetes --preset cpu-deepspeed -o k.yaml",
    EXISTS,
    "--force",
    files={"k.yaml": "mine\n"},
)

# --- launch, bundle, slurm, sif, keys ------------------------------------------------------
for name in ("launch", "bundle", "slurm"):
    case(
        f"{name}-runtime-bogus",
        (
            name,
            "--preset",
            "cpu-deepspeed",
            "--runtime",
            "podman",
            *(("--launcher", "torchrun") if name == "slurm" else ()),
        ),
        USAGE,
        "runtime",
    )
    case(
        f"{name}-launcher-bogus",
        (name, "--preset", "cpu-deepspeed", "--launcher", "horovodrun"),
        USAGE,
        "--launcher",
    )
    case(
        f"{name}-launcher-newline",
        (name, "--preset", "cpu-deepspeed", "--launcher", "torchrun\n"),
        USAGE,
        "--launcher",
    )
    case(
        f"{name}-image-newline",
        (name, "--preset", "cpu-deepspeed", "--image", "demo:latest\nRUN id"),
        USAGE,
        "--image",
    )
case("launch-unknown-option", "launch --preset cpu-deepspeed --nodes n1", USAGE, "--nodes")
case(
    "bundle-output-is-file",
    "bundle --preset cpu-deepspeed -o cluster",
    USAGE,
    "cluster",
    files={"cluster": "a file\n"},
)
case(
    "bundle-output-existing-force",
    "bundle --preset cpu-deepspeed -o d --force",
    USAGE,
    "d",
    dirs={"d": 0o755},
    files={"d/keep": "x"},
)
case(
    "bundle-half-keys",
    "bundle --preset cpu-deepspeed -o cluster",
    USAGE,
    "id_ed25519",
    dirs={"cluster": 0o700},
    files={"cluster/authorized_keys": "ssh-ed25519 AAAA x\n"},
)
case(
    "keys-output-is-file",
    "keys -o cluster",
    USAGE,
    "cluster",
    files={"cluster": "a file\n"},
)
case(
    "keys-existing-folder-mode",
    "keys -o d",
    USAGE,
    "d",
    dirs={"d": 0o755},
    files={"d/id_ed25519": "x"},
)
case(
    "keys-existing-key",
    "keys -o d",
    EXISTS,
    "--force",
    dirs={"d": 0o700},
    files={"d/id_ed25519": "x", "d/id_ed25519.pub": "y"},
)
case(
    "keys-bad-spec",
    "keys stack.yaml -o d",
    SPEC,
    "image.ssh.port",
    files={HOSTILE: spec(image="ssh: {port: 0}")},
)
case(
    "slurm-output-exists",
    "slurm --preset cpu-deepspeed --launcher torchrun -o job.sbatch",
    EXISTS,
    "--force",
    files={"job.sbatch": "#!/bin/sh\n"},
)
case(
    "slurm-extra-key-newline",
    ("slurm", HOSTILE),
    SPEC,
    "launch.slurm.extra",
    files={HOSTILE: spec(launch='slurm: {extra: ["--x\\ny=1"]}')},
)
case(
    "slurm-output-folder-force",
    "slurm --preset cpu-deepspeed --launcher torchrun -o d --force",
    USAGE,
    "d",
    dirs={"d": 0o755},
)
case(
    "sif-program-bogus",
    "sif demo:latest --program docker",
    USAGE,
    "--program",
)
case(
    "sif-image-newline",
    ("sif", "demo:latest\nid"),
    USAGE,
    "image",
)
case(
    "sif-image-option",
    ("sif", "--", "--help"),
    USAGE,
    "image",
)
case("sif-no-image", "sif", USAGE, "IMAGE")
case(
    "sif-output-newline",
    ("sif", "demo:latest", "-o", "a\nb.sif"),
    USAGE,
    "--output",
)

# --- build inputs (render and build share them) ---------------------------------------------
PEM = "-----BEGIN CERTIFICATE-----\nQUJD\n-----END CERTIFICATE-----\n"
for name in ("render", "build"):
    pre = (name, "--preset", "cpu-deepspeed")
    case(f"{name}-ca-missing", (*pre, "--ca-bundle", "ca.pem"), USAGE, "--ca-bundle")
    case(
        f"{name}-ca-not-pem",
        (*pre, "--ca-bundle", "ca.pem"),
        USAGE,
        "--ca-bundle",
        files={"ca.pem": "hello\n"},
    )
    case(
        f"{name}-ca-non-utf8",
        (*pre, "--ca-bundle", "ca.pem"),
        USAGE,
        "--ca-bundle",
        files={"ca.pem": PEM.encode() + b"\xff"},
    )
    case(
        f"{name}-ca-folder",
        (*pre, "--ca-bundle", "ca"),
        USAGE,
        "--ca-bundle",
        dirs={"ca": 0o755},
    )
    case(f"{name}-trust-ca-alone", (*pre, "--trust-ca"), USAGE, "--ca-bundle")
    case(f"{name}-wheelhouse-missing", (*pre, "--wheelhouse", "wh"), USAGE, "--wheelhouse")
    case(
        f"{name}-wheelhouse-empty",
        (*pre, "--wheelhouse", "wh"),
        USAGE,
        "--wheelhouse",
        dirs={"wh": 0o755},
    )
    case(
        f"{name}-wheelhouse-bad-name",
        (*pre, "--wheelhouse", "wh"),
        USAGE,
        "--wheelhouse",
        files={"wh/not-a-wheel.whl": ""},
    )
    case(f"{name}-index-ftp", (*pre, "--pip-index-url", "ftp://x"), USAGE, "ftp://x")
    case(
        f"{name}-index-newline",
        (*pre, "--pip-index-url", "https://x\nRUN id"),
        USAGE,
        "https://x",
    )
    case(
        f"{name}-index-trailing-newline",
        (*pre, "--pip-index-url", "https://x/\n"),
        USAGE,
        "--pip-index-url",
    )
    case(
        f"{name}-extra-index-space",
        (*pre, "--pip-extra-index-url", "https://x y"),
        USAGE,
        "https://x",
    )
    case(
        f"{name}-base-other-family",
        (*pre, "--base-image", "nvidia/cuda:12.4.1-devel-ubuntu22.04"),
        SPEC,
        "--base-image",
    )
    case(
        f"{name}-base-newline",
        (*pre, "--base-image", "debian\nRUN id"),
        USAGE,
        "--base-image",
    )
case("render-format-bogus", "render --preset cpu-deepspeed --format rpm", USAGE, "--format")
case("render-format-all-stdout", "render --preset cpu-deepspeed --format all", USAGE, "-o")
case(
    "render-output-is-file",
    "render --preset cpu-deepspeed -o out",
    USAGE,
    "out",
    files={"out": "a file\n"},
)
case(
    "render-rootfs-is-file",
    "render --preset cpu-deepspeed -o out",
    USAGE,
    "rootfs",
    files={"out/rootfs": "a file\n"},
)
case(
    "render-output-clobber",
    "render --preset cpu-deepspeed -o out",
    EXISTS,
    "--force",
    files={"out/Dockerfile": "FROM scratch\n"},
)
case(
    "render-output-dockerfile-folder-force",
    "render --preset cpu-deepspeed -o out --force",
    USAGE,
    "Dockerfile",
    dirs={"out/Dockerfile": 0o755},
)
case("lint-format-bogus", "lint --preset cpu-deepspeed --format rpm", USAGE, "--format")
case(
    "build-progress-bogus",
    "build --preset cpu-deepspeed --progress fancy",
    USAGE,
    "--progress",
)
case(
    "build-arg-bad",
    "build --preset cpu-deepspeed --build-arg NOVALUE",
    USAGE,
    "--build-arg",
)
case(
    "build-tag-newline",
    ("build", "--preset", "cpu-deepspeed", "--tag", "a:b\nc"),
    USAGE,
    "--tag",
)

# --- init, schema, presets ------------------------------------------------------------------
case("init-preset-bogus", "init --preset tpu", USAGE, "tpu")
case("init-preset-traversal", "init --preset ../../etc/passwd", USAGE, "preset")
case("init-output-exists", "init -o stack.yaml", EXISTS, "--force", files={HOSTILE: "mine\n"})
case(
    "init-output-folder-force",
    "init -o d --force",
    USAGE,
    "d",
    dirs={"d": 0o755},
)
case(
    "init-output-in-file",
    "init -o f/stack.yaml",
    USAGE,
    "f",
    files={"f": "x"},
)
case("schema-output-exists", "schema -o s.json", EXISTS, "--force", files={"s.json": "{}"})
case("schema-extra-argument", "schema extra", USAGE, "extra")
case(
    "schema-output-folder-force",
    "schema -o d --force",
    USAGE,
    "d",
    dirs={"d": 0o755},
)
case("presets-extra-argument", "presets cpu", USAGE, "cpu")
case("presets-unknown-option", "presets --yaml", USAGE, "--yaml")
case("unknown-command", "rendr", USAGE, "rendr")

# --- engine commands: bad options refused before connecting ----------------------------------
case("rehearse-nodes-zero", "rehearse --preset cpu-deepspeed --nodes 0", USAGE, "--nodes")
case("rehearse-nodes-many", "rehearse --preset cpu-deepspeed --nodes 1000", USAGE, "--nodes")
case(
    "rehearse-launcher-bogus",
    "rehearse --preset cpu-deepspeed --launcher horovodrun",
    USAGE,
    "--launcher",
)
case(
    "rehearse-launcher-unrehearsable",
    "rehearse --preset cpu-deepspeed --launcher gaudi_spawn",
    USAGE,
    "--launcher",
)
case("rehearse-timeout-zero", "rehearse --preset cpu-deepspeed --timeout 0", USAGE, "--timeout")
case(
    "rehearse-timeout-negative", "rehearse --preset cpu-deepspeed --timeout -5", USAGE, "--timeout"
)
case("rehearse-timeout-nan", "rehearse --preset cpu-deepspeed --timeout nan", USAGE, "--timeout")
case("rehearse-timeout-inf", "rehearse --preset cpu-deepspeed --timeout inf", USAGE, "--timeout")
case(
    "rehearse-script-empty",
    ("rehearse", "--preset", "cpu-deepspeed", "--script", ""),
    USAGE,
    "--script",
)
case(
    "rehearse-script-newline",
    ("rehearse", "--preset", "cpu-deepspeed", "--script", "a.py\nid"),
    USAGE,
    "--script",
)
case(
    "rehearse-args-without-script",
    "rehearse stack.yaml -- --lr 1",
    USAGE,
    "--script",
    files={HOSTILE: GOOD},
)
case("rehearse-image-newline", ("rehearse", "--image", "demo:latest\nid"), USAGE, "--image")
case("rehearse-image-option", ("rehearse", "--image", "--help=x"), USAGE, "--image")
case("rehearse-image-empty", ("rehearse", "--image", ""), USAGE, "--image")
case("lock-preset-no-output", "lock --preset cpu-deepspeed", USAGE, "-o")
case(
    "lock-output-folder",
    "lock --preset cpu-deepspeed -o d",
    USAGE,
    "d",
    dirs={"d": 0o755},
)
case("fingerprint-nothing", "fingerprint", USAGE, "--container")
case("fingerprint-both", "fingerprint demo:latest --container c1", USAGE, "--container")
case(
    "fingerprint-image-newline",
    ("fingerprint", "demo:latest\nid"),
    USAGE,
    "image",
)
case("verify-nothing", "verify", USAGE, "--hostfile")
case("verify-both", "verify --hostfile h --containers a", USAGE, "--hostfile")
case("verify-hostfile-missing", "verify --hostfile h", USAGE, "hostfile h")
case("verify-hostfile-folder", "verify --hostfile h", USAGE, "hostfile h", dirs={"h": 0o755})
case("verify-hostfile-empty", "verify --hostfile h", USAGE, "h", files={"h": "# nothing\n"})
case("verify-hostfile-bad-line", "verify --hostfile h", USAGE, "h:1", files={"h": "n1 slots=x\n"})
case(
    "verify-hostfile-duplicate",
    "verify --hostfile h",
    USAGE,
    "n1",
    files={"h": "n1 slots=1\nn1 slots=1\n"},
)
case(
    "verify-hostfile-non-utf8", "verify --hostfile h", USAGE, "h", files={"h": b"n\xff1 slots=1\n"}
)
case(
    "verify-hostfile-option-host",
    "verify --hostfile h",
    USAGE,
    "h:1",
    files={"h": "-oProxyCommand=id slots=1\n"},
)
case("verify-hostfile-slots-zero", "verify --hostfile h", USAGE, "h:1", files={"h": "n1 slots=0\n"})
case(
    "verify-hostfile-bad-host", "verify --hostfile h", USAGE, "h:1", files={"h": "n$(id) slots=1\n"}
)
case(
    "verify-containers-empty",
    "verify --containers ,",
    USAGE,
    "--containers",
)
case("diff-one-operand", "diff a", USAGE, "SECOND")
case("inspect-no-image", "inspect", USAGE, "IMAGE")
case(
    "inspect-image-newline",
    ("inspect", "demo\nid"),
    USAGE,
    "image",
)

# --- preflight: options, and a bundle that does not match the spec (no ssh is tried) ----
for value in ("1", "0", "-5", "nan", "inf", "2.9"):
    case(
        f"preflight-budget-{value}",
        ("preflight", "--preset", "cpu-deepspeed", "--budget", value),
        USAGE,
        "--budget",
    )
for value in ("0", "1", "-0.1", "nan", "1.5"):
    argv = ("preflight", "--preset", "cpu-deepspeed", "--threshold", value)
    case(f"preflight-threshold-{value}", argv, USAGE, "--threshold")
case(
    "preflight-rehearse-nodes-zero",
    "preflight --preset cpu-deepspeed --rehearse --nodes 0",
    USAGE,
    "--nodes",
)
case(
    "preflight-rehearse-nodes-many",
    "preflight --preset cpu-deepspeed --rehearse --nodes 99",
    USAGE,
    "--nodes",
)
case(
    "preflight-kubernetes-without-dry-run",
    "preflight --preset cpu-deepspeed --scheduler kubernetes",
    USAGE,
    "--dry-run",
)
case(
    "preflight-kubernetes-bogus",
    "preflight --preset cpu-deepspeed --scheduler slurm --dry-run",
    USAGE,
    "--scheduler",
)
case(
    "preflight-kubernetes-secrets-to-stdout",
    "preflight --preset cpu-deepspeed --scheduler kubernetes --dry-run",
    USAGE,
    "-o FILE",
)
case(
    "preflight-kubernetes-pytorchjob-deepspeed",
    "preflight --preset cpu-deepspeed --scheduler kubernetes --job pytorchjob --dry-run -o k.yaml",
    SPEC,
    "--job",
)
case(
    "preflight-kubernetes-other-content",
    "preflight --preset cpu-deepspeed --scheduler kubernetes --dry-run -o k.yaml",
    EXISTS,
    "--force",
    files={"k.yaml": "mine\n"},
)
case(
    "preflight-kubernetes-ssh-config",
    "preflight --preset cpu-deepspeed --scheduler kubernetes --dry-run --ssh-config c",
    USAGE,
    "--ssh-config",
    files={"c": "Host *\n"},
)
case(
    "preflight-kubernetes-name-too-long",
    "preflight stack.yaml --scheduler kubernetes --dry-run -o k.yaml",
    SPEC,
    "name",
    files={"stack.yaml": spec(launch="launcher: torchrun", name="a" * 45)},
)
case(
    "preflight-from-log-missing",
    "preflight --preset cpu-deepspeed --from-log nope.log",
    USAGE,
    "--from-log",
)
case(
    "preflight-from-log-folder",
    "preflight --preset cpu-deepspeed --scheduler kubernetes --from-log logs",
    USAGE,
    "--from-log",
    dirs={"logs": 0o755},
)
case(
    "preflight-from-log-with-dry-run",
    "preflight --preset cpu-deepspeed --from-log x.log --dry-run",
    USAGE,
    "--from-log",
    files={"x.log": "nothing\n"},
)
case(
    "preflight-ssh-config-missing",
    "preflight --preset cpu-deepspeed --ssh-config nope",
    USAGE,
    "--ssh-config",
)
case(
    "preflight-image-newline",
    ("preflight", "--preset", "cpu-deepspeed", "--image", "a\nid"),
    USAGE,
    "--image",
)
case(
    "preflight-hostfile-mismatch",
    "preflight stack.yaml --cluster-dir cluster",
    USAGE,
    "does not match the spec",
    files={
        "stack.yaml": spec(launch="nodes: [n1, n2]\nslots: 2"),
        "cluster/hostfile": "n1 slots=2\n",
    },
)
case(
    "preflight-cluster-dir-not-a-bundle",
    "preflight stack.yaml --cluster-dir cluster",
    USAGE,
    "has no hostfile",
    files={"stack.yaml": spec(launch="nodes: [n1, n2]\nslots: 2"), "cluster/other": "x"},
)
case(
    "preflight-nodes-without-rehearse",
    "preflight --preset cpu-deepspeed --nodes 3",
    USAGE,
    "--nodes",
)
case(
    "preflight-dry-run-rehearse",
    "preflight --preset cpu-deepspeed --rehearse --dry-run",
    USAGE,
    "--dry-run",
)
ARGV = "preflight --preset cpu-deepspeed --rehearse --cluster-dir c"
case("preflight-cluster-dir-rehearse", ARGV, USAGE, "--cluster-dir")

# --- choices, the cluster folder, - for stdin and stdout (issue 15) --------------------------
for name, args in (
    ("render-format", ("render", "--preset", "cpu-deepspeed", "--format")),
    ("lint-format", ("lint", "--preset", "cpu-deepspeed", "-f")),
    ("launch-runtime", ("launch", "--preset", "cpu-deepspeed", "--runtime")),
    ("bundle-launcher", ("bundle", "--preset", "cpu-deepspeed", "--launcher")),
    ("slurm-launcher", ("slurm", "--preset", "cpu-deepspeed", "--launcher")),
    ("build-progress", ("build", "--preset", "cpu-deepspeed", "--progress")),
    ("sif-program", ("sif", "demo:latest", "--program")),
    ("rehearse-launcher", ("rehearse", "--preset", "cpu-deepspeed", "--launcher")),
):
    option = args[-1] if args[-1] != "-f" else "--format"
    case(f"{name}-huge", (*args, MEGA), USAGE, option)
    case(f"{name}-choice-newline", (*args, "docker\nid"), USAGE, option)
    case(f"{name}-empty", (*args, ""), USAGE, option)
    case(f"{name}-upper", (*args, "DOCKER"), USAGE, option)
case("hostfile-n-is-a-count-elsewhere", "hostfile -n gpu1", USAGE, "-n")
case("keys-cluster-dir-is-file", "keys --cluster-dir c", USAGE, "c", files={"c": "a file\n"})
case(
    "bundle-cluster-dir-is-file",
    "bundle --preset cpu-deepspeed --cluster-dir c",
    USAGE,
    "c",
    files={"c": "a file\n"},
)
case("stdin-spec-invalid", "render -", SPEC, "<stdin>", stdin="name: X\n")
case("stdin-spec-field", "launch -", SPEC, "image.accelerator", stdin="name: demo\nimage: {}\n")
case("stdin-spec-non-utf8", "render -", SPEC, "line 2", stdin=b"name: demo\n\xff\n")
case("stdin-spec-empty", "hostfile -", SPEC, "(top level)", stdin="")
case("stdin-spec-alias-bomb", "render - -o out", SPEC, "alias", stdin=ALIAS_BOMB)
case("stdin-spec-too-large", "render -", USAGE, "larger than", stdin="#" * (5 * 1024 * 1024))
case("stdin-spec-and-preset", "render - --preset cpu-deepspeed", USAGE, "not both", stdin=GOOD)
case("stdin-spec-lock-needs-output", "lock -", USAGE, "-o FILE.lock", stdin=GOOD)
case("stdin-spec-build-bad-tag", ("build", "-", "--tag", "a b"), USAGE, "--tag", stdin=GOOD)
case(
    "stdin-spec-requirements-outside",
    "render -",
    SPEC,
    "image.requirements",
    stdin=spec(image="requirements: ../r.txt"),
)
case(
    "lint-output-format-bogus",
    "lint --preset cpu-deepspeed --output-format json",
    USAGE,
    "--output-format",
)
case("lint-sarif-is-not-a-format", "lint --preset cpu-deepspeed -f sarif", USAGE, "--format")

# --- push: what is pushed is a name:tag; a digest record beside the spec is checked ----
case(
    "push-image-newline",
    ("push", "--preset", "cpu-deepspeed", "--image", "a:1\nid"),
    USAGE,
    "--image",
)
case(
    "push-image-digest",
    ("push", "--preset", "cpu-deepspeed", "--image", "a@sha256:" + "1" * 64),
    USAGE,
    "digest",
)
# --- ship: a name:tag to docker nodes; the nodes' runtime and ssh config are checked first -
case(
    "ship-image-newline",
    ("ship", "--preset", "cpu-deepspeed", "--image", "a:1\nid"),
    USAGE,
    "--image",
)
case(
    "ship-image-digest",
    ("ship", "--preset", "cpu-deepspeed", "--image", "a@sha256:" + "1" * 64),
    USAGE,
    "digest",
)
case("ship-check-and-force", "ship --preset cpu-deepspeed --check --force", USAGE, "--check")
case("ship-ssh-config-missing", "ship --preset cpu-deepspeed --ssh-config nope", USAGE, "nope")
case(
    "ship-apptainer",
    ("ship", "spec.yaml"),
    USAGE,
    "launch.sif",
    files={"spec.yaml": spec(launch="runtime: apptainer")},
)
for name, record in (
    ("not-json", "{"),
    ("bad-digest", '{"schema": 1, "reference": "demo:latest", "digest": "sha256:1"}'),
    (
        "shell-reference",
        '{"schema": 1, "reference": "demo:latest;id", "digest": "sha256:' + "1" * 64 + '"}',
    ),
):
    case(
        f"launch-digest-record-{name}",
        "launch stack.yaml",
        USAGE,
        "stack.digest",
        files={"stack.yaml": GOOD, "stack.digest": record},
    )
case("keys-dash-folder", "keys --preset cpu-deepspeed -o -", USAGE, "--cluster-dir")
case("bundle-dash-folder", "bundle --preset cpu-deepspeed --cluster-dir -", USAGE, "--cluster-dir")

# The third round, one module per destination; each appends with case().
# The fourth round: what the real consumers (kubectl, sbatch, srun, the API server) read.
from tests.hostile import (  # noqa: E402, F401
    consumers,
    files_and_options,
    launch_values,
    node_dir,
    pyxis,
)
