"""Mutations of a valid wire document: what a buggy or hostile producer sends.

On the JSON tree: a field dropped, renamed or given a value of another type, numbers huge, negative,
NaN or infinite, very long strings, deep nesting, unknown tags, extreme datetimes, bad quantities. On
the bytes: truncated JSON, random bytes, garbage appended. Non-JSON numbers (``NaN``, ``1e999999999``)
are spliced into the encoded bytes in place of a marker string.
"""
from __future__ import annotations

import copy
from typing import Any

import msgspec
from hypothesis import strategies as st

RAW = "\x00raw:"  # a string leaf starting with this is replaced by its rest, unquoted, in the bytes
NUMBERS = (-1, 0, -(2**63), 2**63, 2**64, 10**30, 3_000_000, -5, 0.5, 1e308, -1e308)
RAW_NUMBERS = ("NaN", "Infinity", "-Infinity", "1e999999999", "1e400", "-1e400", "1" * 5000)
BAD_QUANTITIES = ("-1", "two", "1e999999999", "1e400", "0.5", "", "NaN", "Infinity", "-5", "1Ei" * 50,
                  "9" * 400, "1e-400")
DATETIMES = ("0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "9999-12-31T23:59:59-23:59",
             "0001-01-01T00:00:00+23:59", "2026-02-30T00:00:00Z", "2026-01-01T00:00:00", "now", "")
OTHER_TYPES: tuple[Any, ...] = (None, True, 1, -1, 1.5, "x", [], {}, [1, "a"], {"k": "v"})


def deep(depth: int) -> str:
    """A value nested ``depth`` deep, as raw JSON (spliced into the bytes: no tree of ours holds it)."""
    return RAW + '{"k":[' * (depth // 2) + "1" + "]}" * (depth // 2)


LEAVES: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from(NUMBERS), st.sampled_from(RAW_NUMBERS).map(lambda r: RAW + r),
    st.sampled_from(BAD_QUANTITIES), st.sampled_from(DATETIMES), st.sampled_from(OTHER_TYPES),
    st.integers(1, 200_000).map(lambda n: "x" * n), st.sampled_from((10, 100, 1000, 5000)).map(deep),
    st.binary(max_size=20).map(lambda b: b.decode("latin-1")),
)


def _paths(doc: Any, at: tuple = ()) -> list[tuple]:
    """Every place in the tree: dict keys and list indexes."""
    out = [at]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, at + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, at + (i,))
    return out


def _parent(doc: Any, path: tuple) -> Any:
    for step in path[:-1]:
        doc = doc[step]
    return doc


@st.composite
def mutated(draw: st.DrawFn, doc: Any) -> Any:
    """``doc`` with 1-3 of its places changed (a copy; ``doc`` is left as it was)."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            return draw(LEAVES)
        path = draw(st.sampled_from(paths))
        parent, key = _parent(doc, path), path[-1]
        how = draw(st.sampled_from(("drop", "rename", "replace", "replace", "replace", "tag")))
        if how == "drop":
            del parent[key]
        elif how == "rename" and isinstance(parent, dict):
            parent[draw(st.sampled_from(("x", key.upper(), key + "_", "__class__")))] = parent.pop(key)
        elif how == "tag" and isinstance(doc, dict) and "type" in doc:
            doc["type"] = draw(st.sampled_from(("", "nope", "Submitted", "submitted ", 1, None)))
        else:  # a copy: a later mutation may reach into it, and LEAVES' lists and dicts are shared
            parent[key] = copy.deepcopy(draw(LEAVES))
    return doc


def encode_raw(doc: Any) -> bytes:
    """JSON bytes of ``doc``, with every ``RAW`` marker string spliced in as its text, unquoted."""
    data = msgspec.json.encode(doc)
    marker = msgspec.json.encode(RAW)[:-1]  # the opening quote and the escaped marker
    while marker in data:
        start = data.index(marker)
        end = start + len(marker)
        while data[end:end + 1] != b'"':
            end += 2 if data[end:end + 1] == b"\\" else 1
        text = msgspec.json.decode(b'"' + data[start + len(marker):end] + b'"')
        data = data[:start] + text.encode() + data[end + 1:]
    return data


@st.composite
def mangled(draw: st.DrawFn, data: bytes) -> bytes:
    """The bytes of a message broken: truncated, spliced with random bytes, or with garbage appended."""
    how = draw(st.sampled_from(("truncate", "splice", "append", "random")))
    cut = draw(st.integers(0, max(len(data) - 1, 0)))
    if how == "truncate":
        return data[:cut]
    if how == "splice":
        return data[:cut] + draw(st.binary(min_size=1, max_size=8)) + data[cut:]
    if how == "append":
        return data + draw(st.sampled_from((b"}", b",", b"\x00", b" {}", b"\xff")))
    return draw(st.binary(max_size=64))
