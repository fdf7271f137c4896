"""Env values sealed in the op stream (issue 28: a submitter reads the env of its own ops only).

Every client reads the op events (the view, ``opsched watch``, direct gets of the op stream), other users' included;
an op's env (of any container: main, init steps', sidecars', replicas') may hold what its owner alone should see. With a key (``OPSCHED_ENV_KEY_FILE``; ``opsched up`` writes
one next to the NATS passwords) admission seals every env value of an op as it records its ``submitted`` event, and
the dispatcher opens them as it builds the pods: in the stream a value reads ``sealed:<base64>``, in the pod as it
was written. Only admission and the dispatcher hold the key (each reads it from its own file).

Sealing is AES-SIV (deterministic, authenticated): the same value seals the same way, so the cache's fingerprint
of a spec stays stable across ops (a reader learns that two ops' values are equal, not what they are). Admission
seals every value, one that already reads ``sealed:`` too (sealed again: a value copied from another op's event
opens into its own ciphertext, never into the other op's secret); the dispatcher opens each value once. A restart
or a copy starts from the original's values, opened first. Without a key nothing is sealed (an open bus, tests of
other things) and the dispatcher refuses a sealed value rather than put ciphertext in a pod."""
from __future__ import annotations

import base64
import functools
import os
import secrets
from pathlib import Path
from typing import Any

import msgspec
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV

from opsched.proto.reasons import Refusal
from opsched.proto.spec import Container, EnvVar, OpSpec

PREFIX = "sealed:"
UNSEALABLE_ENV = Refusal.UNSEALABLE_ENV  # the reason an op whose env cannot be opened is refused
KEY_BYTES = 64  # AES-256-SIV
CONTEXT = [b"opsched env value"]  # associated data: a sealed value is an env value, nothing else


class Unsealable(ValueError):
    """A sealed value this service cannot open (no key, or another key)."""


def write_key(path: Path) -> Path:
    """A new key at ``path`` (mode 0600), unless one is there."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode() + "\n")
    return path


class Sealer:
    def __init__(self, key: bytes | None) -> None:
        self._aead = AESSIV(key) if key is not None else None

    @staticmethod
    @functools.lru_cache(maxsize=8)
    def of(path: Path | None) -> "Sealer":
        """The sealer of the key in ``path`` (None: one that seals nothing)."""
        if path is None:
            return Sealer(None)
        try:
            key = base64.b64decode(Path(path).read_text().strip(), validate=True)
        except (OSError, ValueError) as exc:
            raise ValueError(f"OPSCHED_ENV_KEY_FILE {path}: cannot read a base64 key: {exc}") from None
        if len(key) != KEY_BYTES:
            raise ValueError(f"OPSCHED_ENV_KEY_FILE {path}: the key is {len(key)} bytes, not {KEY_BYTES}")
        return Sealer(key)

    @property
    def on(self) -> bool:
        return self._aead is not None

    def seal(self, spec: OpSpec) -> OpSpec:
        """``spec`` with every env value sealed (as it is, without a key)."""
        if self._aead is None:
            return spec
        aead = self._aead
        return _each_value(spec, lambda v: PREFIX + base64.b64encode(aead.encrypt(v.encode(), CONTEXT)).decode())

    def unseal(self, spec: OpSpec) -> OpSpec:
        """``spec`` with every sealed env value opened; ``Unsealable`` names the first this key cannot open."""
        return _each_value(spec, self._open)

    def _open(self, value: str) -> str:
        if not value.startswith(PREFIX):
            return value  # recorded before sealing was on, or by an admission without a key
        if self._aead is None:
            raise Unsealable("an env value is sealed and this service has no key (OPSCHED_ENV_KEY_FILE)")
        try:
            return self._aead.decrypt(base64.b64decode(value[len(PREFIX):], validate=True), CONTEXT).decode()
        except (InvalidTag, ValueError):
            raise Unsealable("an env value was sealed with another key than OPSCHED_ENV_KEY_FILE's") from None


def _each_value(spec: OpSpec, change) -> OpSpec:
    """``spec`` with ``change`` applied to every env value of every container (main, init steps', sidecars', each
    replica group's); ``spec`` itself when no value changes (most ops: no env, or nothing sealed; an admission cycle
    opens every op it admits)."""
    def container(c: Container) -> Container:
        values = [change(e.value) for e in c.env]
        if all(v is e.value for v, e in zip(values, c.env)):
            return c
        return msgspec.structs.replace(c, env=[EnvVar(name=e.name, value=v) for e, v in zip(c.env, values)])

    def pod(p: Any) -> Any:  # an OpSpec or a ReplicaGroup: its containers
        main = container(p.container)
        init = [s if s.container is None or (c := container(s.container)) is s.container
                else msgspec.structs.replace(s, container=c) for s in p.init]
        sidecars = [container(c) for c in p.sidecars]
        if main is p.container and all(a is b for a, b in zip(init, p.init)) \
                and all(a is b for a, b in zip(sidecars, p.sidecars)):
            return p
        return msgspec.structs.replace(p, container=main, init=init, sidecars=sidecars)

    own = pod(spec)
    replicas = [pod(r) for r in spec.replicas]
    hooks = [h if (s := _each_value(h.spec, change)) is h.spec else msgspec.structs.replace(h, spec=s)
             for h in spec.hooks]  # a hook's follow-up op is sealed as its own op would be
    if own is spec and all(a is b for a, b in zip(replicas, spec.replicas)) \
            and all(a is b for a, b in zip(hooks, spec.hooks)):
        return spec
    return msgspec.structs.replace(own, replicas=replicas, hooks=hooks)
