"""Cluster-side files: node lists, hostfiles, .deepspeed_env, keys."""
