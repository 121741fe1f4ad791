"""`/attach <image>` in the terminal: the image becomes a context item of the next prompt (issue 29).
The daemon checks it (type, size, the model's vision); here it is only read and encoded."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
               ".webp": "image/webp"}


def image_item(path: str) -> dict[str, Any]:
    """The `image` context item of the file at `path`; ValueError saying what is wrong."""
    p = Path(path.strip()).expanduser()
    mime = IMAGE_TYPES.get(p.suffix.lower())
    if not path.strip():
        raise ValueError("usage: /attach <image file>")
    if mime is None:
        raise ValueError(f"{p.name}: attach a png, jpeg, gif or webp image")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read {p}: {e.strerror or e}") from None
    return {"type": "image", "mimeType": mime, "data": base64.b64encode(data).decode("ascii")}
