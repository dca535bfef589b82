"""Small text helpers the flags and the error messages share (Beam-free)."""

from __future__ import annotations

from typing import Any

__all__ = ["comma_list", "preview"]


def comma_list(text: str) -> tuple[str, ...]:
    """A comma-separated flag's items: 'a, b,,c ' -> ('a', 'b', 'c')."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def preview(value: Any, limit: int = 60) -> str:
    """`repr(value)`, cut to `limit` characters with an ellipsis: a value quoted in
    an error message, whatever its size."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"
