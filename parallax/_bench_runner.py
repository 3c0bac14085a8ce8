"""Our side of `parallax bench`: a batched env and its compiled rollout, and what it costs.

- `Runner`: what every runner (ours and the competitors') keeps of how it was asked to run;
- `ScanRunner(Runner)`: the donated, compiled scan a JAX runner times (`run`, `close`);
- `ParallaxRunner`: `make_vec(...)` and a donated, ahead-of-time compiled scan of
  `parallax.action_scan` with `parallax.random_actions`, on one device or split over several
  with `jax.shard_map`;
- `tree_bytes(tree)`: the bytes a pytree of arrays holds (the state's size in the result);
- the memory probes the measurement reports (peak RSS, device memory, the program's bytes).
"""

from __future__ import annotations

import resource
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._actions import action_scan, random_actions

__all__ = ["ParallaxRunner", "Runner", "ScanRunner", "tree_bytes"]


def tree_bytes(tree: Any) -> int:
    """The bytes that the arrays of `tree` hold (a PRNG key array counts its key data).

    Args:
        tree: any pytree; leaves without a `dtype` (Python scalars, None) count nothing.

    Returns:
        The sum over array leaves of size times item size, an int.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax.bench import tree_bytes
        >>> tree_bytes({"x": jnp.zeros((4, 3), jnp.float32), "n": jnp.int32(1)})
        52
        >>> tree_bytes(jax.random.split(jax.random.key(0), 5))  # 5 threefry keys: 2 uint32 each
        40
    """
    total = 0
    for leaf in jax.tree.leaves(tree):
        if not hasattr(leaf, "dtype"):
            continue
        if hasattr(leaf, "dtype") and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        total += int(np.prod(np.shape(leaf), dtype=np.int64)) * np.dtype(leaf.dtype).itemsize
    return total


def _peak_rss_bytes() -> int:
    # ru_maxrss is in KiB on Linux, bytes on macOS.
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


def _device_memory() -> dict[str, int] | None:
    try:
        stats = jax.devices()[0].memory_stats()
    except Exception:  # backends without memory statistics raise or return None
        return None
    if not stats:
        return None
    keep = ("bytes_in_use", "peak_bytes_in_use", "bytes_limit")
    return {k: int(stats[k]) for k in keep if k in stats}


def _program_bytes(compiled: Any) -> dict[str, int] | None:
    try:
        analysis = compiled.memory_analysis()
    except Exception:  # not every backend/version provides it
        return None
    if analysis is None:
        return None
    names = {
        "argument_bytes": "argument_size_in_bytes",
        "output_bytes": "output_size_in_bytes",
        "temp_bytes": "temp_size_in_bytes",
        "generated_code_bytes": "generated_code_size_in_bytes",
    }
    return {k: int(getattr(analysis, v)) for k, v in names.items() if hasattr(analysis, v)}


_BATCH_AXIS = "batch"


def _check_devices(devices: Any, num_envs: int) -> int:
    """`devices` as an int that divides `num_envs` and that JAX has, or a ValueError."""
    if not isinstance(devices, int) or isinstance(devices, bool) or devices < 1:
        raise ValueError(f"benchmark: devices must be a positive int, got {devices!r}")
    if num_envs % devices:
        raise ValueError(f"benchmark: num_envs={num_envs} must be divisible by devices={devices}")
    have = len(jax.devices())
    if devices > have:
        raise ValueError(
            f"benchmark: devices={devices} but JAX has {have} {jax.default_backend()} "
            "device(s); on the CPU, make more before JAX's first computation with "
            "parallax.set_cpu_devices(k) (`parallax bench --devices k`)"
        )
    return devices


class Runner:
    """A benchmark runner's common part: the stack it was asked for, and its `extra`.

    Stores `env_id`, `num_envs`, `steps`, `autoreset`, `max_episode_steps`, `seed` and a
    copy of `env_kwargs` (so that a work counter can replay the rollout), and starts
    `extra` (a dict reported with the result) empty.
    """

    label = ""

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        steps: int,
        *,
        autoreset: bool,
        max_episode_steps: int | None,
        seed: int,
        env_kwargs: dict[str, Any],
    ) -> None:
        self.env_id, self.num_envs, self.steps, self.seed = env_id, num_envs, steps, seed
        self.autoreset, self.max_episode_steps = autoreset, max_episode_steps
        self.env_kwargs = dict(env_kwargs)
        self.extra: dict[str, Any] = {}


class ScanRunner(Runner):
    """A runner that times a donated, compiled scan `self._rollout(state, episode_key, start)`
    of `steps` steps from step counter `start`, returning `(state, episodes ended)`.

    A subclass defines `_rollout`, and its `prepare` resets `state` with a key and calls
    `_compile(key)`; each `run()` then continues from the last call's state and counter.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.compiled: Any = None
        self.state: Any = None
        self.episode_key: Any = None
        self.offset = 0

    def _rollout(self, state: Any, episode_key: jax.Array, start: jax.Array) -> Any:
        raise NotImplementedError

    def _compile(self, key: jax.Array) -> float:
        """Set `episode_key` from the reset's `key`, compile `_rollout` (state donated) ahead
        of time for `state`, and warm up with one call (first-touch allocation, thread
        pools). Returns the compile's seconds."""
        from . import rng

        self.episode_key = rng.episode_key(jax.random.fold_in(key, 1))
        t0 = time.perf_counter()
        lowered = jax.jit(self._rollout, donate_argnums=0).lower(
            self.state, self.episode_key, jnp.uint32(0)
        )
        self.compiled = lowered.compile()
        seconds = time.perf_counter() - t0
        self.run()
        return seconds

    def run(self) -> tuple[float, int]:
        start = jnp.uint32(self.offset)
        t0 = time.perf_counter()
        self.state, ended = self.compiled(self.state, self.episode_key, start)
        ended = int(np.sum(jax.block_until_ready(ended)))
        jax.block_until_ready(self.state)
        seconds = time.perf_counter() - t0
        self.offset = (self.offset + self.steps) % 2**32
        return seconds, ended

    def close(self) -> None:
        self.state = None


class ParallaxRunner(ScanRunner):
    """Our side: `make_vec(...)`, a donated jitted scan of `steps` steps, compiled AOT.

    With `devices > 1` the batch is split over the first `devices` devices: each runs the
    scan of a `make_vec(..., num_envs // devices)` stack on its slice of the state, with
    its slice of the same action draws, in a `jax.shard_map` with no communication between
    the devices. The envs of a batch are independent, so the final state equals the one
    device's, bit for bit (the LOB comparison's event count checks it: `events_exact`).
    """

    label = "parallax"

    def __init__(
        self, env_id: str, num_envs: int, steps: int, *, devices: int = 1, **common: Any
    ) -> None:
        """`common`: the keywords of `Runner` (`autoreset`, ..., `env_kwargs`)."""
        from ._registry import make_vec

        super().__init__(env_id, num_envs, steps, **common)
        max_episode_steps, autoreset = self.max_episode_steps, self.autoreset
        env_kwargs = self.env_kwargs
        self.devices = _check_devices(devices, num_envs)
        self.vec = make_vec(env_id, num_envs, max_episode_steps, autoreset, **env_kwargs)
        self.sample = random_actions(self.vec.action_space, num_envs)
        self.local = self.vec
        if self.devices > 1:
            n = num_envs // self.devices
            self.local = make_vec(env_id, n, max_episode_steps, autoreset, **env_kwargs)

    def _rollout(self, state: Any, episode_key: jax.Array, start: jax.Array) -> Any:
        ts = start + jnp.arange(self.steps, dtype=jnp.uint32)
        if self.devices == 1:
            return action_scan(self.vec.step, state, self.sample, episode_key, ts)
        from jax.sharding import PartitionSpec

        n = self.num_envs // self.devices

        def local_sample(key: jax.Array, t: jax.Array) -> Any:
            # the whole batch's draws (cheap beside a step), this device's rows
            start = jax.lax.axis_index(_BATCH_AXIS) * n
            return jax.tree.map(
                lambda a: jax.lax.dynamic_slice_in_dim(a, start, n), self.sample(key, t)
            )

        def local(state: Any, key: jax.Array, ts: jax.Array) -> Any:
            state, ended = action_scan(self.local.step, state, local_sample, key, ts)
            return state, ended[None]  # one count a device, summed on the host (no collective)

        batch, replicated = PartitionSpec(_BATCH_AXIS), PartitionSpec()
        return jax.shard_map(
            local,
            mesh=self._mesh(),
            in_specs=(batch, replicated, replicated),
            out_specs=(batch, batch),
            check_vma=False,
        )(state, episode_key, ts)

    def _mesh(self) -> Any:
        from ._sharding import batch_mesh

        return batch_mesh(jax.devices()[: self.devices], _BATCH_AXIS)

    def prepare(self) -> float:
        key = jax.random.key(self.seed)
        t0 = time.perf_counter()
        self.state = jax.block_until_ready(jax.jit(lambda k: self.vec.reset(key=k))(key))
        if self.devices > 1:
            from jax.sharding import NamedSharding, PartitionSpec

            split = NamedSharding(self._mesh(), PartitionSpec(_BATCH_AXIS))
            self.state = jax.block_until_ready(jax.device_put(self.state, split))
        self.extra["reset_seconds"] = time.perf_counter() - t0
        compile_seconds = self._compile(key)
        self.extra["state_bytes"] = tree_bytes(self.state)
        self.extra["program_bytes"] = _program_bytes(self.compiled)
        return compile_seconds
