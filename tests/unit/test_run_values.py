"""Run values as their consumers read them: launch.master_addr, for every launcher, a host
name or an IP address, never a port (launch.master_port has it) nor an option to the
launcher; paths normalised before any check, and no bind inside the image's folders."""

from __future__ import annotations

import dataclasses

import pytest

from builder.launch.launchers.torchrun import torchrun_argv
from builder.spec.loader import load_preset, parse_spec
from tests.unit.test_spec import problems

SPEC = (
    "name: t\nimage: {accelerator: cpu, torch: '2.13.0', deepspeed: '0.18.0', openmpi: true}\n"
    "launch: {launcher: %s, master_addr: %s}\n"
)


@pytest.mark.parametrize("launcher", ["torchrun", "deepspeed", "mpirun"])
@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("'10.0.0.1:29500'", "carries a port"),
        ("'gpu01:29500'", "carries a port"),
        ("'-x'", "not a host name"),
        ("'--master-port=1'", "not a host name"),
        ("'a b'", "not a host name"),
        ("'gpu01;id'", "not a host name"),
        ("'$(id)'", "not a host name"),
        ("''", "not a host name"),
        ("'gpu01.'", "not a host name"),
        ("'[::1]'", "not a host name"),
    ],
)
def test_a_master_addr_no_launcher_reads_as_a_host_is_refused(
    launcher: str, value: str, said: str
) -> None:
    found = problems(SPEC % (launcher, value))
    assert [p.path for p in found] == ["launch.master_addr"]
    assert said in found[0].message


@pytest.mark.parametrize("value", ["gpu01", "node-1.cluster.local", "10.0.0.1", "fe80::1", "n_1"])
def test_host_names_and_addresses_pass(value: str) -> None:
    spec = parse_spec(SPEC % ("torchrun", f"'{value}'"), "stack.yaml")
    assert spec.launch.master_addr == value


def test_torchrun_puts_an_ipv6_master_in_brackets() -> None:
    """torch's own endpoint parser reads [ADDR]:PORT (an IPv6 address without them would
    lose its last group to the port)."""
    from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint

    launch = dataclasses.replace(load_preset("cuda-torchrun").spec.launch, master_addr="fe80::1")
    argv = torchrun_argv(launch, nnodes=2, master_addr="fe80::1", rdzv_id="r")
    endpoint = argv[argv.index("--rdzv-endpoint") + 1]
    assert endpoint == "[fe80::1]:29500"
    assert parse_rendezvous_endpoint(endpoint, 29400) == ("fe80::1", 29500)


PATHS = (
    "name: t\nimage: {accelerator: cpu, torch: '2.13.0', deepspeed: '0.18.0'}\n"
    "launch: {launcher: torchrun, %s}\n"
)


@pytest.mark.parametrize(
    ("launch", "where", "said"),
    [
        ("checkpoints: /usr/local", "launch.checkpoints", "inside /usr"),
        ("logs: /opt/venv/lib/logs", "launch.logs", "inside /opt/venv"),
        ("mounts: [{source: /data, target: /usr/local/bin}]", "launch.mounts[0].target", "inside"),
        ("mounts: [{source: /data, target: /opt/venv/lib}]", "launch.mounts[0].target", "inside"),
        ("mounts: [{source: /data, target: /etc/builder/x}]", "launch.mounts[0].target", "inside"),
        ("mounts: [{source: /data, target: /dev/shm}]", "launch.mounts[0].target", "/dev/shm"),
        ("mounts: [{source: /data, target: /proc/x}]", "launch.mounts[0].target", "/proc"),
        ("mounts: [{source: /data, target: /opt}]", "launch.mounts[0].target", "over /opt/venv"),
        ("mounts: [{source: /data, target: //usr//lib/}]", "launch.mounts[0].target", "/usr"),
        ("checkpoints: //tmp/ckpt", "launch.checkpoints", "under /tmp"),
        ("logs: //dev/shm/logs", "launch.logs", "under /dev"),
        ("checkpoints: /var//tmp/c/", "launch.checkpoints", "under /var/tmp"),
    ],
)
def test_paths_are_normalised_and_a_bind_inside_the_images_folders_is_refused(
    launch: str, where: str, said: str
) -> None:
    found = problems(PATHS % launch)
    assert where in [p.path for p in found], found
    assert said in " ".join(p.message for p in found)


def test_a_normalised_path_is_what_the_run_binds() -> None:
    spec = parse_spec(
        PATHS % "checkpoints: //shared//ckpt/, mounts: [{source: /data/, target: //data}]", "s"
    )
    assert spec.launch.checkpoints == "/shared/ckpt"
    assert (spec.launch.mounts[0].source, spec.launch.mounts[0].target) == ("/data", "/data")
