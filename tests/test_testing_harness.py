"""The battery's bookkeeping programs (key schedules, action samples, space membership) are
compiled without LLVM optimisation on the CPU, and give the bits the default compile gives."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from parallax import spaces
from parallax.testing import _harness
from parallax.testing._compare import batched_contains
from parallax.testing._rollout import KeyPolicy, SampledPolicy, _schedule_fn

SPACES = {
    "Discrete": spaces.Discrete(5),  # a sample and Gumbel noise (floats through log)
    "MultiDiscrete": spaces.MultiDiscrete([3, 4, 2]),
    "Box": spaces.Box(-1.0, 2.0, (4,)),  # uniform floats
}


def _same_bits(got, want) -> None:
    got_leaves, want_leaves = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        assert g.tobytes() == w.tobytes()


@pytest.mark.parametrize("x64", [False, True], ids=["f32", "x64"])
def test_schedules_and_membership_equal_the_default_compile_bit_for_bit(x64):
    with jax.enable_x64(x64):
        keys = jax.random.split(jax.random.key(3), 3)
        for policy in [SampledPolicy(space) for space in SPACES.values()] + [KeyPolicy(len)]:
            fast = _schedule_fn(policy, 12, 1)
            schedule = fast(keys, keys)
            _same_bits(schedule, jax.jit(fast.__wrapped__)(keys, keys))
        box = SPACES["Box"]
        samples = np.asarray(_schedule_fn(SampledPolicy(box), 12, 1)(keys, keys).prepared[0])
        outside = np.full((1, 12, 4), 2.5, np.float32)
        batch = np.concatenate([samples, outside])  # (4, 12, 4): three inside, one outside
        contains = batched_contains(box, 2)
        inside = np.asarray(contains(batch))
        assert inside[:3].all() and not inside[3].any()
        _same_bits(inside, jax.jit(contains.__wrapped__)(batch))


def test_the_options_reach_the_compiler(monkeypatch):
    # an option XLA does not know fails the compile: the options are not silently dropped
    monkeypatch.setattr(_harness, "HARNESS_COMPILER_OPTIONS", {"xla_no_such_option": 1})
    program = _harness.harness_jit(lambda x: x + 1)
    with pytest.raises(Exception, match="xla_no_such_option"):
        program(np.float32(1.0))
