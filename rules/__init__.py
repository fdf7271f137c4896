"""The rules every part shares, defined once on top of the wire contract (``proto``): how a pod is built and
named, what its pod security allows, what a template or a condition may do, when a cron schedule fires, how a
queue file is read, how spend adds up per window. The services, the CLI and the SDK import them; they import
only ``proto`` and libraries, never a service, the client or NATS."""

if __name__ != "opsched.rules":  # rules/ is the package opsched.rules (opsched/rules links to it): one name, one copy
    raise ImportError("import opsched.rules, not rules: the repository's rules/ is installed as opsched.rules")
