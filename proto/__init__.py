"""The wire contract of opsched: every event and command as a msgspec Struct, defined once."""

if __name__ != "opsched.proto":  # proto/ is the package opsched.proto (opsched/proto links to it): one name, one copy
    raise ImportError("import opsched.proto, not proto: the repository's proto/ is installed as opsched.proto")
