"""The flags naming a Bigtable table, shared by every pipeline that reads or writes one.

Beam parses every loaded PipelineOptions subclass together, so a flag may be
defined once per process: pipelines share this class instead of redefining
`--instance`/`--table` (the project is Beam's own `--project`).
"""

from apache_beam.options.pipeline_options import PipelineOptions

__all__ = ["BigtableTableOptions"]


class BigtableTableOptions(PipelineOptions):
    """Which Bigtable table (the project is --project)."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--instance", help="Bigtable instance id. Required.")
        parser.add_argument("--table", help="Bigtable table id. Required.")
