"""Fingerprints: one comparable record of an environment (``record``), where records come
from (``sources``: images, containers, nodes over ssh, locks), and how two compare
(``compare``), which verify and diff report."""
