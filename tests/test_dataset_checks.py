"""The seam for rules over the whole dataset: a new check is one module and
one line of DATASET_CHECKS, and the writer and verify both judge by it.

Here a team's own rule, "no split with fewer than 10 groups", is added as a
check over the totals and the groups the leakage check counts: the writer
refuses the dataset in its one line and publishes nothing; a dataset written
before the rule is refused by verify.
"""

import json

import apache_beam as beam
import pytest

import transforms as dg
from transforms.checks import dataset_checks
from transforms.checks.check import DatasetCheck, Verdict
from transforms.format.dead_letters import DatasetFailed


class TenGroups(DatasetCheck):
    """Each split that holds examples holds 10 groups or more."""

    name = "ten_groups"

    def judge(self, found, judging):
        few = sorted(split for split, n in judging.facts["group_counts"].items() if n < 10)
        return Verdict(f"splits with fewer than 10 groups: {', '.join(few)}" if few else "")


def _write(output):
    rows = [{"label": i, "speaker": f"s{i % 12}"} for i in range(60)]
    with dg.make_pipeline() as p:
        _ = (p | beam.Create(rows)
               | dg.WriteDataset(str(output), features="label:int64", split_by="speaker",
                                 splits="train=0.75,test=0.25"))


def test_a_check_of_ones_own_is_one_line(tmp_path, monkeypatch):
    _write(tmp_path / "before")
    assert dg.verify_dataset(tmp_path / "before").ok
    counts = {name: split["num_groups"] for name, split in json.loads(
        (tmp_path / "before" / "manifest.json").read_text())["splits"].items()}
    assert sorted(counts.values())[0] < 10 and sum(counts.values()) == 12
    monkeypatch.setattr(dataset_checks, "DATASET_CHECKS",
                        (*dataset_checks.DATASET_CHECKS, TenGroups()))
    with pytest.raises(DatasetFailed, match="^splits with fewer than 10 groups: "):
        _write(tmp_path / "after")
    assert not (tmp_path / "after" / "manifest.json").exists()
    assert [p.split(":")[0] for p in dg.verify_dataset(tmp_path / "before").problems] == [
        "manifest.json"]
