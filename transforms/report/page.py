"""The report as one HTML page: the text summary, the picture, and every frame
and audio clip in the picture again with the example it came from (split,
source key and times, label), so a strange one can be looked up.
"""

from __future__ import annotations

import base64
import html
import io

from PIL import Image

from transforms.report.figure import clip_png
from transforms.report.gather import DatasetView

__all__ = ["html_page"]


def _data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _thumbnail_png(image) -> bytes:
    out = io.BytesIO()
    Image.fromarray(image[..., 0] if image.shape[-1] == 1 else image).save(out, format="PNG")
    return out.getvalue()


def _figure(kind: str, number: int, png: bytes, split: str, caption: str, source: str) -> str:
    lines = [f"<b>{html.escape(split)}</b>", *map(html.escape, caption.splitlines())]
    if source and source not in caption.splitlines():
        lines.append(f"source <code>{html.escape(source)}</code>")
    return (f"<figure id='{kind}-{number}'><img alt='{kind} {number}' src='{_data_url(png)}'>"
            f"<figcaption>{'<br>'.join(lines)}</figcaption></figure>")


def html_page(view: DatasetView, text: str, png: bytes) -> str:
    """The page (module docstring)."""
    frames = [_figure("frame", i, _thumbnail_png(t.image), t.split, t.caption, t.source)
              for i, t in enumerate(view.thumbnails)]
    clips = [_figure("audio", i, clip_png(c), c.split, c.caption, c.source)
             for i, c in enumerate(view.audio)]
    family = [_figure("copy", i, clip_png(c), c.split, c.caption, c.source)
              for i, c in enumerate(view.family)]
    sections = "".join(
        f"<h2>{title}</h2><div class=grid>{''.join(items)}</div>"
        for title, items in (("Frames in the picture", frames), ("Audio in the picture", clips),
                             ("An original beside its copies", family))
        if items)
    return (f"<!doctype html><meta charset=utf-8><title>{html.escape(view.root)}</title>"
            "<style>.grid{display:flex;flex-wrap:wrap;gap:8px}figure{margin:0;font:11px sans-serif}"
            "figure img{max-width:320px}</style>"
            f"<pre>{html.escape(text)}</pre><img alt='dataset report' src='{_data_url(png)}'>"
            f"{sections}\n")
