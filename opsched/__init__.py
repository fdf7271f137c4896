"""opsched: the command line, the embedded default and the local cluster (not a service)."""
