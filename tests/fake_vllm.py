"""A fake `vllm` package for tests of the run path without vLLM: `python -m vllm.entrypoints.cli.main serve ...`
answers /health, /metrics and /server_info; `... bench serve ...` writes a result JSON that counts every prompt.

It is deliberately careless with secrets, like a real program may be: the server echoes the environment
into its log and /server_info, the client into its log and result. `install(folder)` writes the package
and returns the PYTHONPATH that makes `sys.executable -m vllm...` import it.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

MAIN = textwrap.dedent('''
    import json, os, sys, time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    SECRETS = {k: v for k, v in os.environ.items() if "TOKEN" in k or "KEY" in k or "PASSWORD" in k}

    def serve(argv):
        if os.environ.get("FAKE_VLLM_IGNORE_TERM"):  # a server slow to stop: only SIGKILL ends it
            import signal
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        port = int(argv[argv.index("--port") + 1])
        print("INFO fake vllm serve", argv, flush=True)
        print("INFO environment:", " ".join(f"{k}={v}" for k, v in SECRETS.items()), flush=True)
        info = {"vllm_config": {"model": argv[0]},
                "vllm_env": {"VLLM_API_KEY": os.environ.get("VLLM_API_KEY"), "VLLM_MAX_BAD_WORDS_TOTAL_TOKENS": 1024},
                "system_env": {"env_vars": "\\n".join(f"{k}={v}" for k, v in os.environ.items())}}

        class H(BaseHTTPRequestHandler):
            def do_GET(self):
                body = {"/health": "", "/metrics": "vllm:num_requests_running 0\\n",
                        "/server_info": json.dumps(info)}.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.end_headers()
                self.wfile.write((body or "").encode())

            def log_message(self, *a):
                pass

        ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()

    def bench(argv):
        opt = lambda name: argv[argv.index(name) + 1]
        n = int(opt("--num-prompts"))
        print("fake bench", argv, SECRETS, flush=True)
        result = {"completed": n, "failed": 0, "num_prompts": n, "duration": 1.0, "request_throughput": float(n),
                  "output_throughput": 10.0 * n, "echo": SECRETS}
        with open(os.path.join(opt("--result-dir"), opt("--result-filename")), "w") as f:
            json.dump(result, f)

    def main():
        argv = sys.argv[1:]
        {"serve": serve, "bench": lambda a: bench(a[1:])}[argv[0]](argv[1:] if argv[0] == "serve" else argv)

    if __name__ == "__main__":
        main()
''')


def install(folder: Path) -> str:
    root = Path(folder)
    pkg = root / "vllm" / "entrypoints" / "cli"
    pkg.mkdir(parents=True, exist_ok=True)
    (root / "vllm" / "__init__.py").write_text('__version__ = "0.0.fake"\n')
    (root / "vllm" / "entrypoints" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "main.py").write_text(MAIN)
    return str(root)
