"""The launcher's table check (transforms/sources/bigtable/admin.py) on the real emulator:
what is missing is named with the command that makes it, and `create` makes it."""

import uuid

import pytest
from google.cloud.bigtable import Client

from transforms.sources.bigtable.admin import ensure_table
from transforms.sources.bigtable.table import BigtableTable

pytestmark = pytest.mark.filterwarnings("ignore:Connecting to Bigtable emulator:RuntimeWarning")


def _new_table() -> BigtableTable:
    return BigtableTable("datagen-test", "admin", f"t{uuid.uuid4().hex[:10]}")


def _families(table: BigtableTable) -> dict:
    admin = Client(project=table.project, admin=True).instance(table.instance).table(table.table)
    return admin.list_column_families() if admin.exists() else {}


def test_missing_table_and_families_are_named_with_the_fix(bigtable_emulator):
    table = _new_table()
    with pytest.raises(ValueError, match=f"{table.url} does not exist; create it with column "
                                         f"families raw \\(`cbt createtable {table.table} "
                                         f"families=raw`\\)$"):
        ensure_table(table, ["raw"])
    with pytest.raises(ValueError, match="does not exist.*`\\) or pass --create_table$"):
        ensure_table(table, ["raw"], create_flag="--create_table")
    assert _families(table) == {}

    assert ensure_table(table, ["other"], create=True) == ["other"]
    with pytest.raises(ValueError, match=f"has no column family raw \\(it has other\\); add with "
                                         f"`cbt createfamily {table.table} raw` or pass --x$"):
        ensure_table(table, ["raw", "other"], create_flag="--x")
    with pytest.raises(ValueError, match="not a valid Bigtable column family id"):
        ensure_table(table, ["bad:family"])


def test_create_adds_only_missing_families_with_one_version(bigtable_emulator):
    table = _new_table()
    assert ensure_table(table, ["raw", "meta"], create=True) == ["meta", "raw"]
    assert ensure_table(table, ["raw", "ex"], create=True) == ["ex"]
    families = _families(table)
    assert sorted(families) == ["ex", "meta", "raw"]
    assert all(f.gc_rule.max_num_versions == 1 for f in families.values())
    assert ensure_table(table, ["raw", "ex"]) == []  # all there: nothing to do, no error


def test_table_identity_needs_every_part():
    with pytest.raises(ValueError, match="needs project, instance and table"):
        BigtableTable("p", "", "t")
    table = BigtableTable("p", "i", "t", app_profile="batch")
    assert table.url == "bigtable://p/i/t"
    assert table.resource_name == "projects/p/instances/i/tables/t"
