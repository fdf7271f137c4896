"""Every opsched pod ever created in a namespace, seen through an API watch of its own: the UIDs each pod
name had (a name created twice is two pods for one attempt) and whether an op ever had pods of two attempts
alive at once. The watch rides out an API-server outage: it resumes from its resource version, and
re-lists after 410 Gone or when the server is back (a pod cannot be created while it is down)."""
from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch

from opsched.localcluster.rawcalls import raw
from opsched.rules.podspec import LABEL_ATTEMPT, LABEL_OP

TERMINATED = ("Succeeded", "Failed")
WATCH_S = 20  # the server ends each watch after this long ...
TIMEOUTS = (3.0, WATCH_S + 10.0)  # ... so a connection silent for longer is dead: list again


@dataclass
class PodRecord:
    op_id: str
    attempt: int
    uids: set[str] = field(default_factory=set)
    live: bool = True  # not terminated and not deleted: it holds its GPU


class PodLedger:
    """``start()`` watches the namespace in a thread until ``stop()``; ``pods`` by name, ``overlaps``."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self.api = config.new_client_from_config(config_file=str(kubeconfig))
        self.core = client.CoreV1Api(self.api)
        self.namespace = namespace
        self.pods: dict[str, PodRecord] = {}
        self.overlaps: list[str] = []  # "op x: attempts {0, 1} alive at once"
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pod-ledger", daemon=True)

    def start(self) -> "PodLedger":
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching: the thread ends when its watch next returns (at most ``WATCH_S``; it is a daemon)."""
        self._stop.set()
        self._thread.join(0.5)

    def snapshot(self) -> tuple[dict[str, PodRecord], list[str]]:
        with self.lock:
            return dict(self.pods), list(self.overlaps)

    def catch_up(self) -> None:
        """List the pods once more, so a pod the watch has not delivered yet (a loaded machine) is counted."""
        try:
            self._list()
        except Exception:  # noqa: BLE001 - the API server away: the watch's view stands
            pass

    def live_attempts(self) -> dict[str, set[int]]:
        with self.lock:
            out: dict[str, set[int]] = defaultdict(set)
            for record in self.pods.values():
                if record.live:
                    out[record.op_id].add(record.attempt)
            return dict(out)

    # -- the watch ---------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._follow()
        finally:
            self.api.close()

    def _follow(self) -> None:
        version: str | None = None
        while not self._stop.is_set():
            try:
                if version is None:
                    version = self._list()
                version = self._watch(version)
            except client.ApiException as exc:
                if exc.status == 410:  # too old: list again
                    version = None
                else:
                    time.sleep(0.5)
            except Exception:  # noqa: BLE001 - the API server is away: try again, then list again
                version = None
                time.sleep(0.5)

    def _list(self) -> str:
        answer = raw(self.core.list_namespaced_pod, self.namespace, _request_timeout=TIMEOUTS)
        listed = {pod["metadata"]["name"] for pod in answer["items"]}
        for pod in answer["items"]:
            self._saw(pod, deleted=False)
        with self.lock:
            for name, record in self.pods.items():
                if name not in listed:
                    record.live = False  # deleted while the watch was away
        return answer["metadata"]["resourceVersion"]

    def _watch(self, version: str) -> str:
        stream = watch.Watch()
        for item in stream.stream(self.core.list_namespaced_pod, self.namespace, resource_version=version,
                                  timeout_seconds=WATCH_S, allow_watch_bookmarks=True,
                                  _request_timeout=TIMEOUTS, deserialize=False):  # JSON dicts, no model objects
            pod = item["object"]  # an ERROR (410 Gone, ...) fails the stream: listed again
            version = pod["metadata"].get("resourceVersion") or version
            if item["type"] != "BOOKMARK":
                self._saw(pod, deleted=item["type"] == "DELETED")
            if self._stop.is_set():
                stream.stop()
        return version

    def _saw(self, pod: Any, deleted: bool) -> None:
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        if LABEL_OP not in labels:
            return
        op_id, attempt = labels[LABEL_OP], int(labels.get(LABEL_ATTEMPT, "0"))
        live = not deleted and (pod.get("status") or {}).get("phase") not in TERMINATED
        with self.lock:
            record = self.pods.setdefault(meta["name"], PodRecord(op_id, attempt))
            record.uids.add(meta["uid"])
            record.live = live
            if live:
                alive = {r.attempt for r in self.pods.values() if r.live and r.op_id == op_id}
                if len(alive) > 1:
                    self.overlaps.append(f"op {op_id}: attempts {sorted(alive)} alive at once")
