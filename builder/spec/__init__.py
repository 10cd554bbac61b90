"""The stack spec: its records (``records``), their validation (``model``, ``check``),
the YAML loader with line numbers (``loader``) and the built-in presets."""

from __future__ import annotations

from builder.spec.records import (
    SSH,
    ImageSpec,
    LaunchSpec,
    Mount,
    Spec,
    User,
    spec_json_schema,
)

__all__ = ["SSH", "ImageSpec", "LaunchSpec", "Mount", "Spec", "User", "spec_json_schema"]
