"""The version, in this one place: hatchling reads it for the distribution's metadata
(``[tool.hatch.version]``), builder reports it (``--version``, image labels), and
CHANGELOG.md has a section under the same number (tests/unit/test_packaging.py)."""

__version__ = "0.1.0"
