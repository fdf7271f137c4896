"""Shell completion for `opsched` (``argcomplete``): commands, options and their choices, and file names for
the arguments that take files. ``opsched completion bash`` (or zsh, fish, tcsh, powershell) prints the
script to source."""
from __future__ import annotations

import argparse
from typing import Any

SHELLS = ("bash", "zsh", "fish", "tcsh", "powershell")


def autocomplete(p: argparse.ArgumentParser) -> None:
    """Answer the shell and exit when it asks for completions (``_ARGCOMPLETE`` set); nothing otherwise."""
    import argcomplete

    argcomplete.autocomplete(p)


def cmd_completion(args: argparse.Namespace) -> int:
    import argcomplete

    print(argcomplete.shellcode(["opsched"], shell=args.shell), end="")
    return 0


def add_parser(sub: Any) -> None:
    c = sub.add_parser("completion", help="print the shell completion script: "
                                          "eval \"$(opsched completion bash)\" (or zsh, fish, tcsh, powershell)")
    c.add_argument("shell", choices=SHELLS)
    c.set_defaults(func=cmd_completion)
