"""The gateway (services/gateway) on a real, secured nats-server with admission: bearer tokens, the REST submit
(YAML and JSON), the CloudEvents binding (the official SDK as the producer), the verbs' permissions, and its
answers to bad input (4xx naming the field, never a 5xx)."""
from __future__ import annotations

import asyncio
import json
import warnings
from datetime import timedelta
from pathlib import Path

import jsonschema
import pytest
import requests

from opsched.proto import cloudevents as ce
from opsched.proto import subjects
from tests.builders.gateway import serving
from tests.waiting import eventually

BUSES = ["nats"]
SCHEMAS = Path(__file__).resolve().parents[2] / "proto" / "schemas" / "output"
YAML = """\
version: 1.1
kind: operation
name: hello
component:
  run:
    kind: job
    container:
      image: busybox
      command: [sh, -c, "echo hi"]
"""


@pytest.fixture
async def gateway(nats_server, stack_factory, tmp_path):
    await stack_factory(("admission",))
    async with serving(nats_server, tmp_path) as running:
        yield running


async def call(method: str, url: str, **kwargs) -> requests.Response:
    return await asyncio.to_thread(requests.request, method, url, timeout=30, **kwargs)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def submitted_by(client, op_id: str) -> str:
    async for event, row in client.watch(op_id, timeout=15):
        if row.user:
            return row.user
    raise AssertionError(f"no submitted event for {op_id}")


async def test_tokens_none_unknown_expired_revoked_are_401(gateway):
    service, store = gateway
    url = service.url + "/v1/queues"
    assert (await call("GET", url)).status_code == 401
    r = await call("GET", url, headers=bearer("ops_nope_secret"))
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer"
    record, token = store.create("admin")
    assert (await call("GET", url, headers=bearer(token))).status_code == 200
    store.revoke(record.id)  # the file changed: the gateway reads it again
    r = await call("GET", url, headers=bearer(token))
    assert r.status_code == 401 and "revoked" in r.json()["message"]
    _, short = store.create("admin", expires_in=timedelta(seconds=-1) + timedelta(microseconds=1))
    r = await call("GET", url, headers=bearer(short))
    assert r.status_code == 401 and "expired" in r.json()["message"]


async def test_yaml_submit_is_the_token_identity_s(gateway, client):
    service, store = gateway
    _, token = store.create("ann")
    r = await call("POST", service.url + "/v1/ops?id=gw-yaml-1&param=lr=0.1", data=YAML,
                   headers={**bearer(token), "Content-Type": "application/yaml"})
    assert r.status_code == 202, r.text
    assert r.json()["opIds"] == ["gw-yaml-1"] and r.headers["Location"] == "/v1/ops/gw-yaml-1"
    assert await submitted_by(client, "gw-yaml-1") == "ann"
    listed = await call("GET", service.url + "/v1/ops/gw-yaml-1", headers=bearer(token))
    assert listed.status_code == 200
    jsonschema.validate(listed.json(), json.loads((SCHEMAS / "ops.json").read_text()))
    why = await call("GET", service.url + "/v1/ops/gw-yaml-1/why", headers=bearer(token))
    jsonschema.validate(why.json(), json.loads((SCHEMAS / "why.json").read_text()))


async def test_json_submit(gateway, client):
    service, store = gateway
    _, token = store.create("admin")
    spec = {"name": "hello", "container": {"image": "busybox", "command": ["true"]}}
    r = await call("POST", service.url + "/v1/ops?id=gw-json-1", data=json.dumps(spec),
                   headers={**bearer(token), "Content-Type": "application/json"})
    assert r.status_code == 202, r.text
    assert await submitted_by(client, "gw-json-1") == "admin"


async def test_a_submitter_may_not_approve_and_nothing_is_sent(gateway, bus):
    service, store = gateway
    _, token = store.create("ann")
    before = (await bus.js.stream_info(subjects.CMD_STREAM)).state.last_seq
    r = await call("POST", service.url + "/v1/ops/some-op/approve", headers=bearer(token))
    assert r.status_code == 403
    assert "approve" in r.json()["message"] and "submitter" in r.json()["message"]
    assert (await bus.js.stream_info(subjects.CMD_STREAM)).state.last_seq == before  # nothing published


async def test_bad_input_names_the_field(gateway):
    service, store = gateway
    _, token = store.create("admin")
    yaml = {**bearer(token), "Content-Type": "application/yaml"}
    r = await call("POST", service.url + "/v1/ops", data="version: 1.1\nkind: operation\n: : [", headers=yaml)
    assert r.status_code == 400 and r.json()["error"] == "invalid_yaml"
    r = await call("POST", service.url + "/v1/ops", data=YAML.replace("name: hello", "name: hello\nbogus: 1"),
                   headers=yaml)
    assert r.status_code == 400 and "bogus" in r.text
    r = await call("POST", service.url + "/v1/ops?queue=nowhere", data=YAML, headers=yaml)
    assert r.status_code == 400 and r.json()["field"] == "queue" and "nowhere" in r.json()["message"]
    r = await call("POST", service.url + "/v1/ops", data=json.dumps({"name": "x", "container": {"image": 5}}),
                   headers={**bearer(token), "Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["field"] == "container.image", r.text
    r = await call("POST", service.url + "/v1/ops", data=json.dumps({"name": "x", "container": {"image": "a",
                                                                      "bogus": 1}}),
                   headers={**bearer(token), "Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["field"] == "container.bogus", r.text
    ref = YAML.replace("component:\n  run:", "component:\n  pathRef: ../secret.yaml\n  run:")
    r = await call("POST", service.url + "/v1/ops", data=ref, headers=yaml)
    assert r.status_code == 400 and r.json()["field"] == "component.pathRef"


async def test_garbage_to_every_route_is_never_a_5xx(gateway):
    service, store = gateway
    _, token = store.create("admin")
    schema = (await call("GET", service.url + "/openapi.json")).json()
    for path, methods in schema["paths"].items():
        for method in methods:
            url = service.url + path.replace("{op_id}", "no-such-op").replace("{schedule_id}", "no-such-schedule")
            for kind in ("application/json", "application/yaml", "application/cloudevents+json", "text/html"):
                r = await call(method.upper(), url + "?tail=x&follow=maybe&priority=high", data=b"\x00{[garbage",
                               headers={**bearer(token), "Content-Type": kind})
                assert r.status_code < 500, (method, path, kind, r.status_code, r.text)


async def test_openapi_lists_every_route(gateway):
    service, _ = gateway
    paths = (await call("GET", service.url + "/openapi.json")).json()["paths"]
    for route in ("/v1/ops", "/v1/events", "/v1/ops/{op_id}", "/v1/ops/{op_id}/why", "/v1/ops/{op_id}/logs",
                  "/v1/ops/{op_id}/stop", "/v1/ops/{op_id}/approve", "/v1/ops/{op_id}/reject",
                  "/v1/ops/{op_id}/restart", "/v1/ops/{op_id}/copy", "/v1/ops/{op_id}/resume", "/v1/queues",
                  "/v1/cost", "/v1/schedules", "/v1/schedules/{schedule_id}"):
        assert route in paths


async def test_rate_limit_and_body_size(gateway):
    service, store = gateway
    _, token = store.create("admin", rate=0.01, burst=2)
    codes = [(await call("GET", service.url + "/v1/queues", headers=bearer(token))).status_code for _ in range(3)]
    assert codes[:2] == [200, 200] and codes[2] == 429
    r = await call("GET", service.url + "/v1/queues", headers=bearer(token))
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
    _, other = store.create("admin")
    r = await call("POST", service.url + "/v1/ops", data=b"x" * (300 * 1024),
                   headers={**bearer(other), "Content-Type": "application/yaml"})
    assert r.status_code == 413


def _sdk():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from cloudevents.v1 import http
    return http


async def test_cloudevents_binary_structured_batch_and_retries(gateway, client):
    service, store = gateway
    _, token = store.create("ann")
    http = _sdk()
    url = service.url + "/v1/events"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = http.CloudEvent({"type": ce.SUBMIT_TYPE, "source": "tests/gw", "id": "evt-1",
                               "datacontenttype": "application/yaml"}, YAML.encode())
        headers, body = http.to_binary(one)
        two = http.CloudEvent({"type": ce.SUBMIT_TYPE, "source": "tests/gw", "id": "evt-2",
                               ce.OP_ID_EXTENSION: "gw-ce-2"}, {"name": "x", "container": {"image": "busybox"}})
        s_headers, s_body = http.to_structured(two)
        batch = [json.loads(http.to_json(http.CloudEvent({"type": ce.SUBMIT_TYPE, "source": "tests/gw",
                                                          "id": f"b-{i}"}, YAML)))
                 for i in range(2)]
        wrong = http.CloudEvent({"type": "io.example.other", "source": "tests/gw"}, YAML)
        w_headers, w_body = http.to_structured(wrong)
    r1 = await call("POST", url, data=body, headers={**headers, **bearer(token)})
    assert r1.status_code == 202, r1.text
    again = await call("POST", url, data=body, headers={**headers, **bearer(token)})
    assert again.json()["opIds"] == r1.json()["opIds"]  # the same event: the same op
    assert await submitted_by(client, r1.json()["opIds"][0]) == "ann"
    r2 = await call("POST", url, data=s_body, headers={**s_headers, **bearer(token)})
    assert r2.status_code == 202 and r2.json()["opIds"] == ["gw-ce-2"], r2.text
    r3 = await call("POST", url, data=json.dumps(batch),
                    headers={"Content-Type": "application/cloudevents-batch+json", **bearer(token)})
    assert r3.status_code == 202 and len(r3.json()["opIds"]) == 2, r3.text
    for op_id in r3.json()["opIds"]:
        assert await submitted_by(client, op_id) == "ann"
    r4 = await call("POST", url, data=w_body, headers={**w_headers, **bearer(token)})
    assert r4.status_code == 400 and "io.example.other" in r4.json()["message"] and r4.json()["field"] == "type"
    ops = [r for r in await client.ops() if r.op_id == r1.json()["opIds"][0]]
    assert len(ops) == 1


async def test_a_query_no_service_answers_is_503_not_500(gateway):
    service, store = gateway  # admission alone: nobody answers `cost`
    _, token = store.create("admin")
    r = await call("GET", service.url + "/v1/cost", headers=bearer(token))
    assert r.status_code == 503 and r.json()["error"] == "unavailable" and r.headers["Retry-After"]


async def test_a_query_parameter_no_route_reads_is_refused_naming_it(gateway):
    service, store = gateway
    _, token = store.create("admin")
    r = await call("GET", service.url + "/v1/ops?stauts=running", headers=bearer(token))
    assert r.status_code == 400 and r.json()["field"] == "stauts" and "status" in r.json()["message"], r.text
    r = await call("POST", service.url + "/v1/ops/some-op/stop?param=lr=0.1", headers=bearer(token))
    assert r.status_code == 400 and r.json()["field"] == "param", r.text  # stop takes no params: never dropped


async def test_restart_takes_new_params_as_the_cli_s_restart_p(gateway, client):
    service, store = gateway
    _, token = store.create("ann")
    yaml = {**bearer(token), "Content-Type": "application/yaml"}
    with_input = YAML.replace("  run:", "  inputs: [{name: lr, type: float, value: 0.1}]\n  run:")
    r = await call("POST", service.url + "/v1/ops?id=gw-rerun-1", data=with_input, headers=yaml)
    assert r.status_code == 202, r.text
    r = await call("POST", service.url + "/v1/ops/gw-rerun-1/stop", headers=bearer(token))
    assert r.status_code == 200, r.text
    r = await call("POST", service.url + "/v1/ops/gw-rerun-1/restart?param=lr=0.5", headers=bearer(token))
    assert r.status_code == 200, r.text
    new = r.json()["newOpId"]
    params = None
    async for event, _row in client.watch(new, timeout=15):
        if type(event).__name__ == "OperationSubmitted":
            params = event.spec.params
            break
    assert params is not None and params["lr"] == 0.5, params
    r = await call("POST", service.url + "/v1/ops/gw-rerun-1/restart?param=nokeyvalue", headers=bearer(token))
    assert r.status_code == 400 and r.json()["field"] == "param", r.text


async def test_schedules_are_created_listed_and_deleted_by_an_admin_only(gateway, client):
    """POST /v1/schedules as `opsched schedule FILE`, GET as `opsched schedules -o json`, DELETE as
    `opsched schedule --delete ID`; a submitter is refused before anything is sent."""
    service, store = gateway
    _, admin = store.create("admin")
    _, ann = store.create("ann")
    yaml = {"Content-Type": "application/yaml"}
    nightly = YAML.replace("name: hello", "name: nightly\nschedule:\n  kind: interval\n  frequency: 3600")
    r = await call("POST", service.url + "/v1/schedules?id=gw-nightly", data=nightly, headers={**bearer(ann), **yaml})
    assert r.status_code == 403 and "schedule.create" in r.json()["message"]
    r = await call("POST", service.url + "/v1/schedules", data=YAML, headers={**bearer(admin), **yaml})
    assert r.status_code == 400 and r.json()["error"] == "no_schedule" and r.json()["field"] == "schedule"
    r = await call("POST", service.url + "/v1/schedules?id=Not_Valid", data=nightly, headers={**bearer(admin), **yaml})
    assert r.status_code == 400 and r.json()["field"] == "id"
    r = await call("POST", service.url + "/v1/schedules?id=gw-nightly&queue=nowhere", data=nightly,
                   headers={**bearer(admin), **yaml})
    assert r.status_code == 400 and r.json()["field"] == "queue"
    r = await call("POST", service.url + "/v1/schedules?id=gw-nightly", data=nightly, headers={**bearer(admin), **yaml})
    assert r.status_code == 202 and r.json() == {"scheduleId": "gw-nightly"}, r.text

    async def listed(state: str | None = None) -> dict | None:
        r = await call("GET", service.url + "/v1/schedules?id=gw-nightly", headers=bearer(ann))  # reading: anyone
        assert r.status_code == 200, r.text
        jsonschema.validate(r.json(), json.loads((SCHEMAS / "schedules.json").read_text()))
        (schedule,) = r.json()["schedules"] or [None]
        return schedule if schedule and (state is None or schedule["state"] == state) else None
    schedule = await eventually(listed, "the schedule listed", timeout=15)
    assert (schedule["scheduleId"], schedule["kind"], schedule["frequencyS"], schedule["name"]) == \
        ("gw-nightly", "interval", 3600, "nightly")
    r = await call("DELETE", service.url + "/v1/schedules/gw-nightly", headers=bearer(ann))
    assert r.status_code == 403
    r = await call("DELETE", service.url + "/v1/schedules/gw-nightly", headers=bearer(admin))
    assert r.status_code == 202
    await eventually(lambda: listed("deleted"), "the schedule deleted", timeout=15)

