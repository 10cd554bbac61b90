"""What type checkers read for `import builder`: generated from _EXPORTS in
__init__.py, the one list of public names, by `python tests/unit/test_api.py`.
Do not edit; tests/unit/test_api.py checks that the two agree.
"""

from builder._version import __version__ as __version__
from builder.cluster.dsenv import deepspeed_env_text as deepspeed_env_text
from builder.cluster.dsenv import dsenv_for as dsenv_for
from builder.cluster.dsenv import parse_assignments as parse_assignments
from builder.cluster.folder import RunFolder as RunFolder
from builder.cluster.folder import run_folder as run_folder
from builder.cluster.folder import write_cluster_file as write_cluster_file
from builder.cluster.hostfile import MAX_HOSTFILE_BYTES as MAX_HOSTFILE_BYTES
from builder.cluster.hostfile import Host as Host
from builder.cluster.hostfile import choose_hosts as choose_hosts
from builder.cluster.hostfile import hostfile_text as hostfile_text
from builder.cluster.hostfile import hosts_from_nodes as hosts_from_nodes
from builder.cluster.hostfile import read_hostfile as read_hostfile
from builder.cluster.keys import make_keys as make_keys
from builder.cluster.nodelist import expand_nodelist as expand_nodelist
from builder.cluster.ssh import Ssh as Ssh
from builder.engine.build import Built as Built
from builder.engine.build import build_image as build_image
from builder.engine.build import build_platforms as build_platforms
from builder.engine.docker import connect as connect
from builder.engine.images import inspect_image as inspect_image
from builder.engine.images import report_text as image_report_text
from builder.engine.progress import progress_for as progress_for
from builder.engine.push import pull_image as pull_image
from builder.engine.push import push_and_record as push_and_record
from builder.engine.push import push_image as push_image
from builder.engine.push import push_platforms as push_platforms
from builder.engine.ship import NodeImage as NodeImage
from builder.engine.ship import Shipment as Shipment
from builder.engine.ship import check_images as check_images
from builder.engine.ship import ship_image as ship_image
from builder.errors import BuilderError as BuilderError
from builder.errors import ClusterError as ClusterError
from builder.errors import EngineError as EngineError
from builder.errors import InputError as InputError
from builder.errors import RegistryError as RegistryError
from builder.errors import SpecError as SpecError
from builder.files import check_input as check_input
from builder.fingerprint.compare import difference_table as difference_table
from builder.fingerprint.compare import differences as differences
from builder.fingerprint.record import Fingerprint as Fingerprint
from builder.fingerprint.sources import is_lock_reference as is_lock_reference
from builder.fingerprint.sources import of_container as of_container
from builder.fingerprint.sources import of_containers as of_containers
from builder.fingerprint.sources import of_hosts as of_hosts
from builder.fingerprint.sources import of_image as of_image
from builder.fingerprint.sources import of_lock as of_lock
from builder.fingerprint.sources import of_reference as of_reference
from builder.fingerprint.sources import with_image as with_image
from builder.image.context import FORMATS as RENDER_FORMATS
from builder.image.context import primary_output as primary_output
from builder.image.context import render_outputs as render_outputs
from builder.image.inputs import BuildInputs as BuildInputs
from builder.image.inputs import load_inputs as load_inputs
from builder.image.pin import image_for as image_for
from builder.image.pin import pin_path as pin_path
from builder.image.pin import read_pin as read_pin
from builder.image.pin import write_pin as write_pin
from builder.image.recipe import Recipe as Recipe
from builder.image.recipe import image_recipe as image_recipe
from builder.image.recipe import spec_hash as spec_hash
from builder.image.reference import InvalidReference as InvalidReference
from builder.image.reference import Reference as Reference
from builder.image.reference import checked as checked_reference
from builder.image.reference import parse as parse_reference
from builder.image.registry import Pushed as Pushed
from builder.image.render import render_apptainer as render_apptainer
from builder.image.render import render_dockerfile as render_dockerfile
from builder.launch.launchers import get as get_launcher
from builder.launch.launchers import names as launcher_names
from builder.launch.plan import LaunchPlan as LaunchPlan
from builder.launch.plan import launch_plan as launch_plan
from builder.launch.plan import network_warnings as network_warnings
from builder.launch.plan import plan_warnings as plan_warnings
from builder.launch.runtimes import names as runtime_names
from builder.launch.runtimes import runtime as get_runtime
from builder.launch.secrets import secret_files as secret_files
from builder.launch.sif import APPTAINER_PROGRAMS as APPTAINER_PROGRAMS
from builder.launch.sif import sif_build_argv as sif_build_argv
from builder.launch.sif import sif_notes as sif_notes
from builder.launch.squashfs import squashfs_import_argv as squashfs_import_argv
from builder.lint import lint_stack as lint_stack
from builder.lint.sarif import sarif_text as sarif_text
from builder.lock.apply import check_base as check_locked_base
from builder.lock.file import lock_path as lock_path
from builder.lock.take import take_lock as take_lock
from builder.output import OutputFile as OutputFile
from builder.output import write_files as write_files
from builder.preflight.probe import ProbeOutput as ProbeOutput
from builder.preflight.probe import ProbeRequest as ProbeRequest
from builder.preflight.probe import Settings as PreflightSettings
from builder.preflight.rehearsal import rehearsed_preflight as rehearsed_preflight
from builder.preflight.report import Preflight as Preflight
from builder.preflight.report import judge_log as judge_log
from builder.preflight.report import read_log as read_log
from builder.preflight.show import table as preflight_table
from builder.rehearse.faults import Kill as Kill
from builder.rehearse.faults import kill_of as kill_of
from builder.rehearse.report import rank_table as rank_table
from builder.rehearse.run import MAX_NODES as MAX_REHEARSAL_NODES
from builder.rehearse.run import rehearsal_launchers as rehearsal_launchers
from builder.rehearse.run import rehearsal_of as rehearsal_of
from builder.rehearse.run import rehearse as rehearse_stack
from builder.rehearse.run import why_not_rehearsed as why_not_rehearsed
from builder.resolved import Resolved as Resolved
from builder.resolved import resolve as resolve
from builder.schedulers import get as get_scheduler
from builder.schedulers import names as scheduler_names
from builder.schedulers.base import Scheduler as Scheduler
from builder.schedulers.kubernetes.manifests import PodFiles as PodFiles
from builder.schedulers.kubernetes.manifests import kubernetes_manifests as kubernetes_manifests
from builder.schedulers.kubernetes.manifests import kubernetes_secrets as kubernetes_secrets
from builder.schedulers.kubernetes.manifests import kubernetes_text as kubernetes_text
from builder.schedulers.kubernetes.manifests import manifests_yaml as manifests_yaml
from builder.schedulers.kubernetes.manifests import pod_hosts as pod_hosts
from builder.schedulers.kubernetes.manifests import secrets_path as secrets_path
from builder.schedulers.kubernetes.manifests import write_kubernetes as write_kubernetes
from builder.schedulers.kubernetes.preflight import kubernetes_expected as kubernetes_expected
from builder.schedulers.kubernetes.preflight import (
    preflight_manifests_text as preflight_manifests_text,
)
from builder.schedulers.kubernetes.preflight import (
    write_preflight_manifests as write_preflight_manifests,
)
from builder.schedulers.kubernetes.section import KUBERNETES_JOBS as KUBERNETES_JOBS
from builder.schedulers.slurm.preflight import slurm_expected as slurm_expected
from builder.schedulers.slurm.preflight import write_preflight_job as write_preflight_job
from builder.schedulers.slurm.script import sbatch_script as sbatch_script
from builder.schedulers.ssh import write_bundle as write_bundle
from builder.schedulers.ssh.preflight import ClusterPreflight as ClusterPreflight
from builder.spec.loader import Stack as Stack
from builder.spec.loader import load_preset as load_preset
from builder.spec.loader import load_spec as load_spec
from builder.spec.loader import load_stack as load_stack
from builder.spec.loader import parse_spec as parse_spec
from builder.spec.loader import spec_from_dict as spec_from_dict
from builder.spec.presets import preset_names as preset_names
from builder.spec.presets import preset_summaries as preset_summaries
from builder.spec.presets import preset_text as preset_text
from builder.spec.records import Spec as Spec
from builder.spec.records import spec_json_schema as spec_json_schema

__all__ = [
    "APPTAINER_PROGRAMS",
    "KUBERNETES_JOBS",
    "MAX_HOSTFILE_BYTES",
    "MAX_REHEARSAL_NODES",
    "RENDER_FORMATS",
    "BuildInputs",
    "BuilderError",
    "Built",
    "ClusterError",
    "ClusterPreflight",
    "EngineError",
    "Fingerprint",
    "Host",
    "InputError",
    "InvalidReference",
    "Kill",
    "LaunchPlan",
    "NodeImage",
    "OutputFile",
    "PodFiles",
    "Preflight",
    "PreflightSettings",
    "ProbeOutput",
    "ProbeRequest",
    "Pushed",
    "Recipe",
    "Reference",
    "RegistryError",
    "Resolved",
    "RunFolder",
    "Scheduler",
    "Shipment",
    "Spec",
    "SpecError",
    "Ssh",
    "Stack",
    "__version__",
    "build_image",
    "build_platforms",
    "check_images",
    "check_input",
    "check_locked_base",
    "checked_reference",
    "choose_hosts",
    "connect",
    "deepspeed_env_text",
    "difference_table",
    "differences",
    "dsenv_for",
    "expand_nodelist",
    "get_launcher",
    "get_runtime",
    "get_scheduler",
    "hostfile_text",
    "hosts_from_nodes",
    "image_for",
    "image_recipe",
    "image_report_text",
    "inspect_image",
    "is_lock_reference",
    "judge_log",
    "kill_of",
    "kubernetes_expected",
    "kubernetes_manifests",
    "kubernetes_secrets",
    "kubernetes_text",
    "launch_plan",
    "launcher_names",
    "lint_stack",
    "load_inputs",
    "load_preset",
    "load_spec",
    "load_stack",
    "lock_path",
    "make_keys",
    "manifests_yaml",
    "network_warnings",
    "of_container",
    "of_containers",
    "of_hosts",
    "of_image",
    "of_lock",
    "of_reference",
    "parse_assignments",
    "parse_reference",
    "parse_spec",
    "pin_path",
    "plan_warnings",
    "pod_hosts",
    "preflight_manifests_text",
    "preflight_table",
    "preset_names",
    "preset_summaries",
    "preset_text",
    "primary_output",
    "progress_for",
    "pull_image",
    "push_and_record",
    "push_image",
    "push_platforms",
    "rank_table",
    "read_hostfile",
    "read_log",
    "read_pin",
    "rehearsal_launchers",
    "rehearsal_of",
    "rehearse_stack",
    "rehearsed_preflight",
    "render_apptainer",
    "render_dockerfile",
    "render_outputs",
    "resolve",
    "run_folder",
    "runtime_names",
    "sarif_text",
    "sbatch_script",
    "scheduler_names",
    "secret_files",
    "secrets_path",
    "ship_image",
    "sif_build_argv",
    "sif_notes",
    "slurm_expected",
    "spec_from_dict",
    "spec_hash",
    "spec_json_schema",
    "squashfs_import_argv",
    "take_lock",
    "why_not_rehearsed",
    "with_image",
    "write_bundle",
    "write_cluster_file",
    "write_files",
    "write_kubernetes",
    "write_pin",
    "write_preflight_job",
    "write_preflight_manifests",
]

_EXPORTS: dict[str, str]

def __dir__() -> list[str]: ...
