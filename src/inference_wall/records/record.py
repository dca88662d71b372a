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

This module is the only reader of a point's manifest.json (`read_record`, and `read_manifest` for the dict as
written, checked as a record); `store.migrate_record` brings a format-1 manifest to the current format.
"""
from __future__ import annotations

import json
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable

from ..errors import UserError

FORMAT_VERSION = 2
MANIFEST = "manifest.json"


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

    @property
    def preset(self) -> str | None:
        """The model preset the point's server served (`model.preset`)."""
        return self.model.get("preset")

    @property
    def parameters(self) -> dict:
        """The part's own parameters the point ran with (`parameters`, written beside the manifest's own keys)."""
        return self.extra.get("parameters") or {}

    @property
    def bandwidth_gb_s(self) -> float | None:
        """The memory bandwidth the rig capture measured for this point's run (`rig_info.hbm_bandwidth_gb_s`)."""
        return self.rig_info.get("hbm_bandwidth_gb_s")

    @property
    def session_id(self) -> str | None:
        return self.session.id if self.session is not None else None

    @property
    def has_startup(self) -> bool:
        """Whether the point's slice of the server log holds the server's start."""
        return bool(self.session is not None and self.session.has_startup)

    @property
    def server_command(self) -> list | None:
        return self.session.server_command if self.session is not None else None

    @property
    def server_started(self) -> float | None:
        return self.session.server_started if self.session is not None else None

    @property
    def start_to_healthy_s(self) -> float | None:
        return self.session.start_to_healthy_s if self.session is not None else None

    @property
    def vllm_version(self) -> str | None:
        """The vLLM version the rig capture of this point's run found (`rig_info.vllm`)."""
        return self.rig_info.get("vllm")

    @property
    def gpu_name(self) -> str | None:
        """The GPU the point ran on, as nvidia-smi (else torch) named it; None on a machine without one."""
        return (self.rig_info.get("gpu") or {}).get("name") or self.rig_info.get("gpu_name_torch") or None

    @property
    def serve_flags(self) -> dict[str, str | None] | None:
        """The flags of the point's `vllm serve` command (serve_flags); None where the session recorded none."""
        command = self.session.server_command if self.session is not None else None
        return serve_flags(command) if command is not None else None


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


def _load(point: Path) -> tuple[dict, PointRecord] | None:
    """(the dict as written, its record) of point folder `point`'s manifest; None where the folder has none."""
    path = Path(point) / MANIFEST
    try:
        text = path.read_text()
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise BadRecord(f"{path}: not valid JSON ({e}); {_REMEDY}") from None
    try:
        return raw, PointRecord.from_dict(raw, path)
    except BadRecord as e:
        if "newer than this inference_wall reads" in str(e):  # not damaged: a later checkout wrote it
            raise
        raise BadRecord(f"{e}; {_REMEDY}") from None


# What to do about a manifest that is damaged (the point's own files are checked against it, so it is never guessed)
_REMEDY = ("restore it from git (git checkout -- manifest.json in its folder), or remove the point's folder to make "
           "the point again (make reproduce resumes it)")


def read_manifest(point: Path) -> dict | None:
    """The manifest of point folder `point` as written (the dict), once checked as a PointRecord; None where the
    folder has none. Not JSON, or not a record: a one-line error naming the file."""
    loaded = _load(point)
    return None if loaded is None else loaded[0]


def read_record(point: Path) -> PointRecord | None:
    """The typed record of point folder `point`'s manifest; None where the folder has none (errors as
    read_manifest's)."""
    loaded = _load(point)
    return None if loaded is None else loaded[1]


# ---------------------------------------------------------------------------------------------
# Points combined in one fit or spread: the same vLLM, GPU and serve flags, or the page says what differs
# ---------------------------------------------------------------------------------------------

SESSION_FLAGS = ("--host", "--port")  # a server's own address: every session has another, the setup is the same
VLLM_VERSION, GPU_NAME, SERVE_COMMAND = "vLLM version", "GPU", "serve command"


def serve_flags(command: list) -> dict[str, str | None]:
    """{flag: value} of a `vllm serve` command line: every `--flag value` and `--flag=value` after `serve` (the
    last one given wins, as in vLLM's parser), a flag followed by another flag or by nothing with value None;
    the positional model and the server's own --host and --port are left out."""
    args = [str(a) for a in command or []]
    if "serve" in args:
        args = args[args.index("serve") + 1:]
    out: dict[str, str | None] = {}
    i = 0
    while i < len(args):
        name, eq, value = args[i].partition("=")
        if not name.startswith("--"):
            i += 1
            continue
        if eq:
            out[name] = value
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            out[name], i = args[i + 1], i + 1
        else:
            out[name] = None
        i += 1
    for flag in SESSION_FLAGS:
        out.pop(flag, None)
    return out


def _as_record(point) -> PointRecord:
    if isinstance(point, PointRecord):
        return point
    if isinstance(point, dict):
        return PointRecord.from_dict(point)
    return point.record  # store.PointData


def setup_differences(points: Iterable, varied: Iterable[str] = ()) -> list[str]:
    """The keys on which the points combined in one fit or spread differ: "vLLM version", "GPU", and each serve
    flag (as the command line names it) whose value is not the same on every point, or that some points' commands
    lack ("serve command" where some points recorded none); the flags in `varied` (what the points vary on
    purpose, e.g. --max-num-seqs across caps) and each session's --host and --port are not compared. Empty when
    the points share their setup. `points`: PointRecords, store.PointData or manifest dicts."""
    records = [_as_record(p) for p in points]
    skip = set(varied)
    out = []
    if len({r.vllm_version for r in records}) > 1:
        out.append(VLLM_VERSION)
    if len({r.gpu_name for r in records}) > 1:
        out.append(GPU_NAME)
    flags = [r.serve_flags for r in records]
    if len({f is None for f in flags}) > 1:
        out.append(SERVE_COMMAND)
    known = [f for f in flags if f is not None]
    names = list(dict.fromkeys(name for f in known for name in f))
    _absent = object()
    for name in names:
        if name not in skip and len({f.get(name, _absent) for f in known}) > 1:
            out.append(name)
    return out
