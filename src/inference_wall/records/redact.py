"""No secrets in records: what a run writes (manifests, /server_info, logs) never holds a token or key.

Two defences. By name: a variable or record key named like a secret (HF_TOKEN, VLLM_API_KEY, *_SECRET,
*_PASSWORD, GOOGLE_APPLICATION_CREDENTIALS, ...) keeps its name and loses its value. By value: the values
of the secret-named variables a run could see are replaced wherever they appear in a file it wrote, so a
log line that echoes one (an exception, vLLM's "non-default args") cannot leak it either.
"""
from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

REDACTED = "<redacted>"
# Whole name parts (split at '_', '-', '.'): HF_TOKEN and VLLM_API_KEY are secrets, while
# VLLM_MAX_BAD_WORDS_TOTAL_TOKENS and TOKENIZERS_PARALLELISM are settings worth recording.
_SECRET_PARTS = {"TOKEN", "KEY", "KEYS", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL",
                 "CREDENTIALS", "AUTH", "COOKIE", "PRIVATE", "SIGNATURE"}
_SECRET_SUFFIXES = ("TOKEN", "APIKEY", "SECRET", "PASSWORD", "PASSWD")  # HFTOKEN, OPENAIAPIKEY
_MIN_SECRET_LEN = 6  # shorter values ("1", "true") would scrub ordinary text

# Well-known token formats, for scanning what is already written.
TOKEN_PATTERNS = [
    re.compile(r"\bhf_[A-Za-z0-9]{30,}"),  # Hugging Face
    re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_-]{20,}"),  # OpenAI-style API keys
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}|\bgithub_pat_[A-Za-z0-9_]{30,}"),  # GitHub
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),  # AWS access key id
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),  # Slack
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
]
# The literal text each pattern cannot match without: a pattern runs only over a text that holds one of its
# needles (a substring test runs at memory speed; these regular expressions, over the 400 MB of committed
# traces and logs, took most of a minute).
_NEEDLES = [("hf_",), ("sk-",), ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"), ("AKIA", "ASIA"),
            ("xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"), ("PRIVATE KEY-----",)]
_ASSIGNMENT = re.compile(r"\b([A-Z][A-Z0-9_]*)=([^\s'\",]+)")  # NAME=value, as environments print
# A secret-named NAME holds one of these (a whole part, or a part's ending), so a text without any holds
# no secret-named assignment.
_NAME_NEEDLES = tuple(sorted(_SECRET_PARTS | set(_SECRET_SUFFIXES)))


@functools.lru_cache(maxsize=1 << 16)
def _secret_name(name: str) -> bool:
    parts = [p for p in re.split(r"[^A-Za-z0-9]+", name.upper()) if p]
    return any(p in _SECRET_PARTS or p.endswith(_SECRET_SUFFIXES) for p in parts)


def is_secret_name(name: str) -> bool:
    """Whether a variable, flag or record key is named like a secret (remembered per name: a trace asks
    about the same few keys millions of times)."""
    return _secret_name(str(name))


def redact_env(env: Mapping[str, object] | None) -> dict:
    """A copy of `env` with the value of every secret-named variable replaced by REDACTED."""
    return {k: (REDACTED if is_secret_name(k) and v not in (None, "") else v) for k, v in (env or {}).items()}


def secret_values(env: Mapping[str, str] | None = None, argv: Iterable[str] = ()) -> set[str]:
    """The values worth scrubbing from text: secret-named variables' and secret-named flags' values."""
    values = {str(v) for k, v in (env or {}).items() if is_secret_name(k) and v is not None}
    args = list(argv)
    for i, arg in enumerate(args):
        if arg.startswith("--") and is_secret_name(arg.split("=", 1)[0]):
            values.add(arg.split("=", 1)[1] if "=" in arg else (args[i + 1] if i + 1 < len(args) else ""))
    return {v for v in values if len(v) >= _MIN_SECRET_LEN and v != REDACTED}


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A command line with the values of secret-named flags (--api-key X, --hf-token=X) replaced."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        arg = str(arg)
        if hide_next:
            out.append(REDACTED)
            hide_next = False
        elif arg.startswith("--") and is_secret_name(arg.split("=", 1)[0]):
            if "=" in arg:
                out.append(arg.split("=", 1)[0] + "=" + REDACTED)
            else:
                out.append(arg)
                hide_next = True
        else:
            out.append(arg)
    return out


# A password in a URL's user part (HTTPS_PROXY=http://user:pass@proxy:3128): the user stays, the password goes.
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s/:@'\"]+):([^\s/@'\"]+)@")
# A secret-named flag's value in a printed command line (`--api-key X`, `--hf-token=X`, shlex-quoted or not).
_FLAG_VALUE = re.compile(r"(--[A-Za-z][A-Za-z0-9_.-]*)(=|\s+)('[^']*'|\"[^\"]*\"|[^\s'\"]+)")


def _flag_value(m: re.Match) -> str:
    value = m[3].strip("'\"")
    if not is_secret_name(m[1]) or value == REDACTED or value.startswith("--") or len(value) < _MIN_SECRET_LEN:
        return m[0]
    return f"{m[1]}{m[2]}{REDACTED}"


def _assignment(m: re.Match) -> str:
    """NAME=value with a secret-named NAME and a value long enough to be one (KEY=JSON in a usage line is not)."""
    if not is_secret_name(m[1]) or m[2] == REDACTED or len(m[2]) < _MIN_SECRET_LEN:
        return m[0]
    return f"{m[1]}={REDACTED}"


def scrub_text(text: str, values: Iterable[str] = ()) -> str:
    """The one redaction of a text a record holds or a person reads: the given secret values, secret-named
    `NAME=value` assignments, secret-named flags' values (`--api-key X`), the known token formats (TOKEN_PATTERNS)
    and a password in a URL, each replaced by REDACTED."""
    for v in sorted(set(values), key=len, reverse=True):
        text = text.replace(v, REDACTED)
    if "=" in text and any(n in text for n in _NAME_NEEDLES):
        text = _ASSIGNMENT.sub(_assignment, text)
    if "--" in text:
        text = _FLAG_VALUE.sub(_flag_value, text)
    for pattern, needles in zip(TOKEN_PATTERNS, _NEEDLES):
        if any(n in text for n in needles):
            text = pattern.sub(REDACTED, text)
    if "://" in text and "@" in text:
        text = _URL_PASSWORD.sub(lambda m: f"{m[1]}:{REDACTED}@", text)
    return text


def record_secret_values(obj) -> set[str]:
    """The secret values a JSON-like record holds (secret_values of every dict's items and every list of strings, as
    a command line): what a part's nested parameters (part 6's config_args and config_env) may carry."""
    found: set[str] = set()
    todo = [obj]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            found |= secret_values({k: v for k, v in node.items() if isinstance(v, str)})
            todo += node.values()
        elif isinstance(node, (list, tuple)):
            if all(isinstance(x, str) for x in node):
                found |= secret_values({}, node)
            todo += [x for x in node if isinstance(x, (dict, list, tuple))]
    return found


def redact_record(obj, values: Iterable[str] = ()):
    """A copy of a JSON-like record: secret-named keys with string values lose them, secret values anywhere
    in strings are replaced, and `KEY=value` lines (vLLM's system_env.env_vars) are redacted by name."""
    values = set(values)

    def walk(x):
        if isinstance(x, dict):
            return {k: (REDACTED if is_secret_name(k) and isinstance(v, str) and v else walk(v)) for k, v in x.items()}
        if isinstance(x, list):
            if x and all(isinstance(v, str) for v in x):  # a command line's flags: --api-key X
                x = redact_argv(x)
            return [walk(v) for v in x]
        if isinstance(x, str):
            return scrub_text(x, values)
        return x

    return walk(obj)


def redact_server_info(text: str, values: Iterable[str] = ()) -> str:
    """vLLM's /server_info (vllm_config, vllm_env, system_env) with secrets redacted; text that is not
    JSON is scrubbed as text."""
    try:
        info = json.loads(text)
    except ValueError:
        return scrub_text(text, values)
    return json.dumps(redact_record(info, values), indent=1)


def scrub_files(folder: Path, values: Iterable[str], skip: Iterable[str] = ()) -> None:
    """Replace secret values in every plain text file of `folder` (before compression)."""
    values = set(values)
    if not values:
        return
    for f in Path(folder).iterdir():
        if not f.is_file() or f.suffix == ".gz" or f.name in set(skip):
            continue
        try:
            text = f.read_text(errors="surrogateescape")
        except OSError:
            continue
        clean = text
        for v in sorted(values, key=len, reverse=True):
            clean = clean.replace(v, REDACTED)
        if clean != text:
            f.write_text(clean, errors="surrogateescape")


def find_secrets(text: str, values: Iterable[str] = ()) -> list[str]:
    """What in `text` looks like a secret: a known token format, a secret-named `NAME=value` assignment, or one
    of `values`. Returns short descriptions (never the whole secret)."""
    found = [f"{p.pattern[:20]}... at {m.start()}" for p, needles in zip(TOKEN_PATTERNS, _NEEDLES)
             if any(n in text for n in needles) for m in p.finditer(text)]
    if "=" in text and any(n in text for n in _NAME_NEEDLES):
        found += [f"{m[1]}=... at {m.start()}" for m in _ASSIGNMENT.finditer(text)
                  if is_secret_name(m[1]) and m[2] != REDACTED]
    if "://" in text and "@" in text:
        found += [f"a password in a URL at {m.start()}" for m in _URL_PASSWORD.finditer(text) if m[2] != REDACTED]
    found += [f"a secret value at {text.find(v)}" for v in values if v and v in text]
    return found


def find_secrets_in_record(obj, path: str = "") -> list[str]:
    """Secret-named keys of a JSON-like record whose values are non-empty strings other than REDACTED
    (walked without recursion: a profiler trace has millions of leaves, and only containers are visited)."""
    found: list[str] = []
    todo = [(obj, path)]
    while todo:
        node, where = todo.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for k, v in items:
            if isinstance(v, (dict, list)):
                todo.append((v, f"{where}/{k}"))
            elif isinstance(node, dict) and isinstance(v, str) and v and v != REDACTED and is_secret_name(k):
                found.append(f"{where}/{k}")
    return sorted(found)
