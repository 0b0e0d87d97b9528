"""Seeds: one recorded integer turns into a stable generator per named result.

A cell's interval must not change when another arm is added to the experiment, so each result
draws from its own stream, keyed by the analysis seed and the names of what it describes.
"""

from __future__ import annotations

import zlib

import numpy as np


def derive_seed(seed: int, *names: str) -> int:
    """Return a 63-bit seed from `seed` and `names`, stable across runs, platforms and Pythons.

    zlib.crc32 is used rather than hash(), which is salted per process.
    """
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise TypeError(f"`seed` must be an integer, got {seed!r} ({type(seed).__name__}).")
    keys = [zlib.crc32(str(n).encode("utf-8")) for n in names]
    ss = np.random.SeedSequence([int(seed) & 0xFFFFFFFFFFFFFFFF, *keys])
    return int(ss.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


def as_generator(rng: np.random.Generator | int | None) -> np.random.Generator:
    """Accept a Generator or an int seed; None is refused so that every result is reproducible."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        raise ValueError(
            "`rng` is None: pass an integer seed or a numpy Generator so the result can be "
            "reproduced (bracket records the seed in stats.json)."
        )
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.default_rng(int(rng))
    raise TypeError(f"`rng` must be an int seed or numpy.random.Generator, got {type(rng).__name__}.")
