"""What the batch-level auto-reset costs on a step where no env is done (issue 20).

Structural checks on the compiled program, never timings: one step of a `lax.scan` over
`make_vec`'s auto-resetting stack runs a reset conditional whose first branch (no env done)
must hand the stepped state on in place. Only the leaves the same-step auto-reset keeps twice
(the observation and `info`, also in `final_observation` and `final_info`) may be copied there;
the env state (the price window, the keys) must not be, whatever the partial-reset budget.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_benchmarks import load

import parallax
from parallax import AutoResetWrapper, TimeLimit, VmapAutoResetWrapper, VmapWrapper
from parallax.envs import GridWorld

_computations = load("profile_step")._computations  # the profile's own reading of the HLO

# one worker runs this file, so its module fixtures are built once per `make test`
pytestmark = pytest.mark.xdist_group("autoreset_cost")

N = 64  # the default budget is then N // 16 = 4 resets per step
STEPS = 3
_SKIP = {"get-tuple-element", "tuple", "parameter", "constant", "bitcast"}


def no_reset_kernels(step: Any, state: Any, action: Any) -> tuple[Counter[str], Counter[str]]:
    """The kernels of one scan step on the path where no env resets, and the copies in it.

    Inside a conditional only its first branch counts (a `lax.cond`'s false branch: no env
    done). Returns `(kernels by opcode, shapes copied inside that branch)`, a shape as HLO
    writes it, e.g. `f32[64,30,1]`.
    """

    def rollout(s: Any) -> Any:
        return jax.lax.scan(lambda c, _: (step(c, action), None), s, length=STEPS)[0]

    hlo = jax.jit(rollout).lower(state).compile().as_text() or ""
    comps = _computations(hlo)
    loop = re.search(
        r"while\(.*body=%(\S+?),.*\"known_trip_count\":\{\"n\":\"" + str(STEPS) + '"', hlo
    )
    assert loop is not None, "no scan loop in the program"
    kernels: Counter[str] = Counter()
    copies: Counter[str] = Counter()

    def walk(name: str, in_branch: bool) -> None:
        for line in comps[name]:
            op = re.match(r"\s*(?:ROOT )?%\S+ = (.*?) ([a-z][a-z0-9-]*)\(", line)
            if not op or op.group(2) in _SKIP:
                continue
            kernels[op.group(2)] += 1
            if op.group(2) == "copy" and in_branch:
                copies[op.group(1).split("{")[0]] += 1
            if op.group(2) == "conditional":
                branches = re.search(r"branch_computations=\{([^}]*)\}", line)
                assert branches is not None
                walk(branches.group(1).split(",")[0].strip().lstrip("%"), True)

    walk(loop.group(1), False)
    return kernels, copies


@pytest.fixture(scope="module")
def trading() -> Any:
    return parallax.make("Trading-v0", episode_length=50)


def _action(env: Any) -> Any:
    return jnp.zeros((N, *env.action_space.shape), env.action_space.dtype)


def _auto_reset(env: Any, budget: Any) -> tuple[Counter[str], Counter[str]]:
    vec = VmapAutoResetWrapper(env, N, max_resets_per_step=budget)
    return no_reset_kernels(vec.step, vec.reset(key=jax.random.key(0)), _action(env))


@pytest.fixture(scope="module")
def auto_reset(trading: Any) -> Any:
    """`_auto_reset(trading, budget)`, compiled once per budget for the module's tests."""
    found: dict[Any, tuple[Counter[str], Counter[str]]] = {}

    def get(budget: Any) -> tuple[Counter[str], Counter[str]]:
        if budget not in found:
            found[budget] = _auto_reset(trading, budget)
        kernels, copies = found[budget]
        return Counter(kernels), Counter(copies)

    return get


def test_partial_reset_budget_adds_no_kernel_to_a_step_where_no_env_is_done(auto_reset):
    with_budget, copies_with = auto_reset("auto")
    without, copies_without = auto_reset(None)
    assert with_budget["conditional"] == without["conditional"] == 1
    # the partial path lives inside the reset branch: a step where no env is done runs the
    # same kernels with or without it (a three-way switch copied every leaf of the state)
    assert with_budget == without
    assert copies_with == copies_without


@pytest.mark.parametrize("budget", ["auto", None])
def test_no_reset_step_hands_the_env_state_on_in_place(trading, auto_reset, budget):
    _, copies = auto_reset(budget)
    state = trading.reset(key=jax.random.key(0))
    window = state.env_state.market.window
    # shapes that only the env state and the keys have (the observation is f32[N, 31])
    only_env_state = {
        f"f32[{N},{','.join(map(str, window.shape))}]",  # the 30-row price window
        f"u32[{N},2]",  # the episode key and the state's key
    }
    assert not only_env_state & set(copies), copies
    # at most: the observation and each info leaf, which the auto-reset keeps twice, and
    # the env-state leaves that info repeats (equity, position, the step count)
    assert sum(copies.values()) <= 1 + len(state.info) + 3, copies


def test_auto_reset_step_costs_at_most_the_kept_leaves_over_the_bare_step(trading, auto_reset):
    kernels, _ = auto_reset("auto")
    reset = jax.vmap(lambda k: trading.reset(key=k))(jax.random.split(jax.random.key(0), N))
    bare, _ = no_reset_kernels(jax.vmap(trading.step), reset, _action(trading))
    kept_twice = 1 + len(trading.reset(key=jax.random.key(0)).info)  # observation, info
    # over the bare step: one copy per leaf kept twice, the conditional and `any(done)`
    # (measured: 12 for Trading-v0; the three-way switch added 23)
    assert sum(kernels.values()) - sum(bare.values()) <= kept_twice + 4, (kernels, bare)


def test_budgeted_and_plain_auto_reset_agree_bit_for_bit_under_jit_and_vmap(x64):
    # episodes of random length: steps with 0, a few (<= budget) and many (> budget) resets
    def make(budget: Any) -> Any:
        return VmapAutoResetWrapper(TimeLimit(GridWorld(), 6), 16, max_resets_per_step=budget)

    reference = VmapWrapper(AutoResetWrapper(TimeLimit(GridWorld(), 6)), 16)
    actions = jax.random.randint(jax.random.key(3), (20, 16), 0, 4, jnp.int32)

    def run(env: Any, key: Any) -> Any:
        def body(s: Any, a: Any) -> Any:
            s = env.step(s, a)
            return s, (s.observation, s.step_count, s.info["final_observation"], s.done)

        return jax.lax.scan(body, env.reset(key=key), actions)[1]

    def vmapped_and_one(env: Any) -> Any:
        """Both keys under `vmap` and key 0 alone, in one `jax.jit` (one program per env)."""
        return jax.jit(lambda ks: (jax.vmap(lambda k: run(env, k))(ks), run(env, ks[0])))

    def same(got: Any, want: Any) -> bool:
        return jax.tree.all(jax.tree.map(lambda x, y: np.array_equal(x, y), got, want))

    keys = jax.random.split(jax.random.key(1), 2)
    expected = jax.device_get(jax.jit(jax.vmap(lambda k: run(reference, k)))(keys))
    resets = np.sum(expected[3], axis=-1)
    assert int(resets.max()) > 2 and int(np.sum(resets == 0)) > 0  # all three paths taken
    mine = jax.tree.map(lambda x: x[0], expected)
    for budget in (None, 2, 4, 16):
        got, one = jax.device_get(vmapped_and_one(make(budget))(keys))
        assert same(got, expected)
        assert same(one, mine)
