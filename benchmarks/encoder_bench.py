"""tf.train.Example serialisation: protobuf vs transforms.format.encoder, side by side.

    python -m benchmarks.encoder_bench [--repeat 7]

In this one process, for each case, first checks that ExampleEncoder's bytes
equal protobuf's `SerializeToString(deterministic=True)`, then times (timeit,
best of --repeat) encoding one example both ways:

  protobuf  tf.train.Example(features=tf.train.Features(feature={...}))
            .SerializeToString(), the lists built straight from the numpy arrays;
  encoder   ExampleEncoder(spec).encode(values) on the same arrays.

Cases: a 16,000-value float32 array; a 16,000-value int64 array with
magnitudes spread log-uniformly from 0 to 2**63 and a quarter negative (so
varint lengths of 1 to 10 bytes mixed); a "typical example" (a 64 KiB bytes
payload, an int64 label and four floats); and, for reference, 16,000 int64
values that all have the same varint length (the encoder's fast path).
"""

from __future__ import annotations

import argparse
import platform
import timeit

import numpy as np
import tensorflow as tf
from google.protobuf import __version__ as protobuf_version
from google.protobuf.internal import api_implementation

from transforms.format.encoder import ExampleEncoder

N = 16_000
TARGET = 30


def _protobuf_feature(kind: str, value) -> tf.train.Feature:
    if kind == "float":
        return tf.train.Feature(float_list=tf.train.FloatList(value=value))
    if kind == "int64":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=value))
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=value))


def _protobuf_example(spec, values) -> tf.train.Example:
    return tf.train.Example(features=tf.train.Features(feature={
        name: _protobuf_feature(kind, values[name]) for name, kind in spec}))


def cases(rng: np.random.Generator) -> list:
    """(label, spec, values, counts toward the 30x target)."""
    bits = rng.integers(0, 64, N)                 # magnitude in bits, 0..63
    mixed = rng.integers(0, 2 ** 63 - 1, N, endpoint=True) >> (63 - bits)
    mixed[rng.random(N) < 0.25] *= -1
    return [
        ("float32 x16000", [("x", "float")],
         {"x": rng.standard_normal(N).astype(np.float32)}, True),
        ("int64 x16000, mixed magnitudes", [("x", "int64")], {"x": mixed}, True),
        ("typical: 64 KiB bytes + label + 4 floats",
         [("payload", "bytes"), ("label", "int64"), ("stats", "float")],
         {"payload": [rng.bytes(64 << 10)], "label": np.array([7]),
          "stats": rng.standard_normal(4).astype(np.float32)}, False),
        ("(extra) int64 x16000, one varint length", [("x", "int64")],
         {"x": rng.integers(2 ** 28, 2 ** 35, N)}, False),
    ]


def best_us(fn, repeat: int) -> float:
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    return min(timer.repeat(repeat=repeat, number=number)) / number * 1e6


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)

    print(f"python {platform.python_version()}, numpy {np.__version__}, "
          f"tensorflow {tf.__version__}, protobuf {protobuf_version} "
          f"({api_implementation.Type()} backend)")
    rows = []
    for label, spec, values, counted in cases(np.random.default_rng(0)):
        encoder = ExampleEncoder(spec)
        expected = _protobuf_example(spec, values).SerializeToString(deterministic=True)
        assert encoder.encode(values) == expected, f"{label}: bytes differ from protobuf"

        protobuf = best_us(lambda spec=spec, values=values: _protobuf_example(
            spec, values).SerializeToString(), args.repeat)
        ours = best_us(lambda encoder=encoder, values=values: encoder.encode(values), args.repeat)
        rows.append((label, protobuf, ours, counted))

    print(f"\n{'case':44s} {'protobuf us':>12s} {'encoder us':>11s} {'speed-up':>9s}")
    for label, protobuf, ours, counted in rows:
        verdict = ("" if not counted else
                   f"  target {TARGET}x {'met' if protobuf / ours >= TARGET else 'MISSED'}")
        print(f"{label:44s} {protobuf:12.1f} {ours:11.1f} {protobuf / ours:8.1f}x{verdict}")
    print("\nBytes checked equal to SerializeToString(deterministic=True) for every case.")


if __name__ == "__main__":
    main()
