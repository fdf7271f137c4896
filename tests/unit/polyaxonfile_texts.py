"""Polyaxon files the polyaxonfile tests start from, and helpers to vary, parse and check them."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from opsched.polyaxonfile import FieldError, SpecError, parse_polyaxonfile
from opsched.proto import codec
from opsched.proto.spec import OpSpec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

COMPONENT = """
version: 1.1
kind: component
name: train
tags: [a, b]
queue: gpu
termination: {maxRetries: 2}
run:
  kind: job
  container:
    image: python:3.11-slim
    command: ["sh", "-c", "sleep 1"]
    resources:
      limits: {nvidia.com/gpu: 1}
"""

OPERATION = """
version: 1.1
kind: operation
name: op-name
queue: agent-1/fast
priority: 5
isApproved: false
cost: 2.5
conditions: "{{ params.lr > 0 }}"
params:
  lr: {value: 0.1}
  epochs: 7
termination: {timeout: 600}
cache: {ttl: 60}
component:
  name: comp-name
  queue: slow
  priority: 1
  tags: [from-component]
  termination: {maxRetries: 3, timeout: 30}
  cache: {disable: true}
  inputs:
    - {name: lr, type: float, value: 0.01}
    - {name: epochs, type: int}
    - {name: seed, type: int, value: 42}
    - {name: note, type: str, isOptional: true}
  run:
    kind: job
    container:
      image: python:3.11-slim
      command: sh -c "echo hi; sleep 2"
"""


PYTORCHJOB = """
version: 1.1
kind: component
name: ddp
run:
  kind: pytorchjob
  cleanPodPolicy: All
  master:
    replicas: 1
    container:
      image: trainer:1
      command: sh -c "python train.py --rank 0"
      resources:
        limits: {nvidia.com/gpu: 1}
  worker:
    replicas: 3
    container:
      image: trainer:1
      command: sh -c "python train.py"
      env: [{name: ROLE, value: worker}]
      resources:
        limits: {nvidia.com/gpu: 2}
"""


def parse(text: str, **kwargs) -> OpSpec:
    """The spec of ``text``; whatever the edge accepts, the contract accepts (the services' own decode)."""
    spec = parse_polyaxonfile(textwrap.dedent(text), **kwargs)
    assert within_contract(spec) == spec
    return spec


def within_contract(spec: OpSpec) -> OpSpec:
    """``spec`` as a service decodes it off the wire (raises the contract's refusal)."""
    return codec.decode_spec(codec.encode(spec))


def errors_of(text: str, **kwargs) -> dict[str, FieldError]:
    with pytest.raises(SpecError) as info:
        parse(text, **kwargs)
    return {err.loc: err for err in info.value.errors}


def replaced(text: str, replacements: dict[str, str]) -> str:
    for old, new in replacements.items():
        assert old in text, old
        text = text.replace(old, new)
    return text


def component(**replacements: str) -> str:
    """COMPONENT with some lines replaced (old line text → new text)."""
    return replaced(COMPONENT, replacements)


def pytorchjob(**replacements: str) -> str:
    """PYTORCHJOB with some lines replaced (old line text → new text)."""
    return replaced(PYTORCHJOB, replacements)
