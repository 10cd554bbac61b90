"""launch.master_addr is checked for every launcher as each passes it on: a host name or an
IP address, never a port (launch.master_port has it) nor an option to the launcher."""

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
