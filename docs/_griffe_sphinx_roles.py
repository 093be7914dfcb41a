"""A griffe extension for the API reference: Sphinx markup in docstrings, rendered.

The docstrings are Sphinx-style (``docstring_style: sphinx``), whose parser reads the field lists
(``:param x:``, ``:raises E:``) but leaves the text's markup alone, so the reference printed
``:class:`~jigs.errors.JitCheckError``` as it is written. When a package is loaded this rewrites
each docstring:

- a cross-reference role (``:class:``, ``:func:``, ``:meth:``, ``:data:``, ``:mod:``,
  ``:attr:``, ``:exc:``, ``:obj:``, ``:const:``) becomes an *optional* autorefs link: its target
  is resolved as Sphinx does, from the documented object's scope (a class's members, then its
  module's names), and it renders as a link where the site documents the target and as plain
  code where it does not (a private module, another package), so ``--strict`` holds. ``~`` shows
  the last component only; ``:role:`title <target>``` shows the title;
- a literal block's marker loses its second colon (``Example::`` -> ``Example:``; a ``::`` alone
  on its line goes): the indented block after it is a Markdown code block already.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

_ROLE = re.compile(
    r":(?:py:)?(?:class|func|meth|data|mod|attr|exc|obj|const):`(?P<body>[^`]+)`",
)
_TITLED = re.compile(r"(?P<title>.*?)\s*<(?P<target>[^<>]+)>\s*$", re.S)


def _resolve(obj: griffe.Object, name: str) -> str:
    """``name`` as a full path, looked up from ``obj``'s scope; as written when it is not there
    (an absolute path, or a name the package does not hold)."""
    head, _, rest = name.partition(".")
    try:
        base = obj.resolve(head)
    except (griffe.GriffeError, KeyError, ValueError):
        return name
    return f"{base}.{rest}" if rest else base


def _link(obj: griffe.Object, body: str) -> str:
    titled = _TITLED.match(body)
    if titled:
        title, target = titled["title"], titled["target"]
    else:
        target = body
        title = body.lstrip("~").rsplit(".", 1)[-1] if body.startswith("~") else body
    target = target.lstrip("~").lstrip(".")
    identifier = html.escape(_resolve(obj, target), quote=True)
    code = f"<code>{html.escape(title)}</code>"
    return f'<autoref identifier="{identifier}" optional>{code}</autoref>'


def _literal_markers(text: str) -> str:
    lines = []
    for line in text.split("\n"):
        if line.strip() == "::":
            continue
        marker = line.endswith("::") and not line.endswith(":::")
        lines.append(line[:-1] if marker else line)
    return "\n".join(lines)


def rewrite(obj: griffe.Object, text: str) -> str:
    """The docstring ``text`` of ``obj`` with its roles and literal markers rendered."""
    return _literal_markers(_ROLE.sub(lambda m: _link(obj, m["body"]), text))


def _rewrite_docstring(obj: griffe.Object) -> None:
    docstring = obj.docstring
    if docstring is None:
        return
    new = rewrite(obj, docstring.value)
    if new != docstring.value:
        docstring.value = new
        docstring.__dict__.pop("parsed", None)  # a cached parse of the old text


def _walk(obj: griffe.Object, seen: set[str]) -> None:
    if obj.path in seen:
        return
    seen.add(obj.path)
    _rewrite_docstring(obj)
    for member in obj.members.values():
        if not member.is_alias:
            _walk(member, seen)  # type: ignore[arg-type]


class SphinxRoles(griffe.Extension):
    """Render the Sphinx roles and literal-block markers of every docstring in a package."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        _walk(pkg, set())
