"""The web view's command-line options, for `opsched ui` and `opsched up --ui` (no server imported here)."""
from __future__ import annotations

import argparse

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8089


def add_ui_arguments(p: argparse.ArgumentParser, prefix: str = "") -> None:
    p.add_argument(f"--{prefix}host", default=DEFAULT_HOST,
                   help=f"address the web view listens on (default {DEFAULT_HOST}; the page is read-only and has "
                        "no login: listen elsewhere only where everybody may see every op)")
    p.add_argument(f"--{prefix}port", type=int, default=DEFAULT_PORT,
                   help=f"the web view's port (default {DEFAULT_PORT}; 0: any free port)")
