"""Local workers: forked from the pool's zygote, gone when it ends, a death
reported instead of waited on; and how many a job gets when its user does not
say (transforms/runner/worker_pool.py, worker_count.py)."""

import gc
import logging
import os

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

import transforms as dg
from pipelines import dataset_job, tar_to_tfrecord
from transforms.runner.launcher_steps import OnSmallRecords
from transforms.runner.worker_count import WORTH_BYTES, busiest_share, local_workers
from transforms.testing.corpus import write_corpus

MiB = 1 << 20


def _workers(workers: str = "2"):
    return dg.make_pipeline(PipelineOptions(["--direct_num_workers", workers]))


def _note_process(x, folder):
    with open(os.path.join(folder, f"{x}"), "w") as f:
        f.write(f"{os.getpid()} {os.getppid()}")
    return x


@pytest.mark.parametrize("workers", ["2", "0"])  # 0: Beam's one a core
def test_workers_are_processes_forked_from_one_zygote(tmp_path, workers):
    with _workers(workers) as p:
        done = p | beam.Create(range(8)) | beam.Map(_note_process, str(tmp_path))
        assert_that(done, equal_to(list(range(8))))
    noted = [tuple(map(int, (tmp_path / f"{x}").read_text().split())) for x in range(8)]
    pids, parents = {pid for pid, _ in noted}, {parent for _, parent in noted}
    assert len(pids) == min(int(workers) or os.cpu_count(), 8) and os.getpid() not in pids
    assert len(parents) == 1 and os.getpid() not in parents  # the zygote, a child of ours


class _NoteSetUp(beam.DoFn):
    def __init__(self, folder: str):
        self._folder = folder

    def setup(self):
        with open(os.path.join(self._folder, f"set-up-{id(self)}"), "w") as f:
            f.write(f"{os.getpid()}")

    def process(self, x):
        yield _note_process(x, self._folder)


class _Tally(OnSmallRecords, beam.PTransform):
    """Small records: its steps run in the launcher of a pooled run."""

    def __init__(self, folder: str):
        super().__init__()
        self._folder = folder

    def expand(self, numbers):
        return (numbers
                | "Sum" >> beam.CombineGlobally(sum)
                | "Note" >> beam.ParDo(_NoteSetUp(self._folder)))


def test_small_records_stay_in_the_launcher_and_the_rest_goes_to_the_workers(tmp_path):
    # transforms/runner/launcher_steps.py: a user's step, and ours over media,
    # on the workers; an OnSmallRecords' steps in this process, on one worker.
    with _workers() as p:
        done = p | beam.Create(range(8)) | beam.Map(_note_process, str(tmp_path))
        (tmp_path / "tally").mkdir()
        total = done | _Tally(str(tmp_path / "tally"))
        assert_that(total, equal_to([28]))
    worked = {int((tmp_path / f"{x}").read_text().split()[0]) for x in range(8)}
    tallied = int((tmp_path / "tally" / "28").read_text().split()[0])
    assert tallied == os.getpid() and os.getpid() not in worked and len(worked) == 2
    # One in-process worker runs such a stage, not one a pool worker (a DoFn set up once).
    assert len(list((tmp_path / "tally").glob("set-up-*"))) == 1


def _exit_on_three(x):
    if x == 3:
        os._exit(3)
    return x


def test_a_worker_that_dies_fails_the_run_naming_it_instead_of_hanging():
    with pytest.raises(RuntimeError, match=r"local worker worker_\d+ died \(exit status 3\)"):
        with _workers() as p:
            _ = p | beam.Create(range(8)) | beam.Map(_exit_on_three)


def test_a_workers_warning_reaches_the_launchers_log_as_it_would_in_one_process(capfd):
    logging.getLogger("tests.pool").setLevel(logging.INFO)
    try:
        with _workers() as p:
            _ = (p | beam.Create(["kept"])
                 | beam.Map(lambda x: logging.getLogger("tests.pool").info("said %s", x)))
    finally:
        logging.getLogger("tests.pool").setLevel(logging.NOTSET)
    assert "INFO tests.pool: said kept" in capfd.readouterr().err


@pytest.mark.parametrize(("sizes", "cores", "workers"), [
    ([246 * MiB] * 4, 2, 2),            # writer_bench's 1 GB: 4 units of 2 tars
    ([246 * MiB] * 4, 8, 4),            # no more workers than units
    ([141 * MiB, 47 * MiB], 2, 1),      # the 200 MB corpus: one unit holds most of it
    ([123 * MiB], 2, 1),                # a unit is read by one worker
    ([100 * MiB] * 3, 2, 1),            # a second worker takes 100 MiB off: not worth a second
    ([WORTH_BYTES] * 2, 2, 2),
])
def test_more_workers_only_where_they_take_enough_off_the_busiest(sizes, cores, workers):
    assert local_workers(sizes, cores).workers == workers


def test_units_are_dealt_in_turn_largest_first():
    assert busiest_share([5, 1, 4, 2, 3], 2) == 5 + 3 + 1
    assert busiest_share([5, 1, 4, 2, 3], 1) == 15


@pytest.mark.parametrize(("given", "said"), [
    ([], ["local workers: 1 (2 work units, 0.2 MB: more would not pay; "
          "--direct_num_workers N to choose)"]),
    (["--direct_num_workers", "1"], []),   # given, though it is Beam's default
    (["--direct_num_workers=2"], []),
])
def test_a_job_left_to_choose_says_how_many_workers_it_took(tmp_path, caplog, given, said,
                                                            monkeypatch):
    monkeypatch.setattr(dataset_job, "local_workers", _recorded(chosen := []))
    write_corpus(str(tmp_path / "corpus"), shards=2, samples_per_shard=4)
    with caplog.at_level(logging.INFO, logger=dataset_job.__name__):
        tar_to_tfrecord.run(["--input", str(tmp_path / "corpus" / "*.tar"),
                             "--output", str(tmp_path / "out"), "--features", "label=cls:int64",
                             "--splits", "train=1", "--shard_size_mb", "0.01",  # a unit a shard
                             *given])
    assert [r.getMessage() for r in caplog.records
            if r.getMessage().startswith("local workers")] == said
    assert len(chosen) == (not given)


def _recorded(calls: list):
    def chosen(*args):
        calls.append(args)
        return local_workers(*args)
    return chosen


def test_a_pipeline_made_and_never_run_ends_its_pool():
    pipeline = _workers()
    zygote = pipeline.runner._pool._zygote
    del pipeline
    gc.collect()
    assert zygote.wait() == 0
