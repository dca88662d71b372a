"""No secrets in records: the redaction rules, and a scan of every committed file under data/."""
from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import pytest

from inference_wall.records.redact import (REDACTED, find_secrets, find_secrets_in_record, is_secret_name, redact_argv,
                                   redact_env, redact_server_info, secret_values)
from inference_wall.run.rig import recorded_environment

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["HF_TOKEN", "VLLM_API_KEY", "HUGGING_FACE_HUB_TOKEN", "AWS_SECRET_ACCESS_KEY",
                                  "MY_SERVICE_PASSWORD", "GOOGLE_APPLICATION_CREDENTIALS", "OPENAI_APIKEY",
                                  "hf_token", "--api-key", "GITHUB_TOKEN", "DB_PASSWD"])
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["VLLM_MAX_BAD_WORDS_TOTAL_TOKENS", "TOKENIZERS_PARALLELISM", "PYTHONPATH",
                                  "VLLM_USE_FASTOKENS", "max_num_batched_tokens", "PWD", "OMP_NUM_THREADS",
                                  "tokenizer"])
def test_settings_are_not_secrets(name):
    assert not is_secret_name(name)


def test_recorded_environment_is_an_allow_list_with_secrets_redacted():
    env = recorded_environment({"HF_TOKEN": "hf_x" * 10, "VLLM_API_KEY": "k" * 20, "VLLM_LOG_STATS_INTERVAL": "1",
                                "AWS_SECRET_ACCESS_KEY": "s" * 20, "HOME": "/root", "PYTHONPATH": "/src"})
    assert env == {"HF_TOKEN": REDACTED, "VLLM_API_KEY": REDACTED, "VLLM_LOG_STATS_INTERVAL": "1", "PYTHONPATH": "/src"}


def test_commands_and_server_info_lose_secret_values():
    assert redact_argv(["serve", "m", "--api-key", "abcdefgh", "--hf-token=xyz12345", "--port", "8000"]) == \
        ["serve", "m", "--api-key", REDACTED, f"--hf-token={REDACTED}", "--port", "8000"]
    values = secret_values({"HF_TOKEN": "hf_secretvalue", "OMP_NUM_THREADS": "2"}, ["--api-key", "cli-secret"])
    assert values == {"hf_secretvalue", "cli-secret"}
    info = json.dumps({"vllm_env": {"VLLM_API_KEY": "cli-secret", "VLLM_MAX_BAD_WORDS_TOTAL_TOKENS": 1024},
                       "system_env": {"env_vars": "HF_TOKEN=whatever123\nOMP_NUM_THREADS=2\n"},
                       "vllm_config": {"note": "echo hf_secretvalue"}})
    out = redact_server_info(info, values)
    assert "cli-secret" not in out and "whatever123" not in out and "hf_secretvalue" not in out
    parsed = json.loads(out)
    assert parsed["vllm_env"]["VLLM_MAX_BAD_WORDS_TOTAL_TOKENS"] == 1024
    assert "OMP_NUM_THREADS=2" in parsed["system_env"]["env_vars"]
    assert redact_env({"X_TOKEN": "", "Y_KEY": "v"}) == {"X_TOKEN": "", "Y_KEY": REDACTED}


def test_scanner_finds_token_formats_and_secret_assignments():
    assert find_secrets("token hf_" + "a" * 34)
    assert find_secrets("export HF_TOKEN=abc123")
    assert not find_secrets(f"HF_TOKEN={REDACTED} key=(1, 32) VLLM_MAX_BAD_WORDS_TOTAL_TOKENS=1024")
    assert find_secrets_in_record({"a": [{"api_key": "x"}]}) == ["/a/0/api_key"]
    assert not find_secrets_in_record({"api_key": None, "HF_TOKEN": REDACTED})


@pytest.mark.parametrize("secret", [
    "hf_" + "a1" * 17, "sk-proj-" + "b" * 24, "ghp_" + "c" * 36, "github_pat_" + "d_" * 16, "AKIA" + "E" * 16,
    "xoxb-" + "1234-" * 3, "-----BEGIN RSA PRIVATE KEY-----", "MY_SERVICE_PASSWORD=hunter22", "OPENAIAPIKEY=abcdef"])
def test_every_token_format_is_found_in_long_text(secret):
    """The scanner runs a pattern only over text holding its literal prefix: one sample of each kind, inside text
    that holds no other, is still found (a needle that did not match its pattern would hide it)."""
    text = "x " * 5000 + f"value {secret} end" + " y" * 5000
    assert find_secrets(text), secret
    assert find_secrets_in_record({"deep": [{"n": 1}, {"Auth_Token": secret}]}) == ["/deep/1/Auth_Token"]


def _committed_files(folder: str) -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", folder], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return sorted(p for p in (ROOT / folder).rglob("*") if p.is_file())
    return [ROOT / line for line in out.splitlines()]


def test_no_committed_data_file_holds_a_secret():
    files = _committed_files("data")
    assert any(f.name == "manifest.json" for f in files)
    found = {}
    for f in files:
        raw = f.read_bytes()
        text = (gzip.decompress(raw) if f.suffix == ".gz" else raw).decode(errors="replace")
        hits = find_secrets(text)
        if f.name.endswith((".json", ".json.gz")):
            try:
                hits += find_secrets_in_record(json.loads(text))
            except ValueError:
                pass
        if hits:
            found[str(f.relative_to(ROOT))] = hits[:3]
    assert not found, found


# A profile as a user may write one: keys in flags, tokens in its environment and its notes, a proxy password in a
# URL, a key in part 6's nested server flags. Before, `plan --dry-run` printed every flag and variable in full, `plan`
# printed the nested key, and the rigs page showed the URL's password and the notes' tokens.
LEAKY_SECRETS = {"flag_key": "sk-proj-AAAAbbbbCCCCddddEEEEffff", "flag_token": "hf_abcdefghijklmnopqrstuvwxyz0123456789",
                 "env_token": "hf_ZZZZabcdefghijklmnopqrstuvwxyz012345", "wandb": "wandb-secret-0123456789",
                 "proxy_password": "s3cretpass", "notes_hf": "hf_NOTEabcdefghijklmnopqrstuvwxyz0123",
                 "notes_sk": "sk-NOTEabcdefghijklmnopqrstu", "nested": "nested-secret-key-0123"}
LEAKY_PROFILE = {
    "description": "a rig with secrets", "emulates": f"nothing, with {LEAKY_SECRETS['notes_sk']} in its words",
    "serve_args": ["--api-key", LEAKY_SECRETS["flag_key"], "--hf-token", LEAKY_SECRETS["flag_token"]],
    "env": {"HF_TOKEN": LEAKY_SECRETS["env_token"], "WANDB_API_KEY": LEAKY_SECRETS["wandb"],
            "HTTPS_PROXY": f"http://alice:{LEAKY_SECRETS['proxy_password']}@proxy.example:3128"},
    "notes": [f"token in notes {LEAKY_SECRETS['notes_hf']} and {LEAKY_SECRETS['notes_sk']}"],
    "overrides": {"06-past-one-gpu": {"config_args": {"tp2": ["--distributed-executor-backend", "mp", "--api-key",
                                                              LEAKY_SECRETS["nested"]]}}}}


@pytest.fixture
def leaky_data(tmp_path):
    (tmp_path / "rigs").mkdir()
    (tmp_path / "rigs" / "leaky.json").write_text(json.dumps(LEAKY_PROFILE))
    (tmp_path / "models").symlink_to(ROOT / "data" / "models")
    return tmp_path


def _leaks(text: str) -> list[str]:
    return [name for name, value in LEAKY_SECRETS.items() if value in text] + find_secrets(text)


@pytest.mark.parametrize("part", ["3", "6"])
@pytest.mark.parametrize("dry_run", [False, True])
def test_no_line_plan_prints_holds_a_secret(part, dry_run, leaky_data, capsys):
    from inference_wall import cli

    argv = ["plan", "--part", part, "--rig", "leaky", "--data-dir", str(leaky_data)] + (["--dry-run"] if dry_run else [])
    assert cli.main(argv) == 0
    out = capsys.readouterr()
    assert not _leaks(out.out + out.err), _leaks(out.out + out.err)
    if dry_run:  # the names stay, so a reader sees what the server gets
        assert "--api-key <redacted>" in out.out and "HF_TOKEN=<redacted>" in out.out
        assert "HTTPS_PROXY=http://alice:<redacted>@proxy.example:3128" in out.out


def test_the_rigs_page_shows_no_secret_of_a_profile(leaky_data):
    from dataclasses import asdict

    from inference_wall.run.rig import load_profile, rigs_overview, shown

    rows = rigs_overview(leaky_data)
    (row,) = [r for r in rows if r["rig"] == "leaky"]
    assert "HTTPS_PROXY=http://alice:<redacted>@proxy.example:3128" in row["env"]
    text = json.dumps(rows) + json.dumps(asdict(shown(load_profile("leaky", leaky_data))))
    assert not _leaks(text), _leaks(text)


def test_one_redaction_for_text_and_records():
    from inference_wall.records.redact import redact_record, scrub_text

    line = ("HTTPS_PROXY=https://bob:pw-1234@h:1 git clone https://github.com/x/y --api-key 'a b c d' --hf-token=tok123456 "
            f"--max-num-batched-tokens 2048 --long-output {LEAKY_SECRETS['notes_hf']}")
    assert scrub_text(line) == ("HTTPS_PROXY=https://bob:<redacted>@h:1 git clone https://github.com/x/y --api-key "
                                "<redacted> --hf-token=<redacted> --max-num-batched-tokens 2048 --long-output <redacted>")
    assert redact_record({"args": {"tp2": ["--api-key", "abcdefgh", "--port", "1"]}}) == \
        {"args": {"tp2": ["--api-key", REDACTED, "--port", "1"]}}
    assert find_secrets("http://alice:hunter2@proxy:3128") and not find_secrets("http://alice:<redacted>@proxy:3128")
