"""The plugin contract check: is a kind built for the contract this core implements?

:data:`jigs.plugin.CONTRACT_VERSION` is ``"major.minor"``. A kind fits when it declares the same
major and a minor at most this core's (:attr:`jigs.plugin.Harness.contract`). Anything else (a
newer minor, another major, nothing declared, a malformed value) raises
:class:`~jigs.errors.HarnessContractError`.
"""

from __future__ import annotations

import importlib.metadata
import re
from typing import Any

from jigs.descriptors import LIMITS, HarnessDescriptor
from jigs.errors import HarnessContractError, HarnessPluginError
from jigs.plugin import CONTRACT_VERSION, Harness

__all__ = [
    "CHANGES",
    "CORE_RELEASES",
    "GUIDE",
    "check_contract",
    "check_route",
    "core_releases_for",
    "fits",
    "parse",
    "verify_kind",
]

#: The jigs-core releases implementing each contract version, as ``(lowest, first beyond)``
#: release numbers, in release order (what a refusal tells the operator to pin). One entry is
#: added whenever :data:`~jigs.plugin.CONTRACT_VERSION` changes.
CORE_RELEASES: dict[str, tuple[str, str]] = {"2.0": ("0.1", "0.2"), "2.1": ("0.1", "0.2")}

#: Where a kind's author reads the contract (what a refusal points at).
GUIDE = "docs/guide/write-a-harness-kind.md (https://github.com/jigs-dev/jigs-python)"

#: What changed from each earlier contract major, as a refusal of a kind built for it shows.
CHANGES: dict[int, tuple[str, ...]] = {
    1: (
        "limits are declared once, on the descriptor: "
        'limits = {"max_turns": "cli" or "core", ...} replaces the descriptor\'s '
        "supported_limits and the Harness' native_limits",
        "the model endpoint is a part the descriptor composes: "
        "class D(ModelEndpointFields, HarnessDescriptor) (jigs.descriptors; base_url, "
        "api_key_env) or override model_key_env(); model_id() names the model",
        "the registry verifies the hooks: launch_turn and decoder, or open_transport",
        "ConfigFile and Planted moved to jigs_testing; config_files() is a hook of the kit",
        "helpers come from jigs.plugin.tools, never from jigs._* modules",
    ),
}


#: ``major.minor``: ASCII digits, no leading zero, at most 4 each.
_VERSION = re.compile(r"(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})")


def parse(version: object) -> tuple[int, int] | None:
    """``"major.minor"`` as two ints, or None for anything else."""
    if not isinstance(version, str):
        return None
    found = _VERSION.fullmatch(version)
    if found is None:
        return None
    return int(found[1]), int(found[2])


def fits(declared: object, core: str = CONTRACT_VERSION) -> bool:
    """Whether a kind declaring ``declared`` loads on a core implementing ``core``."""
    kind, ours = parse(declared), parse(core)
    if kind is None or ours is None:
        return False
    return kind[0] == ours[0] and kind[1] <= ours[1]


def check_contract(
    harness: Any,
    *,
    distribution: str | None = None,
    distribution_version: str | None = None,
    core: str = CONTRACT_VERSION,
) -> None:
    """Return if ``harness`` (a :class:`~jigs.plugin.Harness`) fits ``core``; raise
    :class:`~jigs.errors.HarnessContractError` naming the kind, what it declares and the
    jigs-core versions that fit otherwise."""
    declared = getattr(harness, "contract", None)
    if fits(declared, core):
        return
    kind = str(getattr(harness, "kind", "?"))
    shown: str | None
    if declared is None:
        shown = None
    elif parse(declared) is not None:
        shown = str(declared)
    elif (  # a short plain string is shown (a version, never a secret); anything else is not
        isinstance(declared, str)
        and len(declared) <= 16
        and declared.isascii()
        and declared.isprintable()
    ):
        shown = f"<malformed {declared!r}, not 'major.minor'>"
    else:  # never echo an arbitrary object; a malformed value is named by its shape
        shown = f"<malformed {type(declared).__name__}, not 'major.minor'>"
    releases = core_releases_for(shown) if shown is not None else None
    raise HarnessContractError(
        kind,
        contract=shown,
        core_contract=core,
        core_version=_core_version(),
        fits=releases,
        distribution=distribution,
        distribution_version=distribution_version,
        changes=_changes_since(declared, core),
        guide=GUIDE,
    )


def _changes_since(declared: object, core: str) -> tuple[str, ...]:
    """What changed between the major ``declared`` names and ``core``'s (empty when unknown)."""
    kind, ours = parse(declared), parse(core)
    if kind is None or ours is None or kind[0] >= ours[0]:
        return ()
    return tuple(change for major in range(kind[0], ours[0]) for change in CHANGES.get(major, ()))


def core_releases_for(declared: str) -> str | None:
    """The jigs-core releases a kind declaring ``declared`` loads on, as a requirement suffix
    (``">=0.1,<0.2"``), or None when no release in :data:`CORE_RELEASES` does."""
    spans = [span for contract, span in CORE_RELEASES.items() if fits(declared, contract)]
    if not spans:
        return None
    return f">={spans[0][0]},<{spans[-1][1]}"


def _core_version() -> str:
    try:
        return importlib.metadata.version("jigs-core")
    except importlib.metadata.PackageNotFoundError:  # a source tree on sys.path
        return "unknown"


#: A top-level descriptor field that holds a model key's variable name under another name than
#: the endpoint part's: the core would not see it, so the kind is refused.
_KEY_FIELD = re.compile(r"(^|_)(api_?key|key|token|secret)(_env|_var|_name)?$")


_ENFORCERS = ("cli", "core")


def verify_kind(harness: Any) -> None:
    """Check a kind the way pluggy checks hook implementations, once, when it registers: its
    contract version (:func:`check_contract`), then its hooks and its one declaration. Raise
    :class:`~jigs.errors.HarnessPluginError` naming the kind, every problem and its fix."""
    check_contract(harness)
    problems = _hook_problems(harness)
    descriptor = getattr(harness, "descriptor_type", None)
    if not (isinstance(descriptor, type) and issubclass(descriptor, HarnessDescriptor)):
        problems.append(
            "descriptor_type is not a jigs.descriptors.HarnessDescriptor subclass: set "
            "descriptor_type = MyDescriptor on the Harness subclass"
        )
    else:
        problems += _descriptor_problems(harness, descriptor)
    if problems:
        kind = str(getattr(harness, "kind", "?"))
        raise HarnessPluginError(
            f"the {kind!r} harness does not implement plugin contract {CONTRACT_VERSION}: "
            + "; ".join(problems)
            + f". See {GUIDE}; meanwhile JIGS_DISABLE_PLUGINS={kind} hides it"
        )


def _overrides(harness: Any, name: str) -> bool:
    return getattr(type(harness), name, None) is not getattr(Harness, name)


#: Credentials of well-known shapes: a kind's ``session_id_pattern`` matching one would let a
#: key passed by mistake as ``resume`` through the core's secret test.
_KEY_SAMPLES = (
    "sk-ant-api03-" + "a1B2" * 20,
    "sk-proj-" + "a1B2" * 12,
    "ghp_" + "a1B2" * 9,
    "AKIA" + "A1B2" * 4,
)


def _pattern_problems(pattern: object) -> list[str]:
    """What is wrong with a kind's ``session_id_pattern`` (contract 2.1)."""
    if pattern is None:
        return []
    try:
        compiled = re.compile(pattern)  # type: ignore[call-overload]
    except (re.error, TypeError):
        return ["session_id_pattern is not a regular expression (a str) or None"]
    if any(compiled.fullmatch(sample) for sample in _KEY_SAMPLES):
        return [
            "session_id_pattern also matches API keys (sk-..., ghp_..., AKIA...): narrow it to "
            "the shape of the CLI's own session ids"
        ]
    return []


def _hook_problems(harness: Any) -> list[str]:
    problems: list[str] = []
    if not isinstance(harness, Harness):
        return [f"it is a {type(harness).__name__}, not a jigs.plugin.Harness subclass"]
    for name in ("kind", "display_name"):
        if not isinstance(getattr(harness, name, None), str):
            problems.append(f"class variable {name} is missing: set {name} = '...'")
    if not _overrides(harness, "open_transport"):
        for hook in ("launch_turn", "decoder"):
            if not _overrides(harness, hook):
                problems.append(
                    f"hook {hook} is missing: implement {hook}() (a process per turn), or "
                    f"open_transport() for a CLI that serves many turns"
                )
    problems += _pattern_problems(getattr(harness, "session_id_pattern", None))
    if harness.structured_output not in ("native", "prompted"):
        problems.append('structured_output must be "native" or "prompted"')
    if hasattr(type(harness), "native_limits"):
        problems.append(
            "native_limits is a contract 1.x declaration: move it to the descriptor's limits "
            '(each limit the CLI enforces as "cli")'
        )
    return problems


def _descriptor_problems(harness: Any, descriptor: type[HarnessDescriptor]) -> list[str]:
    problems: list[str] = []
    name = descriptor.__name__
    if getattr(harness, "kind", None) != descriptor._kind_default():
        problems.append(
            f"{name}.kind must default to the harness kind: "
            f'kind: Literal["{getattr(harness, "kind", "?")}"] = "{getattr(harness, "kind", "?")}"'
        )
    if hasattr(descriptor, "supported_limits"):
        problems.append(
            f"{name}.supported_limits is a contract 1.x declaration: declare "
            f'limits = {{"max_turns": "cli" or "core", ...}} instead'
        )
    limits = descriptor.limits
    bad = sorted(
        str(k) for k, who in limits.items() if k not in LIMITS or who not in ("cli", "core")
    )
    if bad:
        problems.append(
            f"{name}.limits names {', '.join(bad)}: keys are {', '.join(LIMITS)}, values "
            f'"cli" or "core"'
        )
    own_key = descriptor.model_key_env is not HarnessDescriptor.model_key_env
    loose = sorted(f for f in descriptor.model_fields if _KEY_FIELD.search(f))
    if not own_key and loose:
        problems.append(
            f"{name} declares {', '.join(loose)} outside an endpoint part, so the secret rules "
            f"would not see it: compose jigs.descriptors.ModelEndpointFields (base_url, "
            f"api_key_env: class {name}(ModelEndpointFields, HarnessDescriptor)), or override "
            f"model_key_env() to return the variable's name"
        )
    if not own_key and _overrides(harness, "model_route"):
        problems.append(
            f"model_route() is implemented but {name} has no endpoint part: compose "
            f"jigs.descriptors.ModelEndpointFields or override model_key_env()"
        )
    return problems


def check_route(kind: str, route: Any, descriptor: HarnessDescriptor) -> None:
    """Refuse a :class:`~jigs.plugin.ModelRoute` whose key is not the one the descriptor's
    endpoint part names (:meth:`~jigs.descriptors.HarnessDescriptor.model_key_env`): the secret
    rules follow the part, so a route to another variable would proxy a key they never saw."""
    if route is None or route.key_env == descriptor.model_key_env():
        return
    raise HarnessPluginError(
        f"the {kind!r} harness routes the model key of {route.key_env}, but its descriptor's "
        f"endpoint part names {descriptor.model_key_env()}: return "
        f"ModelRoute(key_env=descriptor.model_key_env(), ...) from model_route(). See {GUIDE}"
    )
