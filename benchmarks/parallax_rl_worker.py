"""The worker of `parallax bench --compare parallax-rl`: the published parallax-rl 0.4.0 stack.

It runs under *another* interpreter, that of a virtual environment with parallax-rl 0.4.0
and gymnax installed (its import name is `parallax` too, so it cannot share our process):

    $PARALLAX_RL_PYTHON -I benchmarks/parallax_rl_worker.py '{"name": "CartPole-v1", ...}'

(`-I`: neither this folder nor the current directory is put on its `sys.path`, so `import
parallax` finds the published release, not this checkout.) The one argument is a JSON
object: `name` (a gymnax env name), `num_envs`, `steps`, `max_episode_steps`, `seed`.

The worker builds `VmapWrapper(AutoResetWrapper(TimeLimit(GymnaxAdapter(env), M)), N)`,
compiles a jitted `lax.scan` of `steps` steps with random actions from `jax.random`, and
prints one JSON line: `version`, `compile_seconds`, and `published_error` where the
published adapter fails (then it measures `PatchedAdapter`) or `error`. Then it answers
each line read on stdin with one timed call, as one JSON line `{"seconds", "ended"}`, so
that `benchmarks/competitors.py` can interleave its repeats with ours.
"""

from __future__ import annotations

import json
import sys
import time
from importlib.metadata import version
from typing import Any


def main(argv: list[str]) -> int:
    """Build, compile and serve timed calls (see the module docstring); returns 0."""
    import gymnax
    import jax
    import jax.numpy as jnp
    from parallax.adapters.gymnax import GymnaxAdapter
    from parallax.wrappers import AutoResetWrapper, TimeLimit, VmapWrapper

    import parallax

    cfg = json.loads(argv[0])
    n, steps = cfg["num_envs"], cfg["steps"]

    class PatchedAdapter(GymnaxAdapter):  # type: ignore[misc, valid-type]
        """parallax-rl 0.4.0 unpacks 5 values; gymnax 1.0.1 returns 6. The published step
        with only that fixed: `terminated | truncated` is its termination, as in 0.4.0."""

        def step(self, state: Any, action: Any) -> Any:
            key, step_key = jax.random.split(state.key)
            obs, env_state, reward, term, trunc, info = self.env.step(
                step_key, state.env_state, action, self.params
            )
            return parallax.State(
                env_state=env_state,
                observation=obs,
                reward=reward,
                termination=term | trunc,
                truncation=jnp.bool_(False),
                info={"discount": jnp.float32(info.get("discount", 1.0))},
                step_count=state.step_count + 1,
                key=key,
            )

    def build(cls: Any) -> Any:
        env = cls(gymnax.make(cfg["name"])[0])
        return VmapWrapper(AutoResetWrapper(TimeLimit(env, cfg["max_episode_steps"])), n)

    env = build(GymnaxAdapter)

    def rollout(state: Any, key: Any) -> Any:
        def body(carry: Any, k: Any) -> Any:
            state, ended = carry
            action = jax.random.randint(k, (n,), 0, env.action_space.n)
            state = env.step(state, action)
            done = jnp.sum(state.termination | state.truncation, dtype=jnp.int32)
            return (state, ended + done), None

        keys = jax.random.split(key, steps)
        (state, ended), _ = jax.lax.scan(body, (state, jnp.int32(0)), keys)
        return state, ended

    out: dict[str, Any] = {"version": version("parallax-rl")}
    run: Any = None
    state: Any = None
    try:
        try:
            state = env.reset(key=jax.random.key(cfg["seed"]))
            jax.eval_shape(env.step, state, jnp.zeros((n,), jnp.int32))
        except ValueError as error:
            out["published_error"] = f"{type(error).__name__}: {error}"
            env = build(PatchedAdapter)
            state = env.reset(key=jax.random.key(cfg["seed"]))
        t0 = time.perf_counter()
        run = jax.jit(rollout).lower(state, jax.random.key(0)).compile()
        out["compile_seconds"] = time.perf_counter() - t0
        state, _ = jax.block_until_ready(run(state, jax.random.key(1)))
    except Exception as error:  # reported to the parent, which raises it there
        out["error"] = f"{type(error).__name__}: {error}"
    print(json.dumps(out), flush=True)
    if "error" in out:
        return 0
    for r, _ in enumerate(sys.stdin, start=1):  # one timed call per line read
        t0 = time.perf_counter()
        state, ended = jax.block_until_ready(run(state, jax.random.key(1 + r)))
        print(json.dumps({"seconds": time.perf_counter() - t0, "ended": int(ended)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
