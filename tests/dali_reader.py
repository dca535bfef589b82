"""NVIDIA DALI reading a dataset, for the tests: its TFRecord reader through our
record indexes, on the CPU.

DALI (nvidia-dali-cuda120, the `dali` extra `make test` installs) runs its CPU
operators on a machine without a GPU: pipelines built with device_id=None.
"""

from __future__ import annotations

import os

import numpy as np
import nvidia.dali.tfrecord as tfrec
from nvidia.dali import fn, pipeline_def

_KINDS = {"string": tfrec.string, "int64": tfrec.int64, "float32": tfrec.float32}


def read_split(output, info, split, features: dict) -> dict:
    """Every record of `split` read by DALI's TFRecord reader through our indexes, in
    one batch on the CPU: {feature: one array per record}. `features` maps a name
    to (kind, shape, default), kind one of string, int64, float32; "frame" is
    decoded by DALI's image decoder."""
    shards = info["splits"][split]["shards"]
    count = info["splits"][split]["num_examples"]

    @pipeline_def(batch_size=count, num_threads=1, device_id=None)
    def records():
        ex = fn.readers.tfrecord(
            path=[os.path.join(output, s["file"]) for s in shards],
            index_path=[os.path.join(output, s["index"]["file"]) for s in shards],
            features={name: tfrec.FixedLenFeature(shape, _KINDS[kind], default)
                      for name, (kind, shape, default) in features.items()},
            random_shuffle=False, name="Reader")
        return tuple(fn.decoders.image(ex[name], device="cpu") if name == "frame" else ex[name]
                     for name in features)

    pipe = records()
    pipe.build()
    assert pipe.epoch_size("Reader") == count
    batch = pipe.run()
    return {name: [np.array(out.at(i)) for i in range(count)]
            for name, out in zip(features, batch)}
