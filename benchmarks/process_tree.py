"""Running a command and measuring it whole: wall time and the peak memory of its
process tree (the command and every process it starts, such as the local
runner's worker processes), sampled from /proc.

    run = measure([sys.executable, "-m", "pipelines.tar_to_tfrecord", ...])
    run.seconds, run.peak_rss     # bytes: the largest sum of RSS seen at once

RSS counts pages shared between the processes (libraries, copy-on-write) in
each of them, so the sum errs high, never low.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from typing import NamedTuple, Sequence

__all__ = ["Measured", "measure", "tree_rss"]

_PAGE = os.sysconf("SC_PAGE_SIZE")


class Measured(NamedTuple):
    seconds: float
    peak_rss: int     # bytes
    output: str       # stdout and stderr, for errors and the job's own summary


def _children() -> dict:
    """pid -> its child pids, from /proc/*/stat."""
    children: dict = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                # The command may hold spaces and parentheses; the ppid follows the last ')'.
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    return children


def tree_rss(pid: int) -> int:
    """The RSS of `pid` and all its descendants now, in bytes."""
    children, pending, total = _children(), [pid], 0
    while pending:
        current = pending.pop()
        try:
            with open(f"/proc/{current}/statm") as f:
                total += int(f.read().split()[1]) * _PAGE
        except OSError:
            continue  # exited meanwhile
        pending.extend(children.get(current, ()))
    return total


def measure(command: Sequence[str], env: dict | None = None, cwd: str | None = None,
            interval_s: float = 0.05) -> Measured:
    """Runs `command` to its end; raises CalledProcessError (with its output) if it fails."""
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], tree_rss(process.pid))
            done.wait(interval_s)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output, _ = process.communicate()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    text = output.decode("utf-8", "replace")
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, command, text)
    return Measured(seconds, peak[0], text)
