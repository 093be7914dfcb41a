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


def _build(tmp_path: Path) -> Path:
    """``mkdocs build --strict`` into a fresh directory: no error, no warning."""
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
    return site


def test_the_site_builds_strictly_with_the_whole_contract(tmp_path: Path) -> None:
    site = _build(tmp_path)
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
        "jigs_register_harnesses",
    ):
        assert name in reference, name
    # the kit's types are the kit's (jigs_testing), the helpers kinds use have a page of theirs
    kit = _text_outside_code((site / "reference/conformance/index.html").read_text())
    for name in ("ConfigFile", "Planted", "config_files_of"):
        assert name in kit, name
    tools = _text_outside_code((site / "reference/plugin-tools/index.html").read_text())
    for name in ("decode_line", "make_dir", "check_env_name", "redact_known"):
        assert name in tools, name
    # the docstring text is there, not only the names
    assert "The CLI this kind runs" in reference
    # the contract's data classes are dataclasses: their constructors are shown, fields in
    # order, defaults included
    signature = re.search(r"TurnLaunch\s*\((.{0,400})", reference, re.S)
    assert signature is not None
    fields = re.findall(r"(\w+)\s*:\s", signature.group(1))
    assert fields[:3] == ["argv", "env", "stdin"], signature.group(1)
    assert re.search(r"exit_grace\s*:\s*float\s*=\s*3\.0", reference)

    # every step's run= and the model protocol have pages of their own
    top = _text_outside_code((site / "reference/jigs/index.html").read_text())
    for name in ("RunMetadata", "workflow_run_id", "attempt", "AgentSessionRef", "store_key"):
        assert name in top, name
    models = _text_outside_code((site / "reference/models/index.html").read_text())
    for name in ("generate_text", "stream_text", "GenerateResult", "LanguageModel", "Usage"):
        assert name in models, name


_RAW_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|data|mod|attr|exc|obj|const):`")


def _text_outside_code(page: str) -> str:
    """A built page's visible text, code blocks and spans left out, entities decoded."""
    page = re.sub(r"<(script|style|pre|code)\b.*?</\1>", " ", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_no_built_page_shows_raw_sphinx_markup(tmp_path: Path) -> None:
    """The docstrings are Sphinx-style: their roles are cross-references (links, or plain code for
    a target the site does not document; docs/_griffe_sphinx_roles.py), a literal block's ``::``
    is not printed, and the CLI table shows no escaping backslash."""
    site = _build(tmp_path)
    raw_roles: dict[str, list[str]] = {}
    stray: dict[str, list[str]] = {}
    for page in sorted(site.rglob("*.html")):
        source = page.read_text()
        name = str(page.relative_to(site))
        roles = [m.group(0) for m in re.finditer(rf"{_RAW_ROLE.pattern}.{{0,60}}", source)]
        roles += [
            m.group(0)
            for m in re.finditer(r":(?:class|func|meth|data|mod|attr|exc|obj):<code>", source)
        ]
        if roles:
            raw_roles[name] = roles
        text = _text_outside_code(source)
        hits = [m.group(0) for m in re.finditer(r".{0,40}(?<!:)::(?![:\w]).{0,20}", text)]
        if hits:
            stray[name] = hits
    assert not raw_roles, raw_roles
    assert not stray, stray
    # the roles became links: a class, a method and a module of the contract
    steps = (site / "reference/steps/index.html").read_text()
    assert re.search(r'<a class="autorefs autorefs-internal"[^>]*href="[^"]*#jigs\.errors\.', steps)
    # the CLI table: no backslash before a pipe or an underscore, in code or in text
    cli = html.unescape((site / "cli/index.html").read_text())
    assert not re.findall(r".{0,30}\\[|_].{0,30}", cli)
    assert "jigs runs prune" in cli


def test_the_kind_authors_guide_lists_every_kit_check_in_order():
    import re
    from pathlib import Path

    from jigs_testing.conformance import CHECKS

    guide = (Path(__file__).parents[2] / "docs/guide/write-a-harness-kind.md").read_text()
    listed = guide.split("Each check is named", 1)[1].split(") and runs alone", 1)[0]
    assert re.findall(r"`(\w+)`", listed.split("in order:", 1)[1]) == list(CHECKS)
