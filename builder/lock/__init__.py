"""Locks: the file format (``file``, pure), taking one from a built image (``take``) and
applying it to a build once (``apply``)."""
