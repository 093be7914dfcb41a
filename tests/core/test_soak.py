"""The soak's short version (issue 35): a worker runs echo steps and real-CLI steps with
crashes, deadlines, cancellations, stray grandchildren and API errors mixed in; afterwards it
holds no more file descriptors, sockets, namespaces, threads, processes or temp dirs than after
its warm-up, and every outcome is typed. The long run is ``benchmarks/soak.py`` itself."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.real_cli("claude"),
    pytest.mark.real_cli("codex"),
    pytest.mark.real_cli("pi"),
]

SOAK = Path(__file__).resolve().parents[2] / "benchmarks" / "soak.py"


def test_a_short_soak_leaves_nothing_behind_and_types_every_outcome(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    result = subprocess.run(
        [sys.executable, str(SOAK), "--echo", "14", "--real", "5", "--concurrency", "2", "--check"],
        cwd=SOAK.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr[-3000:]
    assert re.search(r"^steps run: 29 ", out, re.MULTILINE), out
    # every fault happened and came back as its type (the rotation is fixed)
    for outcome in ("echo AgentCrashedError", "echo AgentTimeoutError", "echo cancelled"):
        assert re.search(rf"^\s+2  {outcome}$", out, re.MULTILINE), out
    for kind in ("claude", "codex", "pi"):
        assert re.search(rf"^\s+2  {kind} ok$", out, re.MULTILINE), out
        assert re.search(rf"^\s+1  {kind} AgentTimeoutError$", out, re.MULTILINE), out
        assert re.search(rf"^\s+1  {kind} cancelled$", out, re.MULTILINE), out
    assert "untyped" not in out
