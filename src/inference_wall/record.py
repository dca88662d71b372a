"""A point's manifest as a typed, versioned record.

The sweep writes a manifest through `PointRecord` (so what it writes is checked against these types), and
the store reads each manifest into one once (`PointData.record`). Like a stored result class that knows
its own format version, a record carries `format` and loads every older one:

- format 1 (no `format` key): manifests written before this module, some without `artefacts`;
- format 2: the same keys plus `format`.

A manifest from a newer format, a missing key that every version had, or a value of the wrong type is a
one-line error naming the manifest. Keys this module does not know (a part's own, e.g. `parameters`)
are kept in `extra` and written back unchanged, so a record round-trips to the same dict.
Reading attributes instead of dict keys makes a typo an AttributeError rather than a silent None.
"""
from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from .errors import UserError

FORMAT_VERSION = 2


class BadRecord(UserError):
    """A manifest that does not load as a record: names the file and the key."""


def _check(where: str, key: str, value: Any, kinds: tuple[type, ...], optional: bool = False) -> Any:
    if value is None and optional:
        return value
    if isinstance(value, bool) and bool not in kinds:
        ok = False
    else:
        ok = isinstance(value, kinds)
    if not ok:
        names = " or ".join(k.__name__ for k in kinds) + (" or null" if optional else "")
        raise BadRecord(f"{where}: '{key}' should be {names}, not {type(value).__name__} ({str(value)[:60]!r})")
    return value


NUM = (int, float)


@dataclass(frozen=True, slots=True)
class PassRecord:
    """One `vllm bench serve` pass of a point (manifest `passes[]`)."""

    label: str
    kind: str  # warmup | cold | measured
    started: float
    ended: float
    result: str  # the result file's name
    spec: dict = field(default_factory=dict)
    command: list = field(default_factory=list)
    runner: str | None = None
    planned_prompts: int | None = None
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict, where: str) -> "PassRecord":
        d = dict(d)
        _check(where, "passes[].label", d.get("label"), (str,))
        _check(where, "passes[].kind", d.get("kind"), (str,))
        for key in ("started", "ended"):
            _check(where, f"passes[].{key}", d.get(key), NUM)
        _check(where, "passes[].result", d.get("result"), (str,))
        _check(where, "passes[].planned_prompts", d.get("planned_prompts"), (int,), optional=True)
        return _build(cls, d)

    @property
    def wall_s(self) -> float:
        return self.ended - self.started


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """The server session a point ran in (manifest `session`); a failed point may hold only `id`."""

    id: str
    index: int | None = None
    has_startup: bool | None = None  # whether the point's log slice holds the server's start
    log_slice: list | None = None
    server_command: list | None = None
    server_env: dict | None = None
    server_started: float | None = None
    server_healthy: float | None = None
    start_to_healthy_s: float | None = None
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict, where: str) -> "SessionRecord":
        d = dict(d)
        _check(where, "session.id", d.get("id"), (str,))
        for key in ("server_started", "server_healthy", "start_to_healthy_s"):
            _check(where, f"session.{key}", d.get(key), NUM, optional=True)
        _check(where, "session.has_startup", d.get("has_startup"), (bool,), optional=True)
        return _build(cls, d)


@dataclass(frozen=True, slots=True)
class PointRecord:
    """One sweep point's manifest.json."""

    status: str  # complete | failed | interrupted
    part: str
    rig: str
    point: str
    format: int = FORMAT_VERSION
    error: str | None = None
    params: dict = field(default_factory=dict)
    max_num_seqs: int | None = None
    workload: dict = field(default_factory=dict)
    model: dict = field(default_factory=dict)
    passes: tuple[PassRecord, ...] = ()
    session: SessionRecord | None = None
    rig_profile: dict = field(default_factory=dict)
    rig_info: dict = field(default_factory=dict)
    files: list = field(default_factory=list)
    artefacts: dict = field(default_factory=dict)  # {file: {"bytes", "sha256"}}; {} in older format-1 manifests
    written: float = 0.0
    inference_wall: str | None = None
    extra: dict = field(default_factory=dict)  # keys of a part's own (e.g. `parameters`), kept as written

    @classmethod
    def from_dict(cls, d: dict, where: str | Path = "manifest") -> "PointRecord":
        where = str(where)
        if not isinstance(d, dict):
            raise BadRecord(f"{where}: a manifest is a JSON object, not {type(d).__name__}")
        d = dict(d)
        version = d.pop("format", 1)
        _check(where, "format", version, (int,))
        if version > FORMAT_VERSION:
            raise BadRecord(f"{where}: manifest format {version} is newer than this inference_wall reads "
                            f"({FORMAT_VERSION}); update the checkout")
        for key in ("status", "part", "rig", "point"):
            if key not in d:
                raise BadRecord(f"{where}: the manifest has no '{key}'")
            _check(where, key, d[key], (str,))
        _check(where, "error", d.get("error"), (str,), optional=True)
        _check(where, "max_num_seqs", d.get("max_num_seqs"), (int,), optional=True)
        _check(where, "written", d.get("written", 0.0), NUM)
        for key in ("params", "workload", "model", "rig_profile", "rig_info", "artefacts"):
            _check(where, key, d.get(key) or {}, (dict,))
        _check(where, "passes", d.get("passes") or [], (list,))
        d["passes"] = tuple(PassRecord.from_dict(p, where) for p in d.get("passes") or [])
        if d.get("session") is not None:
            _check(where, "session", d["session"], (dict,))
            d["session"] = SessionRecord.from_dict(d["session"], where)
        for key in ("params", "workload", "model", "rig_profile", "rig_info", "artefacts"):
            d[key] = d.get(key) or {}
        # format 1 -> 2: nothing to convert; `artefacts` may be absent (older points load unchecked)
        return _build(cls, {**d, "format": FORMAT_VERSION})

    def to_dict(self) -> dict:
        """The manifest dict, as the sweep writes it (format included)."""
        out = _plain(self, drop_defaults=False)
        out["passes"] = [_plain(p) for p in self.passes]
        out["session"] = _plain(self.session) if self.session is not None else None
        return out

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    def pass_(self, label: str) -> PassRecord | None:
        return next((p for p in self.passes if p.label == label), None)


def _build(cls, d: dict):
    known = {f.name for f in fields(cls)} - {"extra"}
    kwargs = {k: d[k] for k in known if d.get(k) is not None}
    return cls(**kwargs, extra={k: v for k, v in d.items() if k not in known})


def _default(f):
    return f.default if f.default is not MISSING else (f.default_factory() if f.default_factory is not MISSING else MISSING)


def _plain(rec, drop_defaults: bool = True) -> dict:
    """A record's fields as a dict; a pass's or session's optional fields that are None are left out (as the
    sweep wrote them: e.g. `planned_prompts` only where the pass was resized)."""
    out = {}
    for f in fields(rec):
        if f.name == "extra":
            continue
        value = getattr(rec, f.name)
        if drop_defaults and value is None and _default(f) is None:
            continue
        out[f.name] = value
    out.update(rec.extra)
    return out


def new_manifest(fields_: dict) -> dict:
    """What the sweep writes: `fields_` checked as a PointRecord, with the current format."""
    return PointRecord.from_dict(fields_, "new manifest").to_dict()


