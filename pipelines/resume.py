"""Which earlier work a run picks up (--resume, --retry_failed), decided by the
launcher before any work: the run's folder, fresh or an unfinished run's to
continue, and the receipts it may reuse (transforms/writer/ledger.py, where
the job reuses them).

    run, picked_up = plan_run_folder(output, fingerprint, options, recipe,
                                     resume=True, retry_failed=False)
    start_run(run, fingerprint, options, recipe)    # marks the folder with the recipe

Earlier work of another recipe is refused in one line naming what changed:
the flags when both runs were jobs', else the recipe's parts.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from apache_beam.io.filesystems import FileSystems

from transforms.format import manifest
from transforms.writer.ledger import RunFolder, deciding, deciding_recipe

__all__ = ["flag_differences", "plan_run_folder", "recipe_differences", "start_run"]


def flag_differences(earlier: Mapping[str, Any], now: Mapping[str, Any]) -> list:
    """'--window_s 1.0 (was 2.0)' for each recorded flag that differs."""
    earlier_deciding, now_deciding = deciding(earlier), deciding(now)
    return [f"--{name} {now.get(name)!r} (was {earlier.get(name)!r})"
            for name in sorted(set(earlier_deciding) | set(now_deciding))
            if earlier_deciding.get(name) != now_deciding.get(name)]


def recipe_differences(earlier: Mapping[str, Any], now: Mapping[str, Any],
                       path: str = "") -> list:
    """'cut.windows.window_s 1.0 (was 2.0)' for each deciding part of two
    recipe descriptions that differs (a corpus's recordings by its name)."""
    if not path:
        earlier, now = deciding_recipe(earlier), deciding_recipe(now)
    found = []
    for name in sorted(set(earlier) | set(now)):
        before, after = earlier.get(name), now.get(name)
        where = f"{path}.{name}" if path else name
        if before == after:
            continue
        if name in ("noise", "rirs") and path == "cut.augment":
            found.append(f"the {'RIR' if name == 'rirs' else name} corpus's recordings")
        elif isinstance(before, dict) and isinstance(after, dict):
            found += recipe_differences(before, after, where)
        else:
            found.append(f"{where} {after!r} (was {before!r})")
    return found




def _read_json(path: str) -> dict | None:
    try:
        with FileSystems.open(path) as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None


def _run_folders(output: str) -> list:
    """(folder, run.json) of the unfinished runs in `output`."""
    pattern = RunFolder.marker_in(FileSystems.join(output, f"{manifest.TEMP_PREFIX}*"))
    found = []
    for metadata in FileSystems.match([pattern])[0].metadata_list:
        run = _read_json(metadata.path)
        if run is not None:
            found.append((metadata.path.rsplit("/", 1)[0], run))
    return found


def _another_recipe(flag: str, what: str, earlier: Mapping[str, Any],
                    options: Mapping[str, Any], recipe: Mapping[str, Any],
                    advice: str) -> ValueError:
    """The one-line refusal of earlier work of another recipe, naming what
    changed: the flags, when both runs were jobs', else the recipe's parts."""
    if "recipe" not in earlier:
        changed = ["a version that recorded no recipe"]
    else:
        changed = ((flag_differences(earlier.get("options", {}), options)
                    if options and earlier.get("options") else [])
                   or recipe_differences(earlier["recipe"], recipe)
                   or ["the source or the feature spec"])
    return ValueError(f"{flag}: {what} another recipe: {', '.join(changed)}; "
                      f"run without {flag} to {advice}")


def plan_run_folder(output: str, fingerprint: str, options: Mapping[str, Any],
                    recipe: Mapping[str, Any], *, resume: bool,
                    retry_failed: bool) -> tuple[RunFolder, str]:
    """This run's folder, and a line saying what it picks up.

    Without `resume` or `retry_failed`: a fresh folder. Otherwise the unfinished
    run of the same recipe with the most receipts (its folder continues), and
    the published dataset's ledger when its recipe is the same. ValueError, in
    one line naming the flags that changed, when the earlier work is another
    recipe's, or `retry_failed` finds no published dataset.
    """
    if not (resume or retry_failed):
        return RunFolder.fresh(output), ""
    flag = "--retry_failed" if retry_failed else "--resume"
    info = _read_json(FileSystems.join(output, manifest.MANIFEST))  # None: no dataset
    if retry_failed and info is None:
        raise ValueError(f"--retry_failed: {output} holds no published dataset to retry the "
                         "failures of; --resume continues an unfinished run")
    if info is not None and info.get("recipe_fingerprint") != fingerprint:
        raise _another_recipe(flag, f"{output} was written by", info, options, recipe,
                              "replace it")
    runs = _run_folders(output)
    mine = [folder for folder, run in runs if run.get("fingerprint") == fingerprint]
    others = [run for _, run in runs if run.get("fingerprint") != fingerprint]
    if not mine and others and info is None:
        raise _another_recipe(flag, f"the unfinished run in {output} used", others[0], options,
                              recipe, "start afresh")
    counts = {folder: len(FileSystems.match([RunFolder.receipts_in(folder)])[0]
                          .metadata_list) for folder in mine}
    reuse, said = [], []
    folder = max(mine, key=lambda f: (counts[f], f)) if mine else None
    if folder is not None:
        reuse.append(RunFolder.receipts_in(folder))
        said.append(f"{counts[folder]} unit receipts of the unfinished run in {folder}")
    if info is not None and info.get("ledger"):
        reuse.append(FileSystems.join(output, info["ledger"]))
        said.append(f"the published dataset's {info['ledger']}")
    run = RunFolder(folder or RunFolder.fresh(output).temp_dir, tuple(reuse), retry_failed)
    return run, f"{flag}: reusing " + (" and ".join(said) if said else "nothing: a full run")


def start_run(run: RunFolder, fingerprint: str, options: Mapping[str, Any],
              recipe: Mapping[str, Any]) -> None:
    """Marks the run's folder with its recipe, so a later --resume knows it:
    its fingerprint, and to say what changed, its flags and its recipe."""
    with FileSystems.create(RunFolder.marker_in(run.temp_dir)) as f:
        f.write(json.dumps({"fingerprint": fingerprint, "options": dict(options),
                            "recipe": dict(recipe)}, sort_keys=True).encode("utf-8"))
