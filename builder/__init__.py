"""builder: reproducible multi-node deep-learning training environments.

One stack spec (YAML or a built-in preset) yields the Dockerfile, the
Apptainer definition files and, from the same data, everything a launch
needs. The public API is below; names are imported on first use so that
importing ``builder`` (and running ``builder --help``) stays light.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from builder._version import __version__

if TYPE_CHECKING:
    from builder.cluster.dsenv import deepspeed_env_text, dsenv_for
    from builder.cluster.hostfile import Host, hostfile_text, hosts_from_nodes, read_hostfile
    from builder.cluster.nodelist import expand_nodelist
    from builder.engine.build import build_image
    from builder.engine.docker import connect
    from builder.engine.push import pull_image, push_image
    from builder.errors import BuilderError, SpecError
    from builder.fingerprint.compare import differences
    from builder.fingerprint.record import Fingerprint
    from builder.fingerprint.sources import of_containers, of_hosts, of_image, of_lock
    from builder.image.context import render_outputs
    from builder.image.pin import image_for, read_pin, write_pin
    from builder.image.recipe import Recipe, image_recipe, spec_hash
    from builder.image.registry import Pushed
    from builder.image.render import render_apptainer, render_dockerfile
    from builder.launch.bundle import write_bundle
    from builder.launch.plan import LaunchPlan, launch_plan
    from builder.launch.slurm import sbatch_script
    from builder.lint import lint_stack
    from builder.lock.take import take_lock
    from builder.output import OutputFile
    from builder.preflight.cluster import ClusterPreflight, Ssh
    from builder.preflight.probe import Settings as PreflightSettings
    from builder.preflight.rehearsal import rehearsed_preflight
    from builder.preflight.report import Preflight
    from builder.rehearse.run import rehearse
    from builder.spec.loader import Stack, load_preset, load_spec, parse_spec, spec_from_dict
    from builder.spec.records import Spec

_EXPORTS = {
    "BuilderError": "builder.errors",
    "SpecError": "builder.errors",
    "Spec": "builder.spec.records",
    "Stack": "builder.spec.loader",
    "load_spec": "builder.spec.loader",
    "load_preset": "builder.spec.loader",
    "parse_spec": "builder.spec.loader",
    "Recipe": "builder.image.recipe",
    "image_recipe": "builder.image.recipe",
    "spec_hash": "builder.image.recipe",
    "render_dockerfile": "builder.image.render",
    "render_apptainer": "builder.image.render",
    "OutputFile": "builder.output",
    "render_outputs": "builder.image.context",
    "lint_stack": "builder.lint",
    "build_image": "builder.engine.build",
    "connect": "builder.engine.docker",
    "LaunchPlan": "builder.launch.plan",
    "launch_plan": "builder.launch.plan",
    "sbatch_script": "builder.launch.slurm",
    "Host": "builder.cluster.hostfile",
    "hostfile_text": "builder.cluster.hostfile",
    "hosts_from_nodes": "builder.cluster.hostfile",
    "read_hostfile": "builder.cluster.hostfile",
    "expand_nodelist": "builder.cluster.nodelist",
    "deepspeed_env_text": "builder.cluster.dsenv",
    "dsenv_for": "builder.cluster.dsenv",
    "rehearse": "builder.rehearse.run",
    "spec_from_dict": "builder.spec.loader",
    "write_bundle": "builder.launch.bundle",
    "push_image": "builder.engine.push",
    "pull_image": "builder.engine.push",
    "Pushed": "builder.image.registry",
    "image_for": "builder.image.pin",
    "read_pin": "builder.image.pin",
    "write_pin": "builder.image.pin",
    "take_lock": "builder.lock.take",
    "Fingerprint": "builder.fingerprint.record",
    "of_image": "builder.fingerprint.sources",
    "of_containers": "builder.fingerprint.sources",
    "of_hosts": "builder.fingerprint.sources",
    "of_lock": "builder.fingerprint.sources",
    "differences": "builder.fingerprint.compare",
    "ClusterPreflight": "builder.preflight.cluster",
    "Ssh": "builder.preflight.cluster",
    "PreflightSettings": "builder.preflight.probe",
    "rehearsed_preflight": "builder.preflight.rehearsal",
    "Preflight": "builder.preflight.report",
}
_RENAMED = {"PreflightSettings": "Settings"}
"""Public names that differ from the name in their module."""

__all__ = [
    "BuilderError",
    "ClusterPreflight",
    "Fingerprint",
    "Host",
    "LaunchPlan",
    "OutputFile",
    "Preflight",
    "PreflightSettings",
    "Pushed",
    "Recipe",
    "Spec",
    "SpecError",
    "Ssh",
    "Stack",
    "__version__",
    "build_image",
    "connect",
    "deepspeed_env_text",
    "differences",
    "dsenv_for",
    "expand_nodelist",
    "hostfile_text",
    "hosts_from_nodes",
    "image_for",
    "image_recipe",
    "launch_plan",
    "lint_stack",
    "load_preset",
    "load_spec",
    "of_containers",
    "of_hosts",
    "of_image",
    "of_lock",
    "parse_spec",
    "pull_image",
    "push_image",
    "read_hostfile",
    "read_pin",
    "rehearse",
    "rehearsed_preflight",
    "render_apptainer",
    "render_dockerfile",
    "render_outputs",
    "sbatch_script",
    "spec_from_dict",
    "spec_hash",
    "take_lock",
    "write_bundle",
    "write_pin",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), _RENAMED.get(name, name))
    raise AttributeError(f"module 'builder' has no attribute {name!r}")
