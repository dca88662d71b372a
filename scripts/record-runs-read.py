"""Run by a notebook's kernel before its first cell (build-book.py starts each kernel with this file as an IPython
exec_file): note every data/runs/<part>/ folder the notebook opens a file in or lists, one name a line, in the file
that IW_READS_LOG names. The runs folder is IW_READS_UNDER. Python's audit hooks see every open() and
directory listing (pandas, json, gzip and pathlib all go through them), so what the page reads is what it did, not
what its code says it does; build-book compares it with the folders the page's key covers."""


def _record_runs_read():
    import os
    import sys

    log, under = os.environ.get("IW_READS_LOG"), os.environ.get("IW_READS_UNDER")
    if not log or not under:
        return
    prefix = os.path.abspath(under) + os.sep
    seen: set[str] = set()
    busy = []

    def hook(event: str, args: tuple) -> None:
        if busy or event not in ("open", "os.listdir", "os.scandir") or not args:
            return
        path = args[0]
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):  # a file descriptor, or None (the current folder)
            return
        path = os.path.abspath(path)
        if not path.startswith(prefix):
            return
        folder = path[len(prefix):].split(os.sep, 1)[0]
        if folder and folder not in seen:
            seen.add(folder)
            busy.append(1)
            try:
                with open(log, "a") as f:
                    f.write(folder + "\n")
            finally:
                busy.pop()

    sys.addaudithook(hook)


_record_runs_read()
del _record_runs_read
