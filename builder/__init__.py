"""builder: reproducible multi-node deep-learning training environments.

One stack spec (YAML or a built-in preset) yields the Dockerfile, the
Apptainer definition files and, from the same data, everything a launch
needs. The public API is below, and the command line calls nothing else;
names are imported on first use so that importing ``builder`` (and running
``builder --help``) stays light.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from builder._version import __version__

if TYPE_CHECKING:
    from builder.cluster.dsenv import deepspeed_env_text, dsenv_for, parse_assignments
    from builder.cluster.hostfile import (
        Host,
        choose_hosts,
        hostfile_text,
        hosts_from_nodes,
        read_hostfile,
    )
    from builder.cluster.keys import make_keys
    from builder.cluster.nodelist import expand_nodelist
    from builder.cluster.ssh import Ssh
    from builder.engine.build import build_image
    from builder.engine.docker import connect
    from builder.engine.images import inspect_image
    from builder.engine.images import report_text as image_report_text
    from builder.engine.progress import progress_for
    from builder.engine.push import pull_image, push_and_record, push_image
    from builder.engine.ship import NodeImage, Shipment, check_images, ship_image
    from builder.errors import BuilderError, SpecError
    from builder.fingerprint.compare import difference_table, differences
    from builder.fingerprint.record import Fingerprint
    from builder.fingerprint.sources import (
        is_lock_reference,
        of_container,
        of_containers,
        of_hosts,
        of_image,
        of_lock,
        of_reference,
        with_image,
    )
    from builder.image.context import FORMATS as RENDER_FORMATS
    from builder.image.context import primary_output, render_outputs
    from builder.image.inputs import BuildInputs, load_inputs, with_base
    from builder.image.pin import image_for, pin_path, read_pin, write_pin
    from builder.image.recipe import Recipe, image_recipe, spec_hash
    from builder.image.registry import Pushed
    from builder.image.render import render_apptainer, render_dockerfile
    from builder.launch.bundle import write_bundle
    from builder.launch.launchers import get as get_launcher
    from builder.launch.launchers import names as launcher_names
    from builder.launch.plan import LaunchPlan, launch_plan, network_warnings, plan_warnings
    from builder.launch.runtimes import RUNTIMES
    from builder.launch.runtimes import runtime as get_runtime
    from builder.launch.sif import APPTAINER_PROGRAMS, sif_build_argv
    from builder.launch.slurm import sbatch_script
    from builder.lint import lint_stack
    from builder.lint.sarif import sarif_text
    from builder.lock.apply import check_base as check_locked_base
    from builder.lock.apply import with_lock
    from builder.lock.file import lock_path
    from builder.lock.take import take_lock
    from builder.output import OutputFile, write_files
    from builder.preflight.cluster import ClusterPreflight
    from builder.preflight.probe import Settings as PreflightSettings
    from builder.preflight.rehearsal import rehearsed_preflight
    from builder.preflight.report import Preflight
    from builder.preflight.show import table as preflight_table
    from builder.rehearse.report import rank_table
    from builder.rehearse.run import MAX_NODES as MAX_REHEARSAL_NODES
    from builder.rehearse.run import rehearsal_launchers
    from builder.rehearse.run import rehearse as rehearse_stack
    from builder.spec.loader import (
        MAX_SPEC_BYTES,
        Stack,
        load_preset,
        load_spec,
        load_stack,
        parse_spec,
        spec_from_dict,
    )
    from builder.spec.loader import decoded as decode_spec
    from builder.spec.presets import preset_names, preset_summaries, preset_text
    from builder.spec.records import ENV_NAME, IMAGE_REF, Spec, spec_json_schema

_EXPORTS = {
    # errors
    "BuilderError": "builder.errors",
    "SpecError": "builder.errors",
    # the spec
    "Spec": "builder.spec.records",
    "Stack": "builder.spec.loader",
    "load_spec": "builder.spec.loader",
    "load_preset": "builder.spec.loader",
    "load_stack": "builder.spec.loader",
    "parse_spec": "builder.spec.loader",
    "decode_spec": "builder.spec.loader",
    "spec_from_dict": "builder.spec.loader",
    "MAX_SPEC_BYTES": "builder.spec.loader",
    "preset_names": "builder.spec.presets",
    "preset_summaries": "builder.spec.presets",
    "preset_text": "builder.spec.presets",
    "spec_json_schema": "builder.spec.records",
    "ENV_NAME": "builder.spec.records",
    "IMAGE_REF": "builder.spec.records",
    # the image's files
    "Recipe": "builder.image.recipe",
    "image_recipe": "builder.image.recipe",
    "spec_hash": "builder.image.recipe",
    "render_dockerfile": "builder.image.render",
    "render_apptainer": "builder.image.render",
    "render_outputs": "builder.image.context",
    "primary_output": "builder.image.context",
    "RENDER_FORMATS": "builder.image.context",
    "BuildInputs": "builder.image.inputs",
    "load_inputs": "builder.image.inputs",
    "with_base": "builder.image.inputs",
    "OutputFile": "builder.output",
    "write_files": "builder.output",
    "lint_stack": "builder.lint",
    "sarif_text": "builder.lint.sarif",
    # images in the engine, and their digests
    "connect": "builder.engine.docker",
    "build_image": "builder.engine.build",
    "progress_for": "builder.engine.progress",
    "inspect_image": "builder.engine.images",
    "image_report_text": "builder.engine.images",
    "push_image": "builder.engine.push",
    "push_and_record": "builder.engine.push",
    "pull_image": "builder.engine.push",
    "ship_image": "builder.engine.ship",
    "check_images": "builder.engine.ship",
    "Shipment": "builder.engine.ship",
    "NodeImage": "builder.engine.ship",
    "Pushed": "builder.image.registry",
    "image_for": "builder.image.pin",
    "read_pin": "builder.image.pin",
    "write_pin": "builder.image.pin",
    "pin_path": "builder.image.pin",
    # the run on a cluster
    "LaunchPlan": "builder.launch.plan",
    "launch_plan": "builder.launch.plan",
    "network_warnings": "builder.launch.plan",
    "plan_warnings": "builder.launch.plan",
    "launcher_names": "builder.launch.launchers",
    "get_launcher": "builder.launch.launchers",
    "RUNTIMES": "builder.launch.runtimes",
    "get_runtime": "builder.launch.runtimes",
    "sbatch_script": "builder.launch.slurm",
    "write_bundle": "builder.launch.bundle",
    "sif_build_argv": "builder.launch.sif",
    "APPTAINER_PROGRAMS": "builder.launch.sif",
    "Host": "builder.cluster.hostfile",
    "choose_hosts": "builder.cluster.hostfile",
    "hostfile_text": "builder.cluster.hostfile",
    "hosts_from_nodes": "builder.cluster.hostfile",
    "read_hostfile": "builder.cluster.hostfile",
    "expand_nodelist": "builder.cluster.nodelist",
    "make_keys": "builder.cluster.keys",
    "deepspeed_env_text": "builder.cluster.dsenv",
    "dsenv_for": "builder.cluster.dsenv",
    "parse_assignments": "builder.cluster.dsenv",
    "Ssh": "builder.cluster.ssh",
    # rehearsal and preflight
    "rehearse_stack": "builder.rehearse.run",
    "rehearsal_launchers": "builder.rehearse.run",
    "MAX_REHEARSAL_NODES": "builder.rehearse.run",
    "rank_table": "builder.rehearse.report",
    "ClusterPreflight": "builder.preflight.cluster",
    "PreflightSettings": "builder.preflight.probe",
    "rehearsed_preflight": "builder.preflight.rehearsal",
    "Preflight": "builder.preflight.report",
    "preflight_table": "builder.preflight.show",
    # the same environment everywhere
    "take_lock": "builder.lock.take",
    "lock_path": "builder.lock.file",
    "with_lock": "builder.lock.apply",
    "check_locked_base": "builder.lock.apply",
    "Fingerprint": "builder.fingerprint.record",
    "of_image": "builder.fingerprint.sources",
    "of_container": "builder.fingerprint.sources",
    "of_containers": "builder.fingerprint.sources",
    "of_hosts": "builder.fingerprint.sources",
    "of_lock": "builder.fingerprint.sources",
    "of_reference": "builder.fingerprint.sources",
    "is_lock_reference": "builder.fingerprint.sources",
    "with_image": "builder.fingerprint.sources",
    "differences": "builder.fingerprint.compare",
    "difference_table": "builder.fingerprint.compare",
}
_RENAMED = {
    "PreflightSettings": "Settings",
    "RENDER_FORMATS": "FORMATS",
    "decode_spec": "decoded",
    "launcher_names": "names",
    "get_launcher": "get",
    "get_runtime": "runtime",
    "check_locked_base": "check_base",
    "MAX_REHEARSAL_NODES": "MAX_NODES",
    "preflight_table": "table",
    "image_report_text": "report_text",
    "rehearse_stack": "rehearse",
}
"""Public names that differ from the name in their module."""

__all__ = [
    "APPTAINER_PROGRAMS",
    "ENV_NAME",
    "IMAGE_REF",
    "MAX_REHEARSAL_NODES",
    "MAX_SPEC_BYTES",
    "RENDER_FORMATS",
    "RUNTIMES",
    "BuildInputs",
    "BuilderError",
    "ClusterPreflight",
    "Fingerprint",
    "Host",
    "LaunchPlan",
    "NodeImage",
    "OutputFile",
    "Preflight",
    "PreflightSettings",
    "Pushed",
    "Recipe",
    "Shipment",
    "Spec",
    "SpecError",
    "Ssh",
    "Stack",
    "__version__",
    "build_image",
    "check_images",
    "check_locked_base",
    "choose_hosts",
    "connect",
    "decode_spec",
    "deepspeed_env_text",
    "difference_table",
    "differences",
    "dsenv_for",
    "expand_nodelist",
    "get_launcher",
    "get_runtime",
    "hostfile_text",
    "hosts_from_nodes",
    "image_for",
    "image_recipe",
    "image_report_text",
    "inspect_image",
    "is_lock_reference",
    "launch_plan",
    "launcher_names",
    "lint_stack",
    "load_inputs",
    "load_preset",
    "load_spec",
    "load_stack",
    "lock_path",
    "make_keys",
    "network_warnings",
    "of_container",
    "of_containers",
    "of_hosts",
    "of_image",
    "of_lock",
    "of_reference",
    "parse_assignments",
    "parse_spec",
    "pin_path",
    "plan_warnings",
    "preflight_table",
    "preset_names",
    "preset_summaries",
    "preset_text",
    "primary_output",
    "progress_for",
    "pull_image",
    "push_and_record",
    "push_image",
    "rank_table",
    "read_hostfile",
    "read_pin",
    "rehearsal_launchers",
    "rehearse_stack",
    "rehearsed_preflight",
    "render_apptainer",
    "render_dockerfile",
    "render_outputs",
    "sarif_text",
    "sbatch_script",
    "ship_image",
    "sif_build_argv",
    "spec_from_dict",
    "spec_hash",
    "spec_json_schema",
    "take_lock",
    "with_base",
    "with_image",
    "with_lock",
    "write_bundle",
    "write_files",
    "write_pin",
]


def __dir__() -> list[str]:
    return sorted(__all__)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), _RENAMED.get(name, name))
    raise AttributeError(f"module 'builder' has no attribute {name!r}")
