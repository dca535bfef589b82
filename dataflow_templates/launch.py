"""The flex template entry point: the template launcher runs this file with the parameters.

Which pipeline it starts is the image's DATAGEN_PIPELINE (the Dockerfile's
PIPELINE build argument). The pipeline module is imported and its `run`
called as `python -m pipelines.X` would - not executed as `__main__`, so no
class or function of the job lives in a main session. The launcher must
return once the job is submitted (Dataflow's flex template guide: do not wait
for the job), hence --no_wait_until_finish.
"""

import importlib
import os
import sys

from pipelines import cli


def main() -> None:
    module = importlib.import_module(f"pipelines.{os.environ['DATAGEN_PIPELINE']}")
    sys.argv.append("--no_wait_until_finish")
    cli.main(module.run)


if __name__ == "__main__":
    main()
