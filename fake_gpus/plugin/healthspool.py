"""Health events handed to a running plugin through files: the fake driver's stand-in for NVML.

A fake GPU has no NVML to report an XID, so a lab writes the event into the plugin's spool
directory, ``<plugins-dir>/<driver>/health-events/`` (the DaemonSet's hostPath, so the node's own
filesystem: ``docker exec <node> sh -c 'cat > ...'`` reaches it without kubectl exec or a network
port). One event per file ``<id>.event.json`` (written as a dot file, then renamed):

    {"device": "gpu-0", "kind": "xid", "xid": 79}     kind: xid, gpu-lost, unmonitored
    {"device": "gpu-0", "kind": "repair"}              the lab's "GPU replaced": taints off, Healthy

The plugin (``HealthEvents.poll``, every half second) handles each file, removes it and answers in
``<id>.result.json``: ``{"ok": true|false, "message": "..."}``; a refused event (unknown device,
bad XID, NVMLDeviceHealthCheck off) is logged by the plugin and named in that answer.
``python -m fake_gpus inject-health`` writes an event and prints the answer.

Bounds: an event file holds at most ``MAX_EVENT_BYTES``; at most ``MAX_PER_POLL`` are handled per
poll; names are ``[A-Za-z0-9_-]{1,64}``; answers nobody collected are pruned to ``MAX_RESULTS``.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

from fake_gpus.fileio import replacing
from fake_gpus.health_events import EVENT_KINDS, REPAIR, HealthEvent, HealthEventError

from .paths import plugin_data_dir

SPOOL_DIR = "health-events"
EVENT_SUFFIX, RESULT_SUFFIX = ".event.json", ".result.json"
MAX_EVENT_BYTES = 4096
MAX_PER_POLL = 64
MAX_RESULTS = 64
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_FIELDS = {"device", "kind", "xid"}


def spool_dir(plugins_dir: str | Path, driver: str) -> Path:
    return plugin_data_dir(plugins_dir, driver) / SPOOL_DIR


def event_doc(device: str, kind: str, xid: int | None = None) -> dict[str, Any]:
    """The JSON of one event; checked as the plugin checks it (raises HealthEventError)."""
    doc: dict[str, Any] = {"device": device, "kind": kind}
    if xid is not None:
        doc["xid"] = xid
    parse_event(doc)
    return doc


def parse_event(doc: Any) -> tuple[str, HealthEvent | None]:
    """(device, event) of an event file's JSON; event None is a repair. Raises HealthEventError."""
    if not isinstance(doc, dict):
        raise HealthEventError("an event is a JSON object such as {\"device\": \"gpu-0\", \"kind\": \"xid\", \"xid\": 79}")
    unknown = sorted(set(doc) - _FIELDS)
    if unknown:
        raise HealthEventError(f"unknown field(s) {', '.join(map(repr, unknown))}: an event has device, kind, xid")
    device = doc.get("device")
    if not isinstance(device, str) or not device:
        raise HealthEventError(f"device {device!r}: name the device as its ResourceSlice does (e.g. gpu-0)")
    kind = doc.get("kind")
    if kind == REPAIR:
        if doc.get("xid") is not None:
            raise HealthEventError(f"a repair carries no xid (got {doc['xid']!r})")
        return device, None
    if kind not in EVENT_KINDS:
        raise HealthEventError(f"health event kind {kind!r}: use one of {', '.join((*EVENT_KINDS, REPAIR))}")
    return device, HealthEvent(kind, doc.get("xid"))


def write_event(directory: Path, doc: dict[str, Any]) -> str:
    """Drop one event into the spool; returns its id (the answer is ``<id>.result.json``)."""
    event_id = uuid.uuid4().hex
    with replacing(directory / f"{event_id}{EVENT_SUFFIX}", prefix=".") as fh:
        json.dump(doc, fh)
    return event_id


def wait_result(directory: Path, event_id: str, timeout: float) -> dict[str, Any] | None:
    """The plugin's answer to an event (removed once read), or None after ``timeout`` seconds."""
    path = directory / f"{event_id}{RESULT_SUFFIX}"
    deadline = time.monotonic() + timeout
    while True:
        try:
            answer = json.loads(path.read_text())
        except (FileNotFoundError, ValueError):  # not there yet (the plugin writes it whole)
            if time.monotonic() > deadline:
                return None
            time.sleep(0.1)
            continue
        path.unlink(missing_ok=True)
        return answer if isinstance(answer, dict) else {"ok": False, "message": f"unreadable answer {answer!r}"}


def pending(directory: Path) -> list[tuple[str, Path]]:
    """(id, path) of the waiting event files, oldest first, at most MAX_PER_POLL; a file with a bad
    name is answered nowhere (it has no usable id) and removed."""
    try:
        entries = list(directory.iterdir())
    except FileNotFoundError:
        return []
    out = []
    for p in entries:
        if p.name.startswith(".") or not p.name.endswith(EVENT_SUFFIX):
            continue
        event_id = p.name[:-len(EVENT_SUFFIX)]
        if not _ID.fullmatch(event_id):
            p.unlink(missing_ok=True)
            continue
        try:
            out.append((p.stat().st_mtime_ns, event_id, p))
        except FileNotFoundError:
            continue
    return [(i, p) for _, i, p in sorted(out)[:MAX_PER_POLL]]


def read_event(path: Path) -> Any:
    """An event file's JSON (raises HealthEventError when it is too big or not JSON)."""
    with path.open("rb") as fh:
        raw = fh.read(MAX_EVENT_BYTES + 1)
    if len(raw) > MAX_EVENT_BYTES:
        raise HealthEventError(f"event file of more than {MAX_EVENT_BYTES} bytes")
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise HealthEventError(f"not JSON ({exc})") from exc


def answer(directory: Path, event_id: str, ok: bool, message: str) -> None:
    """Write the answer to an event and prune answers nobody collected beyond MAX_RESULTS."""
    with replacing(directory / f"{event_id}{RESULT_SUFFIX}", prefix=".") as fh:
        json.dump({"ok": ok, "message": message}, fh)
    results = []
    for p in directory.glob(f"*{RESULT_SUFFIX}"):
        with contextlib.suppress(FileNotFoundError):  # collected meanwhile
            results.append((p.stat().st_mtime_ns, p))
    for _, old in sorted(results)[:-MAX_RESULTS]:
        old.unlink(missing_ok=True)
