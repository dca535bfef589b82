"""What a run published, for comparing two runs' output folders byte for byte.

    assert published_tree(resumed) == published_tree(clean)
"""

import json

__all__ = ["published_tree"]


def published_tree(folder) -> dict:
    """Every file under `folder`: path -> bytes; the manifest parsed, without
    its creation time."""
    tree = {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}
    manifest = json.loads(tree.pop("manifest.json"))
    del manifest["created"]
    return {**tree, "manifest.json": manifest}
