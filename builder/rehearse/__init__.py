"""`builder rehearse`: a session (nodes, network, folder, outcome, teardown) and one
strategy per launcher family: over ssh, on every node, as a Slurm batch job
(``run``, ``session``)."""
