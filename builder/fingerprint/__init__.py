"""Fingerprints: one comparable record of an environment (``record``), where records come
from (``sources``: images, containers, nodes over ssh, locks), and how two compare
(``compare``), which verify and diff report."""

from __future__ import annotations

from builder.fingerprint.compare import difference_table, differences
from builder.fingerprint.record import Fingerprint, parse_collected
from builder.fingerprint.sources import of_container, of_image, of_reference, over_ssh

__all__ = [
    "Fingerprint",
    "difference_table",
    "differences",
    "of_container",
    "of_image",
    "of_reference",
    "over_ssh",
    "parse_collected",
]
