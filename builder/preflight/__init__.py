"""`builder preflight`: the probe job run through the launch plan on the real nodes (or
a rehearsal's containers), judged per node: devices, compute, memory, links,
all-reduce, transport and environment."""
