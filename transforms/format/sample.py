"""The Sample: a plain dict of field name to value (the WebDataset convention).

Beam-free. `__key__` is the sample's stable id and `__url__` where it came from;
a segment of a recording (transforms/recipe/segments.py) also has `__span__`,
the part of its media it is. Every other entry is a data field (`flac`, `cls`,
`json`, or `family:qualifier` for Bigtable). Sources produce Samples; nothing
downstream knows the source.

A field's value is bytes as a rule. A reader asked to may leave a large field
where it is stored, as a `StoredBytes` (transforms/sources/stored.py), for a
decoder to open and stream (transforms/media/decoded.py `media_file`);
`read_stored` gives everything else its bytes before the recipe reads them.

Names are text. Where a source meets names that are bytes in no encoding (a
binary Bigtable row key, a tar member or file name that is not UTF-8), they
are written losslessly with `escape`: UTF-8 as it is, a backslash doubled and
every other byte as `\\xNN`. `codecs.escape_decode(text.encode())[0]` gives
the bytes back.
"""

from __future__ import annotations

import abc
import hashlib
import json
from typing import IO, Any, Collection, Mapping

import numpy as np

from transforms.format.text import preview

__all__ = ["CHANNEL", "CONTENT_KEY_PREFIX", "KEY", "SOURCE_KEY", "SPAN", "URL", "StoredBytes",
           "as_sample",
           "content_key", "data_fields", "escape", "escape_name", "field_text", "field_value",
           "is_text", "keyed", "read_stored", "FieldReader"]

KEY = "__key__"
URL = "__url__"
SPAN = "__span__"
# The channel of its file a sample's audio is on, where its input says so (a
# Lhotse supervision on one channel of a stereo telephone call): a cut decodes
# that channel alone, whatever --channel chooses for the others.
CHANNEL = "__channel__"
# The field of a cut example naming the sample (the recording) it was cut from.
SOURCE_KEY = "source_key"
# The key `content_key` gives a dict that has none.
CONTENT_KEY_PREFIX = "content-"


class StoredBytes(abc.ABC):
    """A field's bytes where they are stored, read when opened."""

    size: int

    @abc.abstractmethod
    def open(self) -> IO[bytes]:
        """A new seekable binary file of exactly these bytes; the caller closes it."""

    def read(self) -> bytes:
        """The bytes, whole."""
        with self.open() as f:
            return f.read()

    def __len__(self) -> int:
        return self.size


def read_stored(sample: Mapping[str, Any], keep: Collection[str] = ()) -> Mapping[str, Any]:
    """The sample with every StoredBytes field read into bytes but those in `keep`
    (the fields a decoder streams); the sample itself when there is none."""
    stored = [name for name, value in sample.items()
              if isinstance(value, StoredBytes) and name not in keep]
    if not stored:
        return sample
    return {**sample, **{name: sample[name].read() for name in stored}}


def escape(raw: bytes) -> str:
    """Bytes as text, losslessly (see the module docstring): b"caf\\xe9" -> "caf\\\\xe9"."""
    return raw.replace(b"\\", b"\\\\").decode("utf-8", "backslashreplace")


def is_text(name: str) -> bool:
    """Whether a str is valid Unicode text: not a name decoded from non-UTF-8
    bytes with Python's surrogateescape (os.listdir, tarfile do that)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def escape_name(name: str) -> str:
    """A name that is not text (`is_text`) as `escape` gives its bytes."""
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate no decoding made
        raw = name.encode("utf-8", "surrogatepass")
    return escape(raw)


# A byte-order mark: Windows tools (Notepad, PowerShell's Out-File) start text files with it.
_BOM = "\ufeff"


def field_text(value: Any) -> str:
    """A field's value as text: the one rule by which numbers, bools, split keys,
    labels, `--where`, `--split_column` and `string` features read a value.

    Text, or bytes decoded as UTF-8 (an invalid byte as U+FFFD), with a leading
    byte-order mark and surrounding whitespace (spaces, tabs, CR, LF) removed:
    `echo 3 > KEY.cls` writes `3\\n`, Windows tools `\\ufeff3\\r\\n`, and both
    are `3`, as the number they hold is. A bool is `true`/`false` and a number
    its decimal text, as JSON writes them; a JSON object or list its JSON text,
    keys sorted. A null (JSON `null`) has no text: ValueError, so it never
    passes as the string "None".
    """
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value).decode("utf-8", "replace")
    if isinstance(value, str):
        return value.removeprefix(_BOM).strip()
    if value is None:
        raise ValueError("the value is null")
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, float, np.integer, np.floating)):
        return str(value)
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True)
    raise ValueError(f"a {type(value).__name__} has no text form")


def field_value(value: Any) -> Any:
    """A value parsed from text (a JSON member, a CSV cell) as a field holds it:
    text as UTF-8 bytes, as a tar member's; an object as its JSON, keys sorted;
    numbers, bools and lists of them as they are."""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True).encode("utf-8")
    return value


def as_sample(element: Any, nor: str = "") -> dict:
    """A PCollection's element as a Sample (`keyed`); TypeError saying what it
    is otherwise, with a preview of it (and `nor`, what else the caller takes)."""
    if not isinstance(element, Mapping):
        taken = f"neither a Sample (a dict of field name to value) nor {nor}" if nor else (
            "not a Sample (a dict of field name to value)")
        raise TypeError(f"a {type(element).__name__} is {taken}: {preview(element)}")
    return keyed(element)


def keyed(element: Mapping[str, Any]) -> dict:
    """A dict as a Sample: itself when it has a text `__key__`, else a copy
    keyed by its `content_key`, so a dict built by any Beam step can be split,
    ordered and named in a dead letter. TypeError, with a preview of the
    element, for a field name that is not text (pandas' integer columns) or a
    key that is neither text nor absent."""
    names = [name for name in element if not isinstance(name, str)]
    if names:
        raise TypeError(f"field names must be text, got {names[0]!r} in "
                        f"{preview(dict(element))}")
    if KEY not in element:
        return {KEY: content_key(element), **element}
    if not isinstance(element[KEY], str):
        raise TypeError(f"__key__ must be text, got {preview(element[KEY])} in "
                        f"{preview(dict(element))}")
    return dict(element)


def content_key(value: Mapping[str, Any] | bytes) -> str:
    """`content-<16 hex digits>`: a digest of a dict's fields or of bytes, the
    same on every run and machine."""
    digest = hashlib.blake2b(digest_size=8, person=b"datagen-content")
    if isinstance(value, Mapping):
        for name in sorted(value):
            digest.update(name.encode("utf-8", "surrogatepass") + b"\0")
            digest.update(_content_bytes(value[name]) + b"\0")
    else:
        digest.update(bytes(value))
    return f"{CONTENT_KEY_PREFIX}{digest.hexdigest()}"


def _content_bytes(value: Any) -> bytes:
    if isinstance(value, np.ndarray):
        return f"{value.dtype.str}{value.shape}".encode() + np.ascontiguousarray(value).tobytes()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return repr(value).encode("utf-8", "surrogatepass")


def data_fields(sample: Mapping[str, Any]) -> list:
    """The sample's data field names (everything but `__key__`, `__url__`, ...)."""
    return [k for k in sample if not k.startswith("__")]


class FieldReader:
    """Reads fields and projections (`json.speaker`, `audio.bytes`) from one sample.

    A projection `field.path.to.value` reads into `field`: a dict (a Parquet
    struct: Hugging Face's audio column is {"bytes", "path"}) as it is, JSON
    text parsed once per sample.
    A name that is itself a field (`data.flac`-style extensions) wins over a
    projection.
    """

    def __init__(self, sample: Mapping[str, Any]):
        self._sample = sample
        self._parsed: dict = {}

    def get(self, source: str) -> Any:
        """The value at `source`; raises KeyError naming what is missing."""
        if source in self._sample:
            return self._sample[source]
        for field, path in self._projections(source):
            obj = self._json(field)
            for i, part in enumerate(path):
                if not isinstance(obj, Mapping) or part not in obj:
                    raise KeyError(
                        f"{source!r}: JSON field {field!r} has no "
                        f"{'.'.join(path[:i + 1])!r}")
                obj = obj[part]
            return obj
        fields = ", ".join(data_fields(self._sample))
        raise KeyError(f"{source!r}: no such field (fields: {fields})")

    def _projections(self, source: str):
        parts = source.split(".")
        for i in range(len(parts) - 1, 0, -1):
            field = ".".join(parts[:i])
            if field in self._sample:
                yield field, parts[i:]
                return

    def _json(self, field: str):
        if field not in self._parsed:
            raw = self._sample[field]
            if isinstance(raw, Mapping):  # a Parquet struct, an Arrow row, JSON read by Beam
                self._parsed[field] = raw
                return raw
            try:
                self._parsed[field] = json.loads(raw)
            except (ValueError, TypeError) as e:
                raise ValueError(f"field {field!r} is not valid JSON: {e}") from None
            except RecursionError:
                raise ValueError(f"field {field!r} is JSON nested too deeply to read") from None
        return self._parsed[field]
