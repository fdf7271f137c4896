"""The gateway's REST API (FastAPI): the CLI's verbs over HTTP, each request as its token's identity. Every
answer is the CLI's ``-o json`` one (``opsched.output.full`` of ``proto.outputs`` and the query answers; their
schemas, ``proto/schemas/output/``, are in the OpenAPI document), every bad request a 4xx naming the field
(``errors``). A token's verb is checked against its identity's role (``proto.permissions.VERBS``) before anything
is published: 403 naming the verb and the role; the bus would refuse the rest (the gateway's own user may send
only the fronted users' verbs)."""
from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from opsched.bus.requesting import UNANSWERED
from opsched.client import Client, CommandRefused, LogsUnanswered, VerdictUnknown
from opsched.gateway_tokens import TokenStore, Unauthorized
from opsched.output import full
from opsched.proto import permissions
from opsched.proto.limits import MAX_SPEC_BYTES
from opsched.proto.outputs import OpList, VerdictItem, VerdictList
from opsched.rules.spec_size import SpecTooLarge
from opsched.services.gateway import events, submits
from opsched.services.gateway.errors import ERROR_SCHEMA, ApiError
from opsched.services.gateway.metrics import Requests
from opsched.services.runtime.token_buckets import TokenBuckets

SCHEMAS = Path(__file__).resolve().parents[2] / "proto" / "schemas" / "output"
MAX_BODY = MAX_SPEC_BYTES  # a request body: the bus's max spec size
RERUNS = ("restart", "copy", "resume")  # the verbs that take new params (`opsched restart ID -P k=v`)
TEXT_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/plain")


def schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.json").read_text())


def answers(name: str | None, status: int = 200) -> dict:
    """FastAPI ``responses=``: the CLI's output schema ``name``, and the error shape."""
    out: dict[Any, Any] = {code: {"content": {"application/json": {"schema": ERROR_SCHEMA}}}
                           for code in (400, 401, 403, 404, 409, 413, 429)}
    if name:
        out[status] = {"content": {"application/json": {"schema": schema(name)}}}
    return out


class Caller:
    """The identity a request acts as, its role, and the SDK sending as it."""

    def __init__(self, identity: str, role: str, client: Client) -> None:
        self.identity, self.role, self.client = identity, role, client

    def may(self, verb: str) -> None:
        if verb not in permissions.VERBS.get(self.role, ()):
            raise ApiError(403, "not_allowed", f"{self.identity} ({self.role}) may not {verb}: the {self.role} role "
                           f"sends {', '.join(permissions.VERBS.get(self.role, ())) or 'no commands'}", field=None)


def build_app(client: Client, store: TokenStore, roles: dict[str, str], now: Callable[[], datetime],  # noqa: C901
              requests: Requests | None = None, verdict_timeout: float = 10.0) -> FastAPI:
    # (one closure per route, sharing the caller check; each route is short)
    """``roles``: each fronted identity's role (a token of another identity is refused)."""
    app = FastAPI(title="opsched gateway", version="1", dependencies=[Depends(no_unknown_query)],
                  description="The CLI's verbs over HTTP; CloudEvents in at /v1/events. Bearer tokens "
                  "(`opsched tokens create USER`).")
    buckets: dict[str, TokenBuckets] = {}
    requests = requests or Requests()

    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return ApiError(400, "invalid_request", f"{where}: {first.get('msg', 'invalid')}", field=where).response()

    async def unanswered(_: Request, exc: Exception) -> JSONResponse:  # no service answering: not the caller's fault
        return ApiError(503, "unavailable", f"no answer from the services ({type(exc).__name__}): is "
                        "opsched running?", headers={"Retry-After": "5"}).response()

    for unanswered_error in UNANSWERED:
        app.add_exception_handler(unanswered_error, unanswered)  # type: ignore[arg-type]
    app.add_exception_handler(LogsUnanswered, unanswered)  # type: ignore[arg-type]

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return ApiError(exc.status_code, "not_found" if exc.status_code == 404 else "http_error",
                        str(exc.detail)).response()

    @app.middleware("http")
    async def count(request: Request, call_next: Any) -> Any:
        response = await call_next(request)
        route = request.scope.get("route")
        requests.count(getattr(route, "path", "unmatched"), response.status_code)
        return response

    async def caller(request: Request) -> Caller:
        try:
            token = store.authenticate(request.headers.get("authorization"))
        except Unauthorized as exc:
            raise ApiError(401, "unauthorized", exc.reason, headers={"WWW-Authenticate": "Bearer"}) from None
        role = roles.get(token.identity)
        if role is None:
            raise ApiError(403, "unknown_identity", f"the token's identity {token.identity!r} is no user this "
                           "gateway acts for")
        bucket_of = buckets.get(token.id)
        if bucket_of is None or bucket_of.per_min != token.rate * 60:
            bucket_of = buckets[token.id] = TokenBuckets(token.rate * 60, token.burst)
        bucket = bucket_of.refilled(token.id, now())
        if bucket.tokens < 1:
            wait = max(1, int((1 - bucket.tokens) / token.rate + 0.999))
            raise ApiError(429, "rate_limited", f"more than {token.rate:g} requests/s (burst {token.burst})",
                           headers={"Retry-After": str(wait)})
        bucket.tokens -= 1
        return Caller(token.identity, role, client.acting_as(token.identity))

    async def body_of(request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > MAX_BODY:
            raise ApiError(413, "too_large", f"the body is over {MAX_BODY} bytes")
        data = b""
        async for chunk in request.stream():
            data += chunk
            if len(data) > MAX_BODY:
                raise ApiError(413, "too_large", f"the body is over {MAX_BODY} bytes")
        return data

    async def send(who: Caller, ops: list, wait: bool) -> JSONResponse:
        queue_problem = await _unknown_queue(who.client, ops)
        if queue_problem:
            raise ApiError(400, "unknown_queue", queue_problem, field="queue")
        ids = []
        for op_id, spec in ops:
            try:
                ids.append(await who.client.submit(spec, op_id, requested_by=who.identity))
            except SpecTooLarge as exc:
                raise ApiError(413, "too_large", str(exc), field="spec") from None
            except ValueError as exc:  # codec.Refused
                raise ApiError(400, "invalid_spec", str(exc)) from None
        body: dict[str, Any] = {"opIds": ids}
        if wait:
            rows = {r.op_id: r for r in await who.client.ops()}
            body["statuses"] = {i: rows[i].status if i in rows else "pending" for i in ids}
        return JSONResponse(body, status_code=202, headers={"Location": f"/v1/ops/{ids[0]}"})

    @app.post("/v1/ops", status_code=202, responses=answers(None), summary="Submit a polyaxonfile (YAML) or OpSpec "
              "(JSON)", openapi_extra={"requestBody": {"content": {"application/yaml": {"schema": {"type": "string"}},
                                                                    "application/json": {"schema": {"type": "object"}}}}})
    async def submit(request: Request, id: str | None = None, param: list[str] | None = Query(None),
                     queue: str | None = None, priority: int | None = None, wait: bool = False) -> JSONResponse:
        who = await caller(request)
        who.may("submit")
        body = await body_of(request)
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind == "application/json":
            if param or queue or priority is not None:
                raise ApiError(400, "overrides_with_json", "param, queue and priority apply to a polyaxonfile; "
                               "a JSON OpSpec says them itself", field="param" if param else "queue" if queue else "priority")
            ops = submits.from_json(body, id)
        elif kind in TEXT_TYPES or not kind:
            overrides = _overrides(param, queue, priority)
            ops = submits.from_yaml(_text(body), overrides, id, "the request body")
        else:
            raise ApiError(415, "unsupported_media_type", f"Content-Type {kind!r}: send application/yaml (a "
                           "polyaxonfile) or application/json (an OpSpec)", field="Content-Type")
        return await send(who, ops, wait)

    @app.post("/v1/events", status_code=202, responses=answers(None),
              summary="CloudEvents (binary, structured, batch): io.opsched.operation.submit")
    async def cloudevents_in(request: Request) -> JSONResponse:
        who = await caller(request)
        who.may("submit")
        body = await body_of(request)
        ops = events.ops_of(dict(request.headers), body)
        return await send(who, ops, False)

    @app.get("/v1/ops", responses=answers("ops"), summary="List ops (as `opsched ops -o json`)")
    async def list_ops(request: Request, status: str | None = None, queue: str | None = None,
                       user: str | None = None, batch: str | None = None) -> JSONResponse:
        who = await caller(request)
        rows = await who.client.ops()
        from opsched.view import items

        at = now()
        listed = [i for i in items(rows, at) if (not status or i.status == status) and (not queue or i.queue == queue)
                  and (not user or i.user == user) and (not batch or i.batch == batch)]
        return JSONResponse(full(OpList(items=listed)))

    @app.get("/v1/ops/{op_id}", responses=answers("ops"), summary="One op (as `opsched ops ID -o json`)")
    async def get_op(request: Request, op_id: str) -> JSONResponse:
        who = await caller(request)
        rows = await who.client.ops()
        from opsched.view import items

        found = [i for i in items(rows, now()) if i.op_id == op_id]
        if not found:
            raise ApiError(404, "unknown_op", f"no operation {op_id}", field="op_id")
        return JSONResponse(full(OpList(items=found)))

    @app.get("/v1/ops/{op_id}/why", responses=answers("why"), summary="Why (as `opsched why ID -o json`)")
    async def why(request: Request, op_id: str) -> JSONResponse:
        who = await caller(request)
        return JSONResponse(full(await who.client.why(op_id)))

    @app.get("/v1/ops/{op_id}/logs", summary="What the op's container printed (text; follow=true streams)")
    async def logs(request: Request, op_id: str, follow: bool = False, tail: int | None = None,
                   replica: str = "", container: str = "") -> StreamingResponse:
        who = await caller(request)
        from opsched.client import LogsRefused
        lines = who.client.logs(op_id, follow=follow, tail=tail, replica=replica, container=container)
        try:
            first = await lines.__anext__()
        except StopAsyncIteration:
            first = None
        except LogsRefused as exc:
            raise ApiError(404, getattr(exc, "reason", "logs_refused"), str(exc), field="op_id") from None

        async def text() -> AsyncIterator[str]:
            if first is not None:
                yield first + "\n"
                async for line in lines:
                    yield line + "\n"
        return StreamingResponse(text(), media_type="text/plain")

    async def command(request: Request, verb: str, op_id: str, comment: str, param: list[str] | None) -> JSONResponse:
        params = _overrides(param, None, None).get("params")
        who = await caller(request)
        who.may(verb)
        c = who.client
        try:
            if verb == "stop":
                v = await c.stop(op_id, comment or "stopped by user", timeout=verdict_timeout)
            elif verb == "approve":
                v = await c.approve(op_id, comment, who.identity, timeout=verdict_timeout)
            elif verb == "reject":
                v = await c.reject(op_id, comment, who.identity, timeout=verdict_timeout)
            elif verb == "resume":
                v = await c.resume(op_id, params, who.identity, timeout=verdict_timeout)
            else:
                v = await c.rerun(op_id, params, copy=verb == "copy", requested_by=who.identity,
                                  timeout=verdict_timeout)
        except CommandRefused as exc:
            item = VerdictItem(op_id=op_id, verb=verb, outcome=exc.verdict.outcome, message=exc.verdict.message,
                               refused=True)
            return JSONResponse({"error": exc.verdict.outcome, "message": str(exc), "field": "op_id",
                                 "verdict": full(VerdictList(items=[item]))}, status_code=409)
        except VerdictUnknown as exc:
            raise ApiError(504, "no_verdict", str(exc)) from None
        assert v is not None
        item = VerdictItem(op_id=op_id, verb=verb, outcome=v.outcome, message=v.message,
                           nothing_to_do=v.nothing_to_do)
        out = full(VerdictList(items=[item]))
        if v.new_op_id:
            out["newOpId"] = v.new_op_id
        return JSONResponse(out)

    def verdicts(verb: str, schema_name: str | None) -> None:
        route = app.post(f"/v1/ops/{{op_id}}/{verb}", responses=answers(schema_name), name=verb,
                         summary=f"{verb} (as `opsched {verb} ID -o json`)")
        if verb in RERUNS:
            @route
            async def rerun(request: Request, op_id: str, param: list[str] | None = Query(None)) -> JSONResponse:
                return await command(request, verb, op_id, "", param)
        else:
            @route
            async def verdict(request: Request, op_id: str, comment: str = "") -> JSONResponse:
                return await command(request, verb, op_id, comment, None)

    for verb, name in (("stop", "stop"), ("approve", "approve"), ("reject", "reject"), ("restart", None),
                       ("copy", None), ("resume", None)):
        verdicts(verb, name)

    @app.get("/v1/schedules", responses=answers("schedules"), summary="Schedules (as `opsched schedules -o json`)")
    async def schedules(request: Request, id: list[str] | None = Query(None)) -> JSONResponse:
        who = await caller(request)
        return JSONResponse(full(await who.client.schedules(id or ())))

    @app.post("/v1/schedules", status_code=202, responses=answers(None), summary="Create a schedule from a "
              "polyaxonfile with a schedule section (as `opsched schedule FILE`)",
              openapi_extra={"requestBody": {"content": {"application/yaml": {"schema": {"type": "string"}}}}})
    async def create_schedule(request: Request, id: str | None = None, param: list[str] | None = Query(None),
                              queue: str | None = None, priority: int | None = None) -> JSONResponse:
        who = await caller(request)
        who.may("schedule.create")
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind and kind not in TEXT_TYPES:
            raise ApiError(415, "unsupported_media_type", f"Content-Type {kind!r}: send application/yaml (a "
                           "polyaxonfile with a schedule section)", field="Content-Type")
        spec, schedule = submits.scheduled(_text(await body_of(request)), _overrides(param, queue, priority), id,
                                           "the request body")
        queue_problem = await _unknown_queue(who.client, [("schedule", spec)])
        if queue_problem:
            raise ApiError(400, "unknown_queue", queue_problem, field="queue")
        schedule_id = await who.client.create_schedule(schedule, spec, schedule_id=id, requested_by=who.identity)
        return JSONResponse({"scheduleId": schedule_id}, status_code=202,
                            headers={"Location": f"/v1/schedules?id={schedule_id}"})

    @app.delete("/v1/schedules/{schedule_id}", status_code=202, responses=answers(None),
                summary="No new runs of a schedule (as `opsched schedule --delete ID`)")
    async def delete_schedule(request: Request, schedule_id: str) -> JSONResponse:
        who = await caller(request)
        who.may("schedule.delete")
        await who.client.delete_schedule(schedule_id, requested_by=who.identity)
        return JSONResponse({"scheduleId": schedule_id}, status_code=202)

    @app.get("/v1/queues", responses=answers("queues"), summary="Queues (as `opsched queues -o json`)")
    async def queues(request: Request) -> JSONResponse:
        who = await caller(request)
        return JSONResponse(full(await who.client.queues()))

    @app.get("/v1/cost", responses=answers("cost"), summary="Cost (as `opsched cost -o json`)")
    async def cost(request: Request) -> JSONResponse:
        who = await caller(request)
        return JSONResponse(full(await who.client.cost()))

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> JSONResponse:
        ok = client.bus.connected
        return JSONResponse({"connected": ok}, status_code=200 if ok else 503)

    return app


def _text(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, "invalid_yaml", f"the body is not UTF-8 text: {exc}") from None


async def no_unknown_query(request: Request) -> None:
    """Never ignore what a caller wrote: a query parameter the route does not read is refused, named (FastAPI
    would drop it silently)."""
    dependant = getattr(request.scope.get("route"), "dependant", None)
    if dependant is None:
        return
    known = _query_names(dependant)
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        reads = ", ".join(sorted(known)) or "no query parameters"
        raise ApiError(400, "unknown_parameter", f"unknown query parameter {unknown[0]!r}: this route reads {reads}",
                       field=unknown[0])


def _query_names(dependant: Any) -> set[str]:
    """The query parameters a route reads: its own and its dependencies'."""
    return {p.alias for p in dependant.query_params}.union(*(_query_names(d) for d in dependant.dependencies))


def _overrides(params: list[str] | None, queue: str | None, priority: int | None) -> dict[str, Any]:
    """As ``opsched submit -P k=v --queue --priority`` (``opsched.cli.params_of``)."""
    out: dict[str, Any] = {}
    if params:
        from opsched.cli import params_of

        try:
            parsed = params_of(params)
        except ValueError as exc:
            raise ApiError(400, "invalid_param", f"param {exc}", field="param") from None
        out["params"] = parsed
    if queue:
        out["queue"] = queue
    if priority is not None:
        out["priority"] = priority
    return out


async def _unknown_queue(client: Client, ops: list) -> str | None:
    """Why the ops cannot go where they ask in the queue configuration in force (as `opsched submit` says)."""
    from opsched.cli import _unknown_queue as unknown
    from opsched.rules.queues_file import load_queues

    config = await client.queue_config() or load_queues(None)  # none put in force yet: admission's default
    return unknown("the request", [s for _, s in ops], [s.queue for _, s in ops], config)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)
