"""The rehearsal's orchestration on the fake engine: the plan's own `docker run` and
`docker exec` lines, the order of its phases, where each fault lands, and that
nothing is left behind. DeepSpeed and torchrun are played by small programs that
do what the real ones do with the bundle: read the hostfile, .deepspeed_env and
probe.json through the containers' mounts, and print each rank's probe report
(tests/integration runs the real launchers)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

import pytest

from builder.cluster.hostfile import read_hostfile
from builder.contract import PRESET_LABEL, REHEARSAL_LABEL
from builder.errors import NotInEngine, UsageError
from builder.launch.launchers.torchrun import LOGGED
from builder.launch.plan import launch_plan
from builder.rehearse.report import MARK
from builder.rehearse.run import Rehearsal, rehearsal_of, rehearse
from builder.resolved import resolve
from builder.spec.loader import load_preset
from tests.fakes import TOOLS, FakeEngine, FakeImage, Ran

if TYPE_CHECKING:
    from builder.rehearse.session import Outcome
    from builder.spec.records import Spec
    from tests.fakes import FakeContainer, Program

SSH_PHASES = ["prepare", "image check", "containers up", "sshd ready", "ssh mesh ready", "job"]
PACKAGES = {"torch": "2.13.0", "deepspeed": "0.19.8"}
WORKDIR = "/workspace"
"""image.workdir of the presets, where launch.code is mounted."""


def stack_image(spec: Spec, **changes: Any) -> FakeImage:
    """The image `builder build` makes of spec, as the fake holds it."""
    reference = f"{spec.image.name}:{spec.image.tag}"
    return replace(
        FakeImage(f"sha256:{spec.name}", (reference,), packages=dict(PACKAGES)), **changes
    )


def probe(
    peer: FakeContainer, script: str, rank: tuple[int, int, int], master: str, env: dict[str, str]
) -> str:
    """The line the probe (script) prints on peer for (rank, local rank, world) when its
    all-reduce works: the variables probe.json beside it asks for, as env has them."""
    path = str(PurePosixPath(WORKDIR, script))  # a relative script is in the code folder
    settings = json.loads((peer.host_path(path).parent / "probe.json").read_text())
    asked = settings["env"]
    number, local, world = rank
    data = {
        "rank": number,
        "local_rank": local,
        "world": world,
        "node": peer.hostname,
        "master": master,
        "env": {key: env.get(key) for key in asked},
        "packages": peer.packages,
        "sum": world * (world + 1) / 2,
        "error": None,
        # each node's first rank uses the ops the image carries (the fake images do)
        "ops": dict.fromkeys(settings["ops"], "prebuilt") if local == 0 else {},
    }
    return MARK + json.dumps(data, sort_keys=True)


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def unescape(value: str, host: str, index: int) -> str:
    """A .deepspeed_env value as a rank on host gets it: pdsh substitutes %h, %u, %n and
    %% in the command line, then sh reads the value in the double quotes DeepSpeed put
    around it: a backslash escapes \\ " $ `, and $NAME expands ($HOME is /root)."""
    codes = {"%": "%", "h": host, "u": "root", "n": str(index)}
    value = re.sub(r"%([%hun])", lambda found: codes[found[1]], value)
    shell = {"HOME": "/root"}
    return re.sub(
        r'\\([\\"$`])|\$(\w+)',
        lambda found: found[1] if found[1] is not None else shell.get(found[2], ""),
        value,
    )


def deepspeed(fail: dict[str, int] | None = None) -> Program:
    """DeepSpeed's launcher: every hostfile host over pdsh (ssh), its ranks with the
    variables of .deepspeed_env only (an ssh session does not get the container's);
    a host in fail has its ranks exit with that code, as pdsh then says."""
    failing = fail or {}

    def launch(engine: FakeEngine, box: FakeContainer, argv: list[str], env: dict[str, str]) -> Ran:
        hosts = read_hostfile(box.host_path(option(argv, "--hostfile")))
        lines = box.host_path(env["DS_ENV_FILE"]).read_text().splitlines()
        world, master = sum(host.slots for host in hosts), option(argv, "--master_addr")
        output, code, rank = "", 0, 0
        for index, host in enumerate(hosts):
            reached = engine.process(box, ["ssh", host.name, "hostname"], env)
            peer = engine.reach(box, host.name)
            exit_code = failing.get(host.name, reached.code)
            if exit_code or peer is None:
                output += f"{host.name}: RuntimeError: rank failed\n"
                output += (
                    f"pdsh@{box.hostname}: {host.name}: ssh exited with exit code {exit_code}\n"
                )
                code, rank = 1, rank + host.slots
                continue
            pairs = (line.partition("=") for line in lines)
            dsenv = {key: unescape(value, host.name, index) for key, _, value in pairs}
            for local in range(host.slots):
                line = probe(peer, argv[-1], (rank, local, world), master, dsenv)
                output += f"{host.name}: {line}\n"
                rank += 1
        return Ran(code, output)

    return launch


ROOT_CAUSE = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
Root Cause (first observed failure):
[0]:
  host      : {host}
  rank      : {rank} (local_rank: 0)
  exitcode  : {code} (pid: 20)
"""


def torchrun(fail: dict[str, int] | None = None) -> Program:
    """torchrun as a node's main process: its node rank in the order the nodes join the
    rendezvous, its ranks with the container's variables; on a host in fail, rank 0
    of the node exits with that code and torchrun prints its root cause."""
    failing = fail or {}

    def run(engine: FakeEngine, box: FakeContainer, argv: list[str], env: dict[str, str]) -> Ran:
        slots, nodes = int(option(argv, "--nproc-per-node")), int(option(argv, "--nnodes"))
        joined = [c for c in engine.boxes.values() if c.network == box.network]
        first = next(i for i, c in enumerate(joined) if c is box) * slots
        if box.hostname in failing:
            return Ran(
                1, "", ROOT_CAUSE.format(host=box.hostname, rank=first, code=failing[box.hostname])
            )
        master = option(argv, "--rdzv-endpoint").split(":")[0]
        ranks = [(first + local, local, nodes * slots) for local in range(slots)]
        lines = "".join(probe(box, argv[-1], rank, master, env) + "\n" for rank in ranks)
        return Ran(0, lines, "torchrun: all ranks done\n")

    return run


def run_rehearsal(fake: FakeEngine, spec: Spec, launcher: str | None = None) -> Outcome:
    return rehearse(spec, image=None, engine=fake, nodes=2, launcher=launcher, timeout=5)


def over_ssh(fake: FakeEngine, spec: Spec) -> Rehearsal:
    """The deepspeed rehearsal of spec on two nodes, in phases."""
    image = f"{spec.image.name}:{spec.image.tag}"
    return Rehearsal(rehearsal_of(spec, "deepspeed"), image=image, engine=fake, nodes=2)


def assert_nothing_left(fake: FakeEngine) -> None:
    assert fake.containers() == []
    assert fake.networks == set()
    (created,) = fake.called("create_network")
    assert fake.called("remove_labelled") == [("remove_labelled", REHEARSAL_LABEL, created[1])]


@pytest.mark.parametrize("preset", ["cpu-deepspeed", "cuda-deepspeed"])
def test_deepspeed_over_ssh_passes_on_every_rank(preset: str) -> None:
    spec = load_preset(preset).spec
    fake = FakeEngine(stack_image(spec))
    fake.programs["deepspeed"] = deepspeed()
    outcome = run_rehearsal(fake, spec)
    assert outcome.faults == []
    assert outcome.ok
    world = 2 * spec.launch.slots
    assert [row.rank for row in outcome.rows] == list(range(world))
    assert [row.node for row in outcome.rows] == ["node1"] * (world // 2) + ["node2"] * (world // 2)
    assert [name for name, _ in outcome.phases] == [*SSH_PHASES, "teardown"]
    runs = fake.called("cli", "docker", "run")
    session = fake.called("create_network")[0][1]
    assert len(runs) == 2
    for number, run in enumerate(runs, start=1):
        argv = list(run[1:])
        assert argv[argv.index("--label") + 1] == f"{REHEARSAL_LABEL}={session}"
        assert argv[argv.index("--network") + 1] == session
        assert argv[argv.index("--hostname") + 1] == f"node{number}"
        assert "--gpus" not in argv
        assert argv[argv.index("--ipc") + 1] == "host"  # the cpu platform's flags stand in
    (launch,) = fake.called("cli", "docker", "exec")
    assert launch[3:].count(f"{session}-node1") == 1
    assert "deepspeed" in launch
    assert_nothing_left(fake)


def test_the_emitted_gpu_flags_would_not_start_here() -> None:
    """Why the stand-in's flags matter: the fake, like docker on this machine, refuses --gpus."""
    spec = load_preset("cuda-deepspeed").spec
    fake = FakeEngine(stack_image(spec))
    plan = launch_plan(resolve(spec), image="builder/cuda-deepspeed:latest", cluster_dir="/c")
    emitted = plan.of_role("start")[0].argv
    assert "--gpus" in emitted
    code, output = fake.cli(emitted, 5)
    assert code == 125
    assert "[[gpu]]" in output
    assert fake.containers() == []


def test_a_node_gone_before_the_mesh_is_named_and_the_job_not_run() -> None:
    spec = load_preset("cpu-deepspeed").spec
    fake = FakeEngine(stack_image(spec))
    fake.programs["deepspeed"] = deepspeed()
    with over_ssh(fake, spec) as rehearsal:
        rehearsal.up()
        assert rehearsal.outcome.ok
        fake.remove_container(rehearsal.session.nodes[1].container)
        outcome = rehearsal.job()
    assert [(f.node, f.what) for f in outcome.faults] == [
        ("node2", "its container stopped (gone): sshd is gone")
    ]
    assert fake.called("cli", "docker", "exec") == []
    assert outcome.rows == []
    assert [name for name, _ in outcome.phases] == [*SSH_PHASES[:-1], "teardown"]
    assert_nothing_left(fake)


def test_a_node_whose_ranks_fail_is_named_from_pdsh() -> None:
    spec = load_preset("cpu-deepspeed").spec
    fake = FakeEngine(stack_image(spec))
    fake.programs["deepspeed"] = deepspeed(fail={"node2": 3})
    outcome = run_rehearsal(fake, spec)
    assert {f.node for f in outcome.faults} == {"node2"}
    first = outcome.faults[0]
    assert first.what == "its ranks exited with code 3"
    assert first.log_tail == "node2: RuntimeError: rank failed"
    assert ("node2", "rank(s) 2, 3 never reported") in {(f.node, f.what) for f in outcome.faults}
    assert [row.rank for row in outcome.rows] == [0, 1]
    assert_nothing_left(fake)


def test_a_node_with_other_packages_is_named() -> None:
    spec = load_preset("cpu-deepspeed").spec
    fake = FakeEngine(stack_image(spec))
    fake.programs["deepspeed"] = deepspeed()
    with over_ssh(fake, spec) as rehearsal:
        rehearsal.up()
        fake.container(rehearsal.session.nodes[1].container).packages["torch"] = "2.12.0"
        outcome = rehearsal.job()
    assert [(f.node, f.what) for f in outcome.faults] == [
        ("node2", "environment differs: torch 2.12.0 (on node1: 2.13.0)")
    ]


def test_a_hung_launcher_is_a_fault_of_the_run() -> None:
    spec = load_preset("cpu-deepspeed").spec
    fake = FakeEngine(stack_image(spec))
    fake.programs["deepspeed"] = lambda *_: Ran(None, "node1: starting\n")
    outcome = run_rehearsal(fake, spec)
    assert [(f.node, f.what) for f in outcome.faults][:1] == [
        (None, "the job did not finish within 5 s")
    ]
    assert_nothing_left(fake)


def test_an_image_without_the_launchers_tools_is_refused_before_any_container() -> None:
    spec = load_preset("cpu-deepspeed").spec
    fake = FakeEngine(stack_image(spec, tools=TOOLS - {"pdsh", "deepspeed"}))
    with pytest.raises(UsageError, match="lacks deepspeed, pdsh, which the deepspeed rehearsal"):
        run_rehearsal(fake, spec)
    assert fake.called("cli") == []
    assert fake.called("run")  # the tool check ran in a throwaway container
    assert_nothing_left(fake)


def test_torchrun_on_every_node_passes() -> None:
    spec = load_preset("cpu-deepspeed").spec
    fake = FakeEngine(stack_image(spec))
    fake.programs["torchrun"] = torchrun()
    outcome = run_rehearsal(fake, spec, launcher="torchrun")
    assert outcome.faults == []
    assert [(row.rank, row.node) for row in outcome.rows] == [
        (r, f"node{r // 2 + 1}") for r in range(4)
    ]
    phases = ["prepare", "image check", "containers up", "job", "teardown"]
    assert [name for name, _ in outcome.phases] == phases
    assert fake.called("cli", "docker", "exec") == []
    for run in fake.called("cli", "docker", "run"):
        # torchrun with the run's logs folder (the session's, as launch.logs is)
        assert run[run.index("sh") : run.index("sh") + 3] == ("sh", "-c", LOGGED)
    assert_nothing_left(fake)


def test_torchrun_root_cause_names_the_failed_node() -> None:
    spec = load_preset("cpu-deepspeed").spec
    fake = FakeEngine(stack_image(spec))
    fake.programs["torchrun"] = torchrun(fail={"node2": 3})
    outcome = run_rehearsal(fake, spec, launcher="torchrun")
    faults = [(f.node, f.what) for f in outcome.faults]
    assert faults[0] == ("node2", "rank 2 exited with code 3 (torchrun's root cause)")
    assert "host      : node2" in outcome.faults[0].log_tail
    assert {node for node, _ in faults} == {"node2"}
    assert_nothing_left(fake)


def test_an_image_alone_is_rehearsed_as_the_preset_it_was_built_from() -> None:
    spec = load_preset("cpu-deepspeed").spec
    fake = FakeEngine(stack_image(spec, labels={PRESET_LABEL: "cpu-deepspeed"}))
    fake.programs["deepspeed"] = deepspeed()
    outcome = rehearse(None, image="builder/cpu-deepspeed", engine=fake, nodes=2, launcher=None)
    assert outcome.ok
    assert outcome.launcher == "deepspeed"
    assert len(outcome.rows) == 2 * spec.launch.slots


def test_an_image_not_in_the_engine_starts_nothing() -> None:
    spec = load_preset("cpu-deepspeed").spec
    fake = FakeEngine()
    with pytest.raises(NotInEngine, match="build it with `builder build`") as caught:
        run_rehearsal(fake, spec)
    assert caught.value.exit_code == 14
    assert fake.calls == []


def test_the_bundle_and_its_key_go_even_when_the_network_will_not() -> None:
    """Something else still on the rehearsal's network: its removal fails, the bundle
    (with the cluster's private key) is removed all the same."""
    spec = load_preset("cpu-deepspeed").spec
    fake = FakeEngine(stack_image(spec))
    fake.programs["deepspeed"] = deepspeed()
    rehearsal = over_ssh(fake, spec)
    folder = rehearsal.session.folder
    rehearsal.up()
    assert (folder / "id_ed25519").is_file()
    fake.start(stack_image(spec).id, name="stranger", network=rehearsal.session.network)
    with pytest.raises(RuntimeError, match="active endpoints"):
        rehearsal.close()
    assert not folder.exists()
