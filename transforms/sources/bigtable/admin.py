"""The launcher's table check, shared by the source and the sinks: before any
pipeline work, a missing instance, table or column family is one ValueError
saying what is missing and how to make it.

    ensure_table(table, ["raw"])                              # reading: check only
    created = ensure_table(table, ["raw"], create=True)       # loading: make what is missing
    ensure_table(table, ["ex"], create_flag="--create_examples_table")  # hint at the flag

New families keep one version per cell (MaxVersions(1)): a reload then
replaces cells instead of piling up versions. Existing families are never
altered. Honours BIGTABLE_EMULATOR_HOST, whose emulator has no instance admin
API (any instance name exists there).
"""

from __future__ import annotations

from typing import Iterable

from google.api_core import exceptions
from google.cloud.bigtable import Client, column_family

from transforms.sources.bigtable.table import BigtableTable, check_family

__all__ = ["ensure_table"]


def ensure_table(table: BigtableTable, families: Iterable[str], *, create: bool = False,
                 create_flag: str | None = None) -> list:
    """Checks that `table` and its `families` exist; with `create`, makes what is
    missing. Returns the families it created.

    Without `create`, a missing instance, table or family is a ValueError whose
    advice names the `cbt` command, and `create_flag` when the caller has one.
    """
    families = sorted({check_family(f) for f in families})
    advice = f" or pass {create_flag}" if create_flag else ""
    client = Client(project=table.project, admin=True)
    try:
        instance = client.instance(table.instance)
        admin = instance.table(table.table)
        if not admin.exists():
            if not create:
                _check_instance(instance, table)
                raise ValueError(
                    f"Bigtable table {table.url} does not exist; create it with column "
                    f"families {', '.join(families)} (`cbt createtable {table.table} "
                    f"families={','.join(families)}`){advice}")
            try:
                admin.create(column_families={f: column_family.MaxVersionsGCRule(1)
                                              for f in families})
                return families
            except exceptions.AlreadyExists:
                pass  # another launcher made it just now: check its families below
            except exceptions.NotFound as e:
                raise ValueError(f"cannot create {table.url}: {e.message}") from None
        present = admin.list_column_families()
        missing = [f for f in families if f not in present]
        if missing and not create:
            raise ValueError(
                f"Bigtable table {table.url} has no column famil"
                f"{'y' if len(missing) == 1 else 'ies'} {', '.join(missing)} (it has "
                f"{', '.join(sorted(present)) or 'none'}); add with `cbt createfamily "
                f"{table.table} {missing[0]}`{advice}")
        for family in missing:
            try:
                admin.column_family(family, column_family.MaxVersionsGCRule(1)).create()
            except exceptions.AlreadyExists:
                pass
        return missing
    finally:
        client.close()


def _check_instance(instance, table: BigtableTable) -> None:
    try:
        exists = instance.exists()
    except exceptions.MethodNotImplemented:
        return  # the emulator: no instance admin API
    if not exists:
        raise ValueError(f"Bigtable instance {table.instance!r} does not exist in project "
                         f"{table.project!r}")
