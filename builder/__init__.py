"""builder: reproducible multi-node deep-learning training environments.

One stack spec (YAML or a built-in preset) yields the Dockerfile, the
Apptainer definition files and, from the same data, everything a launch
needs. The public API is ``_EXPORTS`` below, in this one place: ``__all__`` and
the lazy ``__getattr__`` read it at run time, and ``__init__.pyi``, which type
checkers read instead of this file, is generated from it (tests/unit/test_api.py
checks that the two agree). Names are imported on first use, so that importing
``builder`` (and running ``builder --help``) stays light.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from builder._version import __version__ as __version__

_EXPORTS: dict[str, str] = {
    # errors
    "BuilderError": "builder.errors",
    "InputError": "builder.errors",
    "SpecError": "builder.errors",
    "EngineError": "builder.errors",
    "ClusterError": "builder.errors",
    "RegistryError": "builder.errors",
    # the spec
    "Spec": "builder.spec.records",
    "Stack": "builder.spec.loader",
    "load_spec": "builder.spec.loader",
    "load_preset": "builder.spec.loader",
    "load_stack": "builder.spec.loader",
    "parse_spec": "builder.spec.loader",
    "spec_from_dict": "builder.spec.loader",
    "preset_names": "builder.spec.presets",
    "preset_summaries": "builder.spec.presets",
    "preset_text": "builder.spec.presets",
    "spec_json_schema": "builder.spec.records",
    # the stack resolved once: what every command below takes
    "Resolved": "builder.resolved",
    "resolve": "builder.resolved",
    # the image's files
    "Recipe": "builder.image.recipe",
    "image_recipe": "builder.image.recipe",
    "spec_hash": "builder.image.recipe",
    "render_dockerfile": "builder.image.render",
    "render_apptainer": "builder.image.render",
    "render_outputs": "builder.image.context",
    "primary_output": "builder.image.context",
    "RENDER_FORMATS": "builder.image.context:FORMATS",
    "BuildInputs": "builder.image.inputs",
    "load_inputs": "builder.image.inputs",
    "OutputFile": "builder.output",
    "check_input": "builder.files",
    "write_files": "builder.output",
    "lint_stack": "builder.lint",
    "sarif_text": "builder.lint.sarif",
    # images in the engine, and their digests
    "connect": "builder.engine.docker",
    "build_image": "builder.engine.build",
    "build_platforms": "builder.engine.build",
    "Built": "builder.engine.build",
    "push_platforms": "builder.engine.push",
    "progress_for": "builder.engine.progress",
    "inspect_image": "builder.engine.images",
    "image_report_text": "builder.engine.images:report_text",
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
    "launcher_names": "builder.launch.launchers:names",
    "get_launcher": "builder.launch.launchers:get",
    "runtime_names": "builder.launch.runtimes:names",
    "get_runtime": "builder.launch.runtimes:runtime",
    "Scheduler": "builder.schedulers.base",
    "scheduler_names": "builder.schedulers:names",
    "get_scheduler": "builder.schedulers:get",
    "secret_files": "builder.launch.secrets",
    "sbatch_script": "builder.schedulers.slurm.script",
    "kubernetes_manifests": "builder.schedulers.kubernetes.manifests",
    "KUBERNETES_JOBS": "builder.schedulers.kubernetes.section",
    "kubernetes_secrets": "builder.schedulers.kubernetes.manifests",
    "kubernetes_text": "builder.schedulers.kubernetes.manifests",
    "write_kubernetes": "builder.schedulers.kubernetes.manifests",
    "secrets_path": "builder.schedulers.kubernetes.manifests",
    "manifests_yaml": "builder.schedulers.kubernetes.manifests",
    "PodFiles": "builder.schedulers.kubernetes.manifests",
    "pod_hosts": "builder.schedulers.kubernetes.manifests",
    "write_bundle": "builder.schedulers.ssh",
    "write_cluster_file": "builder.cluster.folder",
    "RunFolder": "builder.cluster.folder",
    "run_folder": "builder.cluster.folder",
    "sif_build_argv": "builder.launch.sif",
    "sif_notes": "builder.launch.sif",
    "parse_reference": "builder.image.reference:parse",
    "checked_reference": "builder.image.reference:checked",
    "Reference": "builder.image.reference",
    "InvalidReference": "builder.image.reference",
    "APPTAINER_PROGRAMS": "builder.launch.sif",
    "squashfs_import_argv": "builder.launch.squashfs",
    "Host": "builder.cluster.hostfile",
    "choose_hosts": "builder.cluster.hostfile",
    "hostfile_text": "builder.cluster.hostfile",
    "hosts_from_nodes": "builder.cluster.hostfile",
    "read_hostfile": "builder.cluster.hostfile",
    "MAX_HOSTFILE_BYTES": "builder.cluster.hostfile",
    "expand_nodelist": "builder.cluster.nodelist",
    "make_keys": "builder.cluster.keys",
    "deepspeed_env_text": "builder.cluster.dsenv",
    "dsenv_for": "builder.cluster.dsenv",
    "parse_assignments": "builder.cluster.dsenv",
    "Ssh": "builder.cluster.ssh",
    # rehearsal and preflight
    "rehearse_stack": "builder.rehearse.run:rehearse",
    "rehearsal_launchers": "builder.rehearse.run",
    "rehearsal_of": "builder.rehearse.run",
    "why_not_rehearsed": "builder.rehearse.run",
    "MAX_REHEARSAL_NODES": "builder.rehearse.run:MAX_NODES",
    "rank_table": "builder.rehearse.report",
    "Kill": "builder.rehearse.faults",
    "kill_of": "builder.rehearse.faults",
    "ClusterPreflight": "builder.schedulers.ssh.preflight",
    "PreflightSettings": "builder.preflight.probe:Settings",
    "ProbeRequest": "builder.preflight.probe",
    "ProbeOutput": "builder.preflight.probe",
    "rehearsed_preflight": "builder.preflight.rehearsal",
    "Preflight": "builder.preflight.report",
    "preflight_table": "builder.preflight.show:table",
    "judge_log": "builder.preflight.report",
    "read_log": "builder.preflight.report",
    "preflight_manifests_text": "builder.schedulers.kubernetes.preflight",
    "write_preflight_manifests": "builder.schedulers.kubernetes.preflight",
    "kubernetes_expected": "builder.schedulers.kubernetes.preflight",
    "write_preflight_job": "builder.schedulers.slurm.preflight",
    "slurm_expected": "builder.schedulers.slurm.preflight",
    # the same environment everywhere
    "take_lock": "builder.lock.take",
    "lock_path": "builder.lock.file",
    "check_locked_base": "builder.lock.apply:check_base",
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
"""Public name -> "module", or "module:name" where the public name is not the module's
(``rehearse_stack`` is ``builder.rehearse.run:rehearse``: ``builder.rehearse``, the
subpackage, is an attribute of this package once imported, so it cannot also be a
function's name here)."""

__all__ = ["__version__"]
__all__.extend(_EXPORTS)


def __dir__() -> list[str]:
    return sorted(__all__)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'builder' has no attribute {name!r}")
    module, _, attribute = _EXPORTS[name].partition(":")
    value = getattr(import_module(module), attribute or name)
    globals()[name] = value  # the next use is a plain attribute lookup
    return value
