"""Local workers: where a 2-worker run's time goes, how the job scales with its
workers against as many lean loops side by side, and what the job picks for
itself on a small corpus.

    python -m benchmarks.workers_bench [--speech_mb 1024] [--small_mb 200] [--parts 1,2,3]
                                       [--workers 1,2,4,8] [--repeats 3] [--workdir DIR]

writer_bench's speech corpus (16 kHz FLAC in 8 tar shards, cut into 1 s
float32 windows), with --shard_size_mb 100 so that every shard is a unit of
its own and 8 workers have a unit each. Every run starts from a synced disk
and a warm page cache; the runs of each part take turns, `--repeats` times;
medians.

1. The timeline of one 2-worker run, with Beam's own worker processes
   (`--direct_running_mode multi_processing`) and with the pool the jobs use
   now (transforms/runner/worker_pool.py): trace points
   (benchmarks/timeline_hooks) in the launcher, the runner and each unit's
   conversion, shown for the run of median length.
2. Scaling: the job with N workers for each N of --workers, against 1 worker
   and against N lean loops side by side (benchmarks/lean_loop.py, each
   every N-th shard: the machine's ceiling for N processes); the peak RSS of
   the job's process tree, and per worker (RSS counts shared pages in every
   process: the sum errs high).
3. A corpus of --small_mb in 8 shards: 1 worker, 2 workers, and the job left
   to choose (no --direct_num_workers, transforms/runner/worker_count.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import statistics
import sys
import tempfile

from benchmarks.audio_pipeline_bench import speech_corpus, write_shards
from benchmarks.process_tree import measure, warm
from benchmarks.writer_bench import SPEECH_FLAGS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOOKS = os.path.join(REPO, "benchmarks", "timeline_hooks")
FLAGS = [*SPEECH_FLAGS, "--shard_size_mb", "100"]
MAX_RSS_PER_WORKER = 500 << 20
# Issue #37: 2 workers against 1, and against two lean loops side by side.
TARGETS = {"1 worker": 1.6, "two lean loops": 0.8}


def _job(workers: int | None, corpus: str, output: str, *extra: str) -> list:
    chosen = [] if workers is None else ["--direct_num_workers", str(workers)]
    return [sys.executable, "-m", "pipelines.tar_to_tfrecord", *chosen,
            "--input", f"{corpus}/*.tar", "--output", output, *FLAGS, *extra]


def _leans(n: int, corpus: str, output: str) -> list:
    """One shell running n lean loops at once, each every n-th shard; it fails if any does."""
    loops = [shlex.join([sys.executable, "-m", "benchmarks.lean_loop", "speech", "--input",
                         f"{corpus}/*.tar", "--output", f"{output}/{i}", "--part", f"{i}/{n}"])
             for i in range(n)]
    started = "".join(f"{loop} & p{i}=$!; " for i, loop in enumerate(loops))
    waited = "".join(f"wait $p{i} || failed=1; " for i in range(n))
    return ["sh", "-c", f"failed=0; {started}{waited}exit $failed"]


def _timed(runs: dict, corpus: str, workdir: str, repeats: int, trace: bool = False) -> dict:
    """name -> [(Measured, trace events)]: each command of `runs` (its output
    folder is its last --output) `repeats` times, taking turns."""
    results: dict = {name: [] for name in runs}
    for _ in range(repeats):
        for name, command in runs.items():
            output = os.path.join(workdir, "out")
            shutil.rmtree(output, ignore_errors=True)
            trace_file = os.path.join(workdir, "trace.jsonl")
            env = dict(os.environ, PYTHONPATH=REPO)
            if trace:
                env.update(PYTHONPATH=f"{HOOKS}:{REPO}", DATAGEN_TIMELINE=trace_file)
                open(trace_file, "w").close()
            warm(corpus)
            run = measure([part.replace("{out}", output) for part in command], env=env)
            events = ([json.loads(line) for line in open(trace_file)] if trace else [])
            results[name].append((run, events))
    shutil.rmtree(os.path.join(workdir, "out"), ignore_errors=True)
    return results


def _median_seconds(runs: list) -> float:
    return statistics.median(run.seconds for run, _ in runs)


def timeline(events: list, seconds: float) -> list:
    """(phase, seconds) of one traced run, and a line per worker."""
    launcher = min((e for e in events if e["what"] == "interpreter"), key=lambda e: e["t"])
    t0 = launcher["t"]
    at = {e["what"]: e["t"] - t0 for e in events if e["pid"] == launcher["pid"]
          and e["what"] in ("run_start", "close_start", "run_end", "exit")}
    units = [e for e in events if e["what"] == "unit"]
    first = min(u["start"] for u in units) - t0
    last = max(u["t"] for u in units) - t0
    phases = [("launcher: imports, flags, plan", at["run_start"]),
              ("runner: first stages, workers start", first - at["run_start"]),
              ("converting: first unit to last", last - first),
              ("final step", at["close_start"] - last),
              ("runner closes its workers", at["run_end"] - at["close_start"]),
              ("launcher: summary", at["exit"] - at["run_end"]),
              ("interpreter exit", seconds - at["exit"])]
    workers = []
    for pid in sorted({u["pid"] for u in units}):
        own = sorted((u for u in units if u["pid"] == pid), key=lambda u: u["start"])
        busy = sum(u["t"] - u["start"] for u in own)
        workers.append(f"  worker {pid}: units {[u['index'] for u in own]}, "
                       f"{own[0]['start'] - t0:.2f}-{own[-1]['t'] - t0:.2f} s, busy {busy:.2f} s, "
                       f"idle in the conversion {last - first - busy:.2f} s")
    return phases, workers


def part_timeline(corpus: str, workdir: str, repeats: int) -> None:
    print("\n1. where a 2-worker run's time goes (the run of median length)")
    runs = {"Beam's worker processes": _job(2, corpus, "{out}", "--direct_running_mode",
                                            "multi_processing"),
            "the pool's": _job(2, corpus, "{out}")}
    results = _timed(runs, corpus, workdir, repeats, trace=True)
    table = {}
    for name, measured in results.items():
        run, events = sorted(measured, key=lambda m: m[0].seconds)[len(measured) // 2]
        phases, workers = timeline(events, run.seconds)
        table[name] = phases
        print(f"{name}: {run.seconds:.2f} s")
        print("\n".join(workers))
    names = list(table)
    print(f"{'phase':40s} " + " ".join(f"{n:>24s}" for n in names))
    for i, (phase, _) in enumerate(table[names[0]]):
        print(f"{phase:40s} " + " ".join(f"{table[n][i][1]:23.2f}s" for n in names))


def part_scaling(corpus: str, workdir: str, counts: list, repeats: int) -> list:
    print(f"\n2. scaling on {os.cpu_count()} cores: the job with N workers, N lean loops side by "
          f"side (median of {repeats})")
    runs, workers = {}, {}  # name -> command, and its processes side by side
    for n in counts:
        runs[f"job {n}"] = _job(n, corpus, "{out}")
        runs[f"lean {n}"] = _leans(n, corpus, "{out}")
        workers.update({f"job {n}": n, f"lean {n}": n})
    runs["job 2, Beam's workers"] = _job(2, corpus, "{out}", "--direct_running_mode",
                                         "multi_processing")
    workers["job 2, Beam's workers"] = 2
    results = _timed(runs, corpus, workdir, repeats)
    seconds = {name: _median_seconds(measured) for name, measured in results.items()}
    print(f"{'run':24s} {'seconds':>8s} {'x 1 worker':>11s} {'x N leans':>10s} "
          f"{'peak RSS':>9s} {'per worker':>11s}")
    missed = []
    for name, measured in results.items():
        n, job = workers[name], name.startswith("job")
        rss = statistics.median(run.peak_rss for run, _ in measured)
        against_one = f"{seconds['job 1'] / seconds[name]:.2f}x" if job else ""
        against_leans = f"{seconds[f'lean {n}'] / seconds[name]:.2f}x" if job else ""
        print(f"{name:24s} {seconds[name]:8.2f} {against_one:>11s} {against_leans:>10s} "
              f"{rss / 2**20:5.0f} MiB {rss / n / 2**20:7.0f} MiB")
        if job and rss / n > MAX_RSS_PER_WORKER:
            missed.append(f"{name}: {rss / n / 2**20:.0f} MiB a worker > 500 MiB")
    if "job 2" in seconds:
        for against, base in (("1 worker", "job 1"), ("two lean loops", "lean 2")):
            ratio, least = seconds[base] / seconds["job 2"], TARGETS[against]
            if ratio < least:
                missed.append(f"2 workers: {ratio:.2f}x {against} < {least}x")
    return missed


def part_small(corpus: str, megabytes: float, workdir: str, repeats: int) -> list:
    print(f"\n3. {megabytes:.0f} MB in 8 shards (median of {repeats})")
    runs = {"1 worker": _job(1, corpus, "{out}"), "2 workers": _job(2, corpus, "{out}"),
            "the job's choice": _job(None, corpus, "{out}")}
    results = _timed(runs, corpus, workdir, repeats)
    seconds = {name: _median_seconds(measured) for name, measured in results.items()}
    chose = [line for line in results["the job's choice"][0][0].output.splitlines()
             if "local workers" in line]
    for name in runs:
        print(f"{name:18s} {seconds[name]:6.2f} s  {seconds['1 worker'] / seconds[name]:.2f}x")
    print(f"it chose: {chose[0] if chose else '(nothing said)'}")
    slower = seconds["the job's choice"] > seconds["1 worker"] * 1.05
    return ["the job's choice is slower than 1 worker on the small corpus"] if slower else []


def _parts(args, workdir: str) -> list:
    """Runs the parts asked for in `workdir` (its corpora kept there); returns unmet targets."""
    counts = [int(n) for n in args.workers.split(",")]
    parts = {int(n) for n in args.parts.split(",")}
    speech, missed = os.path.join(workdir, "speech"), []
    if not os.path.isdir(speech):
        write_shards(speech_corpus(args.speech_mb), speech, shards=8)
    if 1 in parts:
        part_timeline(speech, workdir, args.repeats)
    if 2 in parts:
        missed += part_scaling(speech, workdir, counts, args.repeats)
    if 3 in parts:
        small = os.path.join(workdir, "small")
        if not os.path.isdir(small):
            write_shards(speech_corpus(args.small_mb), small, shards=8)
        missed += part_small(small, args.small_mb, workdir, args.repeats)
    return missed


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speech_mb", type=float, default=1024)
    parser.add_argument("--small_mb", type=float, default=200)
    parser.add_argument("--parts", default="1,2,3", help="The parts to run (docstring).")
    parser.add_argument("--workers", default="1,2,4,8", help="Worker counts to scale over.")
    parser.add_argument("--repeats", type=int, default=3, help="Runs of each, interleaved.")
    parser.add_argument("--workdir", default="", help="Keep corpora here (default: a temp dir).")
    args = parser.parse_args(argv)
    scratch = (contextlib.nullcontext(args.workdir) if args.workdir
               else tempfile.TemporaryDirectory(prefix="datagen-workers-bench-"))
    with scratch as workdir:
        missed = _parts(args, workdir)
    print(f"\ntargets: {'all met' if not missed else 'MISSED: ' + '; '.join(missed)}")


if __name__ == "__main__":
    main()
