"""`parallax.train` (the PPO): GAE bootstraps correctly, and a tiny PPO run, vmapped over two seeds in
one jit, clearly beats both a random policy and its own untrained policy on
OptimalExecution-v0 (scored on the same episodes as the Almgren-Chriss baseline)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest


@pytest.fixture(scope="module")
def ppo():
    from parallax import train

    return train


def test_gae_bootstraps_on_truncation_not_on_termination(ppo):
    # one env, 4 steps: step 1 is truncated, step 3 terminated
    reward = jnp.array([[1.0], [2.0], [3.0], [4.0]])
    value = jnp.array([[10.0], [20.0], [30.0], [40.0]])
    next_value = jnp.array([[20.0], [99.0], [40.0], [77.0]])  # 99, 77: terminal observations
    termination = jnp.array([[0.0], [0.0], [0.0], [1.0]])
    done = jnp.array([[False], [True], [False], [True]])
    gamma, lam = 0.9, 0.5
    adv, target = ppo.gae(reward, value, next_value, termination, done, gamma, lam)
    d3 = 4.0 - 40.0  # terminated: no bootstrap from 77
    d2 = 3.0 + gamma * 40.0 - 30.0
    d1 = 2.0 + gamma * 99.0 - 20.0  # truncated: bootstrap from the terminal observation's value
    d0 = 1.0 + gamma * 20.0 - 10.0
    expected = [d0 + gamma * lam * d1, d1, d2 + gamma * lam * d3, d3]
    np.testing.assert_allclose(np.asarray(adv[:, 0]), expected, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(target), np.asarray(adv + value), rtol=1e-6)


def test_config_presets_and_validation(ppo):
    config = ppo.preset("OptimalExecution-v0", total_steps=8000, num_envs=None)
    assert config.num_envs == 32 and config.num_updates == 10 and config.gamma == 1.0
    assert config.minibatch_size == 32 * 25 // 4
    with pytest.raises(TypeError, match="Discrete, 1-D MultiDiscrete or 1-D Box"):
        from parallax import spaces

        ppo.ActionHead(spaces.MultiBinary(3), -0.5)


def test_tiny_ppo_improves_on_random_and_on_its_initial_policy(ppo):
    config = ppo.preset("OptimalExecution-v0", total_steps=32 * 25 * 20, num_eval_envs=64)
    train = jax.jit(jax.vmap(ppo.make_train(config)))
    out = train(jax.random.split(jax.random.key(0), 2))
    curves = np.asarray(out["metrics"]["mean_return"])
    assert curves.shape == (2, config.num_updates)
    evaluate = jax.jit(ppo.make_evaluate(config))
    head = ppo.ActionHead(ppo.true_action_space(config), config.init_log_std)
    for seed in range(2):
        params = jax.tree.map(lambda x, i=seed: x[i], out["params"])
        state = jax.tree.map(lambda x, i=seed: x[i], out["env_state"])
        scores = {k: float(v) for k, v in evaluate(jax.random.key(7), params, state).items()}
        untrained = ppo.init_params(jax.random.key(seed), 3, head, config.hidden)
        initial = float(evaluate(jax.random.key(7), untrained, state)["mean_episode_reward"])
        # random ~ -1200 bps, the untrained policy (sell half each step) ~ -600, TWAP ~ -430,
        # Almgren-Chriss ~ -315: a broken advantage or update stays near the untrained policy
        assert scores["mean_episode_reward"] > scores["random_policy_reward"] + 500, scores
        assert scores["mean_episode_reward"] > initial + 150, (scores, initial)
        assert scores["mean_episode_reward"] > -480.0, scores
        assert scores["baseline_reward"] > scores["mean_episode_reward"] - 150, scores
        # the training curve went up: late updates beat early ones
        curve = curves[seed][np.isfinite(curves[seed])]
        assert curve[-4:].mean() > curve[:4].mean() + 100, curve


def test_multidiscrete_head_is_one_categorical_per_element(ppo):
    """A 1-D MultiDiscrete action (e.g. LimitOrderBook-v0's bid, ask, market) gets one
    categorical per element: logits side by side, log-probabilities and entropies added."""
    import itertools

    from parallax import spaces

    head = ppo.ActionHead(spaces.MultiDiscrete([3, 2, 4]), -0.5)
    assert head.size == 3 + 2 + 4
    out = jnp.array(
        [[0.3, -1.0, 2.0, 0.5, 0.1, -0.2, 1.5, 0.0, 0.7], [1.0, 1.0, 1.0, -3.0, 2.0, 0, 0, 0, 0]]
    )
    parts = [out[:, :3], out[:, 3:5], out[:, 5:]]
    every = jnp.array(list(itertools.product(range(3), range(2), range(4))))  # (24, 3)
    for row in range(2):
        logp = head.log_prob(jnp.broadcast_to(out[row], (24, 9)), jnp.zeros(9), every)
        assert logp.shape == (24,)
        np.testing.assert_allclose(float(jnp.sum(jnp.exp(logp))), 1.0, rtol=1e-5)
        expected = sum(jax.nn.log_softmax(p[row])[every[:, i]] for i, p in enumerate(parts))
        np.testing.assert_allclose(np.asarray(logp), np.asarray(expected), rtol=1e-5)
        # the mode is the most likely joint action, the entropy that of the joint law
        mode = head.mode(out[row : row + 1])[0]
        assert mode.tolist() == [int(jnp.argmax(p[row])) for p in parts]
        assert mode.tolist() == every[int(jnp.argmax(logp))].tolist()
        entropy = float(head.entropy(out[row : row + 1], jnp.zeros(9))[0])
        np.testing.assert_allclose(entropy, float(-jnp.sum(jnp.exp(logp) * logp)), rtol=1e-5)
    # samples are int actions in range, each element drawn from its own categorical
    u = head.sample(jax.random.key(0), jnp.broadcast_to(out[0], (4000, 9)), jnp.zeros(9))
    action = head.to_action(u)
    assert action.shape == (4000, 3) and action.dtype == jnp.int32
    assert bool(spaces.MultiDiscrete([3, 2, 4]).contains(action[0]))
    for i, p in enumerate(parts):
        frequency = np.bincount(np.asarray(action[:, i]), minlength=p.shape[1]) / 4000
        np.testing.assert_allclose(frequency, np.asarray(jax.nn.softmax(p[0])), atol=0.03)
    with pytest.raises(TypeError, match="1-D MultiDiscrete"):
        ppo.ActionHead(spaces.MultiDiscrete([[2, 3], [2, 3]]), -0.5)
