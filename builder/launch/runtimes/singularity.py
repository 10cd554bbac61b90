"""Singularity: Apptainer's predecessor, still the name on many sites."""

from __future__ import annotations

from builder.launch.runtimes.apptainer import Apptainer


class Singularity(Apptainer):
    """Apptainer's predecessor, still the name on many sites: the same flags."""

    name = "singularity"


RUNTIME = Singularity()
