"""Hostile inputs, third round: files and options (appended to the corpus's CASES)."""

from __future__ import annotations
