"""`opsched tokens create|list|revoke`: the gateway's bearer tokens (``opsched.gateway_tokens``), in
``<data dir>/auth/gateway-tokens.json`` unless ``--file`` names another (a deployment's mounted Secret)."""
from __future__ import annotations

import argparse
from pathlib import Path

from opsched.connection import fail
from opsched.output import TABLE, add_output, render


def tokens_file(args: argparse.Namespace) -> Path:
    from opsched.gateway_tokens import FILE_NAME

    return Path(args.file) if args.file else Path(args.data_dir) / "auth" / FILE_NAME


def add_parser(sub: argparse._SubParsersAction) -> None:
    from opsched.gateway_tokens import DEFAULT_BURST, DEFAULT_RATE

    t = sub.add_parser("tokens", help="the HTTP gateway's bearer tokens: create, list, revoke")
    t.add_argument("--file", help="the tokens file (default: DATA_DIR/auth/gateway-tokens.json)")
    verbs = t.add_subparsers(dest="tokens_verb", required=True)
    c = verbs.add_parser("create", help="a token acting as USER (a client user of the bus); printed once")
    c.add_argument("user")
    c.add_argument("--expires", help="e.g. 30d, 12h (default: never)")
    c.add_argument("--rate", type=float, default=DEFAULT_RATE, help=f"requests/s (default {DEFAULT_RATE:g})")
    c.add_argument("--burst", type=int, default=DEFAULT_BURST, help=f"... at once (default {DEFAULT_BURST})")
    lst = verbs.add_parser("list", help="every token, never its secret nor hash")
    add_output(lst)
    r = verbs.add_parser("revoke", help="revoke a token by its id (every gateway sharing the file: at once)")
    r.add_argument("id")
    t.set_defaults(func=cmd_tokens)


def cmd_tokens(args: argparse.Namespace) -> int:
    from opsched.gateway_tokens import TokenStore, parse_duration
    from opsched.proto import permissions
    from opsched.proto.outputs import TokenList
    from opsched.tables import tokens_table

    store = TokenStore(tokens_file(args))
    if args.tokens_verb == "create":
        try:
            if args.user in permissions.SERVICES or args.user == permissions.GATEWAY:
                raise ValueError(f"{args.user!r} is a service's user: a token acts as a client user")
            if args.rate <= 0 or args.burst < 1:
                raise ValueError("--rate must be positive and --burst at least 1")
            expires = parse_duration(args.expires) if args.expires else None
        except ValueError as exc:
            return fail(str(exc))
        _, token = store.create(args.user, expires, args.rate, args.burst)
        print(token)
        return 0
    if args.tokens_verb == "list":
        listed = TokenList(items=[t.listed() for t in store.tokens().values()])
        print(tokens_table(listed) if args.output == TABLE else render(listed, args.output))
        return 0
    try:
        store.revoke(args.id)
    except KeyError:
        return fail(f"no token {args.id!r} (`opsched tokens list`)")
    return 0
