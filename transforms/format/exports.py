"""A package's names loaded on first use (Beam-free, as the bottom layer is).

    __getattr__, __dir__ = exports_on_first_use(__name__, {"Name": "package.module"})

The project's public names (transforms/__init__.py) load so, and so do the
subpackages' whose modules would load heavy libraries (Beam, a Bigtable
client) the moment the package is imported.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

__all__ = ["exports_on_first_use"]


def exports_on_first_use(package: str, exports: dict) -> tuple:
    """A package's `__getattr__` and `__dir__` for `exports` (name -> the module
    that defines it): a name's module is imported when the name is first used,
    then the name is a plain attribute of the package."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        namespace[name] = value
        return value

    def __dir__() -> list:
        return sorted(exports)

    return __getattr__, __dir__
