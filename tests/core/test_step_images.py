"""Images in a prompt (``prompt=[text, Image(...)]``), each kind that takes them with its real
CLI against ``jigs_testing``'s model server: the image's bytes reach the model request; the step
log records its digest, never its bytes; a kind that takes none refuses at call time."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from jigs import RunMetadata
from jigs.errors import PromptError
from jigs.models import Image
from jigs_testing import ModelServer, text
from proxied_kinds import proxied

pytestmark = pytest.mark.anyio

KEY_ENV = "JIGS_IMAGES_TEST_KEY"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _png() -> bytes:
    """A real 2x2 PNG whose pixels are unique to this test (a marker in the bytes)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"\x00\x12\x34\x56\x78\x9a\xbc" * 2
    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


@pytest.fixture
def scratch(scratch_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(KEY_ENV, "sk-model-key-for-images-test-1234567")
    return scratch_home


@pytest.mark.parametrize("kind", ["claude", "codex", "pi"])
async def test_an_images_bytes_reach_the_model_request(
    kind: str,
    require_cli: Callable[[str], Path],
    scratch: Path,
    worktree: Path,
    tmp_path: Path,
    jigs_data_dir: Path,
) -> None:
    from jigs.steps import run_agent

    require_cli(kind)
    png = _png()
    shot = tmp_path / "screenshot.png"
    shot.write_bytes(png)
    async with ModelServer([text("I see it")]) as server:
        result = await run_agent(
            harness=proxied(kind, KEY_ENV, "images")(server),
            cwd=worktree,
            prompt=["What does the failing test's screenshot show?", Image(shot)],
            run=RunMetadata(workflow_run_id=f"images-{kind}"),
            agents_env=["IS_SANDBOX"] if kind == "claude" else [],
        )
        body = json.dumps(server.model_requests[0].body)
    assert result.text == "I see it"
    assert base64.b64encode(png).decode() in body, body[:3000]
    logs = list(jigs_data_dir.glob("runs/*/*/events/*.jsonl"))
    lines = [json.loads(line) for log in logs for line in log.read_text().splitlines()]
    noted = [line for line in lines if line.get("type") == "prompt-images"]
    digest = hashlib.sha256(png).hexdigest()
    assert [i["sha256"] for n in noted for i in n["images"]] == [digest]
    assert base64.b64encode(png).decode() not in json.dumps(lines)


async def test_a_kind_without_images_refuses_them_before_anything_starts(worktree: Path) -> None:
    from jigs import harnesses
    from jigs.steps import run_agent

    with pytest.raises(PromptError, match="takes no images"):
        await run_agent(
            harness=harnesses.echo(),
            cwd=worktree,
            prompt=["look", Image(_png())],
            run=RunMetadata(workflow_run_id="images-echo"),
        )
    for bad in (["only", b"bytes"], [Image(_png())], Image(_png()), 7):
        with pytest.raises(PromptError):
            await run_agent(
                harness=harnesses.echo(),
                cwd=worktree,
                prompt=bad,  # type: ignore[arg-type]
                run=RunMetadata(workflow_run_id="images-bad"),
            )


async def test_a_runners_model_takes_images_in_a_later_call(
    require_cli: Callable[[str], Path], scratch: Path, worktree: Path
) -> None:
    """Codex's app server starts with the runner: the images dir it reads exists from then."""
    from jigs.models import generate_text
    from jigs.steps import create_agent_runner

    require_cli("codex")
    png = _png()
    async with ModelServer([text("first"), text("second")]) as server:
        async with create_agent_runner(
            proxied("codex", KEY_ENV, "images")(server),
            cwd=worktree,
            run=RunMetadata(workflow_run_id="images-runner"),
        ) as runner:
            await generate_text(runner.model, prompt="hello")
            result = await generate_text(
                runner.model, prompt=["and this mock-up?", Image(png, "image/png")]
            )
        body = json.dumps(server.model_requests[1].body)
    assert result.text == "second"
    assert base64.b64encode(png).decode() in body
