"""The one place a stack becomes what every command works from: a ``Resolved`` stack.

``resolve`` runs once per command. It applies --base-image and the lock and
checks them once, picks the runtime and launcher (the spec's, or the command's
overrides, checked together and against the image), and looks every plug-in up
by name here and nowhere else: the platform (and through it the collective
library), the fabric, the launcher, the runtime, the scheduler. Everything
downstream (recipe, build, launch plan, bundle, batch script, rehearsal,
preflight, fingerprint) reads these objects.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from builder import platforms, schedulers
from builder.errors import UsageError
from builder.fabrics import fabric
from builder.image.inputs import BuildInputs, with_base
from builder.launch import launchers
from builder.launch.runtimes import runtime
from builder.launch.secrets import is_secret_name, secret_names
from builder.lock.apply import with_lock
from builder.model import did_you_mean
from builder.spec.check import launcher_problems
from builder.spec.loader import Stack
from builder.spec.records import env_value_problem

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from builder.architectures import Architecture
    from builder.collectives import Collective
    from builder.engine.base import Engine
    from builder.fabrics import Fabric, FabricUse
    from builder.launch.launchers.base import Launcher
    from builder.launch.runtimes import Runtime
    from builder.platforms.base import Platform, ResolvedImage
    from builder.schedulers.base import Scheduler
    from builder.spec.records import LaunchSpec, Spec


@dataclass(frozen=True)
class Resolved:
    """A stack with every choice made: the spec (its base applied), the build inputs
    (its lock held), and the plug-ins, as objects."""

    stack: Stack
    inputs: BuildInputs
    platform: Platform
    image: ResolvedImage
    fabric: Fabric
    launcher: Launcher
    runtime: Runtime
    scheduler: Scheduler

    @property
    def spec(self) -> Spec:
        return self.stack.spec

    @property
    def collective(self) -> Collective:
        return self.platform.collective

    @property
    def network(self) -> FabricUse:
        """What the collective library needs over the fabric."""
        return self.collective.over(self.fabric)

    def for_architecture(self, architecture: Architecture) -> Resolved:
        """The stack as one CPU architecture's build sees it: that architecture's base
        where the inputs give one (--platform-base), its wheels only."""
        inputs = self.inputs.for_architecture(architecture)
        if inputs.base_image == self.inputs.base_image:
            return replace(self, inputs=inputs)
        stack = with_base(self.stack, inputs)
        return replace(
            self, stack=stack, inputs=inputs, image=self.platform.resolve(stack.spec.image)
        )

    def with_spec(self, spec: Spec) -> Resolved:
        """The same stack with another run of the same image (a probe's, a rehearsal's):
        its plug-ins stay, so the image section may not change."""
        if spec.image != self.spec.image:
            raise ValueError("with_spec changes the run, never the image")
        return replace(self, stack=replace(self.stack, spec=spec))

    def with_run(self, launch: LaunchSpec, *, runtime: Runtime | None = None) -> Resolved:
        """The same image run another way (a rehearsal's staged nodes, its Slurm job's
        nodes): launch replaced and, where it changes, the runtime. The inputs, image,
        platform, fabric and scheduler stay as resolved; what changed is checked as
        resolve checks it (launch.launcher against the image and the run)."""
        spec = replace(self.spec, launch=launch)
        return replace(
            self,
            stack=replace(self.stack, spec=spec),
            launcher=_launcher(spec, launch.launcher),
            runtime=runtime or self.runtime,
        )

    def with_settings(self, values: Mapping[str, str], option: str = "--set") -> Resolved:
        """The same run with values added to (or overriding) launch.env: a command's
        ``--set NAME=VALUE``, which then reaches every rank on every site as launch.env
        does. Only what changed is checked: the values as launch.env takes them, and no
        secret (a command line is no place for one: launch.env and launch.secret carry
        secrets, in 0600 files)."""
        if not values:
            return self
        launch = self.spec.launch
        secret = sorted(
            name for name in values if name in secret_names(launch) or is_secret_name(name)
        )
        if secret:
            raise UsageError(
                f"{option} {', '.join(secret)}: a secret never goes on a command line (every "
                "user of the machine reads it in ps, and builder prints its plans with it); set "
                "it in launch.env (named in launch.secret if its name does not say so): it "
                "travels only in the run folder's 0600 secrets files",
                field=option,
                value=tuple(secret),
            )
        for name, value in values.items():
            problem = env_value_problem(name, value)
            if problem:
                raise UsageError(f"{option} {name}: {problem}", field=option, value=name)
        env = {**launch.env, **values}
        spec = replace(self.spec, launch=replace(launch, env=env))
        return replace(self, stack=replace(self.stack, spec=spec))

    def run_environment(self) -> dict[str, str]:
        """What every rank's environment gets: the platform's advice (and its multi-node
        NVLink settings, launch.mnnvl), the launcher's policy (torchrun's restarts), the
        fabric's, the interface of launch.socket_ifname for each of its collective
        libraries, then launch.env."""
        interface = self.spec.launch.socket_ifname
        sockets = dict.fromkeys(self.platform.socket_variables, interface) if interface else {}
        launch = self.spec.launch
        mnnvl = dict(self.platform.mnnvl_env or ()) if launch.mnnvl else {}
        return {
            **self.platform.run_env(),
            **mnnvl,
            **self.launcher.run_env(launch),
            **self.network.env,
            **sockets,
            **launch.env,
        }


def resolve(
    stack: Stack | Spec,
    inputs: BuildInputs | None = None,
    *,
    runtime_name: str | None = None,
    launcher_name: str | None = None,
    scheduler_name: str = "ssh",
    lock_of: Path | None = None,
    engine: Engine | None = None,
) -> Resolved:
    """stack resolved for a command: --base-image (in inputs) applied and checked, the
    lock beside lock_of (the spec file) read and checked (its base against engine, when
    given), and the runtime and launcher of the run (the scheduler's default runtime and
    the spec's launcher, unless named) checked together and against the image."""
    if not isinstance(stack, Stack):
        stack = Stack(stack, f"stack {stack.name}", None)
    inputs = inputs or BuildInputs()
    stack = with_base(stack, inputs)
    inputs = with_lock(stack, inputs, lock_of, engine)
    spec = stack.spec
    scheduler = _scheduler(scheduler_name)
    run = runtime(runtime_name or scheduler.runtime_of(spec.launch))
    launcher = _launcher(spec, launcher_name or spec.launch.launcher)
    platform = platforms.get(spec.image.accelerator)
    return Resolved(
        stack=stack,
        inputs=inputs,
        platform=platform,
        image=platform.resolve(spec.image),
        fabric=fabric(spec.image.fabric),
        launcher=launcher,
        runtime=run,
        scheduler=scheduler,
    )


def _scheduler(name: str) -> Scheduler:
    """The scheduler called name: every module of builder.schedulers is one."""
    if name not in schedulers.names():
        raise UsageError(
            f"--scheduler {name!r}: choose one of {', '.join(schedulers.names())}"
            + did_you_mean(name, schedulers.names()),
            field="--scheduler",
            value=name,
        )
    return schedulers.get(name)


def _launcher(spec: Spec, name: str) -> Launcher:
    """The launcher called name, checked against the image (an override, or the launcher
    of a derived run such as a rehearsal's, as the spec's own was)."""
    if name not in launchers.names():
        raise UsageError(
            f"--launcher {name!r}: choose one of {', '.join(launchers.names())}"
            + did_you_mean(name, launchers.names()),
            field="--launcher",
            value=name,
        )
    launcher = launchers.get(name)
    problems = launcher_problems(spec.image, replace(spec.launch, launcher=name))
    if problems:
        raise UsageError(
            f"launcher {name}: " + "; ".join(f"{path}: {what}" for path, what in problems)
        )
    return launcher
