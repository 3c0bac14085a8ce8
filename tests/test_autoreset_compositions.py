"""Every composition of an auto-reset with `vmap` is the batch-level auto-reset (issue 37).

`VmapAutoResetWrapper(env, n)`, `VmapWrapper(AutoResetWrapper(env), n)`, `jax.vmap` over
`AutoResetWrapper(env)` and the nested forms (seeds x envs) give every env exactly the same
states, bit for bit, for the four finance envs, GridWorld, a gymnax id, a brax id and a
multi-agent env, in float32 and x64; they do under `lax.scan`, with per-env `params=`,
split over devices (`shard_rollout`), and gradients flow through `step` the same way.
What each composition costs is in `tests/test_wrappers.py` (resets counted on the host)
and in `benchmarks/autoreset_compositions.py` (timed).
"""

from __future__ import annotations

from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import parallax
from parallax import (
    AutoResetWrapper,
    TimeLimit,
    VmapAutoResetWrapper,
    VmapWrapper,
    random_actions,
    rng,
    rollout,
    shard_rollout,
)
from parallax._wrappers.vmap import params_axes

N = 32  # the default reset budget is then 2 envs per step: all three reset paths run
SEEDS = 2
T = 7

ENVS = {
    "Trading-v0": lambda: parallax.make("Trading-v0", episode_length=4),
    "Portfolio-v0": lambda: parallax.make("Portfolio-v0", episode_length=4),
    "MarketMaking-v0": lambda: parallax.make("MarketMaking-v0", n_steps=4),
    "OptimalExecution-v0": lambda: parallax.make("OptimalExecution-v0", n_steps=4),
    "GridWorld-v0": lambda: TimeLimit(parallax.make("GridWorld-v0"), 3),
    "gymnax/CartPole-v1": lambda: TimeLimit(parallax.make("gymnax/CartPole-v1"), 4),
    "brax/fast": lambda: parallax.make("brax/fast", episode_length=3),
    "Race-v0": lambda: TimeLimit(parallax.make("Race-v0"), 3),
}


def _same(got: Any, want: Any) -> None:
    chex.assert_trees_all_equal(got, want, strict=True)


def _trajectories(env: Any, mode: str = "same-step", nested: bool = True) -> Any:
    """Per composition, the states of `T` steps of `N` envs (and of `SEEDS x N` nested)."""
    single = AutoResetWrapper(env, mode=mode)
    fused = VmapAutoResetWrapper(env, N, mode=mode)
    plain = VmapWrapper(AutoResetWrapper(env, mode=mode), N)
    sample = random_actions(env.action_space, N)
    nested_sample = random_actions(env.action_space, SEEDS * N)

    def scan(step: Any, state: Any, draw: Any) -> Any:
        episode_key = rng.episode_key(jax.random.key(7))

        def body(s: Any, t: Any) -> Any:
            s = step(s, draw(episode_key, t))
            return s, s

        return jax.lax.scan(body, state, jnp.arange(T, dtype=jnp.uint32))[1]

    def nested_draw(episode_key: Any, t: Any) -> Any:
        actions = nested_sample(episode_key, t)
        return jax.tree.map(lambda a: a.reshape(SEEDS, N, *a.shape[1:]), actions)

    def run() -> dict[str, Any]:
        key = jax.random.key(3)
        keys = jax.random.split(key, N)
        seed_keys = jax.random.split(jax.random.key(5), SEEDS)
        nested_keys = jax.vmap(lambda k: jax.random.split(k, N))(seed_keys)
        over_one = jax.vmap(lambda k: single.reset(key=k))
        flat = {
            "VmapAutoResetWrapper": scan(fused.step, fused.reset(key=key), sample),
            "VmapWrapper(AutoResetWrapper)": scan(plain.step, plain.reset(key=key), sample),
            "vmap(AutoResetWrapper)": scan(jax.vmap(single.step), over_one(keys), sample),
        }
        if not nested:
            return flat
        return {
            **flat,
            "vmap(VmapAutoResetWrapper)": scan(
                jax.vmap(fused.step), jax.vmap(lambda k: fused.reset(key=k))(seed_keys), nested_draw
            ),
            "vmap(vmap(AutoResetWrapper))": scan(
                jax.vmap(jax.vmap(single.step)), jax.vmap(over_one)(nested_keys), nested_draw
            ),
            # the same SEEDS x N envs as one flat batch: what every env must get
            "flat SEEDS x N": scan(
                jax.vmap(single.step), over_one(nested_keys.reshape(-1)), nested_sample
            ),
        }

    return jax.device_get(jax.jit(run)())


def _check_compositions(got: dict[str, Any]) -> None:
    reference = got["VmapAutoResetWrapper"]
    assert bool(np.any(reference.done)), "no episode ended: the auto-reset was not exercised"
    _same(got["VmapWrapper(AutoResetWrapper)"], reference)
    _same(got["vmap(AutoResetWrapper)"], reference)
    if "vmap(VmapAutoResetWrapper)" in got:
        nested = got["vmap(vmap(AutoResetWrapper))"]
        _same(nested, got["vmap(VmapAutoResetWrapper)"])
        # steps x seeds x envs -> steps x (seeds * envs): each env as in one flat batch
        merged = jax.tree.map(lambda x: x.reshape(T, SEEDS * N, *x.shape[3:]), nested)
        _same(merged, got["flat SEEDS x N"])


# nested vmap (seeds x envs) doubles the program; a cheap env of each kind runs it
NESTED = {"GridWorld-v0", "Trading-v0", "Race-v0"}


@pytest.mark.parametrize(
    "x64",  # the x64 runs of this sweep: `make test-slow`
    [False, pytest.param(True, marks=pytest.mark.slow)],
    ids=["f32", "x64"],
    indirect=True,
)
@pytest.mark.parametrize("name", list(ENVS))
def test_every_composition_gives_every_env_the_same_states(name, x64):
    _check_compositions(_trajectories(ENVS[name](), nested=name in NESTED))


def test_next_step_mode_composes_the_same_way():
    _check_compositions(_trajectories(ENVS["GridWorld-v0"](), mode="next-step"))


def test_per_env_params_reach_the_step_and_the_reset_in_every_composition():
    env = parallax.make("Trading-v0", episode_length=3)
    sigma = np.linspace(0.1, 0.5, N)
    params = env.params.replace(sigma=sigma)  # one row per env, the rest shared
    axes = params_axes(env, params, N)
    fused, single = VmapAutoResetWrapper(env, N), AutoResetWrapper(env)
    actions = jnp.tile(jnp.arange(N, dtype=jnp.int32) % 3, (6, 1))

    def run() -> Any:
        key = jax.random.key(0)
        start = fused.reset(key=key, params=params)
        vstep = jax.vmap(lambda s, a, p: single.step(s, a, params=p), in_axes=(0, 0, axes))

        def scan(step: Any) -> Any:
            return jax.lax.scan(lambda s, a: (lambda n: (n, n))(step(s, a)), start, actions)[1]

        return (
            scan(lambda s, a: fused.step(s, a, params=params)),
            scan(lambda s, a: vstep(s, a, params)),
            scan(fused.step),
        )

    ours, theirs, default = jax.device_get(jax.jit(run)())
    _same(theirs, ours)
    assert bool(np.any(ours.done))
    # the per-env volatility changed the prices (so the params really reached the envs)
    assert not np.array_equal(ours.observation, default.observation)


def test_nested_vmaps_with_per_env_params_equal_one_flat_batch():
    # seeds x envs with params per env, and a third vmap over that: every env gets what it
    # gets in one flat batch of all the envs (the batching rule adds a leading dim per vmap
    # and gathers each env's own params row in the partial resets). The envs start at
    # staggered points of their episodes, so a few end on every step: the partial resets.
    length = 20
    env = parallax.make("Trading-v0", episode_length=length)
    single = AutoResetWrapper(env)
    shape = (2, SEEDS, N)
    rows = int(np.prod(shape))
    sigma = jnp.asarray(np.linspace(0.1, 0.5, rows), jnp.float32)
    s0 = jnp.asarray(np.linspace(50.0, 150.0, rows), jnp.float32)  # read by the reset
    per_env = (sigma, s0)
    offset = jnp.arange(rows) % length
    actions = jnp.asarray(np.arange(6 * rows).reshape(6, rows) % 3, jnp.int32)
    keys = jax.random.split(jax.random.key(2), rows)

    def params(p: Any) -> Any:
        return env.params.replace(sigma=p[0], s0=p[1])

    def step(s: Any, a: Any, p: Any) -> Any:
        return single.step(s, a, params=params(p))

    def scan(step: Any, state: Any, xs: Any) -> Any:
        return jax.lax.scan(lambda s, a: (lambda n: (n, n))(step(s, a)), state, xs)[1]

    def run() -> Any:
        start = jax.vmap(lambda k, p: single.reset(key=k, params=params(p)))(keys, per_env)

        def stagger(s: Any, t: Any) -> Any:  # env i takes its first offset[i] steps
            moved = jax.vmap(step)(s, jnp.zeros(rows, jnp.int32), per_env)
            return jax.tree.map(
                lambda m, o: jnp.where(
                    jnp.reshape(t < offset, (rows,) + (1,) * (m.ndim - 1)), m, o
                ),
                moved,
                s,
            ), None

        start = jax.lax.scan(stagger, start, jnp.arange(length))[0]
        flat = scan(lambda s, a: jax.vmap(step)(s, a, per_env), start, actions)
        nested_start = jax.tree.map(lambda x: x.reshape(*shape, *x.shape[1:]), start)
        step3 = jax.vmap(jax.vmap(jax.vmap(step)))
        nested = scan(
            lambda s, a: step3(s, a, jax.tree.map(lambda x: x.reshape(shape), per_env)),
            nested_start,
            actions.reshape(-1, *shape),
        )
        default = scan(jax.vmap(single.step), start, actions)
        return start, flat, nested, default

    start, flat, nested, default = jax.device_get(jax.jit(run)())
    merged = jax.tree.map(lambda x: x.reshape(x.shape[0], rows, *x.shape[4:]), nested)
    _same(merged, flat)

    # and what an env gets alone, without any vmap (a plain `lax.cond` reset): two envs
    # whose episodes end in these steps, and two whose do not (the last one is where a
    # partial reset's unused slots point)
    @jax.jit
    def alone(state: Any, acts: Any, p: Any) -> Any:
        return scan(lambda s, a: step(s, a, p), state, acts)

    assert flat.done[:, 19].any() and flat.done[:, 76].any() and not flat.done[:, 0].any()
    for i in (19, 76, 0, rows - 1):
        row = jax.tree.map(lambda x, i=i: x[i], (start, actions.T, per_env))
        _same(jax.device_get(alone(*row)), jax.tree.map(lambda x, i=i: x[:, i], flat))
    per_step = np.sum(flat.done, axis=1)
    assert np.all((per_step > 0) & (per_step <= rows // 16)), per_step  # partial resets
    # the per-env volatility reached the envs
    assert not np.array_equal(flat.observation, default.observation)


def test_split_over_devices_every_composition_gives_the_unsplit_batch_level_results():
    base = TimeLimit(parallax.make("GridWorld-v0"), 3)

    def policy(key: Any, state: Any) -> Any:
        return jax.random.randint(key, (8,), 0, 4)

    key = jax.random.key(1)
    fused = VmapAutoResetWrapper(base, 8)
    _, want = jax.jit(rollout, static_argnums=(0, 1, 3))(fused, policy, key, 7)
    _, got = shard_rollout(VmapWrapper(AutoResetWrapper(base), 8), policy, key, 7)
    assert len(got.reward.sharding.device_set) == 4
    _same(jax.device_get(got), jax.device_get(want))
    assert bool(np.any(want.done))


def test_gradients_flow_through_step_into_the_envs_that_continue():
    # a differentiable env (OptimalExecution-v0: the observation's remaining inventory is a
    # smooth function of the fractions sold): d(loss)/d(actions) through the auto-reset is
    # the same in every composition; where no episode has ended it is the plain env's
    # gradient, and a new episode's first state carries none (a fresh draw from its key)
    env = TimeLimit(parallax.make("OptimalExecution-v0"), 3)
    fused, single, bare = VmapAutoResetWrapper(env, 4), AutoResetWrapper(env), VmapWrapper(env, 4)
    start = fused.reset(key=jax.random.key(0))

    def total(env: Any, step: Any, actions: Any) -> Any:
        def body(s: Any, a: Any) -> Any:
            s = step(s, a)
            # the terminal observation, not the reset's
            return s, jnp.sum(parallax.final_observation(s) ** 2)

        return jax.lax.scan(body, env.reset(key=jax.random.key(0)), actions)[1].sum()

    def grads(actions: Any) -> Any:
        return (
            jax.grad(lambda a: total(fused, fused.step, a))(actions),
            jax.grad(lambda a: total(fused, jax.vmap(single.step), a))(actions),
            jax.grad(lambda a: total(bare, bare.step, a))(actions[:3]),
        )

    # fractions inside (0, 1), away from the clip at the action space's bounds
    actions = 0.3 + 0.1 * jax.random.uniform(jax.random.key(1), (4, 4, 1))
    ours, theirs, plain = jax.device_get(jax.jit(grads)(actions))
    np.testing.assert_array_equal(theirs, ours)
    assert np.all(np.isfinite(ours)) and np.any(ours[:3] != 0) and np.any(ours[3] != 0)
    # the third step ends every episode (time limit 3) and the fourth starts a new one: the
    # first three actions get the gradient of the episode without the auto-reset, as the
    # fourth reward depends on no action before the reset
    np.testing.assert_allclose(ours[:3], plain, rtol=1e-5, atol=1e-7)
    # forward mode too: a tangent on the first action moves the first observation
    step = jax.vmap(single.step)
    _, tangent = jax.jvp(
        lambda a: step(start, a).observation, (actions[0],), (jnp.ones_like(actions[0]),)
    )
    assert np.all(np.isfinite(tangent)) and np.any(tangent != 0)
