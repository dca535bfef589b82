"""Running a command and measuring it whole: wall time and the peak memory of its
process tree (the command and every process it starts, such as the local
runner's worker processes), sampled from /proc.

    run = measure([sys.executable, "-m", "pipelines.tar_to_tfrecord", ...], watch=output)
    run.seconds, run.peak_rss     # bytes: the largest sum of RSS seen at once
    run.first_output_s            # when the first .tfrecord file appeared under `watch`
    run.cpu_seconds               # user + system CPU of the whole tree
    run.peak_pss                  # bytes: the largest sum of PSS seen at once (sampled less often)

RSS counts pages shared between the processes (libraries, copy-on-write) in
each of them, so the sum errs high, never low; PSS splits each shared page
among its processes, so the tree's sum counts it once (/proc/PID/smaps_rollup).
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import threading
import time
from typing import Mapping, NamedTuple, Sequence

__all__ = ["Measured", "interleaved", "measure", "tree_memory", "tree_rss", "warm"]

_PAGE = os.sysconf("SC_PAGE_SIZE")


class Measured(NamedTuple):
    seconds: float
    peak_rss: int                 # bytes
    output: str                   # stdout and stderr, for errors and the job's own summary
    first_output_s: float | None  # seconds to the first .tfrecord file under `watch`
    cpu_seconds: float            # user + system, of the command and every process it waited for
    peak_pss: int = 0             # bytes


def warm(folder: str) -> None:
    """Before a timed run: nothing left to write back (the disk's background
    work would be timed too), and every file under `folder` in the page cache."""
    os.sync()
    for directory, _, names in os.walk(folder):
        for name in names:
            with open(os.path.join(directory, name), "rb") as f:
                while f.read(1 << 24):
                    pass


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


def _tree(pid: int) -> list:
    """`pid` and all its descendants now."""
    children, pending, found = _children(), [pid], []
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(children.get(current, ()))
    return found


def tree_rss(pid: int) -> int:
    """The RSS of `pid` and all its descendants now, in bytes."""
    return tree_memory(pid, pss=False)[0]


def tree_memory(pid: int, pss: bool = True) -> tuple[int, int]:
    """(RSS, PSS) of `pid` and all its descendants now, in bytes (PSS 0
    unless asked: it costs the kernel a walk of each process's pages)."""
    rss = proportional = 0
    for current in _tree(pid):
        try:
            with open(f"/proc/{current}/statm") as f:
                rss += int(f.read().split()[1]) * _PAGE
            if pss:
                with open(f"/proc/{current}/smaps_rollup") as f:
                    proportional += next(int(line.split()[1]) * 1024 for line in f
                                         if line.startswith("Pss:"))
        except (OSError, StopIteration):
            continue  # exited meanwhile
    return rss, proportional


def _has_output(folder: str) -> bool:
    """Whether a .tfrecord file (or one being written) is anywhere under `folder`."""
    return any(".tfrecord" in name for _, _, names in os.walk(folder) for name in names)


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(command: Sequence[str], env: dict | None = None, cwd: str | None = None,
            interval_s: float = 0.05, watch: str | None = None,
            pss_interval_s: float = 1.0) -> Measured:
    """Runs `command` to its end; raises CalledProcessError (with its output) if it fails.

    The tree's RSS is sampled every `interval_s`, its PSS every
    `pss_interval_s`: a PSS sample costs the kernel a walk of every page of
    each process (28 ms of CPU on a 2-worker job's 600 MiB tree), which every
    50 ms took 40% of a core from the command, and a 2-worker job on 2 cores
    ran 20% longer for it. The CPU time is what the command and the
    processes it waited for used (the local runner waits for its workers):
    one measure() at a time."""
    cpu = _cpu_of_children()
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
    peak = [0, 0]   # RSS, PSS
    first: list = [None]
    done = threading.Event()

    def sample():
        pss_due = 0.0
        while not done.is_set():
            now = time.perf_counter()
            rss, pss = tree_memory(process.pid, pss=now >= pss_due)
            if now >= pss_due:
                pss_due = now + pss_interval_s
            peak[0], peak[1] = max(peak[0], rss), max(peak[1], pss)
            if watch and first[0] is None and _has_output(watch):
                first[0] = time.perf_counter() - start
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
    return Measured(seconds, peak[0], text, first[0], _cpu_of_children() - cpu, peak[1])


def interleaved(commands: Mapping[str, Sequence[str]], corpus: str, output: str,
                repeats: int) -> dict:
    """name -> [Measured, ...]: every command run `repeats` times, the commands
    taking turns (so the machine's drift falls on all alike), each from an
    empty `output` after `warm(corpus)`, its output folder watched."""
    runs: dict = {name: [] for name in commands}
    for _ in range(repeats):
        for name, command in commands.items():
            shutil.rmtree(output, ignore_errors=True)
            warm(corpus)
            runs[name].append(measure(command, watch=output))
    return runs
