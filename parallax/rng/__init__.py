"""Counter-based randomness: every draw is a pure function of four numbers.

``draw = f(episode_key, step, slot, index)``. There is no stream and no
cursor, so a batched implementation may compute draws it throws away, draw
out of order, or restart an episode in place without disturbing anything,
and a readable one-instance reference (``parallax.rng.reference``, NumPy)
gets bit-identical values.

Holds (JAX flavour; works under ``jit``/``vmap`` with x64 on or off):

- keys: ``episode_key(key)``, ``fold_in(episode_key, data)``;
- draws: ``bits``, ``uniform``, ``randint``, ``bernoulli``, ``normal``, each
  called as ``(episode_key, step, slot, index, ...)`` and broadcasting over
  array arguments;
- vectors over an index range: ``uniform_vector``, ``normal_vector``,
  ``randint_vector``, ``bernoulli_vector`` (``index = start + arange(num)``
  on a new last axis);
- slot tables: ``Slot``, ``SlotTable``.

The hash. An episode key is 64 bits (two uint32 words). A draw is two
chained keyed Feistel permutations of a 64-bit block::

    (a0, a1) = P[episode_key](step, slot)      # per (episode, step, slot)
    (word0, word1) = P[a0, a1](index, 0)       # the draw

``P[k0, k1]`` is four Feistel rounds ``y ^= mix32(x + k)``, ``x ^= mix32(y +
k')`` with round keys ``k0, k1, k0 + C2, k1 + C3``, and ``mix32`` is a
32-bit xorshift-multiply finaliser (the "lowbias32" constants found by Chris
Wellons' search for low-bias integer hashes). Why this design:

- only uint32 add, multiply (low word), shift and xor, so it is exact with
  ``jax_enable_x64`` off, identical on every backend, and trivially written
  in NumPy or any other language;
- each stage is a bijection of 64 bits for a fixed key, so within one
  (episode, step, slot) distinct indices never collide, and within one
  episode distinct (step, slot) pairs never share a second-stage key;
- four rounds with a strong round function give full avalanche: after two
  rounds every input bit has passed through ``mix32``; the tests check that
  flipping any single bit of any input flips each output bit with
  probability 0.5 within sampling noise, and the statistical battery
  (``benchmarks/rng_quality.py``) finds no bias;
- it is cheap: about 40 integer operations per stage, against about 120 for
  one Threefry-2x32-20 block, and there is no per-step key splitting.
  ``benchmarks/rng_speed.py`` (4096 envs x 8 normals x 256 steps in a jitted
  scan, CPU) measured 2.1-2.3x the throughput of ``jax.random`` with a split
  per env per step; see ``docs/rng.md``.
- Philox would need the high half of a 32 x 32-bit product, which JAX cannot
  express in 32-bit types; Threefry-2x32 is slower per draw.

It is not a cryptographic generator: keys are not secret and nothing here
resists an adversary, as for any simulation RNG.

Exactness. ``bits``, ``uniform``, ``randint``, ``bernoulli`` and ``normal``
are bit-identical between this module and ``parallax.rng.reference`` for all
inputs, with x64 on or off, eager or jitted (the tests assert it). ``normal``
achieves this with arithmetic whose result IEEE 754 fixes even when XLA fuses
``a * b + c`` into an FMA (every product feeding an addition is exact; the
logarithm is computed from the integer bits; see ``_normal``). Its accuracy
is that of AS241: float32 within 4.5e-7 relative of the exact quantile,
float64 within 1e-14. The guarantee covers the draws only: your own
``mu + sigma * z`` may be contracted differently by XLA and NumPy.

Example:
  >>> import jax, jax.numpy as jnp
  >>> from parallax import rng
  >>> from parallax.rng import reference
  >>> ek = rng.episode_key(jax.random.key(42))
  >>> z = rng.normal(ek, 3, 7, jnp.arange(4))
  >>> bool((z == reference.normal(ek, 3, 7, range(4))).all())
  True
"""

from parallax.rng._draws import (
    bernoulli,
    bernoulli_vector,
    bits,
    episode_key,
    fold_in,
    normal,
    normal_vector,
    randint,
    randint_vector,
    uniform,
    uniform_vector,
)
from parallax.rng._slots import Slot, SlotTable

__all__ = [
    "Slot",
    "SlotTable",
    "bernoulli",
    "bernoulli_vector",
    "bits",
    "episode_key",
    "fold_in",
    "normal",
    "normal_vector",
    "randint",
    "randint_vector",
    "uniform",
    "uniform_vector",
]
