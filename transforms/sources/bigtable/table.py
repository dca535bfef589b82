"""Which Bigtable table: one identity for the source, the sinks and the launchers.

    table = BigtableTable("my-project", "media", "clips")
    table.url            # 'bigtable://my-project/media/clips': Samples' __url__, messages
    table.resource_name  # 'projects/my-project/instances/media/tables/clips': API calls

Pure configuration, pickled to workers; the admin checks on it are in
transforms/sources/bigtable/admin.py.
"""

from __future__ import annotations

import dataclasses
import re

__all__ = ["ID", "MAX_FAMILY_CHARS", "BigtableTable", "check_family"]

# Instance, table and column family ids as the admin API accepts them.
ID = r"[_a-zA-Z0-9][-_.a-zA-Z0-9]*"
MAX_FAMILY_CHARS = 64


@dataclasses.dataclass(frozen=True)
class BigtableTable:
    """One table; `app_profile` (None = the instance's default) routes its reads."""

    project: str
    instance: str
    table: str
    app_profile: str | None = None

    def __post_init__(self):
        if not (self.project and self.instance and self.table):
            raise ValueError(f"a Bigtable table needs project, instance and table, got "
                             f"{self.project!r}/{self.instance!r}/{self.table!r}")

    @property
    def url(self) -> str:
        """`bigtable://project/instance/table`."""
        return f"bigtable://{self.project}/{self.instance}/{self.table}"

    @property
    def resource_name(self) -> str:
        """`projects/P/instances/I/tables/T`, the name API requests carry."""
        return f"projects/{self.project}/instances/{self.instance}/tables/{self.table}"


def check_family(family: str, what: str = "column family") -> str:
    """`family` if it is a valid column family id, else a ValueError naming `what`."""
    if not (isinstance(family, str) and re.fullmatch(ID, family)
            and len(family) <= MAX_FAMILY_CHARS):
        raise ValueError(f"{what} {family!r} is not a valid Bigtable column family id "
                         f"({ID}, at most {MAX_FAMILY_CHARS} characters)")
    return family
