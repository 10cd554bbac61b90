"""Hostile inputs, fourth round: what the real consumers would misread (appended to the
corpus's CASES). kubectl's YAML 1.1 reader and the API server's rules, sbatch's getopt
and srun's filename patterns, every launcher's rendezvous host, the image's own folders,
a saved preflight log, and registry ports. Each is refused (or judged) with its field
named, nothing written."""

from __future__ import annotations

from tests.hostile.corpus import SPEC, USAGE, case, spec

PREFLIGHT_FAILED = 15
K8S = ("kubernetes", "stack.yaml", "-o", "k.yaml")
TORCHRUN = "launcher: torchrun\nnodes: [node1, node2]\n"


def k8s(name: str, launch: str, says: str, *, code: int = SPEC, image: str = "") -> None:
    """A kubernetes command on a spec with launch lines (the torchrun run by default)."""
    body = launch if launch.startswith("launcher:") else TORCHRUN + launch
    case(f"k8s-{name}", K8S, code, says, files={"stack.yaml": spec(image=image, launch=body)})


# --- what the API server refuses --------------------------------------------------------
for index, name in enumerate(("7b", "1-run", "9x", "0")):
    case(
        f"k8s-name-digit-{index}",
        K8S,
        SPEC,
        "DNS-1035",
        files={"stack.yaml": spec(name=f"'{name}'", launch=TORCHRUN)},
    )
for name, tolerations, says in (
    ("exists-with-value", "[{key: k, operator: Exists, value: v}]", "leave value out"),
    ("equal-without-key", "[{operator: Equal, value: v}]", "needs a key"),
    ("default-without-key", "[{value: v}]", "needs a key"),
    ("default-without-key-effect", "[{effect: NoSchedule}]", "needs a key"),
    ("second-bad", "[{key: a}, {operator: Exists, key: b, value: c}]", "[1]"),
):
    k8s(f"toleration-{name}", f"kubernetes: {{tolerations: {tolerations}}}", says)
for name, option in (
    ("claim-zero", "claim_size: '0'"),
    ("claim-zero-gi", "claim_size: 0Gi"),
    ("claim-leading-zero", "claim_size: 0100Gi"),
    ("shm-zero", "shm_size: '0'"),
    ("shm-zero-mi", "shm_size: 0Mi"),
    ("claim-negative", "claim_size: -1Gi"),
    ("claim-decimal", "claim_size: 1.5Gi"),
):
    key = option.split(":", 1)[0]
    k8s(name, f"kubernetes: {{{option}}}", f"launch.kubernetes.{key}")
for name, target, says in (
    ("dev-shm", "/dev/shm", "/dev/shm"),
    ("dev-shm-slash", "/dev/shm/", "/dev/shm"),
    ("dev-shm-double", "//dev//shm", "/dev/shm"),
    ("proc", "/proc/x", "/proc"),
    ("sys", "/sys", "/sys"),
    ("venv-lib", "/opt/venv/lib", "/opt/venv"),
    ("usr-local-bin", "/usr/local/bin", "/usr"),
    ("etc-builder", "/etc/builder/preflight", "/etc/builder"),
    ("opt", "/opt", "/opt/venv"),
):
    k8s(f"mount-{name}", f"mounts: [{{source: /data, target: '{target}'}}]", says)
k8s("deepspeed-one-node", "launcher: deepspeed\nnodes: [node1]", "written as two")
case(
    "k8s-efa-without-count",
    K8S,
    SPEC,
    "launch.kubernetes.fabric_devices",
    files={
        "stack.yaml": spec(image="fabric: efa", launch=TORCHRUN, top="").replace(
            "accelerator: cpu", "accelerator: cuda"
        )
    },
)

# --- kubectl's reader: a named runtime's patch per Trainer release ------------------------
for release, option, says in (
    ("2.0", "network: team/rdma-net", "annotations"),
    ("2.0", "image_pull_secrets: [login]", "imagePullSecrets"),
    ("2.1", "rdma_resource: rdma/hca, host_network: true", "securityContext"),
    ("2.3", "", "launch.kubernetes.trainer"),
    ("v2.2", "", "launch.kubernetes.trainer"),
):
    extra = f", {option}" if option else ""
    fabric = "fabric: infiniband" if "rdma" in option else ""
    k8s(
        f"trainer-{release}-{option.split(':')[0] or 'release'}",
        f"kubernetes: {{runtime: torch-distributed, trainer: '{release}'{extra}}}",
        says,
        image=fabric,
    )

# --- a secret quoted by YAML or a shell is still a secret --------------------------------
for index, secret in enumerate(
    ("#hf'K8S: y", 'a"b\\\\c: d', "it's $(here)", "- dash first token", "tab\\there xyz")
):
    quoted = secret.replace("'", "''")
    for launcher in ("torchrun", "deepspeed"):
        case(
            f"k8s-secret-in-args-{launcher}-{index}",
            K8S,
            SPEC,
            "launch.env.HF_TOKEN",
            files={
                "stack.yaml": spec(
                    launch=f"launcher: {launcher}\nnodes: [node1, node2]\n"
                    f"env: {{HF_TOKEN: '{quoted}'}}\nargs: ['--token', '{quoted}']"
                )
            },
        )

# --- sbatch's getopt: aliases and unique starts of the options builder writes ------------
SLURM = "launcher: torchrun\nslurm: {cpus_per_task: 4, %s}"
for option in (
    "--tasks-per-node=4",
    "--tasks=4",
    "--ntasks-per-n=4",
    "--ntasks-per-no=2",
    "--outp=x.out",
    "--out=x.out",
    "--err=x.err",
    "--cpus-per-t=2",
    "--job=other",
    "--job-n=other",
    "--part=debug",
    "--acc=x",
    "--no-req",
    "--wr=true",
    "--sig=USR1@60",
    "--gpus-per-t=1",
    "--gpu-b=closest",
    "--nod=2",
    "--ntask=8",
    "--exclus",
    "--open-m=append",
    "--ch=/tmp",
    "--ti=10",
    "--requ",
):
    case(
        f"slurm-extra-{option.lstrip('-').split('=')[0]}",
        ("slurm", "stack.yaml"),
        SPEC,
        "launch.slurm.extra[0]",
        files={"stack.yaml": spec(launch=SLURM % f"extra: ['{option}']")},
    )
for option in ("--mem-per-cpu=4G", "--mem-per-gpu=40G", "--mem-per-c=4G", "--mem-per=1G"):
    case(
        f"slurm-mem-and-{option.lstrip('-').split('=')[0]}",
        ("slurm", "stack.yaml"),
        SPEC,
        "launch.slurm.extra[0]",
        files={"stack.yaml": spec(launch=SLURM % f"mem: 500G, extra: ['{option}']")},
    )

# --- srun's filename patterns: a backslash turns every one off ---------------------------
for name, logs in (
    ("backslash", "/shared/lo\\\\gs"),
    ("backslash-end", "/shared/logs\\\\"),
    ("percent", "/shared/100%/logs"),
    ("percent-n", "/shared/%N"),
):
    case(
        f"slurm-logs-{name}",
        ("slurm", "stack.yaml"),
        USAGE,
        "launch.logs",
        files={"stack.yaml": spec(launch=(SLURM % "mem: 1G") + f'\nlogs: "{logs}"')},
    )
case(
    "slurm-cluster-dir-backslash",
    ("slurm", "stack.yaml", "--cluster-dir", "/shared/c\\d"),
    USAGE,
    "--cluster-dir",
    files={"stack.yaml": spec(launch=SLURM % "mem: 1G")},
)

# --- the rendezvous host, for every launcher ---------------------------------------------
for launcher in ("torchrun", "deepspeed", "mpirun"):
    image = "openmpi: true" if launcher == "mpirun" else ""
    for index, host in enumerate(
        ("10.0.0.1:29500", "gpu01:29500", "-x", "--help", "a b", "gpu01;id", "$(id)", "gpu01.")
    ):
        case(
            f"master-addr-{launcher}-{index}",
            ("launch", "stack.yaml"),
            SPEC,
            "launch.master_addr",
            files={
                "stack.yaml": spec(
                    image=image, launch=f"launcher: {launcher}\nmaster_addr: '{host}'"
                )
            },
        )

# --- paths: normalised first, and never inside the image's folders -----------------------
for name, launch, says in (
    ("checkpoints-usr-local", "checkpoints: /usr/local", "launch.checkpoints"),
    ("checkpoints-double-tmp", "checkpoints: //tmp/ckpt", "launch.checkpoints"),
    ("logs-double-dev-shm", "logs: //dev/shm/logs", "launch.logs"),
    ("logs-venv", "logs: /opt/venv/logs", "launch.logs"),
    ("checkpoints-var-tmp", "checkpoints: /var//tmp/c/", "launch.checkpoints"),
    ("mount-sbin", "mounts: [{source: /d, target: /sbin/x}]", "launch.mounts[0].target"),
    ("mount-lib", "mounts: [{source: /d, target: ///lib}]", "launch.mounts[0].target"),
):
    case(
        f"path-{name}",
        ("launch", "stack.yaml"),
        SPEC,
        says,
        files={"stack.yaml": spec(launch=launch)},
    )

# --- registry ports -----------------------------------------------------------------------
for index, port in enumerate(("99999", "0", "65536", "123456789")):
    case(
        f"registry-port-name-{index}",
        ("render", "stack.yaml"),
        SPEC,
        "image.name",
        files={"stack.yaml": spec(image=f"name: reg.example.com:{port}/team/demo")},
    )
    case(
        f"registry-port-image-{index}",
        ("launch", "stack.yaml", "--image", f"reg.example.com:{port}/demo:1"),
        USAGE,
        "--image",
        files={"stack.yaml": spec()},
    )
    case(
        f"registry-port-base-{index}",
        ("render", "stack.yaml", "--base-image", f"reg.example.com:{port}/debian:12"),
        USAGE,
        "--base-image",
        files={"stack.yaml": spec()},
    )
case(
    "platform-base-twice",
    ("build", "stack.yaml", "--platform-base", "linux/arm64=a:1", "--platform-base", "aarch64=b:1"),
    USAGE,
    "given twice",
    files={"stack.yaml": spec(image="platforms: [linux/amd64, linux/arm64]")},
)
case(
    "platform-base-not-built",
    ("build", "stack.yaml", "--platform-base", "linux/arm64=a:1"),
    USAGE,
    "does not build linux/arm64",
    files={"stack.yaml": spec()},
)

# --- a saved preflight log: any line is judged, never a traceback -------------------------
MARK = "BUILDER_PREFLIGHT "
for name, text in (
    ("brackets", MARK + "[" * 100_000),
    ("braces", MARK + "{" * 50_000),
    ("huge-rank", MARK + '{"rank": ' + "9" * 5000 + "}"),
    ("inf-rank", MARK + '{"rank": 1e400}'),
    ("string-rank", MARK + '{"rank": "0"}'),
    ("bool-rank", MARK + '{"rank": true}'),
    ("negative-rank", MARK + '{"rank": -1}'),
    ("world-string", MARK + '{"rank": 0, "world": "two"}'),
    ("versions-list", MARK + '{"rank": 0, "world": 2, "versions": ["torch"]}'),
    ("point-without-max", MARK + '{"rank": 0, "world": 2, "allreduce": {"world": [{"min": 3}]}}'),
    ("escape-codes", MARK + '{"rank": 0, "error": "\\u001b]0;owned\\u0007"}'),
    ("nan", MARK + '{"rank": 0, "world": NaN, "matmul": {"tflops": Infinity}}'),
    ("cut-lines", "\n".join([MARK + '{"rank": 0, "world": 2, "no'] * 20_000)),
    ("binary", "\x00\xff" * 1000),
):
    case(
        f"from-log-{name}",
        ("preflight", "--preset", "cpu-deepspeed", "--from-log", "p.log"),
        PREFLIGHT_FAILED,
        "preflight named",
        files={"p.log": text},
    )
