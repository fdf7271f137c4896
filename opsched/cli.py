"""The `opsched` command line: up, submit, ops, watch, stop."""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import warnings
from pathlib import Path

from opsched import completion, entrypoint, logs_cli, reading, tokens_cli, versioning
from opsched.connection import EXIT_INVALID, EXIT_UNREACHABLE, add_connection_arguments
from opsched.connection import connect as _connect
from opsched.connection import fail as _fail

EXIT_FULL = 1  # a submit refused at a stream's limit (the backlog cap per identity): not stored, try again later
QUEUES_HELP = ("queue configuration YAML whose pod security the op is checked against (default: the running "
               "`opsched up`'s, else the default level)")


def params_of(pairs: list[str]) -> dict[str, object]:
    """``k=v`` pairs (a value is JSON, else text); ValueError naming a pair that is not ``key=value``. The
    CLI's ``-P`` and the gateway's ``param=`` read them so."""
    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"expects key=value, got {pair!r}")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def parse_params(pairs: list[str]) -> dict[str, object]:
    try:
        return params_of(pairs)
    except ValueError as exc:
        raise SystemExit(_fail(f"--param {exc}")) from None


def cmd_submit(args: argparse.Namespace) -> int:
    """Submit one op, or every op of a sweep (a file with a ``matrix``): each id, then the batch id.

    With ``--id X`` a sweep's ops are ``X-0``, ``X-1``, ... and its batch id is derived from X, so
    submitting the same sweep again with the same id is the same batch (ops are idempotent)."""
    from opsched import dryrun  # reading a file (pydantic models, Jinja2) is most of the CLI's start: only here
    from opsched.polyaxonfile import load_polyaxonfiles
    from opsched.rules.templating import TemplateError

    files = _files(args, "submit")
    overrides = {k: v for k, v in (("params", parse_params(args.param) if args.param else None),
                                   ("queue", args.queue or None), ("priority", args.priority)) if v is not None}
    specs = _read(lambda hub: load_polyaxonfiles(files, overrides or None, salt=args.id, hub=hub), args)
    if isinstance(specs, int):
        return specs
    args.label = " -f ".join(files)  # how messages name what was read
    from opsched.client import new_op_ids

    ids = new_op_ids(args.id, specs)
    config = _queue_config(args)
    try:
        pods = [dryrun.rendered(spec, op_id, config) for spec, op_id in zip(specs, ids)]
    except TemplateError as exc:
        return _fail(f"{args.label}: {exc}")
    problems = dryrun.refusals(specs, pods, ids, config)
    if problems:
        return _fail(f"{args.label}: refused:\n  " + "\n  ".join(problems))
    if args.dry_run:
        built = [p for spec, op_id in zip(pods, ids) for p in dryrun.pods_of(spec, op_id, config)]
        print(dryrun.dump(built, args.output), end="")
        for note in dryrun.hook_notes(specs, ids):  # a hook's op is built when its op ends: said, not printed
            print(f"opsched: {note}", file=sys.stderr)
        return 0
    return asyncio.run(_submit(args, specs, ids, [spec.queue for spec in pods]))


def _files(args: argparse.Namespace, verb: str) -> list[str]:
    """The polyaxonfiles of a command: FILE, then every -f FILE, in order (exit 2 when there is none)."""
    files = ([args.file] if args.file else []) + list(getattr(args, "files", None) or [])
    if not files:
        raise SystemExit(_fail(f"opsched {verb} needs a polyaxonfile: FILE, or -f FILE (several: later ones patch "
                               "the first)"))
    return files


def _hub(args: argparse.Namespace):
    """The component library of hubRef: --hub, else $OPSCHED_HUB, else the context file's ``hub``."""
    from opsched.context import hub_folder
    from opsched.polyaxonfile import Hub

    folder, origin, unset = hub_folder(getattr(args, "hub", None), context=getattr(args, "context", None),
                                       data_dir=getattr(args, "data_dir", ".opsched"))
    return Hub(folder, origin, unset)


def _read(load, args: argparse.Namespace):
    """``load(hub)``, its warnings printed; an invalid file: every problem on stderr, exit 2."""
    from opsched.polyaxonfile import SpecError, SpecWarning

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", SpecWarning)
            loaded = load(_hub(args))
    except SpecError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_INVALID
    for warning in caught:
        print(f"opsched: warning: {warning.message}", file=sys.stderr)
    return loaded


def _queue_config(args: argparse.Namespace):
    """The queue config whose pod security the ops are checked against (exit 2 when it is invalid)."""
    from opsched import dryrun
    from opsched.rules.queues_file import QueuesConfigError

    try:
        return dryrun.queue_config(getattr(args, "queues", None), Path(getattr(args, "data_dir", ".opsched")))
    except QueuesConfigError as exc:
        raise SystemExit(_fail(str(exc))) from None


def _unknown_queue(file: str, specs: list, queues: list[str | None], config) -> str | None:
    """Why the file's ops cannot go where they ask in ``config`` (the queue configuration in force), or None."""
    known = [q.name for q in config.queues]
    asked = [queue.rpartition("/")[2] if queue else config.project_queues.get(spec.project, config.default_queue)
             for spec, queue in zip(specs, queues)]  # (a rendered ``agent/queue``: its queue)
    unknown = sorted({q for q in asked if q not in known})
    if not unknown:
        return None
    return (f"{file}: unknown queue {', '.join(map(repr, unknown))}; known queues: {', '.join(known) or 'none'} "
            "(the queue configuration in force: `opsched queues`)")


async def _submit(args: argparse.Namespace, specs: list, ids: list[str], queues: list[str | None]) -> int:
    from opsched.bus import tracing

    tracing.configure_or_exit()  # OTEL_TRACES_EXPORTER: the submit is the root of each op's trace
    parent = os.environ.get("TRACEPARENT") or None  # ... or continues the caller's (W3C, the env carrier)
    if parent is not None and not tracing.valid_traceparent(parent):
        return _fail(f"TRACEPARENT={parent!r} is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)")
    client = await _connect(args)
    if client is None:
        return EXIT_UNREACHABLE
    batch = specs[0].batch
    try:
        config = await client.queue_config()  # none in force yet: admission routes (and rejects) as it starts
        unknown = _unknown_queue(args.label, specs, queues, config) if config is not None else None
        if unknown is not None:  # refused before anything is published
            return _fail(unknown)
        failed = await _submit_each(client, args.label, specs, ids, parent)
        if failed is not None:
            return failed
        if batch:  # the ids on stdout, then the batch id; a summary on stderr
            limit = specs[0].batch_concurrency
            print(f"opsched: batch {batch}: {len(ids)} operations"
                  + (f", at most {limit} at once" if limit else ""), file=sys.stderr, flush=True)
            print(batch, flush=True)
        if args.wait:
            return await reading.watch(client, ids, args.output if args.output == "json" else None,
                                       title=batch or ids[0])
    finally:
        await client.close()
        tracing.shutdown()  # its spans exported before the process ends
    return 0


async def _submit_each(client, file: str, specs: list, ids: list[str], parent: str | None) -> int | None:
    """Submit each spec with its id, printing the id once sent; the exit code of the first refused (None: all sent)."""
    from opsched.bus.bus import StreamFull, no_stream
    from opsched.bus.errors import MessageTooLarge
    from opsched.bus.refusals import NotPermitted
    from opsched.rules.spec_size import SpecTooLarge

    for spec, op_id in zip(specs, ids):
        try:
            await client.submit(spec, op_id=op_id, requested_by="cli", traceparent=parent)
        except (SpecTooLarge, MessageTooLarge, NotPermitted) as exc:  # refused: nothing stored
            return _fail(f"{file}: refused: {exc}")
        except StreamFull as exc:  # the server's backlog cap (or a full stream): nothing stored, try later
            return _fail(f"{file}: refused: {exc}", EXIT_FULL)
        except Exception as exc:  # nothing stores commands: the services never created their streams
            if not no_stream(exc):
                raise
            return _fail(f"{file}: not sent: no stream stores commands on this server yet (the scheduler's "
                         "services create it when they start: start them, or `opsched up`)", EXIT_UNREACHABLE)
        print(op_id, flush=True)
    return None


def cmd_schedule(args: argparse.Namespace) -> int:
    """Create a schedule from a polyaxonfile's ``schedule`` section (prints its id), or delete one."""
    if args.delete:
        if args.file or getattr(args, "files", None):
            return _fail("give FILE to create a schedule or --delete ID to delete one, not both")

        async def delete(client) -> int:
            await client.delete_schedule(args.delete, requested_by="cli")
            print(f"delete sent for schedule {args.delete}")
            return 0
        return reading.with_client(args, delete)
    if not args.file and not getattr(args, "files", None):
        return _fail("opsched schedule needs a FILE, or -f FILE (or --delete ID)")
    loaded = _scheduled_op(args)
    if isinstance(loaded, int):
        return loaded
    spec, schedule = loaded

    async def create(client) -> int:
        print(await client.create_schedule(schedule, spec, schedule_id=args.id, requested_by="cli"))
        return 0
    return reading.with_client(args, create)


def _scheduled_op(args: argparse.Namespace):
    """(OpSpec, ScheduleSpec) of the file, or an exit code after saying what is wrong."""
    from opsched import dryrun
    from opsched.polyaxonfile import load_polyaxonfile_with_schedule
    from opsched.proto.schedules import MAX_SCHEDULE_ID
    from opsched.proto.subjects import valid_token

    if args.id and (not valid_token(args.id) or len(args.id) > MAX_SCHEDULE_ID):
        return _fail(f"--id {args.id!r}: use lowercase letters, digits and '-', at most {MAX_SCHEDULE_ID}")
    files = _files(args, "schedule")
    overrides = {k: v for k, v in (("params", parse_params(args.param) if args.param else None),
                                   ("queue", args.queue), ("priority", args.priority)) if v is not None}
    loaded = _read(lambda hub: load_polyaxonfile_with_schedule(files, overrides=overrides or None, hub=hub), args)
    if isinstance(loaded, int):
        return loaded
    spec, schedule = loaded
    args.label = " -f ".join(files)
    if schedule is None:
        return _fail(f"{args.label} has no schedule section (kind: cron, interval or datetime); "
                     "use `opsched submit` to run it once")
    config = _queue_config(args)
    problems = dryrun.refusals([spec], [dryrun.rendered(spec, "preview", config)], ["preview"], config)
    if problems:
        return _fail(f"{args.label}: refused:\n  " + "\n  ".join(problems))
    return spec, schedule


def _with_verdict(args: argparse.Namespace, send) -> int:
    """Run ``send(client)`` (a command waiting for admission's verdict, ``opsched.verdicts``) and say the verdict:
    done or nothing to do -> stdout, exit 0; refused -> stderr, exit 1 (2: what was typed names nothing or is
    invalid); no verdict within --timeout -> stderr, exit 4 (it may or may not have taken effect)."""
    from opsched.verdicts import EXIT_NO_VERDICT, CommandRefused, VerdictUnknown

    async def run(client) -> int:
        try:
            verdict = await send(client)
        except CommandRefused as exc:
            return _fail(str(exc), exc.verdict.exit_code)
        except VerdictUnknown as exc:
            return _fail(str(exc), EXIT_NO_VERDICT)
        if verdict.new_op_id:  # a restart or copy: its new id alone on stdout (for scripts), the verdict on stderr
            print(f"opsched: {verdict.message}", file=sys.stderr, flush=True)
            print(verdict.new_op_id)
        else:
            print(verdict.message)
        return verdict.exit_code
    return reading.with_client(args, run)


def cmd_stop(args: argparse.Namespace) -> int:
    if _bulk(args):
        return cmd_bulk(args)
    return _with_verdict(args, lambda client: client.stop(args.ids[0], timeout=args.timeout))


def _bulk(args: argparse.Namespace) -> bool:
    """Several ids, a selection or JSON output: the bulk command (one message per chunk, a verdict per op)."""
    return len(args.ids) != 1 or bool(args.batch or args.queue or args.all) or args.output != reading.TABLE


def cmd_bulk(args: argparse.Namespace) -> int:
    """stop|approve|reject [ID...] [--batch B] [--queue Q --all]: the ops chosen (``opsched.bulk_select``), one
    command message per chunk of ids, admission's verdict on each op, then a summary; the exit code of the worst
    (``verdicts.bulk_exit_code``)."""
    from opsched.bulk_select import SelectionError, check_flags, select
    from opsched.output import emit
    from opsched.verdicts import bulk_exit_code, bulk_lines, bulk_list

    try:
        check_flags(args.command, args.ids, args.batch, args.queue, args.all)  # before connecting
    except SelectionError as exc:
        return _fail(str(exc), EXIT_INVALID)

    async def run(client) -> int:
        view = await client.view() if args.batch or args.queue else None
        try:
            ids = select(view, args.command, args.ids, args.batch, args.queue, args.all)
        except SelectionError as exc:
            return _fail(str(exc), EXIT_INVALID)
        if not ids:
            if args.output != reading.TABLE:
                emit(bulk_list(args.command, {}), args.output)
            else:
                print(f"nothing to {args.command}: no op of the selection is in a state {args.command} acts on")
            return 0
        comment = getattr(args, "comment", None) or ""
        if args.command == "stop":
            verdicts = await client.stop_many(ids, timeout=args.timeout)
        else:
            act = client.approve_many if args.command == "approve" else client.reject_many
            verdicts = await act(ids, comment=comment, requested_by="cli", timeout=args.timeout)
        if args.output != reading.TABLE:
            emit(bulk_list(args.command, verdicts), args.output)
        else:
            print("\n".join(bulk_lines(args.command, verdicts, args.timeout)))
        return bulk_exit_code(verdicts)
    return reading.with_client(args, run)


def cmd_touch(args: argparse.Namespace) -> int:
    return _with_verdict(args, lambda client: client.touch(args.id, timeout=args.timeout))


def cmd_approve(args: argparse.Namespace) -> int:
    if _bulk(args):
        return cmd_bulk(args)

    def send(client):
        act = client.approve if args.command == "approve" else client.reject
        return act(args.ids[0], comment=args.comment or "", requested_by="cli", timeout=args.timeout)
    return _with_verdict(args, send)


def cmd_rerun(args: argparse.Namespace) -> int:
    """restart, copy, resume: the params of each -f file (params only), in order, then -P."""
    params = parse_params(args.param)
    files = getattr(args, "files", None)
    if files:
        from opsched.polyaxonfile import SpecError, load_params_files

        try:
            params = {**load_params_files(files), **params}
        except SpecError as exc:
            print(str(exc), file=sys.stderr)
            return EXIT_INVALID

    def send(client):
        if args.command == "resume":
            return client.resume(args.id, params, requested_by="cli", timeout=args.timeout)
        return client.rerun(args.id, params, copy=args.command == "copy", requested_by="cli", timeout=args.timeout)
    return _with_verdict(args, send)


def cmd_queues(args: argparse.Namespace) -> int:
    if args.action is not None:
        return cmd_queue_stop(args)
    if args.to_resources is not None:
        return queues_to_resources(Path(args.to_resources))
    if args.apply is None:
        return reading.show_queues(args)
    from opsched.rules.queues_file import QueuesConfigError, load_queues

    try:
        config = load_queues(Path(args.apply))
    except QueuesConfigError as exc:
        return _fail(str(exc))

    return _with_verdict(args, lambda client: client.set_queues(config, requested_by="cli", timeout=args.timeout))


def queues_to_resources(path: Path) -> int:
    """``opsched queues --to-resources FILE``: the file's configuration as the cluster's queue resources (OpsQueue,
    OpsFlavor, ... and the OpsConfig ``opsched``), YAML for ``kubectl apply -f -``; nothing is sent."""
    import yaml

    from opsched.rules.queue_resources import manifests
    from opsched.rules.queues_file import QueuesConfigError, load_queues
    try:
        config = load_queues(path)
    except QueuesConfigError as exc:
        return _fail(str(exc))
    print(f"# the queue configuration of {path} as opsched.io resources: kubectl apply -f <this>", flush=True)
    sys.stdout.write(yaml.safe_dump_all(manifests(config), sort_keys=False))
    return 0


def cmd_queue_stop(args: argparse.Namespace) -> int:
    """``opsched queues hold|drain|resume QUEUE``: admission's verdict as for a command on an op."""
    from opsched.verdicts import QUEUE_VERBS

    if args.action not in QUEUE_VERBS or not args.queue or args.apply is not None:
        return _fail(f"usage: opsched queues {'|'.join(QUEUE_VERBS)} QUEUE [-m COMMENT] (without --apply); got "
                     f"{' '.join(filter(None, (args.action, args.queue))) or 'nothing'}", EXIT_INVALID)
    return _with_verdict(args, lambda client: client.stop_queue(args.queue, QUEUE_VERBS[args.action],
                                                                args.comment or "", requested_by="cli",
                                                                timeout=args.timeout))


def cmd_up(args: argparse.Namespace) -> int:
    from opsched.embedded import run_up

    return run_up(args)


def cmd_ui(args: argparse.Namespace) -> int:
    from opsched.ui.server import cmd_ui as serve_ui

    return serve_ui(args)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="opsched", description=__doc__)
    add_connection_arguments(p)
    versioning.add_flag(p)
    sub = p.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start nats-server, a local control plane with GPU nodes, and all services")
    from opsched.embedded import add_up_arguments
    add_up_arguments(up)
    up.set_defaults(func=cmd_up)
    s = sub.add_parser("submit", help="submit a polyaxonfile (YAML); a file with a matrix submits "
                                      "every op of its sweep")
    _add_file_arguments(s)
    s.add_argument("--param", "-P", action="append", default=[], help="override a param: key=value (after every "
                   "file)")
    completion.queue(s.add_argument("--queue", "-q", help="the queue (default: the file's, else its project's, else "
                                    "the default queue); one the configuration in force does not have is refused "
                                    "(exit 2, the known ones listed)"))
    s.add_argument("--priority", type=int)
    s.add_argument("--id", help="operation id (default: random); the same id submitted twice is one op "
                   "(a sweep's ops are ID-0, ID-1, ...)")
    s.add_argument("--wait", "-w", action="store_true", help="watch until the op (every op of a sweep) ends")
    s.epilog = ("exit 1: the server refused the submit at a limit (your backlog of queued commands of a verb, "
                "OPSCHED_CMD_BACKLOG_PER_SUBJECT, or a full command stream): nothing stored, send it again later")
    s.add_argument("--dry-run", action="store_true", help="print the pods each op would get; publish nothing")
    s.add_argument("--output", "-o", choices=("yaml", "json"), default="yaml",
                   help="--dry-run's format; with --wait, json prints one JSON object per event")
    s.add_argument("--queues", type=Path, metavar="FILE", help=QUEUES_HELP)
    s.set_defaults(func=cmd_submit)
    for verb, text in (("approve", "release an op held for approval"), ("reject", "refuse an op held for approval")):
        a = _verdict_parser(sub, verb, text, bulk=True)
        a.add_argument("--comment", "-m")
        a.set_defaults(func=cmd_approve)
    for verb, text in (("restart", "run an op again as a new op linked to it (prints the new op's id)"),
                       ("copy", "a new op from an op's spec, starting from its outputs (prints the new op's id)"),
                       ("resume", "continue a stopped/failed/timed-out op in place (same id, new attempt)")):
        r = _verdict_parser(sub, verb, text)
        r.add_argument("--param", "-P", action="append", default=[], help="override a param: key=value (after "
                       "the -f files)")
        r.add_argument("-f", "--file", dest="files", action="append", default=[], metavar="FILE",
                       help="a file of params only (`params: {lr: {value: 0.1}}`), merged in order; repeatable")
        r.set_defaults(func=cmd_rerun)
    qs = sub.add_parser("queues", help="queues: running/concurrency, quota use per flavor, pending, borrowed; "
                        "hold, drain or resume one (admins)")
    qs.add_argument("action", nargs="?", choices=("hold", "drain", "resume"),
                    help="hold: admit nothing more from QUEUE (its running ops go on); drain: also preempt what it "
                    "runs; resume: admit again (docs/queues.md, Holding and draining a queue)")
    qs.add_argument("queue", nargs="?", help="the queue to hold, drain or resume")
    qs.add_argument("--comment", "-m", help="why (shown by `opsched queues` and `opsched why`)")
    qs.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for admission's verdict")
    qs.add_argument("--apply", metavar="FILE", help="replace the queue configuration with this YAML file")
    qs.add_argument("--to-resources", metavar="FILE", help="print this YAML file's configuration as the cluster's "
                    "queue resources (OpsQueue, OpsFlavor, ...: docs/queue-resources.md), for kubectl apply")
    reading.add_output(qs)
    qs.set_defaults(func=cmd_queues)
    reading.add_read_parsers(sub)
    logs_cli.add_parser(sub)
    tokens_cli.add_parser(sub)
    completion.add_parser(sub)
    versioning.add_parser(sub)
    _add_schedule_parser(sub)
    ui = sub.add_parser("ui", help="serve the read-only web view: queues, ops, timelines, cost, live")
    from opsched.ui.options import add_ui_arguments
    add_ui_arguments(ui)
    ui.set_defaults(func=cmd_ui)
    st = _verdict_parser(sub, "stop", "stop a queued or running operation", bulk=True)
    st.set_defaults(func=cmd_stop)
    tc = _verdict_parser(sub, "touch", "say a running service is in use: its idle time (termination.culling) "
                                       "starts again")
    tc.set_defaults(func=cmd_touch)
    return p


BULK_EPILOG = """

Several ids, --batch B or --queue Q --all: one command message per 1000 ops, a line per op with admission's
verdict, then "approved 98, nothing to do 2, refused 0, no verdict 0". --batch/--queue pick approve: pending or
on hold and not yet approved; reject: on hold; stop: not ended (both given: the ops in both). Exit 4 if any op got
no verdict, else 2 if a refusal is of what was typed (an unknown op), else 1 if any was refused, else 0.
-o json: a list of {opId, verb, outcome, message, refused, nothingToDo, answered}."""
VERDICT_EPILOG = """\
Waits for admission's verdict on this command and prints it: done (e.g. "stop requested", "approved",
"resumed as attempt 2"; restart/copy print the new op's id) or nothing to do ("already approved", "a stop was
requested already") on stdout, exit 0. Refused: the reason on stderr, exit 1 (the op has ended, is not
resumable, is not on hold, your user may not act on its project, ...) or 2 (what you typed names nothing or is
invalid: an unknown op id, params that cannot render; also a verb your NATS role may not send). No verdict
within --timeout seconds: exit 4, the command may or may not have taken effect. NATS unreachable: exit 3."""


def _verdict_parser(sub, verb: str, text: str, bulk: bool = False) -> argparse.ArgumentParser:
    """A command on one op that waits for admission's verdict (``_with_verdict``); ``bulk``: on several ops, or
    on those a selection picks (``cmd_bulk``)."""
    from opsched.verdicts import VERDICT_TIMEOUT_S

    p = sub.add_parser(verb, help=text, description=text, epilog=VERDICT_EPILOG + (BULK_EPILOG if bulk else ""),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    if bulk:
        completion.op_id(p.add_argument("ids", nargs="*", metavar="ID", help="the ops (several: one command, a verdict per op)"))
        p.add_argument("--batch", help="the ops of this sweep (its batch id) that the verb can act on now")
        completion.queue(p.add_argument("--queue", help="with --all: the ops of this queue that the verb can act on now"))
        p.add_argument("--all", action="store_true", help="confirms --queue: every such op of the queue")
        reading.add_output(p)
    else:
        completion.op_id(p.add_argument("id"))
    p.add_argument("--timeout", type=float, default=VERDICT_TIMEOUT_S,
                   help=f"seconds to wait for admission's verdict (default {VERDICT_TIMEOUT_S:g})")
    return p


def _add_file_arguments(p: argparse.ArgumentParser) -> None:
    """FILE, -f FILE (repeatable) and --hub: the polyaxonfiles read as one, and the library of their hubRefs."""
    p.add_argument("file", nargs="?", help="the polyaxonfile (the same as a first -f)")
    p.add_argument("-f", "--file", dest="files", action="append", default=[], metavar="FILE",
                   help="a polyaxonfile; repeatable: the first (or FILE) says what runs, each later one patches it "
                   "(as `polyaxon run -f a -f b`), a file of params only patches the params")
    p.add_argument("--hub", metavar="DIR", help="the component library of hubRef: DIR/NAME/VERSION.yaml, "
                   "DIR/NAME.yaml for the latest (default: $OPSCHED_HUB, then the context file's hub)")


def _add_schedule_parser(sub) -> None:
    sc = sub.add_parser("schedule", help="run a polyaxonfile on its schedule (cron, interval, datetime); "
                                         "--delete ID stops a schedule")
    _add_file_arguments(sc)
    sc.add_argument("--id", help="schedule id (default: the op name and 6 random hex); run n is op ID-n")
    sc.add_argument("--delete", metavar="ID", help="delete this schedule: no new runs")
    sc.add_argument("--param", "-P", action="append", default=[], help="override a param: key=value")
    completion.queue(sc.add_argument("--queue", "-q"))
    sc.add_argument("--priority", type=int)
    sc.add_argument("--queues", type=Path, metavar="FILE", help=QUEUES_HELP)
    sc.set_defaults(func=cmd_schedule)


def main(argv: list[str] | None = None) -> int:
    entrypoint.begin()
    p = parser()
    if argv is None:
        completion.autocomplete(p)  # the shell asking for completions: answered, and exits
    args = p.parse_args(argv)
    if args.command != "up":
        from opsched.bus import logging as oplog

        oplog.configure("console", "error")  # a client prints its own messages
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
