"""Run in the image's python stage by a locked build: the installed Python packages
must be exactly the lock's (argv[1], a `name==version` file). Standard library only.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path


def _name(raw: str) -> str:
    return re.sub(r"[-_.]+", "-", raw).lower()


def main() -> None:
    locked: dict[str, str] = {}
    for line in Path(sys.argv[1]).read_text().splitlines():
        name, _, version = line.strip().partition("==")
        if name:
            locked[_name(name)] = version
    installed: dict[str, str] = {}
    for dist in metadata.distributions():
        if dist.metadata["Name"]:
            installed.setdefault(_name(dist.metadata["Name"]), dist.version)
    wrong = [
        f"{name} {installed.get(name, 'missing')} (lock: {locked.get(name, 'not in the lock')})"
        for name in sorted(locked.keys() | installed.keys())
        if installed.get(name) != locked.get(name)
    ]
    if wrong:
        print("builder: the installed Python packages differ from the lock:", file=sys.stderr)
        for line in wrong:
            print(f"  {line}", file=sys.stderr)
        print("build without the lock (--no-lock) and run `builder lock` again", file=sys.stderr)
        sys.exit(1)
    print(f"builder: {len(installed)} Python packages, exactly as locked")


if __name__ == "__main__":
    main()
