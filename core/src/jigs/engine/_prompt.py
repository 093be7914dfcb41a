"""A step's prompt: a string, or text and :class:`~jigs.models.Image` parts.

:func:`prompt_parts` checks it (only :class:`~jigs.errors.PromptError` comes out) and splits it
into the turn's text (the text parts joined by blank lines) and its images, in order.
:func:`materialise` copies each image into the step's private dir (0600, named by its digest),
where the kind reads it and its sandboxed CLI may too: an image's bytes never travel in an engine
payload, an event or a log, only its digest does.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jigs.errors import JigsError, PromptError
from jigs.models._types import Image
from jigs.plugin import PromptImage

__all__ = ["MAX_IMAGE_BYTES", "materialise", "prompt_parts", "validate_text"]

#: The largest image a prompt may carry (the model APIs' own limits are near it).
MAX_IMAGE_BYTES = 20 * 1024 * 1024
_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
}


def validate_text(prompt: object) -> str:
    """The prompt's text, or :class:`PromptError`: a non-empty string without NUL bytes.
    (A long prompt is fine: kinds pass it through stdin or a file, never one argv element.)"""
    if not isinstance(prompt, str):
        raise PromptError(
            f"the prompt must be a string or a list of text and Image parts, got "
            f"{type(prompt).__name__}"
        )
    if not prompt.strip():
        raise PromptError("the prompt is empty; give the agent something to do")
    if "\x00" in prompt:
        raise PromptError(
            "the prompt contains a NUL byte, which no CLI can receive; remove it (binary data "
            "belongs in a file in the worktree)"
        )
    return prompt


def _part(part: object) -> str | Image:
    if isinstance(part, str | Image):
        return part
    if isinstance(part, Mapping) and part.get("type") == "image":
        try:  # an Image that went through JSON
            return Image.model_validate(dict(part))
        except JigsError as exc:
            raise PromptError(f"an image part of the prompt is not an Image: {exc}") from None
    raise PromptError(
        f"a prompt part must be text (str) or a jigs.models.Image, got {type(part).__name__}"
    )


def prompt_parts(prompt: object) -> tuple[str, tuple[Image, ...]]:
    """``(text, images)`` of a prompt; raises :class:`PromptError`."""
    if isinstance(prompt, str):
        return validate_text(prompt), ()
    if isinstance(prompt, Image):
        prompt = [prompt]
    if isinstance(prompt, bytes | bytearray) or not isinstance(prompt, Sequence):
        raise PromptError(
            f"the prompt must be a string or a list of text and Image parts, got "
            f"{type(prompt).__name__}"
        )
    parts = [_part(p) for p in prompt]
    texts = [p for p in parts if isinstance(p, str) and p.strip()]
    images = tuple(p for p in parts if isinstance(p, Image))
    if not texts:
        raise PromptError("the prompt has no text; say what the agent should do with the images")
    return validate_text("\n\n".join(texts)), images


def _sniff(data: bytes) -> str | None:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _read(image: Image, number: int) -> bytes:
    if image.data is not None:
        data = image.data
    else:
        path = Path(image.path or "")
        try:
            if path.stat().st_size > MAX_IMAGE_BYTES:
                raise PromptError(f"image {number} is over {MAX_IMAGE_BYTES >> 20} MiB")
            data = path.read_bytes()
        except OSError as exc:
            raise PromptError(
                f"image {number} of the prompt cannot be read ({exc.strerror or exc}): {path}"
            ) from None
    if len(data) > MAX_IMAGE_BYTES:
        raise PromptError(f"image {number} is over {MAX_IMAGE_BYTES >> 20} MiB")
    return data


def materialise(images: Sequence[Image], where: Path) -> tuple[PromptImage, ...]:
    """Copy each image into ``where`` (the step's private dir); what the kind gets. Raises
    :class:`PromptError` for an image that cannot be read or is not PNG, JPEG, GIF or WebP."""
    out: list[PromptImage] = []
    for number, image in enumerate(images, 1):
        data = _read(image, number)
        media_type = image.media_type or _sniff(data)
        if media_type is None:
            raise PromptError(
                f"image {number} of the prompt is not PNG, JPEG, GIF or WebP; convert it, or "
                f"name its media_type"
            )
        digest = hashlib.sha256(data).hexdigest()
        path = where / f"{digest[:32]}{_EXTENSIONS[media_type]}"
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        out.append(PromptImage(path=path, media_type=media_type, sha256=digest, size=len(data)))
    return tuple(out)


def image_record(images: Sequence[PromptImage]) -> list[dict[str, Any]]:
    """What the step log and the log keep of the images: digests, types and sizes."""
    return [{"sha256": i.sha256, "media_type": i.media_type, "bytes": i.size} for i in images]
