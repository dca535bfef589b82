"""Noise corpora for augmentation: tar shards of noise recordings, listed once at launch.

`list_noise(patterns)` reads each uncompressed tar file's headers, seeking
past the members' data, and probes each audio member's header for its
length: a `NoiseRecording` per member (its key, where its bytes lie as a
StoredMember, its seconds). The list is the job's configuration, so every
worker draws from the same recordings in the same order; a worker reads a
recording only when a copy uses it (transforms/media/augment.py keeps a
bounded cache of decoded ones). A member that does not probe as audio, a
compressed tar (whose members cannot be read where they lie), or a corpus of
no recording stops the job before any work, naming it.
"""

from __future__ import annotations

import functools
import posixpath
import tarfile
from typing import Sequence

from transforms.media.audio import probe_audio
from transforms.media.augment import NoiseRecording
from transforms.media.decoded import MediaError
from transforms.sources.compression import codec_of_name
from transforms.sources.file_match import as_patterns, match_files
from transforms.sources.input_files import open_input
from transforms.sources.stored import StoredMember

__all__ = ["AUDIO_EXTENSIONS", "list_noise"]

AUDIO_EXTENSIONS = frozenset({"flac", "wav", "ogg", "mp3", "opus", "m4a"})


@functools.lru_cache(maxsize=8)
def _listed(patterns: tuple) -> tuple:
    recordings = []
    for path in match_files(patterns):
        if codec_of_name(path) is not None:
            raise ValueError(f"noise corpus {path}: a compressed tar's members cannot be read "
                             "where they lie; give it uncompressed")
        with open_input(path) as f, tarfile.open(fileobj=f, mode="r:") as tar:
            members = [m for m in tar if m.isfile() and m.name.rsplit(".", 1)[-1].lower()
                       in AUDIO_EXTENSIONS]
        for member in members:
            stored = StoredMember(path, member.offset_data, member.size)
            try:
                frames, rate = probe_audio(stored, name=member.name)
            except MediaError as e:
                raise ValueError(f"noise corpus {path}, member {member.name}: not audio "
                                 f"({e})") from None
            key = posixpath.basename(member.name).split(".", 1)[0]
            recordings.append(NoiseRecording(key, stored, frames / rate))
    if not recordings:
        raise ValueError(f"noise corpus {', '.join(patterns)}: no audio member "
                         f"({', '.join(sorted(AUDIO_EXTENSIONS))}) in its tar files")
    return tuple(recordings)


def list_noise(patterns: str | Sequence[str]) -> tuple:
    """The NoiseRecordings of the tar files matching `patterns`, in file and
    member order; ValueError naming what cannot be one (module docstring)."""
    return _listed(tuple(as_patterns(patterns)))
