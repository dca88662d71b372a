"""Pin Triton's autotuning disk cache to one folder and log every lookup (GPU host only).

Put this folder first on PYTHONPATH and set WALL_AUTOTUNE_DIR; without WALL_AUTOTUNE_DIR
this file does nothing but hand over to any other sitecustomize further down sys.path.

    export WALL_AUTOTUNE_DIR=/opt/wallcache/autotune   # *.autotune.json land here
    export WALL_AUTOTUNE_LOG=/opt/wallcache/autotune.log   # optional; stderr always
    export PYTHONPATH=$PWD/gpu/triton_autotune_cache:/opt/wallsite

What it changes, once `triton.runtime.autotuner` is imported (import hook, so Python
processes that never import Triton, e.g. papermill, pay nothing):
  * every `triton.autotune` Autotuner gets cache_results=True (what vLLM's
    env_override.py already asks for through TRITON_CACHE_AUTOTUNING=1);
  * `Autotuner.check_disk_cache` reads/writes `<fn>.autotune.json` under
    WALL_AUTOTUNE_DIR/<key> instead of under whatever TRITON_CACHE_DIR holds at that moment
    (torch/Inductor may set TRITON_CACHE_DIR while the process runs: see NOTES-autotune.md);
  * each lookup prints one line:  [wall-autotune] HIT|MISS <kernel> key=... <s> ...
It changes no kernel source, config list or tuning key: a HIT selects the config that the
recorded benchmark found fastest for the same Triton build, GPU target, kernel source and
tuning key (Triton's own cache key, triton/runtime/autotuner.py check_disk_cache).
Compiled kernels still go to TRITON_CACHE_DIR as usual.
"""
import os
import sys

_DIR = os.environ.get("WALL_AUTOTUNE_DIR")
_LOG = os.environ.get("WALL_AUTOTUNE_LOG")
_TARGET = "triton.runtime.autotuner"


def _log(msg):
    line = f"[wall-autotune] pid={os.getpid()} {msg}"
    print(line, file=sys.stderr, flush=True)
    if _LOG:
        try:
            with open(_LOG, "a") as f:
                f.write(line + "\n")
        except OSError:
            pass


def _patch(mod):
    import time
    from triton import knobs
    from triton.runtime import cache as tcache

    class PinnedCacheManager(tcache.FileCacheManager):
        def __init__(self, key, override=False, dump=False):
            self.key = key
            self.cache_dir = os.path.join(_DIR, key)
            self.lock_path = os.path.join(self.cache_dir, "lock")
            os.makedirs(self.cache_dir, exist_ok=True)

    # check_disk_cache calls the module-level name get_cache_manager(cache_key)
    mod.get_cache_manager = lambda key: PinnedCacheManager(tcache._base32(key))

    Autotuner = mod.Autotuner
    orig_init = Autotuner.__init__
    orig_check = Autotuner.check_disk_cache

    def __init__(self, *args, **kwargs):
        orig_init(self, *args, **kwargs)
        self.cache_results = not knobs.runtime.interpret

    def check_disk_cache(self, tuning_key, configs, bench_fn):
        t0 = time.time()
        hit = orig_check(self, tuning_key, configs, bench_fn)
        cacheable = bool(tuning_key) and not any(c.pre_hook for c in configs)
        best = self.cache.get(tuning_key)
        _log(f"{'HIT' if hit else ('MISS' if cacheable else 'UNCACHEABLE')} "
             f"{self.base_fn.__name__} key={tuning_key} configs={len(configs)} "
             f"{time.time() - t0:.2f}s best={best} dir={_DIR} "
             f"TRITON_CACHE_DIR={os.environ.get('TRITON_CACHE_DIR')}")
        return hit

    Autotuner.__init__ = __init__
    Autotuner.check_disk_cache = check_disk_cache
    _log(f"patched {_TARGET} (dir={_DIR})")


if _DIR:
    import importlib.abc
    import importlib.machinery

    class _Hook(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):
            if fullname != _TARGET:
                return None
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is None or spec.loader is None:
                return spec
            orig_exec = spec.loader.exec_module

            def exec_module(module):
                orig_exec(module)
                try:
                    _patch(module)
                except Exception as e:  # never break the import itself
                    _log(f"patch FAILED: {e!r}")

            spec.loader.exec_module = exec_module
            return spec

    if _TARGET in sys.modules:  # imported already (unlikely this early)
        _patch(sys.modules[_TARGET])
    else:
        sys.meta_path.insert(0, _Hook())


def _chain():
    """Run the next sitecustomize on sys.path (the image's own, if any), which this shadows."""
    here = os.path.dirname(os.path.abspath(__file__))
    for p in sys.path:
        d = os.path.abspath(p or os.getcwd())
        f = os.path.join(d, "sitecustomize.py")
        if d != here and os.path.isfile(f):
            with open(f) as fh:
                code = compile(fh.read(), f, "exec")
            exec(code, {"__name__": "sitecustomize", "__file__": f})
            return


_chain()
