"""The layers import only those below them: format < media < recipe, the Beam-free
bottom that training code and the Beam layers stand on (transforms/__init__.py).
Read from the source, so an import inside a function counts too."""

import ast
import pathlib

import pytest

TRANSFORMS = pathlib.Path(__file__).resolve().parent.parent / "transforms"
# Each Beam-free package and the packages it may import from.
BELOW = {
    "format": {"format"},
    "media": {"format", "media"},
    "recipe": {"format", "media", "recipe"},
    "testing": {"format", "media", "testing"},
}


def _imported_packages(path: pathlib.Path) -> set:
    """The transforms.* packages a module imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        found |= {name.split(".")[1] for name in names
                  if name.startswith("transforms.") and name.count(".") >= 1}
    return found


@pytest.mark.parametrize("package", sorted(BELOW))
def test_a_layer_imports_only_the_layers_below_it(package):
    above = {f"{path.relative_to(TRANSFORMS)}: {sorted(_imported_packages(path) - BELOW[package])}"
             for path in sorted((TRANSFORMS / package).glob("*.py"))
             if _imported_packages(path) - BELOW[package]}
    assert not above
