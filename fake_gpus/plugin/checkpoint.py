"""The plugin's record of prepared claims, kept on disk so a restart loses nothing.

File format (JSON): ``{"version": 1, "driver": D, "claims": {<uid>: <PreparedClaim dict>}}``.
Writes go to a temp file in the same directory followed by ``os.replace`` (fake_gpus.fileio), so a crash
leaves either the old or the new file, never a torn one. There is no fsync: it cost ~10 ms
per prepare, and after a power loss the CDI specs in /var/run are gone anyway and the
kubelet prepares again.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fake_gpus.errors import EngineError
from fake_gpus.fileio import replacing

VERSION = 1


@dataclass
class PreparedDevice:
    request_names: list[str]
    pool_name: str
    device_name: str
    cdi_device_ids: list[str]
    share_id: str | None = None


@dataclass
class PreparedClaim:
    namespace: str
    name: str
    uid: str
    devices: list[PreparedDevice] = field(default_factory=list)
    cdi_spec: dict[str, Any] | None = None  # kept so a lost spec file can be rewritten

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PreparedClaim:
        return cls(namespace=d["namespace"], name=d["name"], uid=d["uid"],
                   devices=[PreparedDevice(**x) for x in d.get("devices", [])],
                   cdi_spec=d.get("cdi_spec"))


class CheckpointError(EngineError, RuntimeError):
    pass


class Checkpoint:
    """Thread-safe map claim UID -> PreparedClaim, persisted on every change."""

    def __init__(self, path: str | os.PathLike[str], driver: str):
        self.path = Path(path)
        self.driver = driver
        self._lock = threading.Lock()
        self._claims: dict[str, PreparedClaim] = self._load()
        # each claim's JSON, encoded once: a save joins strings instead of re-encoding everything
        self._encoded: dict[str, str] = {uid: json.dumps(asdict(c)) for uid, c in self._claims.items()}
        self._dirty = False

    def _load(self) -> dict[str, PreparedClaim]:
        if not self.path.exists():
            return {}
        try:
            data = json.loads(self.path.read_text())
            if data.get("version") != VERSION:
                raise CheckpointError(f"unsupported version {data.get('version')!r}")
            if data.get("driver") not in (None, self.driver):
                raise CheckpointError(f"it belongs to driver {data.get('driver')!r}, not {self.driver!r}")
            return {uid: PreparedClaim.from_dict(c) for uid, c in data.get("claims", {}).items()}
        except (ValueError, KeyError, TypeError, CheckpointError) as exc:
            raise CheckpointError(
                f"checkpoint {self.path} is unreadable ({exc}); move it away to start with no "
                "prepared claims") from exc

    def _save_locked(self) -> None:
        head = json.dumps({"version": VERSION, "driver": self.driver})[:-1]
        body = ",\n".join(f"{json.dumps(uid)}: {self._encoded[uid]}" for uid in sorted(self._encoded))
        text = f'{head}, "claims": {{\n{body}}}}}\n'
        with replacing(self.path, prefix=".checkpoint-") as fh:
            fh.write(text)

    def get(self, uid: str) -> PreparedClaim | None:
        with self._lock:
            return self._claims.get(uid)

    def put(self, claim: PreparedClaim, *, save: bool = True) -> None:
        """Record a claim; with save=False the file is written by the next flush()."""
        with self._lock:
            self._claims[claim.uid] = claim
            self._encoded[claim.uid] = json.dumps(asdict(claim))
            self._dirty = True
            if save:
                self._flush_locked()

    def remove(self, uid: str, *, save: bool = True) -> bool:
        with self._lock:
            if self._claims.pop(uid, None) is None:
                return False
            del self._encoded[uid]
            self._dirty = True
            if save:
                self._flush_locked()
            return True

    def flush(self) -> None:
        """Write the file if anything changed since the last write."""
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if self._dirty:
            self._save_locked()
            self._dirty = False

    def all(self) -> dict[str, PreparedClaim]:
        with self._lock:
            return dict(self._claims)
