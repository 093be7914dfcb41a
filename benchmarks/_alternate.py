"""Alternate a raw CLI turn with the same turn through jigs, and report the median ratio.

Used by the per-kind benchmarks (run as scripts, so this module is importable by its name).
Alternating the order each pair spreads the machine's drift evenly over both sides.
"""

from __future__ import annotations

import statistics
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field


@dataclass
class Pairs:
    raws: list[float] = field(default_factory=list)
    ours: list[float] = field(default_factory=list)

    @property
    def ratios(self) -> list[float]:
        return [j / r for r, j in zip(self.raws, self.ours, strict=True)]


async def alternate(
    raw: Callable[[], Awaitable[float]],
    ours: Callable[[int], Awaitable[float]],
    runs: int,
    *,
    each: Callable[[], Awaitable[None]] | None = None,
) -> Pairs:
    """One warm-up of each, then ``runs`` pairs in alternating order; ``each`` runs after
    every pair (for extra measurements)."""
    await raw()
    await ours(-1)
    pairs = Pairs()
    for i in range(runs):
        if i % 2 == 0:
            r, j = await raw(), await ours(i)
        else:
            j = await ours(i)
            r = await raw()
        pairs.raws.append(r)
        pairs.ours.append(j)
        if each is not None:
            await each()
    return pairs


def report(raw_label: str, ours_label: str, pairs: Pairs, *, target: float = 1.05) -> float:
    """Print both medians and the median ratio; return the ratio."""
    width = max(len(raw_label), len(ours_label))
    print(f"{raw_label:<{width}}: median {statistics.median(pairs.raws) * 1000:.1f} ms")
    print(f"{ours_label:<{width}}: median {statistics.median(pairs.ours) * 1000:.1f} ms")
    ratio = statistics.median(pairs.ratios)
    print(f"median ratio jigs/raw over {len(pairs.raws)} pairs: {ratio:.3f} (target <= {target})")
    return ratio
