"""A published tf.Transform against the manifest: it loads, takes the raw
features the manifest declares and gives the features it says a reader gets;
where readers apply it (transform.applied AT_READ), it applies to the
dataset's own records as `dg.load` applies it."""

from __future__ import annotations

from transforms.format.manifest import DatasetInfo

__all__ = ["transform_problems"]

# Records the transform is applied to, where readers apply it.
_TRIED = 8


def _kinds(spec) -> list:
    return sorted((f.name, f.kind) for f in spec)


def transform_problems(root: str, info: DatasetInfo) -> list:
    """Each way the published transform disagrees with the manifest, a line
    naming transform_fn/ (none for a dataset built without one)."""
    if not info.transform:
        return []
    import tensorflow as tf
    import tensorflow_transform as tft

    from transforms.format import reader
    from transforms.tft.stage import transformed_spec

    where = info.transform["transform_fn"] + "/"
    try:
        output = tft.TFTransformOutput(root)
        schema = output.transformed_metadata.schema
        raw = set(output.raw_feature_spec())
        output.transform_features_layer()  # the SavedModel loads
    except (OSError, tf.errors.OpError, ValueError) as e:
        return [f"{where}: does not load: {type(e).__name__}: {e}"]
    problems = []
    if raw != set(info.raw_spec.names):
        problems.append(f"{where}: takes {sorted(raw)}, the manifest's raw features are "
                        f"{sorted(info.raw_spec.names)}")
    gives = transformed_spec(schema, info.raw_spec)
    if _kinds(gives) != _kinds(info.read_spec):
        problems.append(f"{where}: gives {_kinds(gives)}, the manifest says a reader gets "
                        f"{_kinds(info.read_spec)}")
    split = next((name for name, s in info.splits.items() if s["num_examples"]), None)
    if problems or not info.transform_at_read or split is None:
        return problems
    try:
        for _ in reader.load(root, split, batch_size=_TRIED).take(1):
            pass
    except (tf.errors.OpError, ValueError) as e:
        problems.append(f"{where}: does not apply to {split}'s records: {type(e).__name__}: "
                        f"{str(e).splitlines()[0]}")
    return problems
