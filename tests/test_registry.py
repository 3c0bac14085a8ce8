"""Ids, make, make_vec and the `parallax list` command."""

import jax
import pytest

import parallax
from parallax import TimeLimit, VmapAutoResetWrapper, VmapWrapper
from parallax._cli import main
from parallax._wrappers.base import unwrap_layers
from parallax.envs import GridWorld


def test_make_builds_registered_envs_with_overrides():
    assert isinstance(parallax.make("GridWorld-v0"), GridWorld)
    parallax.register("Limited-v0", lambda max_steps=5: TimeLimit(GridWorld(), max_steps))
    assert parallax.make("Limited-v0", max_steps=9).max_steps == 9


def test_unknown_ids_suggest_close_matches():
    with pytest.raises(KeyError, match="did you mean 'GridWorld-v0'"):
        parallax.make("GridWorld-v1")


def test_make_vec_builds_the_documented_stack():
    # the stack that runs is the stack you see: batch-level auto-reset over a VmapWrapper
    vec = parallax.make_vec("GridWorld-v0", 8, max_episode_steps=20)
    assert isinstance(vec, VmapAutoResetWrapper) and vec.num_envs == 8
    assert isinstance(vec.env, VmapWrapper) and isinstance(vec.env.env, TimeLimit)
    assert vec.env.env.max_steps == 20 and vec.autoreset_mode == "same-step"
    assert [type(layer).__name__ for layer in unwrap_layers(vec)] == [
        "VmapAutoResetWrapper",
        "VmapWrapper",
        "TimeLimit",
        "GridWorld",
    ]
    off = parallax.make_vec("GridWorld-v0", 8, autoreset=False)
    assert type(off) is VmapWrapper and isinstance(off.env, GridWorld)
    assert off.autoreset_mode == "off"
    nxt = parallax.make_vec("GridWorld-v0", 2, autoreset="next-step")
    assert nxt.mode == "next-step" and nxt.autoreset_mode == "next-step"
    state = vec.reset(key=jax.random.key(0))
    assert state.observation.shape == (8, 4)


def test_make_vec_checks_its_arguments():
    with pytest.raises(ValueError, match="num_envs must be a positive int"):
        parallax.make_vec("GridWorld-v0", 0)
    with pytest.raises(ValueError, match="max_episode_steps must be a positive int"):
        parallax.make_vec("GridWorld-v0", 2, max_episode_steps=0)


def test_cli_list_prints_every_local_id(capsys):
    assert main(["list", "--no-namespaces"]) == 0
    out = capsys.readouterr().out.split()
    for env_id in ("GridWorld-v0", "Race-v0", "Trading-v0", "OptimalExecution-v0"):
        assert env_id in out


def test_register_refuses_an_existing_id_unless_told_to_override(monkeypatch):
    from parallax import _registry

    monkeypatch.setattr(_registry, "_REGISTRY", dict(_registry._REGISTRY))
    with pytest.raises(ValueError, match=r"'GridWorld-v0' is already registered.*override=True"):
        parallax.register("GridWorld-v0", lambda: TimeLimit(GridWorld(), 3))
    assert isinstance(parallax.make("GridWorld-v0"), GridWorld)  # untouched
    parallax.register("GridWorld-v0", lambda: TimeLimit(GridWorld(), 3), override=True)
    assert parallax.make("GridWorld-v0").max_steps == 3
