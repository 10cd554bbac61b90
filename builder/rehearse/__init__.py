"""`builder rehearse`: a session (nodes, network, folder, outcome, teardown) and one
strategy per launcher family: over ssh, on every node, as a Slurm batch job."""

from __future__ import annotations

from builder.rehearse.run import Rehearsal, rehearsal_launchers, rehearse
from builder.rehearse.session import Outcome

__all__ = ["Outcome", "Rehearsal", "rehearsal_launchers", "rehearse"]
