"""The spaces contract: shape, dtype, sample, jit-able contains, immutability, hashing, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from parallax import spaces, stack_space

ALL = [
    spaces.Discrete(5),
    spaces.Discrete(3, shape=(2,)),
    spaces.Box(0.0, 1.0, (3,)),
    spaces.Box([-1.0, 0.0], [1.0, 10.0]),
    spaces.Box(-jnp.inf, jnp.inf, (4,)),
    spaces.Box(0.0, jnp.inf, (2,)),
    spaces.Box(-jnp.inf, 0.0, (2,)),
    spaces.Box(-3, 3, (2,), dtype=jnp.int32),
    spaces.MultiDiscrete([2, 3, 4]),
    spaces.MultiBinary(4),
    spaces.PyTreeSpace(
        {"a": spaces.Discrete(2), "b": (spaces.Box(0.0, 1.0, (2,)), spaces.MultiBinary(2))}
    ),
]


@pytest.mark.parametrize("space", ALL, ids=repr)
def test_samples_are_contained_and_typed(space, x64):
    keys = jax.random.split(jax.random.key(0), 64)
    samples = jax.vmap(lambda k: space.sample(key=k))(keys)
    inside = jax.vmap(space.contains)(samples)
    assert bool(inside.all())
    one = space.sample(key=keys[0])
    assert jax.tree.map(lambda x: tuple(x.shape), one) == space.shape
    assert jax.tree.map(lambda x: x.dtype, one) == space.dtype


@pytest.mark.parametrize("space", ALL, ids=repr)
def test_contains_is_jittable_and_returns_a_bool_array(space):
    x = space.sample(key=jax.random.key(1))
    out = jax.jit(space.contains)(x)
    assert out.dtype == jnp.bool_ and out.shape == ()
    assert bool(out)


def test_unbounded_box_samples_are_finite():
    box = spaces.Box(-jnp.inf, jnp.inf, (1000,))
    x = box.sample(key=jax.random.key(0))
    assert bool(jnp.all(jnp.isfinite(x)))
    half = spaces.Box(np.array([0.0, -np.inf]), np.array([np.inf, 5.0]))
    y = jax.vmap(lambda k: half.sample(key=k))(jax.random.split(jax.random.key(1), 500))
    assert bool(jnp.all(jnp.isfinite(y)))
    assert bool(jnp.all(y[:, 0] >= 0.0)) and bool(jnp.all(y[:, 1] <= 5.0))


def test_huge_bounded_box_does_not_overflow():
    big = float(np.finfo(np.float32).max)
    box = spaces.Box(-big, big, (100,))
    x = box.sample(key=jax.random.key(0))
    assert bool(jnp.all(jnp.isfinite(x))) and bool(box.contains(x))


def test_per_dimension_bounds_are_kept():
    box = spaces.Box([0.0, 10.0], [1.0, 20.0])
    assert box.shape == (2,)
    x = jax.vmap(lambda k: box.sample(key=k))(jax.random.split(jax.random.key(0), 200))
    assert bool(jnp.all((x[:, 1] >= 10.0) & (x[:, 1] <= 20.0)))
    assert not bool(box.contains(jnp.array([0.5, 5.0], jnp.float32)))


def test_contains_rejects_wrong_shape_kind_and_values():
    d = spaces.Discrete(3)
    assert not bool(d.contains(jnp.int32(3)))
    assert not bool(d.contains(jnp.array([1], jnp.int32)))
    assert not bool(d.contains(jnp.float32(1.0)))
    box = spaces.Box(0.0, 1.0, (2,))
    assert not bool(box.contains(jnp.array([0.5, jnp.nan], jnp.float32)))
    assert not bool(box.contains(jnp.zeros(3, jnp.float32)))
    tree = spaces.PyTreeSpace({"a": spaces.Discrete(2)})
    assert not bool(tree.contains({"b": jnp.int32(0)}))


def test_spaces_are_immutable_hashable_and_comparable():
    assert spaces.MultiDiscrete([2, 3]) == spaces.MultiDiscrete([2, 3])
    assert spaces.MultiDiscrete([2, 3]) != spaces.MultiDiscrete([3, 2])
    assert hash(spaces.Box(0.0, 1.0, (2,))) == hash(spaces.Box(0.0, 1.0, (2,)))
    assert len({spaces.Discrete(2), spaces.Discrete(2), spaces.Discrete(3)}) == 2
    box = spaces.Box(0.0, 1.0, (2,))
    with pytest.raises(AttributeError):
        box._low = np.zeros(2)  # type: ignore[misc]
    with pytest.raises(ValueError):
        box.low[0] = 5.0  # read-only bounds

    # usable as a static argument
    f = jax.jit(lambda k, space: space.sample(key=k), static_argnums=1)
    assert f(jax.random.key(0), spaces.Discrete(4)).shape == ()


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: spaces.Discrete(0), "n must be a positive int"),
        (lambda: spaces.Discrete(True), "n must be a positive int"),
        (lambda: spaces.Box(1.0, 0.0, (2,)), r"low must be <= high.*low=1.0 > high=0.0"),
        (lambda: spaces.Box([0.0, 0.0], [1.0, 1.0, 1.0]), "do not broadcast"),
        (lambda: spaces.Box([0.0, 0.0], 1.0, (3,)), r"low has shape \(2,\)"),
        (lambda: spaces.Box(float("nan"), 1.0, ()), "low must not contain NaN"),
        (lambda: spaces.MultiDiscrete([2, 0]), "nvec must hold positive ints"),
        (lambda: spaces.MultiBinary(0), "n must hold positive sizes"),
        (lambda: spaces.PyTreeSpace({}), "at least one space"),
        (lambda: stack_space(spaces.Discrete(2), 0), "num must be a positive int"),
    ],
)
def test_invalid_construction_names_the_field(build, match):
    with pytest.raises((ValueError, TypeError), match=match):
        build()


def test_stack_space_leads_with_the_count():
    per_agent = spaces.Box([0.0, -1.0], [1.0, 1.0])
    stacked = stack_space(per_agent, 3)
    assert stacked.shape == (3, 2)
    np.testing.assert_array_equal(stacked.high[:, 1], [1.0, 1.0, 1.0])
    assert stack_space(spaces.Discrete(2), 3) == spaces.Discrete(2, (3,))
    assert stack_space(spaces.MultiDiscrete([2, 3]), 2).shape == (2, 2)
    tree = stack_space(spaces.PyTreeSpace({"x": spaces.MultiBinary(2)}), 4)
    assert tree.shape == {"x": (4, 2)}
