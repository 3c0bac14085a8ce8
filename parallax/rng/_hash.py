"""The counter hash of ``parallax.rng`` in JAX, built from 32-bit operations.

Holds:

- ``mix32``: the 32-bit xorshift-multiply round function.
- ``permute64``: a keyed four-round Feistel permutation of 64 bits held as
  two uint32 words.
- ``hash_words``: ``(episode key, step, slot, index) -> (word0, word1)``.
- ``derive_episode_key``: JAX key data words -> a two-word episode key.
- ``fold_words``: ``(episode key, data) -> child episode key``.
- ``mulhi32``: the high word of a 32 x 32 -> 64-bit product, using only
  uint32 arithmetic (so it works with ``jax_enable_x64`` off).

Every function here takes and returns uint32 arrays of matching shapes and
uses only uint32 adds, multiplies (low 32 bits), shifts and xors, so results
are identical with x64 on or off and on every backend.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from parallax.rng import _spec

_U32 = jnp.uint32


def _c(value: int) -> np.uint32:
    """A uint32 constant (strongly typed, so no dtype promotion happens)."""
    return np.uint32(value)


def mix32(x: jax.Array) -> jax.Array:
    """Bijective 32-bit finaliser: xorshift, multiply, xorshift, multiply, xorshift.

    Args:
      x: uint32 array, any shape.

    Returns:
      uint32 array of the same shape.

    Example:
      >>> int(mix32(jnp.uint32(1)))
      1753845952
    """
    x = x ^ (x >> _c(_spec.MIX_S1))
    x = x * _c(_spec.MIX_M1)
    x = x ^ (x >> _c(_spec.MIX_S2))
    x = x * _c(_spec.MIX_M2)
    return x ^ (x >> _c(_spec.MIX_S3))


def permute64(
    k0: jax.Array, k1: jax.Array, x: jax.Array, y: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Keyed four-round Feistel permutation of the 64-bit block ``(x, y)``.

    Round keys are ``k0, k1, k0 + C2, k1 + C3``; round ``i`` xors
    ``mix32(other half + round key)`` into one half. For a fixed key this is
    a bijection of ``(x, y)``.

    Args:
      k0, k1: uint32 arrays, the key words.
      x, y: uint32 arrays, the block (all four broadcastable to one shape of
        equal rank).

    Returns:
      ``(x, y)`` after four rounds, uint32.

    Example:
      >>> z = jnp.uint32(0)
      >>> [int(w) for w in permute64(z, z, z, z)]
      [1276827981, 33350994]
    """
    y = y ^ mix32(x + k0)
    x = x ^ mix32(y + k1)
    y = y ^ mix32(x + (k0 + _c(_spec.ROUND_C2)))
    x = x ^ mix32(y + (k1 + _c(_spec.ROUND_C3)))
    return x, y


def hash_words(
    k0: jax.Array,
    k1: jax.Array,
    step: jax.Array,
    slot: jax.Array,
    index: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """The draw hash: two chained Feistel permutations.

    ``(a0, a1) = permute64(k0, k1, step, slot)`` is a per-(episode, step,
    slot) key; ``permute64(a0, a1, index, DRAW_TWEAK)`` is the draw. The
    first stage is computed at the broadcast shape of ``k0, k1, step, slot``
    only, so a vector of indices pays for it once.

    Args:
      k0, k1: uint32, episode key words.
      step, slot, index: uint32.

    Returns:
      ``(word0, word1)``, uint32 arrays at the broadcast shape of all inputs.

    Example:
      >>> z = jnp.uint32(0)
      >>> [hex(int(w)) for w in hash_words(z, z, z, z, z)]
      ['0x4133c064', '0x4818acd7']
    """
    a_shape = jnp.broadcast_shapes(k0.shape, k1.shape, step.shape, slot.shape)
    a0, a1 = permute64(
        jnp.broadcast_to(k0, a_shape),
        jnp.broadcast_to(k1, a_shape),
        jnp.broadcast_to(step, a_shape),
        jnp.broadcast_to(slot, a_shape),
    )
    shape = jnp.broadcast_shapes(a_shape, index.shape)
    idx = jnp.broadcast_to(index, shape)
    return permute64(
        jnp.broadcast_to(a0, shape),
        jnp.broadcast_to(a1, shape),
        idx,
        jnp.full(shape, _spec.DRAW_TWEAK, _U32),
    )


def derive_episode_key(words: jax.Array) -> jax.Array:
    """Turn key data words ``(..., W)`` uint32 into an episode key ``(..., 2)``.

    Words are absorbed two at a time (a missing last word counts as 0):
    ``s = permute64(EPISODE_IV, w0, w1)``, then ``s = permute64(s, w2, w3)``...

    Args:
      words: uint32 array with at least one trailing word.

    Returns:
      uint32 array ``words.shape[:-1] + (2,)``.

    Example:
      >>> derive_episode_key(jnp.zeros((2,), jnp.uint32)).shape
      (2,)
    """
    batch = words.shape[:-1]
    s0 = jnp.full(batch, _spec.EPISODE_IV[0], _U32)
    s1 = jnp.full(batch, _spec.EPISODE_IV[1], _U32)
    zero = jnp.zeros(batch, _U32)
    for j in range(0, words.shape[-1], 2):
        lo = words[..., j]
        hi = words[..., j + 1] if j + 1 < words.shape[-1] else zero
        s0, s1 = permute64(s0, s1, lo, hi)
    return jnp.stack([s0, s1], axis=-1)


def fold_words(k0: jax.Array, k1: jax.Array, data: jax.Array) -> jax.Array:
    """Child episode key ``permute64(k ^ FOLD_KEY, data, FOLD_TWEAK)``, shape ``(..., 2)``.

    Args:
      k0, k1: uint32 episode key words.
      data: uint32, broadcastable with the key words (same rank).

    Returns:
      uint32 array ``broadcast_shape + (2,)``.

    Example:
      >>> z = jnp.zeros((), jnp.uint32)
      >>> fold_words(z, z, z).shape
      (2,)
    """
    shape = jnp.broadcast_shapes(k0.shape, k1.shape, data.shape)
    x, y = permute64(
        jnp.broadcast_to(k0 ^ _c(_spec.FOLD_KEY[0]), shape),
        jnp.broadcast_to(k1 ^ _c(_spec.FOLD_KEY[1]), shape),
        jnp.broadcast_to(data, shape),
        jnp.full(shape, _spec.FOLD_TWEAK, _U32),
    )
    return jnp.stack([x, y], axis=-1)


def mulhi32(a: jax.Array, b: jax.Array) -> jax.Array:
    """High 32 bits of the 64-bit product ``a * b`` of two uint32 values.

    Uses 16-bit halves so every partial product fits in uint32.

    Args:
      a, b: uint32 arrays of the same shape.

    Returns:
      uint32 array, ``(a * b) >> 32``.

    Example:
      >>> int(mulhi32(jnp.uint32(2**31), jnp.uint32(6)))
      3
    """
    lo16 = _c(0xFFFF)
    a_lo, a_hi = a & lo16, a >> _c(16)
    b_lo, b_hi = b & lo16, b >> _c(16)
    ll = a_lo * b_lo
    lh = a_lo * b_hi
    hl = a_hi * b_lo
    hh = a_hi * b_hi
    mid = (ll >> _c(16)) + (lh & lo16) + (hl & lo16)
    return hh + (lh >> _c(16)) + (hl >> _c(16)) + (mid >> _c(16))
