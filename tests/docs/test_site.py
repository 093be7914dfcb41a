"""The documentation site builds strictly (any warning fails: a broken link, a page missing from
the navigation, a docstring the reference cannot render), and its API reference holds the whole
Harness contract."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

from doc_blocks import ROOT


def test_the_site_builds_strictly_with_the_whole_contract(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(ROOT / "mkdocs.yml"),
            "-d",
            str(site),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "WARNING" not in done.stderr, done.stderr[-4000:]
    for page in ("index.html", "guide/write-a-harness-kind/index.html", "errors/index.html"):
        assert (site / page).is_file(), page

    # every hook and class variable of the Harness contract is in the generated reference
    from jigs.plugin import Harness

    reference = html.unescape(
        re.sub(r"<[^>]+>", " ", (site / "reference/plugin/index.html").read_text())
    )
    hooks = [*Harness.__annotations__]
    hooks += [n for n in vars(Harness) if not n.startswith("_") and n not in hooks]
    assert "launch_turn" in hooks
    assert "kind" in hooks
    missing = [name for name in hooks if not re.search(rf"\b{re.escape(name)}\b", reference)]
    assert not missing, f"not in the reference: {missing}"
    for name in (
        "TurnLaunch",
        "TurnDecoder",
        "SessionTransport",
        "ModelRoute",
        "ConfigFile",
        "jigs_register_harnesses",
    ):
        assert name in reference, name
    # the docstring text is there, not only the names
    assert "The CLI this kind runs" in reference
    # the contract's data classes are msgspec Structs: their constructors are still shown
    # (docs/_griffe_msgspec.py), fields in order, defaults included
    signature = re.search(r"TurnLaunch\s*\((.{0,400})", reference, re.S)
    assert signature is not None
    fields = re.findall(r"(\w+)\s*:\s", signature.group(1))
    assert fields[:3] == ["argv", "env", "stdin"], signature.group(1)
    assert re.search(r"exit_grace\s*:\s*float\s*=\s*3\.0", reference)
