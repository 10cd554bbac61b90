"""Launching the image on nodes: launchers (one module each), runtimes (how a node runs
a command), the plan (typed, per node and role), the bundle and the Slurm script.

The plan is data; it becomes argv only where it is printed or run, and each
value is quoted once, when shown.
"""
