"""PPO's policy and value networks: plain-JAX MLPs and the action distribution they feed.

- `ActionHead`: how network outputs become actions (categorical for Discrete, one
  categorical per element for a 1-D MultiDiscrete, Gaussian for a 1-D Box), with their
  log-probabilities and entropies.
- `init_params` (separate actor and critic MLPs, orthogonal init as in purejaxrl), `actor`
  and `critic`; `_features` flattens an observation pytree into one float32 vector per env.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from parallax import spaces


# -- network ------------------------------------------------------------------------------------------
class ActionHead:
    """How network outputs become actions: categorical (Discrete), one categorical per
    element (1-D MultiDiscrete: the log-probabilities and entropies add up) or Gaussian (Box).

    Box actions are sampled in a canonical unit `u` and mapped affinely onto the bounds
    (`center + half_width * u`); `ClipAction` clips what falls outside.
    """

    def __init__(self, space: Any, init_log_std: float) -> None:
        self.discrete = isinstance(space, spaces.Discrete)
        # a 1-D MultiDiscrete is one categorical per element, its logits side by side
        self.nvec: tuple[int, ...] = ()
        if self.discrete:
            self.size = int(space.n)
        elif isinstance(space, spaces.MultiDiscrete) and space.nvec.ndim == 1:
            self.nvec = tuple(int(n) for n in space.nvec)
            self.size = sum(self.nvec)
        elif isinstance(space, spaces.Box) and len(space.shape) == 1:
            self.size = int(space.shape[0])
            low, high = space.low, space.high
            bounded = np.isfinite(low) & np.isfinite(high)
            safe_low, safe_high = np.where(bounded, low, -1.0), np.where(bounded, high, 1.0)
            self.center = ((safe_low + safe_high) / 2).astype(np.float32)
            self.half = ((safe_high - safe_low) / 2).astype(np.float32)
        else:
            raise TypeError(
                f"PPO supports Discrete, 1-D MultiDiscrete or 1-D Box actions, got {space!r}"
            )
        self.init_log_std = init_log_std

    def _split(self, out: jax.Array) -> list[jax.Array]:
        """The logits of each element of a MultiDiscrete action."""
        bounds = np.cumsum(self.nvec)[:-1].tolist()
        return jnp.split(out, bounds, axis=-1)

    def to_action(self, u: jax.Array) -> jax.Array:
        if self.discrete or self.nvec:
            return u.astype(jnp.int32)
        return _row(jnp.asarray(self.center), u) + _row(jnp.asarray(self.half), u) * u

    def sample(self, key: jax.Array, out: jax.Array, log_std: jax.Array) -> jax.Array:
        if self.discrete:
            return jax.random.categorical(key, out)
        if self.nvec:
            keys = jax.random.split(key, len(self.nvec))
            parts = self._split(out)
            return jnp.stack([jax.random.categorical(k, p) for k, p in zip(keys, parts)], -1)
        noise = jax.random.normal(key, out.shape, out.dtype)
        return out + _row(jnp.exp(log_std), out) * noise

    def mode(self, out: jax.Array) -> jax.Array:
        if self.nvec:
            return jnp.stack([jnp.argmax(p, axis=-1) for p in self._split(out)], -1)
        return jnp.argmax(out, axis=-1) if self.discrete else out

    def log_prob(self, out: jax.Array, log_std: jax.Array, u: jax.Array) -> jax.Array:
        if self.discrete:
            logp = jax.nn.log_softmax(out)
            return jnp.take_along_axis(logp, u[..., None].astype(jnp.int32), -1)[..., 0]
        if self.nvec:
            index = u.astype(jnp.int32)
            per_element = [
                jnp.take_along_axis(jax.nn.log_softmax(p), index[..., i, None], -1)[..., 0]
                for i, p in enumerate(self._split(out))
            ]
            return jnp.sum(jnp.stack(per_element, -1), axis=-1)
        z = (u - out) / _row(jnp.exp(log_std), out)
        return jnp.sum(-0.5 * z**2 - _row(log_std, out) - 0.5 * math.log(2 * math.pi), axis=-1)

    def entropy(self, out: jax.Array, log_std: jax.Array) -> jax.Array:
        if self.discrete or self.nvec:
            parts = self._split(out) if self.nvec else [out]
            logps = [jax.nn.log_softmax(p) for p in parts]
            per_element = [-jnp.sum(jnp.exp(logp) * logp, axis=-1) for logp in logps]
            return jnp.sum(jnp.stack(per_element, -1), axis=-1)
        total = jnp.sum(log_std + 0.5 * math.log(2 * math.pi * math.e))
        return jnp.broadcast_to(total, out.shape[:-1])


def _dense(key: jax.Array, n_in: int, n_out: int, scale: float) -> dict[str, jax.Array]:
    init = jax.nn.initializers.orthogonal(scale)
    return {"w": init(key, (n_in, n_out), jnp.float32), "b": jnp.zeros(n_out, jnp.float32)}


def init_params(key: jax.Array, obs_size: int, head: ActionHead, hidden: int) -> dict[str, Any]:
    """Separate actor and critic MLPs (two tanh layers), orthogonal init as in purejaxrl."""
    k = jax.random.split(key, 6)
    root2 = math.sqrt(2.0)
    params = {
        "actor": [
            _dense(k[0], obs_size, hidden, root2),
            _dense(k[1], hidden, hidden, root2),
            _dense(k[2], hidden, head.size, 0.01),
        ],
        "critic": [
            _dense(k[3], obs_size, hidden, root2),
            _dense(k[4], hidden, hidden, root2),
            _dense(k[5], hidden, 1, 1.0),
        ],
        "log_std": jnp.full(head.size, head.init_log_std, jnp.float32),
    }
    return params


def _row(vector: jax.Array, like: jax.Array) -> jax.Array:
    """`vector` (last-axis sized) reshaped to broadcast against `like` (explicit ranks)."""
    return vector.reshape((1,) * (like.ndim - 1) + vector.shape)


def _mlp(layers: list[dict[str, jax.Array]], x: jax.Array) -> jax.Array:
    for layer in layers[:-1]:
        h = x @ layer["w"]
        x = jnp.tanh(h + _row(layer["b"], h))
    h = x @ layers[-1]["w"]
    return h + _row(layers[-1]["b"], h)


def _features(observation: Any) -> jax.Array:
    leaves = jax.tree.leaves(observation)
    return jnp.concatenate(
        [jnp.asarray(x, jnp.float32).reshape(*x.shape[:1], -1) for x in leaves], -1
    )


def actor(params: dict[str, Any], obs: jax.Array) -> jax.Array:
    """Policy outputs (logits, or the Gaussian mean in canonical units)."""
    return _mlp(params["actor"], obs)


def critic(params: dict[str, Any], obs: jax.Array) -> jax.Array:
    """State values."""
    return _mlp(params["critic"], obs)[..., 0]
