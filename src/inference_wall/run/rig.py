"""Rigs: a profile per rig in data/rigs/<name>.json (its quirks live in data, not code), and a capture
of what the rig is (GPU, driver, clocks, versions, measured HBM bandwidth) stored in every manifest."""
from __future__ import annotations

import json
import platform
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError
from ..records.redact import record_secret_values, redact_env, redact_record, secret_values
from ..records.store import DATA_DIR, check_rig_name


@dataclass
class RigProfile:
    """Deviations from a stock `vllm serve` on this rig, plus optional sweep overrides per part.

    A user rig on a stock vLLM needs no file: the defaults describe it.
    """

    name: str
    description: str = ""
    serve_args: list[str] = field(default_factory=list)  # extra `vllm serve` flags
    env: dict[str, str] = field(default_factory=dict)  # extra environment for server and client
    part_env: dict[str, dict[str, str]] = field(default_factory=dict)  # part folder -> environment added to env
    notes: list[str] = field(default_factory=list)  # every deviation from a stock server, in words
    model_preset: str = "qwen3.5-4b"
    model_source: str = "dummy"
    overrides: dict[str, dict] = field(default_factory=dict)  # part name -> parameter overrides
    method_only: bool = False  # a test rig: shown on the method page, not beside real GPUs in the parts
    repeat_of: str | None = None  # another run of that rig (same host and stack): compared on the rigs page
    emulates: str | None = None  # an emulation rig: the property of another GPU it reproduces, in words
    does_not_emulate: list[str] = field(default_factory=list)  # what it cannot reproduce (bandwidth, compute)
    gpu_name: str | None = None  # what nvidia-smi's name must contain: a run on another GPU is refused
    datasheet: str | None = None  # the GPU's row in data/reference/gpus/datasheets.csv
    has_profile: bool = False

    def for_part(self, part_name: str) -> dict:
        return dict(self.overrides.get(part_name, {}))

    def for_run(self, part_name: str) -> RigProfile:
        """The profile a run of part `part_name` uses: `env` with that part's `part_env` added (later wins)."""
        from dataclasses import replace

        return replace(self, env={**self.env, **self.part_env.get(part_name, {})})


_STRINGS = {"type": "array", "items": {"type": "string"}}
# data/rigs/<rig>.json: every key optional, no other key allowed (a typo fails loudly, in one line).
PROFILE_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "description": "ignored: the file name is the rig's name"},
        "description": {"type": "string", "description": "one sentence: the GPU, host and stack"},
        "serve_args": {**_STRINGS, "description": "extra `vllm serve` flags, after the series' own (later flags win)"},
        "env": {"type": "object", "additionalProperties": {"type": "string"},
                "description": "extra environment for the server and the benchmark client"},
        "part_env": {"type": "object",
                     "additionalProperties": {"type": "object", "additionalProperties": {"type": "string"}},
                     "description": "per part folder, environment added to env for that part's servers and client "
                                    "(a variable that would make another part's committed points made otherwise)"},
        "notes": {**_STRINGS, "description": "every deviation from a stock server, in words (shown on this page)"},
        "model_preset": {"type": "string", "minLength": 1,
                         "description": "the model's shapes, a folder of data/models (default qwen3.5-4b)"},
        "model_source": {"enum": ["dummy", "hub"],
                         "description": "dummy: random weights of the preset's shapes; hub: the real checkpoint"},
        "method_only": {"type": "boolean",
                        "description": "a test rig: shown on the method page, not beside GPUs in the parts"},
        "overrides": {"type": "object", "additionalProperties": {"type": "object"},
                      "description": "per part folder, parameters that replace the part's defaults "
                                     "(e.g. a shorter rate grid)"},
        "repeat_of": {"type": ["string", "null"],
                      "description": "another run of that rig on the same host and stack: compared under Run to run"},
        "emulates": {"type": ["string", "null"],
                     "description": "an emulation rig: which property of another GPU it reproduces, and how"},
        "does_not_emulate": {**_STRINGS, "description": "what an emulation rig cannot reproduce (bandwidth, compute)"},
        "gpu_name": {"type": "string", "minLength": 1,
                     "description": "what the GPU's name (nvidia-smi) must contain: a run on any other GPU is "
                                    "refused before a server starts"},
        "datasheet": {"type": "string", "minLength": 1,
                      "description": "the GPU's row (key) in data/reference/gpus/datasheets.csv"},
    },
}
PROFILE_KEYS = set(PROFILE_SCHEMA["properties"]) - {"name"}


def profile_error(raw) -> str | None:
    """The first way `raw` breaks PROFILE_SCHEMA, in words (None if it does not)."""
    import jsonschema

    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(PROFILE_SCHEMA).iter_errors(raw))
    if error is None:
        return None
    if error.validator == "additionalProperties" and not error.absolute_path:
        unknown = sorted(set(raw) - set(PROFILE_SCHEMA["properties"]))
        return f"unknown keys {unknown}; known: {sorted(PROFILE_KEYS)}"
    where = "".join(f"[{p!r}]" if isinstance(p, str) else f"[{p}]" for p in error.absolute_path)
    return f"{where or 'the profile'}: {error.message}"


def _unknown_parts_error(raw: dict) -> str | None:
    """Overrides (or a part's environment) for a part that does not exist would be ignored, and the run would
    record the defaults."""
    from ..schema import PARTS

    for key in ("overrides", "part_env"):
        unknown = sorted(set(raw.get(key) or {}) - set(PARTS.values()))
        if unknown:
            return f"{key}: unknown part(s) {unknown}; parts are named by their folders: {', '.join(PARTS.values())}"
    return None


def load_profile(rig: str, data_dir: Path | None = None) -> RigProfile:
    check_rig_name(rig)
    path = Path(data_dir or DATA_DIR) / "rigs" / f"{rig}.json"
    if not path.exists():
        return RigProfile(name=rig)
    try:
        raw = json.loads(path.read_text())
    except ValueError as e:
        raise UserError(f"{path}: not valid JSON ({e})")
    problem = profile_error(raw) or _unknown_parts_error(raw)
    if problem:
        raise UserError(f"{path}: {problem}")
    raw.pop("name", None)
    return RigProfile(name=rig, has_profile=True, **raw)


def shown(profile: RigProfile) -> RigProfile:
    """A copy of a profile fit to show (the rigs page, `plan`): secret-named variables and flags (HF_TOKEN,
    --api-key) lose their values, and those values are scrubbed from its words, as a run's records are."""
    from dataclasses import fields, replace

    secrets = profile_secrets(profile)
    words = {f.name: getattr(profile, f.name) for f in fields(profile) if f.name not in ("name", "has_profile")}
    return replace(profile, **redact_record({**words, "env": redact_env(profile.env),
                                             "part_env": {k: redact_env(v) for k, v in profile.part_env.items()}},
                                            secrets))


def profile_secrets(profile: RigProfile) -> set[str]:
    """The secret values a profile holds: its secret-named variables' and flags', and those of its parts' nested
    parameters (part 6's config_args and config_env), and its parts' environments."""
    return (secret_values(profile.env, profile.serve_args) | record_secret_values(profile.overrides)
            | record_secret_values(profile.part_env))


def known_profiles(data_dir: Path | None = None) -> list[str]:
    return sorted(p.stem for p in (Path(data_dir or DATA_DIR) / "rigs").glob("*.json"))


def _run(cmd: list[str], timeout: float = 60) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


ENV_PREFIXES = ("VLLM_", "TRITON_", "TORCH", "WALL_", "HF_", "TRANSFORMERS_", "NCCL_", "OMP_")
ENV_NAMES = ("PYTHONPATH", "CUDA_VISIBLE_DEVICES")


def recorded_environment(environ) -> dict[str, str]:
    """The allow-listed variables (ENV_PREFIXES, ENV_NAMES) of `environ`, secret-named ones redacted
    (HF_TOKEN and VLLM_API_KEY match the prefixes: their names are recorded, their values never)."""
    return redact_env({k: v for k, v in sorted(environ.items()) if k.startswith(ENV_PREFIXES) or k in ENV_NAMES})


NVIDIA_FIELDS = ["name", "memory.total", "driver_version", "clocks.max.sm", "clocks.max.memory", "power.limit"]

# Runs under the vLLM interpreter: versions, and on CUDA a large device-to-device copy timed with events.
PROBE = r"""
import json, sys, platform
out = {"python": platform.python_version()}
try:
    import vllm; out["vllm"] = getattr(vllm, "__version__", None)
except Exception as e:
    out["vllm_error"] = repr(e)[:200]
try:
    import torch
    out["torch"] = torch.__version__
    out["cuda"] = torch.version.cuda
    if torch.cuda.is_available() and "--bandwidth" in sys.argv:
        n = 1 << 30  # 1 GiB per buffer: many times the L2
        src = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
        dst = torch.empty_like(src)
        for _ in range(3):
            dst.copy_(src)
        torch.cuda.synchronize()
        times = []
        for _ in range(20):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); dst.copy_(src); b.record(); b.synchronize()
            times.append(a.elapsed_time(b) / 1000)
        times.sort()
        t = times[len(times) // 2]
        out["hbm_copy_bytes"] = 2 * n
        out["hbm_copy_median_s"] = t
        out["hbm_bandwidth_gb_s"] = 2 * n / t / 1e9  # bytes read + bytes written
        out["gpu_name_torch"] = torch.cuda.get_device_name(0)
except Exception as e:
    out["torch_error"] = repr(e)[:200]
print("PROBE" + json.dumps(out))
"""


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The host CPU's model name (Linux's /proc/cpuinfo), None where it cannot be read: the host's work per step
    (scheduling, sampling's set-up, the API server) runs on it, and two GPU hosts can differ in it."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip() or None
    except OSError:
        return None
    return None


def capture(python: str, bandwidth: bool = True, env: dict | None = None) -> dict:
    """What this rig is, for the manifest. Never raises: missing pieces are simply absent."""
    import os

    import time

    info: dict = {"host": platform.node(), "cpu": platform.processor() or platform.machine(),
                  "cpu_model": cpu_model(), "cpu_count": os.cpu_count(),
                  # vLLM stamps its log in local time without a year: this maps stamps to epoch seconds
                  "utc_offset_s": -(time.altzone if time.daylight and time.localtime().tm_isdst else time.timezone)}
    # The environment that shapes a run beyond the command line (rig profiles add to it; a host's own
    # wrapper may set more, e.g. a Triton autotune cache): recorded, so a deviation is never invisible.
    info["environment"] = recorded_environment(os.environ)
    if shutil.which("nvidia-smi"):
        out = _run(["nvidia-smi", f"--query-gpu={','.join(NVIDIA_FIELDS)}", "--format=csv,noheader"])
        if out:
            first = out.strip().splitlines()[0]
            info["gpu"] = dict(zip(NVIDIA_FIELDS, [v.strip() for v in first.split(",")]))
    args = [python, "-c", PROBE] + (["--bandwidth"] if bandwidth else [])
    try:
        res = subprocess.run(args, capture_output=True, text=True, timeout=300,
                             env={**os.environ, **(env or {})})
        for line in res.stdout.splitlines():
            if line.startswith("PROBE"):
                info.update(json.loads(line[5:]))
    except (OSError, subprocess.TimeoutExpired, ValueError):
        info["probe_error"] = "probe failed"
    return info


def check_gpu(profile: RigProfile, info: dict) -> None:
    """Refuse a capture (rig_info) whose GPU is not the one the profile names (`gpu_name`), in one line, before
    any server starts: a run on another GPU would be filed under this rig's name."""
    if not profile.gpu_name:
        return
    seen = (info.get("gpu") or {}).get("name") or info.get("gpu_name_torch")
    if not seen or profile.gpu_name.lower() not in str(seen).lower():
        raise UserError(f"rig {profile.name} is a {profile.gpu_name} (data/rigs/{profile.name}.json) but this machine "
                        f"has {seen or 'no NVIDIA GPU'}: run it as another rig (RIG=<name>)")


def rigs_overview(data_dir: Path | None = None) -> list[dict]:
    """Every rig with a profile or with runs: its profile and what its manifests say it is."""
    from ..records.store import iter_points

    seen: dict[str, dict] = {}
    for part, rig, _point, m in iter_points(data_dir):
        info = m.get("rig_info") or {}
        rec = seen.setdefault(rig, {"parts": set(), "vllm": set(), "torch": set(), "bandwidth": []})
        rec["parts"].add(part)
        rec["gpu"] = (info.get("gpu") or {}).get("name") or f"CPU ({info.get('cpu_count')} cores)"
        rec["driver"] = (info.get("gpu") or {}).get("driver_version")
        rec["memory"] = (info.get("gpu") or {}).get("memory.total")
        rec["vllm"].add(str(info.get("vllm")))
        rec["torch"].add(str(info.get("torch")))
        if info.get("hbm_bandwidth_gb_s"):
            rec["bandwidth"].append(info["hbm_bandwidth_gb_s"])
        rec["serve_command"] = (m.get("session") or {}).get("server_command")
    rows = []
    for rig in sorted(set(seen) | set(known_profiles(data_dir))):
        profile = shown(load_profile(rig, data_dir))
        rec = seen.get(rig, {})
        bw = sorted(rec.get("bandwidth", []))
        rows.append({
            "rig": rig, "description": profile.description, "gpu": rec.get("gpu"), "gpu_memory": rec.get("memory"),
            "driver": rec.get("driver"), "vllm": ", ".join(sorted(rec.get("vllm", []))) or None,
            "torch": ", ".join(sorted(rec.get("torch", []))) or None,
            "hbm_bandwidth_gb_s": bw[len(bw) // 2] if bw else None,
            "parts": ", ".join(sorted(rec.get("parts", []))) or "none yet",
            "serve_args": " ".join(profile.serve_args) or "(stock)",
            "env": " ".join([" ".join(f"{k}={v}" for k, v in profile.env.items()) or "(stock)",
                             *_part_env_words(profile.part_env)]),
            "notes": profile.notes, "model": f"{profile.model_preset} ({profile.model_source})",
            "serve_command": rec.get("serve_command"), "repeat_of": profile.repeat_of,
        })
    return redact_record(rows)  # a recorded command line too: every line the rigs page shows, redacted alike


def _part_env_words(part_env: dict[str, dict[str, str]]) -> list[str]:
    """A profile's part_env in words, the parts that share one environment together: '(parts 00, 01: A=1)'."""
    groups: dict[str, list[str]] = {}
    for part, env in sorted(part_env.items()):
        groups.setdefault(" ".join(f"{k}={v}" for k, v in env.items()), []).append(part[:2])
    return [f"({'part' if len(ps) == 1 else 'parts'} {', '.join(ps)}: {words})" for words, ps in groups.items()]


def run_to_run(data_dir: Path | None = None):
    """For every rig whose profile says it repeats another (`repeat_of`): the points both runs measured,
    metric by metric, and how far the rig's own value sits from the repeat's, in percent."""
    import pandas as pd

    from ..schema import PARTS
    from ..records.store import load_points, pass_summary, rig_dir

    metrics = ["output_tok_s", "itl_p50_ms", "itl_p99_ms"]  # TTFT under a flood grows with the prompts sent
    rows = []
    for repeat in known_profiles(data_dir):
        rig = load_profile(repeat, data_dir).repeat_of
        if not rig:
            continue
        for part in PARTS.values():
            if not rig_dir(part, repeat, data_dir).is_dir():
                continue  # the repeat ran nothing of this part: no point to pair (and no need to read the rig's)
            runs: dict[str, dict] = {}
            for pt in load_points(part, data_dir, [rig, repeat]):
                runs.setdefault(pt.name, {})[pt.rig] = pass_summary(pt)
            for point, by_rig in sorted(runs.items()):
                if len(by_rig) < 2:
                    continue
                for m in metrics:
                    a, b = by_rig[repeat].get(m), by_rig[rig].get(m)
                    rows.append({"rig": rig, "repeat": repeat, "part": part, "point": point, "metric": m,
                                 "rig_prompts": by_rig[rig]["num_prompts"],
                                 "repeat_prompts": by_rig[repeat]["num_prompts"], "rig_value": b, "repeat_value": a,
                                 "difference_pct": 100 * (b / a - 1) if a else None})
    return pd.DataFrame(rows, columns=["rig", "repeat", "part", "point", "metric", "rig_prompts", "repeat_prompts",
                                       "rig_value", "repeat_value", "difference_pct"])
