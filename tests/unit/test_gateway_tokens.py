"""The gateway's token store (hashing, expiry on an injected clock, revoke, the file read again when it changes)
and its CloudEvents parsing."""
from __future__ import annotations

import json
import os
import warnings
from datetime import datetime, timedelta, timezone

import pytest

from opsched.gateway_tokens import TokenStore, Unauthorized, parse_duration
from opsched.proto import cloudevents as ce
from opsched.services.gateway import events
from opsched.services.gateway.errors import ApiError

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_secret_is_stored_hashed_and_checked(tmp_path):
    store = TokenStore(tmp_path / "t.json", lambda: T0)
    record, token = store.create("ann")
    text = (tmp_path / "t.json").read_text()
    assert token.split("_", 2)[2] not in text and record.sha256 in text
    assert oct((tmp_path / "t.json").stat().st_mode & 0o777) == "0o600"
    assert store.authenticate(f"Bearer {token}").identity == "ann"
    with pytest.raises(Unauthorized, match="not valid"):
        store.authenticate(f"Bearer {token}x")
    with pytest.raises(Unauthorized, match="required"):
        store.authenticate(None)
    assert not hasattr(record.listed(), "sha256") and record.listed().identity == record.identity


def test_expiry_on_the_injected_clock(tmp_path):
    now = [T0]
    store = TokenStore(tmp_path / "t.json", lambda: now[0])
    _, token = store.create("ann", expires_in=timedelta(hours=1))
    assert store.authenticate(f"Bearer {token}")
    now[0] = T0 + timedelta(hours=1)
    with pytest.raises(Unauthorized, match="expired"):
        store.authenticate(f"Bearer {token}")


def test_a_revoke_by_another_process_is_read_again(tmp_path):
    path = tmp_path / "t.json"
    serving, admin = TokenStore(path, lambda: T0), TokenStore(path, lambda: T0)
    record, token = admin.create("ann")
    assert serving.authenticate(f"Bearer {token}")
    admin.revoke(record.id)
    os.utime(path, ns=(1, 1))  # another mtime even within the filesystem's granularity
    with pytest.raises(Unauthorized, match="revoked"):
        serving.authenticate(f"Bearer {token}")


def test_durations():
    assert parse_duration("30d") == timedelta(days=30)
    with pytest.raises(ValueError, match="--expires"):
        parse_duration("soon")


def _http():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from cloudevents.v1 import http
    return http


YAML = "version: 1.1\nkind: operation\nname: a\ncomponent:\n  run:\n    kind: job\n    container:\n      image: x\n"


def test_cloudevent_op_id_is_deterministic_and_the_extension_wins():
    http = _http()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        headers, body = http.to_structured(http.CloudEvent({"type": ce.SUBMIT_TYPE, "source": "s", "id": "1"}, YAML))
        again = events.ops_of(headers, body)
        assert events.ops_of(headers, body)[0][0] == again[0][0] == events.op_id_of("s", "1")
        headers, body = http.to_structured(http.CloudEvent(
            {"type": ce.SUBMIT_TYPE, "source": "s", "id": "1", ce.OP_ID_EXTENSION: "mine",
             ce.QUEUE_EXTENSION: "q"}, YAML))
        (op_id, spec), = events.ops_of(headers, body)
    assert op_id == "mine" and spec.queue == "q"


def test_cloudevent_wrong_type_and_garbage_are_400():
    http = _http()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        headers, body = http.to_structured(http.CloudEvent({"type": "other", "source": "s"}, YAML))
    with pytest.raises(ApiError) as err:
        events.ops_of(headers, body)
    assert err.value.status == 400 and err.value.field == "type"
    with pytest.raises(ApiError):
        events.ops_of({"content-type": events.BATCH}, json.dumps({"not": "a list"}).encode())
    with pytest.raises(ApiError):
        events.ops_of({"content-type": "application/cloudevents+json"}, b"{garbage")


def test_the_tokens_command_creates_lists_and_revokes(tmp_path, capsys):
    from opsched.cli import main

    file = str(tmp_path / "tokens.json")
    assert main(["tokens", "--file", file, "create", "ann", "--expires", "1d", "--rate", "2"]) == 0
    token = capsys.readouterr().out.strip()
    assert token.startswith("ops_")
    assert main(["tokens", "--file", file, "list", "-o", "json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    listed = answer["items"]
    assert answer["type"] == "token_list" and [t["identity"] for t in listed] == ["ann"]
    assert token.split("_", 2)[2] not in json.dumps(listed) and "sha256" not in listed[0] and listed[0]["rate"] == 2
    assert main(["tokens", "--file", file, "list"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["ID", "IDENTITY", "CREATED", "STATE", "RATE", "BURST"]
    assert table[1].split()[:2] == [listed[0]["id"], "ann"] and "until" in table[1] and "2/s" in table[1]
    assert main(["tokens", "--file", file, "revoke", listed[0]["id"]]) == 0
    assert main(["tokens", "--file", file, "list"]) == 0
    assert "revoked" in capsys.readouterr().out
    with pytest.raises(Unauthorized, match="revoked"):
        TokenStore(tmp_path / "tokens.json").authenticate(f"Bearer {token}")
    assert main(["tokens", "--file", file, "create", "admission"]) != 0  # a service's user: no token acts as it
