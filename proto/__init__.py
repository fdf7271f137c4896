"""The wire contract of opsched: every event and command as a msgspec Struct, defined once."""
