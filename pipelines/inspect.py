"""Summarise a finished dataset: manifest, per-split counts, first examples decoded.

    python -m pipelines.inspect out/ [--examples 2] [--failures 3]
    python -m pipelines.inspect out/ --report report.png   # or report.html

Reads only what the manifest names (through tf.io.gfile, so gs:// works too).
`--report` also draws the dataset (transforms/report/): counts, label
balance, duration, start-time and size histograms per split, a contact sheet
of frames, audio windows with their log-mel spectrograms, dead letters by
stage; as a PNG, or an HTML page holding the summary and the PNG.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from pipelines.cli import native_stderr_silenced

__all__ = ["describe_dataset", "run", "write_report"]


def _show(value) -> str:
    array = np.asarray(value)
    if array.dtype.kind in "SO":
        items = [bytes(v) for v in array.ravel()]
        shown = [(repr(v) if len(v) <= 40 else f"<{len(v)} bytes>") for v in items[:4]]
        more = f" … ({len(items)} values)" if len(items) > 4 else ""
        return (shown[0] if array.ndim == 0 else "[" + ", ".join(shown) + "]") + more
    if array.dtype == np.uint8 and array.ndim >= 3 and array.shape[-1] == 3:
        centre = array[..., array.shape[-3] // 2, array.shape[-2] // 2, :].reshape(-1, 3)[0]
        return f"uint8{list(array.shape)} image(s), centre pixel RGB {centre.tolist()}"
    if array.size <= 8:
        return np.array2string(array, precision=4, separator=", ")
    return (f"{array.dtype}{list(array.shape)} "
            f"{np.array2string(array.ravel()[:6], precision=4, separator=', ')[:-1]}, …]")


def describe_dataset(output_dir: str, examples: int = 2, failures: int = 3) -> str:
    """The text `inspect` prints."""
    import tensorflow as tf

    from transforms.format import reader
    from transforms.format.durations import describe_durations

    info = reader.load_info(output_dir)
    doc = info.document
    lines = [f"dataset {output_dir}",
             f"  created {doc['created']} by beam-datagen {doc['package_version']}",
             f"  source  {json.dumps(doc['source'], sort_keys=True)}",
             f"  files   {info.shard_format}", "  features:"]
    for f in info.read_spec:
        shape = "[*]" if f.is_variable else str(list(f.shape))
        lines.append(f"    {f.name:<20} {f.dtype:<6} {shape:<10} from {f.source}")
    if info.transform:  # the features above are what a reader gets: its outputs
        steps = {k: v for k, v in info.transform.items()
                 if k in ("preprocessing_fn", "normalize", "vocabulary", "bucketize") and v}
        where = ("applied as the shards are read: they hold the raw features"
                 if info.transform_at_read else "the shards hold its outputs")
        lines.append(f"  transform: {json.dumps(steps, sort_keys=True)}, statistics of "
                     f"{info.transform['analyzed_split']}, in {info.transform['transform_fn']}/, "
                     f"{where}; raw features: {', '.join(info.raw_spec.names)}")
    lines.append("  splits:")
    for name, split in info.splits.items():
        lines.append(f"    {name:<8} {split['num_examples']:>9} examples "
                     f"{split['num_bytes'] / 1e6:>10.2f} MB in {len(split['shards'])} shards")
        durations = describe_durations(split.get("durations", {}))
        if durations:
            lines.append(f"             durations: {durations}")
        if "label_counts" in split:  # --label_field or --stratify_by
            lines.append("             labels: " + ", ".join(
                f"{label} {n}" for label, n in sorted(split["label_counts"].items())))
    acc = doc["accounting"]
    lines.append(f"  accounting: {json.dumps(acc, sort_keys=True)}")
    duplicates = doc.get("duplicates")
    if duplicates:  # --duplicates warn or fail (transforms/checks/duplicates.py)
        across = ", ".join(f"{pair} {n}" for pair, n in duplicates["across_splits"].items())
        within = ", ".join(f"{split} {n}" for split, n in duplicates["within_split"].items())
        near = (f" ({duplicates['near']} of them near copies)" if duplicates.get("near")
                else "")
        similar = (f"; {duplicates['similar']} pairs alike but not one recording"
                   if duplicates.get("similar") else "")
        lines.append(f"  duplicates: {duplicates['groups']} groups of copies{near} "
                     f"(across splits: {across or 'none'}; within: {within or 'none'}){similar}"
                     + (f" in {duplicates['file']}" if duplicates["file"] else ""))
    if doc["failures"]["count"]:
        lines.append(f"  failures: {doc['failures']['count']} in {doc['failures']['file']}")
        path = f"{output_dir.rstrip('/')}/{doc['failures']['file']}"
        with tf.io.gfile.GFile(path) as f:
            for line in f.read().splitlines()[:failures]:
                r = json.loads(line)
                lines.append(f"    {r['stage']}: {r['url']} key={r['key']} "
                             f"{r['error_type']}: {r['message'][:120]}")
    for name, split in info.splits.items():
        if not split["num_examples"] or examples <= 0:
            continue
        lines.append(f"  first examples of {name}:")
        for i, example in enumerate(reader.load(output_dir, name, batch_size=None).take(examples)):
            lines.append(f"    [{i}]")
            for key in info.read_spec.names:
                value = example[key]
                value = value.numpy() if hasattr(value, "numpy") else value.to_list()
                lines.append(f"      {key:<20} {_show(value)}")
    return "\n".join(lines)


def write_report(output_dir: str, path: str, text: str, max_examples: int) -> None:
    """The picture of the dataset at `path`: a PNG, or HTML (by its suffix)."""
    import tensorflow as tf

    from transforms.report.figure import draw
    from transforms.report.gather import gather
    from transforms.report.page import html_page

    view = gather(output_dir, max_examples=max_examples)
    png = draw(view)
    data = (html_page(view, text, png).encode("utf-8") if path.endswith((".html", ".htm"))
            else png)
    with tf.io.gfile.GFile(path, "wb") as f:
        f.write(data)


def run(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output_dir", help="A pipeline's --output directory.")
    parser.add_argument("--examples", type=int, default=2, help="Examples to decode per split.")
    parser.add_argument("--failures", type=int, default=3, help="Dead letters to show.")
    parser.add_argument("--report", default="",
                        help="Also draw the dataset into this file: .png, or .html (the summary "
                             "and the picture in one page).")
    parser.add_argument("--report_examples", type=int, default=5000,
                        help="The duration and start-time histograms read up to this many "
                             "examples per split (sizes come from every example's index entry).")
    args = parser.parse_args(argv)
    if args.report and not args.report.endswith((".png", ".html", ".htm")):
        sys.exit(f"error: --report {args.report}: name a .png or .html file")
    try:
        # TensorFlow's C++ chatter (CUDA probing, twice) would bury the summary.
        with native_stderr_silenced():
            text = describe_dataset(args.output_dir, args.examples, args.failures)
            if args.report:
                write_report(args.output_dir, args.report, text, args.report_examples)
    except (FileNotFoundError, ValueError) as e:
        sys.exit(f"error: {e}")
    print(text)
    if args.report:
        print(f"report: {args.report}")


if __name__ == "__main__":
    run(sys.argv[1:])
