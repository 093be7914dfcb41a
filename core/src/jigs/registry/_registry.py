"""Finding harness kinds: pluggy plus entry points (``jigs.harnesses``), read through
:func:`importlib.metadata.entry_points` (:func:`entry_points`, the one reader of every jigs group).

Entry points are listed first and loaded lazily, one kind at a time, each in its own try/except:
a broken plugin records an error naming its distribution, entry point and exception, and every
other kind keeps working. The same kind from two distributions is refused. ``JIGS_DISABLE_PLUGINS``
(comma-separated kinds) blocks named ones. A kind a distribution also declares in the group
``jigs.test_kinds`` (jigs' own echo kind) is a test kind: it resolves by name like any other, but
the listings (:meth:`Registry.kinds`, so ``jigs harnesses``, ``jigs doctor``, ``jigs demo``)
leave it out unless ``JIGS_SHOW_TEST_KINDS=1`` (the test suite sets it). A kind built for
another plugin contract than this core's (:data:`jigs.plugin.CONTRACT_VERSION`; see
:mod:`jigs.registry._contract`) is refused with :class:`~jigs.errors.HarnessContractError`,
whether it comes from an entry point or :meth:`Registry.register`; one missing a required hook
or with a bad declaration (:func:`jigs.registry._contract.verify_kind`) is refused with
:class:`~jigs.errors.HarnessPluginError` (through :meth:`Registry.get`, a
:class:`~jigs.errors.HarnessNotFoundError` carrying it as ``load_error``).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pluggy

from jigs.errors import HarnessContractError, HarnessNotFoundError, HarnessPluginError
from jigs.plugin import Harness, HarnessSpecs
from jigs.registry._contract import check_contract, verify_kind

__all__ = [
    "GROUP",
    "KIND_NAME",
    "SHOW_TEST_KINDS",
    "TEST_GROUP",
    "PluginInfo",
    "Registry",
    "default_registry",
    "distribution_of",
    "entry_points",
    "hidden_test_kinds",
]

EntryPoint = importlib.metadata.EntryPoint

GROUP = "jigs.harnesses"
#: The group a distribution also declares a kind in to make it a test kind (jigs' echo kind).
TEST_GROUP = "jigs.test_kinds"
#: Set (to anything but ``0``) to list the test kinds too.
SHOW_TEST_KINDS = "JIGS_SHOW_TEST_KINDS"
#: What a harness kind name looks like (an entry point name); anything else is never echoed.
KIND_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")


@dataclass(frozen=True)
class PluginInfo:
    """What ``jigs harnesses`` shows for one kind."""

    kind: str
    distribution: str | None
    version: str | None
    entry_point: str | None
    has_model: bool | None = None
    display_name: str | None = None
    error: str | None = None
    disabled: bool = False
    #: The plugin contract the kind declares (None: not loaded, or declares none).
    contract: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "display_name": self.display_name,
            "distribution": self.distribution,
            "version": self.version,
            "entry_point": self.entry_point,
            "has_model": self.has_model,
            "disabled": self.disabled,
            "contract": self.contract,
            "error": self.error,
        }


def entry_points(group: str) -> list[EntryPoint]:
    """The entry points of ``group`` of every installed distribution, as importlib.metadata
    finds them (the first distribution of a name on ``sys.path`` wins), read afresh on every
    call: a kind or store installed a moment ago is found."""
    return list(importlib.metadata.entry_points(group=group))


def hidden_test_kinds() -> frozenset[str]:
    """The test kinds (entry points in :data:`TEST_GROUP`) that jigs' listings leave out (they
    still resolve by name): none when ``JIGS_SHOW_TEST_KINDS`` is set to anything but ``0``."""
    if os.environ.get(SHOW_TEST_KINDS, "") not in ("", "0"):
        return frozenset()
    return frozenset(ep.name for ep in entry_points(TEST_GROUP))


def distribution_of(ep: EntryPoint) -> tuple[str | None, str | None]:
    """The ``Name`` and ``Version`` of the distribution declaring ``ep`` (None when unknown)."""
    dist = ep.dist
    if dist is None:
        return None, None
    return dist.metadata["Name"], dist.version


class Registry:
    """The installed harness kinds. Thread-safe; loads each kind at most once."""

    def __init__(self, *, group: str = GROUP, disabled: Iterable[str] | None = None) -> None:
        self.group = group
        if disabled is None:
            disabled = os.environ.get("JIGS_DISABLE_PLUGINS", "").split(",")
        self.disabled = frozenset(d.strip() for d in disabled if d.strip())
        self._pm = pluggy.PluginManager("jigs")
        self._pm.add_hookspecs(HarnessSpecs)
        self._lock = threading.RLock()
        self._eps: dict[str, list[EntryPoint]] | None = None
        self._hidden: frozenset[str] = frozenset()
        self._loaded: dict[str, Harness[Any]] = {}
        self._errors: dict[str, str] = {}
        self._modules: dict[str, list[Harness[Any]]] = {}
        #: kinds refused for their contract: the harness and its distribution's name and version
        self._refused: dict[str, tuple[Harness[Any], str | None, str | None]] = {}

    def _entry_points(self) -> dict[str, list[EntryPoint]]:
        if self._eps is None:
            found: dict[str, list[EntryPoint]] = {}
            for ep in entry_points(self.group):
                found.setdefault(ep.name, [])
                # the same distribution can appear twice on sys.path; count distinct ones
                if all(distribution_of(other) != distribution_of(ep) for other in found[ep.name]):
                    found[ep.name].append(ep)
            self._eps = found
            self._hidden = hidden_test_kinds()
        return self._eps

    def kinds(self) -> list[str]:
        """Installed kinds (loaded or not), sorted, including programmatic registrations; test
        kinds only with ``JIGS_SHOW_TEST_KINDS=1`` (:func:`get` resolves them either way)."""
        with self._lock:
            return sorted((set(self._entry_points()) | set(self._loaded)) - self._hidden)

    def enabled_kinds(self) -> list[str]:
        """Installed kinds not blocked by ``JIGS_DISABLE_PLUGINS``."""
        return [k for k in self.kinds() if k not in self.disabled]

    def register(self, harness: Harness[Any]) -> None:
        """Register a harness object directly (tests, embedded kinds), verified as an entry
        point's kind is (:func:`jigs.registry._contract.verify_kind`). Raises
        :class:`~jigs.errors.HarnessContractError` for a kind built for another contract and
        :class:`~jigs.errors.HarnessPluginError` for one missing a hook."""
        verify_kind(harness)
        with self._lock:
            if harness.kind in self._loaded and self._loaded[harness.kind] is not harness:
                raise HarnessPluginError(f"harness kind {harness.kind!r} is already registered")
            self._loaded[harness.kind] = harness

    def get(self, kind: str) -> Harness[Any]:
        """The harness for ``kind``, loading its plugin on first use.

        Raises :class:`HarnessNotFoundError` (a ``LookupError``) for an unknown, disabled or
        broken kind, with the installed kinds and the fix; its subclass
        :class:`~jigs.errors.HarnessContractError` for a kind built for another plugin contract.
        """
        with self._lock:
            if kind in self._loaded:
                return self._loaded[kind]
            if kind in self.disabled:
                raise HarnessNotFoundError(kind, self.kinds(), disabled=True)
            eps = self._entry_points().get(kind)
            if not eps:
                raise HarnessNotFoundError(kind, self.kinds())
            if kind not in self._errors:
                self._load(kind, eps)
            if kind in self._refused:
                harness, dist, version = self._refused[kind]
                check_contract(harness, distribution=dist, distribution_version=version)
            if kind in self._errors:
                raise HarnessNotFoundError(kind, self.kinds(), load_error=self._errors[kind])
            return self._loaded[kind]

    def _load(self, kind: str, eps: list[EntryPoint]) -> None:
        if len(eps) > 1:
            dists = ", ".join(sorted(str(distribution_of(ep)[0]) for ep in eps))
            self._errors[kind] = (
                f"kind {kind!r} is provided by more than one distribution ({dists}); "
                f"uninstall all but one"
            )
            return
        ep = eps[0]
        dist, version = distribution_of(ep)
        where = f"entry point {ep.name} = {ep.value} (distribution {dist})"
        try:
            collected = self._harnesses_of(ep.value)
        except Exception as exc:  # a broken plugin must not break the others
            self._errors[kind] = f"{where} failed: {type(exc).__name__}: {exc}"
            return
        matching = [h for h in collected if isinstance(h, Harness) and h.kind == kind]
        if len(matching) != 1:
            got = ", ".join(repr(getattr(h, "kind", h)) for h in collected) or "nothing"
            self._errors[kind] = (
                f"{where} must register exactly one Harness with kind {kind!r}; it registered {got}"
            )
            return
        try:
            check_contract(matching[0], distribution=dist, distribution_version=version)
        except HarnessContractError as exc:
            self._errors[kind] = str(exc)
            self._refused[kind] = (matching[0], dist, version)
            return
        try:  # the hooks, as pluggy verifies hookimpls: refused here, never at the first turn
            verify_kind(matching[0])
        except Exception as exc:  # a broken plugin must not break the others
            self._errors[kind] = f"{where} refused: {exc}"
            return
        self._loaded[kind] = matching[0]

    def _harnesses_of(self, value: str) -> list[Harness[Any]]:
        """Import a plugin module once and collect what its hook registers (a module may serve
        several kinds through several entry points)."""
        if value not in self._modules:
            module = importlib.import_module(value.split(":", 1)[0])
            self._pm.register(module, name=f"{self.group}:{value}")
            caller = self._pm.subset_hook_caller(
                "jigs_register_harnesses",
                remove_plugins=[p for p in self._pm.get_plugins() if p is not module],
            )
            collected: list[Harness[Any]] = []
            caller(register=collected.append)
            self._modules[value] = collected
        return self._modules[value]

    def info(self, kind: str) -> PluginInfo:
        """Load ``kind`` if needed and describe it, with its load error if any."""
        eps = self._entry_points().get(kind, [])
        dist, version = distribution_of(eps[0]) if eps else (None, None)
        ep_text = f"{eps[0].name} = {eps[0].value}" if eps else None
        try:
            harness = self.get(kind)
        except HarnessNotFoundError as exc:
            return PluginInfo(
                kind,
                dist,
                version,
                ep_text,
                error=str(exc) if exc.disabled else (exc.load_error or str(exc)),
                disabled=kind in self.disabled,
                contract=exc.contract if isinstance(exc, HarnessContractError) else None,
            )
        return PluginInfo(
            kind,
            dist,
            version,
            ep_text,
            has_model=harness.has_model,
            display_name=harness.display_name,
            contract=harness.contract,
        )

    def all_info(self) -> list[PluginInfo]:
        return [self.info(kind) for kind in self.kinds()]


_default: list[Registry] = []
_default_lock = threading.Lock()


def default_registry() -> Registry:
    """The process-wide registry (created on first use)."""
    with _default_lock:
        if not _default:
            _default.append(Registry())
        return _default[0]
