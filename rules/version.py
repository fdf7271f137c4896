"""The opsched version installed (the package's metadata; ``""`` when it is not installed, e.g. run from a
checkout without ``pip install -e``). The CLI prints it (`opsched --version`) and each service reports it in its
health answer, so a client can tell which version the server runs."""
from __future__ import annotations

from importlib import metadata


def version() -> str:
    try:
        return metadata.version("opsched")
    except metadata.PackageNotFoundError:
        return ""
