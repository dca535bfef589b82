"""Running a pipeline module from the command line (`python -m pipelines.X`)."""

import logging
import sys
from typing import Callable

__all__ = ["main"]


def main(run: Callable) -> None:
    """Calls `run(argv)`; a flag or input error (ValueError) exits with its message.

    Beam's own INFO logging is left out so the job's summary line stands out.
    """
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("pipelines").setLevel(logging.INFO)
    try:
        run(sys.argv[1:])
    except ValueError as e:
        sys.exit(f"error: {e}")
