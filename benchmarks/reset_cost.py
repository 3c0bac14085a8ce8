"""The cost of resets: an env whose reset costs ~100x its step, with and without cheap resets.

Compares, in one run, env steps/s of a jitted `lax.scan` rollout with auto-reset for:

- `naive`: the gymnax-style auto-reset (every env computes a fresh reset on every step, then
  `where(done, reset, state)`), the behaviour of vmapping a per-env auto-reset;
- `parallax K=None`: `VmapAutoResetWrapper(env, max_resets_per_step=None)`, which
  only skips the reset batch-wide when no env is done;
- `parallax K=...`: the same with `max_resets_per_step=K` (only the finished envs reset when
  at most K are done); `auto` is the default, `K = num_envs // 16`.

Episodes have random lengths (termination with a small probability per step) so resets are
spread over the run, plus a variant where all envs end together (a time limit).

    python benchmarks/reset_cost.py [--num-envs 1024] [--steps 200] [--json out.json]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
from _common import write_json

from parallax import State, TimeLimit, VmapAutoResetWrapper, VmapWrapper, spaces


def _walk_state(x, reward, termination, step_count, key):
    """The walk's `State` at `x` (observed as `[x, x]`), never truncated, with no info."""
    return State(x, jnp.stack([x, x]), reward, termination, jnp.bool_(False), {}, step_count, key)


class ExpensiveReset:
    """Reset simulates a `path_length`-step random walk (like a finance env building a
    price path); step is a couple of flops. `p_end` is the per-step termination chance."""

    action_space = spaces.Discrete(2)
    observation_space = spaces.Box(-jnp.inf, jnp.inf, (2,))

    def __init__(self, path_length: int = 2048, p_end: float = 0.01):
        self.path_length = path_length
        self.p_end = p_end

    def reset(self, *, key):
        key, sub = jax.random.split(key)
        noise = jax.random.normal(sub, (self.path_length,))
        path = jnp.cumsum(jnp.exp(0.01 * noise))  # the expensive part
        x = path[-1] / self.path_length
        return _walk_state(x, jnp.float32(0.0), jnp.bool_(False), jnp.int32(0), key)

    def step(self, state, action):
        x = state.env_state + jnp.where(action == 1, 0.01, -0.01)
        u = jax.random.uniform(jax.random.fold_in(state.key, state.step_count))
        return _walk_state(x, -jnp.abs(x), u < self.p_end, state.step_count + 1, state.key)


def naive_autoreset(env):
    """Every env computes its reset on every step, then selects (gymnax-style)."""

    def step(state, action):
        nxt = env.step(state, action)
        fresh = env.reset(key=jax.random.fold_in(nxt.key, 1))
        return jax.tree.map(lambda r, s: jnp.where(nxt.done, r, s), fresh, nxt)

    return step


def time_rollout(reset, step, num_envs, num_steps, repeats=3):
    def run(key):
        state = reset(key)

        def body(carry, k):
            s = carry
            a = jax.random.randint(k, (num_envs,), 0, 2)
            s = step(s, a)
            return s, s.reward.mean()

        return jax.lax.scan(body, state, jax.random.split(key, num_steps))

    run = jax.jit(run)
    t0 = time.perf_counter()
    jax.block_until_ready(run(jax.random.key(0)))
    compile_s = time.perf_counter() - t0
    times = []
    for r in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(run(jax.random.key(r + 1)))
        times.append(time.perf_counter() - t0)
    best = sorted(times)[len(times) // 2]
    return num_envs * num_steps / best, compile_s


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--path-length", type=int, default=2048)
    parser.add_argument("--p-end", type=float, default=0.005)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    n, t = args.num_envs, args.steps
    base = ExpensiveReset(args.path_length, args.p_end)

    # the reset/step cost ratio of this env, measured
    one_reset = jax.jit(jax.vmap(lambda k: base.reset(key=k)))
    keys = jax.random.split(jax.random.key(0), n)
    states = one_reset(keys)
    one_step = jax.jit(jax.vmap(base.step))
    acts = jnp.zeros(n, jnp.int32)
    jax.block_until_ready(one_step(states, acts))
    t0 = time.perf_counter()
    for _ in range(20):
        jax.block_until_ready(one_reset(keys))
    reset_s = (time.perf_counter() - t0) / 20
    t0 = time.perf_counter()
    for _ in range(20):
        jax.block_until_ready(one_step(states, acts))
    step_s = (time.perf_counter() - t0) / 20

    results = {"num_envs": n, "steps": t, "reset_over_step_cost": reset_s / step_s, "runs": {}}
    naive = jax.vmap(naive_autoreset(base))
    vreset = lambda k: VmapWrapper(base, n).reset(key=k)  # noqa: E731
    results["runs"]["naive"] = time_rollout(vreset, naive, n, t)
    for label, k in (
        ("parallax K=None", None),
        ("parallax K=auto (n/16)", "auto"),
        ("parallax K=n/64", max(1, n // 64)),
    ):
        env = VmapAutoResetWrapper(base, n, max_resets_per_step=k)
        results["runs"][label] = time_rollout(
            lambda key, env=env: env.reset(key=key), env.step, n, t
        )
    for label, k in (("naive, all end together", None), ("parallax, all end together", "auto")):
        limited = TimeLimit(ExpensiveReset(args.path_length, 0.0), 50)
        if label.startswith("naive"):
            step = jax.vmap(naive_autoreset(limited))
            reset = lambda key, e=limited: VmapWrapper(e, n).reset(key=key)  # noqa: E731
            results["runs"][label] = time_rollout(reset, step, n, t)
        else:
            env = VmapAutoResetWrapper(limited, n, max_resets_per_step=k)
            results["runs"][label] = time_rollout(
                lambda key, env=env: env.reset(key=key), env.step, n, t
            )

    naive_sps = results["runs"]["naive"][0]
    print(f"reset costs {results['reset_over_step_cost']:.0f}x a step (N={n}, {t} steps)")
    print(f"{'variant':32s} {'steps/s':>14s} {'vs naive':>9s} {'compile s':>10s}")
    for label, (sps, comp) in results["runs"].items():
        ref = results["runs"]["naive, all end together"][0] if "together" in label else naive_sps
        print(f"{label:32s} {sps:14,.0f} {sps / ref:8.1f}x {comp:10.2f}")
    write_json(args.json, results, indent=2)


if __name__ == "__main__":
    main()
