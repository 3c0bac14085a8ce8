"""What one standard normal of ``parallax.rng`` costs: AS241 against a table of cubics.

Compares the library's float32 draw ``parallax.rng._normal.normal_f32`` (AS241 PPND7
with exact products and a logarithm built from the integer bits) with the prototype
``normal_f32_table`` of ``benchmarks/normal_table.py`` (a table of cubics over octaves of
the tail area, no logarithm, bit-identical to its NumPy twin), and reports the float64
draw (``normal_f64``, AS241 PPND16) for scale:

1. load-independent work from XLA's ``cost_analysis()`` of the jitted program on
   ``--words`` words (default 2**20): flops and transcendentals per normal, for the
   transform alone (words in, normals out) and for the whole draw as
   ``rng.normal_vector`` runs it (the counter hash, then the transform), float32 with
   x64 off and on, and float64 (x64);
2. an interleaved timing of the whole float32 draw, the two alternating call by call in
   one process (so machine load hits both alike): the best and the median of
   ``--repeats`` calls each, and the median of the per-pair ratios as241 / table; once
   on ``--words`` words in one call, and once per ``--shapes`` entry ``NxD`` as a
   jitted ``lax.scan`` of 200 steps drawing ``vmap(normal_vector(ek, t, slot, D))``
   over N episode keys (the finance envs' shape is about 1024x5);
3. accuracy of both float32 draws on ``--words`` random words against
   ``scipy.special.ndtri`` of ``(w + 1/2) / 2**32`` in float64 (if scipy is
   installed): max relative error, max absolute error, max error in float32 ulps;
4. with ``--envs``, each env's auto-resetting ``make_vec`` rollout (``--num-envs`` envs,
   ``--steps`` steps, random actions drawn one step ahead as ``parallax bench`` does)
   compiled twice in one process, once with each float32 draw (the library's draw is
   swapped for the table while tracing, then restored), timed interleaved like 2., with
   XLA's flops of one env's jitted ``step`` and ``reset`` for each.

    python benchmarks/rng_normal_cost.py [--words 1048576] [--repeats 9] [--shapes 1024x5]
        [--json out.json]
    python benchmarks/rng_normal_cost.py --envs Trading-v0 Portfolio-v0 --num-envs 1024
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse
import contextlib
import platform
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from _common import ENV_KWARGS, write_json
from normal_table import normal_f32_table

import parallax
from parallax import action_scan, random_actions, rng
from parallax.rng import _draws, _normal

Transform = Callable[..., jax.Array]
SIDES: dict[str, Transform] = {
    "as241": _normal.normal_f32,  # the library's draw
    "table": normal_f32_table,  # the prototype (benchmarks/normal_table.py)
}


def _cost(fn: Callable[..., jax.Array], *args: Any, per: int) -> dict[str, float]:
    """Flops and transcendentals per element of XLA's cost analysis of ``jit(fn)``."""
    analysis = jax.jit(fn).lower(*args).compile().cost_analysis()
    if isinstance(analysis, list):  # older jax returns one dict per computation
        analysis = analysis[0]
    assert analysis is not None, "this backend gives no cost analysis"
    return {
        "flops": float(analysis.get("flops", 0.0)) / per,
        "transcendentals": float(analysis.get("transcendentals", 0.0)) / per,
    }


def _whole_draw(transform: Transform, dtype: Any, words: int) -> tuple[Callable, tuple]:
    """``rng.normal_vector``'s program with the given transform: 64 envs x ``words / 64``."""
    envs = 64
    num = words // envs
    eks = jax.vmap(lambda i: jnp.stack([i, i ^ jnp.uint32(0x9E3779B9)]))(
        jnp.arange(envs, dtype=jnp.uint32)
    )
    index = jnp.arange(num, dtype=jnp.uint32)

    def draw(eks: jax.Array, step: jax.Array) -> jax.Array:
        w0, w1 = _draws._words(eks, step, jnp.uint32(3), index, True)
        return transform(w0) if dtype == np.float32 else transform(w0, w1)

    return draw, (eks, jnp.uint32(5))


def measure_costs(words: int) -> dict[str, dict[str, float]]:
    """Cost analysis per normal for each transform, alone and inside the whole draw."""
    out: dict[str, dict[str, float]] = {}
    for x64 in (False, True):
        with jax.enable_x64(x64):
            w = jnp.zeros(words, jnp.uint32)
            suffix = " (x64 on)" if x64 else ""
            for name, fn in SIDES.items():
                out[f"float32 {name} transform{suffix}"] = _cost(fn, w, per=words)
                draw, args = _whole_draw(fn, np.float32, words)
                out[f"float32 {name} whole draw{suffix}"] = _cost(draw, *args, per=words)
    with jax.enable_x64(True):
        w = jnp.zeros(words, jnp.uint32)
        out["float64 as241 transform (x64 on)"] = _cost(_normal.normal_f64, w, w, per=words)
        draw, args = _whole_draw(_normal.normal_f64, np.float64, words)
        out["float64 as241 whole draw (x64 on)"] = _cost(draw, *args, per=words)
    return out


def _interleave(programs: dict[str, tuple[Any, tuple]], repeats: int) -> dict[str, Any]:
    """Time compiled programs alternating call by call: best, median, per-pair ratios."""
    for fn, args in programs.values():  # warm up
        jax.block_until_ready(fn(*args))
    took: dict[str, list[float]] = {name: [] for name in programs}
    for _ in range(repeats):
        for name, (fn, args) in programs.items():
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            took[name].append(time.perf_counter() - start)
    ratios = [a / t for a, t in zip(took["as241"], took["table"], strict=True)]
    out: dict[str, Any] = {
        name: {"best_s": min(t), "median_s": statistics.median(t)} for name, t in took.items()
    }
    out["median_ratio_as241_over_table"] = statistics.median(ratios)
    out["best_ratio_as241_over_table"] = min(took["as241"]) / min(took["table"])
    return out


def timing_words(words: int, repeats: int) -> dict[str, Any]:
    """The whole float32 draw of ``words`` normals in one call, both sides interleaved."""
    programs = {}
    for name, fn in SIDES.items():
        draw, args = _whole_draw(fn, np.float32, words)
        programs[name] = (jax.jit(draw).lower(*args).compile(), args)
    return _interleave(programs, repeats)


@contextlib.contextmanager
def _float32_draw(transform: Transform) -> Iterator[None]:
    """Trace ``parallax.rng``'s float32 normals with ``transform`` inside this block."""
    saved = _normal.normal_f32
    _normal.normal_f32 = transform
    _draws._draw.clear_cache()
    try:
        yield
    finally:
        _normal.normal_f32 = saved
        _draws._draw.clear_cache()


def timing_shape(num_envs: int, draws: int, repeats: int, steps: int = 200) -> dict[str, Any]:
    """A scan of ``steps`` steps drawing ``draws`` normals for each of ``num_envs`` keys."""
    eks = rng.episode_key(jax.random.split(jax.random.key(0), num_envs))

    def run(eks: jax.Array) -> jax.Array:
        def body(acc: jax.Array, t: jax.Array) -> tuple[jax.Array, None]:
            return acc + jax.vmap(lambda ek: rng.normal_vector(ek, t, 3, draws))(eks), None

        start = jnp.zeros((num_envs, draws), jnp.float32)
        return jax.lax.scan(body, start, jnp.arange(steps, dtype=jnp.uint32))[0]

    programs = {}
    for name, fn in SIDES.items():
        with _float32_draw(fn):
            programs[name] = (jax.jit(run).lower(eks).compile(), (eks,))
    result = _interleave(programs, repeats)
    result["fusions"] = {
        name: (compiled.as_text() or "").count(" fusion(")
        for name, (compiled, _) in programs.items()
    }
    return result


def env_timing(env_id: str, num_envs: int, steps: int, repeats: int) -> dict[str, Any]:
    """One env's auto-resetting rollout with each float32 draw, compiled apart, timed interleaved."""
    kwargs = ENV_KWARGS.get(env_id, {})
    env = parallax.make(env_id, **kwargs)
    vec = parallax.make_vec(env_id, num_envs, **kwargs)
    sample = random_actions(vec.action_space, num_envs)
    ts = jnp.arange(steps, dtype=jnp.uint32)
    state = jax.jit(lambda k: vec.reset(key=k))(jax.random.key(0))

    def rollout(state: Any, key: Any) -> Any:
        return action_scan(vec.step, state, sample, rng.episode_key(key), ts)

    key = jax.random.key(0)
    action = env.action_space.sample(key=jax.random.key(1))
    one = env.reset(key=key)
    programs, flops, reset_flops = {}, {}, {}
    for name, transform in SIDES.items():
        with _float32_draw(transform):
            compiled = jax.jit(rollout).lower(state, jax.random.key(1)).compile()
            programs[name] = (compiled, (state, jax.random.key(2)))
            flops[name] = _cost(env.step, one, action, per=1)["flops"]
            reset_flops[name] = _cost(lambda k: env.reset(key=k), key, per=1)["flops"]
    result = _interleave(programs, repeats)
    result.update(
        env=env_id,
        num_envs=num_envs,
        steps=steps,
        env_kwargs=kwargs,
        flops_per_env_step=flops,
        flops_per_env_reset=reset_flops,
        steps_per_s_median={name: num_envs * steps / result[name]["median_s"] for name in programs},
    )
    return result


def accuracy(words: int) -> dict[str, dict[str, float]] | None:
    """Errors of both float32 draws against ``scipy.special.ndtri`` (None without scipy)."""
    try:
        from scipy.special import ndtri
    except ModuleNotFoundError:
        return None
    w = np.random.default_rng(0).integers(0, 2**32, words, dtype=np.uint64).astype(np.uint32)
    extremes = np.array([0, 1, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1], np.uint32)
    w = np.concatenate([w, extremes])
    exact = ndtri((w.astype(np.float64) + 0.5) / 2.0**32)
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    out = {}
    for name, fn in SIDES.items():
        z = np.asarray(jax.jit(fn)(jnp.asarray(w))).astype(np.float64)
        err = np.abs(z - exact)
        out[name] = {
            "max_rel": float((err / np.abs(exact)).max()),
            "max_abs": float(err.max()),
            "max_abs_central": float(err[np.abs(exact) < 1.5].max()),
            "max_ulps": float((err / ulp).max()),
            "mean_abs": float(err.mean()),
            "max_abs_z": float(np.abs(z).max()),
        }
    return out


def _print_timing(label: str, t: dict[str, Any]) -> None:
    sides = "  ".join(
        f"{name} best {t[name]['best_s'] * 1e3:.2f} ms median {t[name]['median_s'] * 1e3:.2f} ms"
        for name in SIDES
    )
    print(
        f"{label}: {sides}; as241/table {t['best_ratio_as241_over_table']:.2f}x (best), "
        f"{t['median_ratio_as241_over_table']:.2f}x (median of pairs)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, default=1 << 20, help="normals per program")
    parser.add_argument("--repeats", type=int, default=9, help="timed calls per side")
    parser.add_argument("--shapes", nargs="*", default=["1024x5", "1024x64"], help="NxD scans")
    parser.add_argument("--envs", nargs="*", default=[], help="env ids to time end to end")
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--json", type=str, default=None, help="also write results here")
    args = parser.parse_args()

    costs = measure_costs(args.words)
    errors = accuracy(args.words)
    words_timing = timing_words(args.words, args.repeats)
    shapes = {}
    for shape in args.shapes:
        n, d = (int(x) for x in shape.split("x"))
        shapes[shape] = timing_shape(n, d, args.repeats)
    envs = [env_timing(e, args.num_envs, args.steps, args.repeats) for e in args.envs]

    print(f"device: {jax.devices()[0].device_kind} ({platform.processor() or platform.machine()})")
    print(f"{'XLA cost analysis, per normal':<44} {'flops':>8} {'transcendentals':>16}")
    for name, c in costs.items():
        print(f"{name:<44} {c['flops']:>8.1f} {c['transcendentals']:>16.2f}")
    cut = 1 - costs["float32 table transform"]["flops"] / costs["float32 as241 transform"]["flops"]
    whole = 1 - (
        costs["float32 table whole draw"]["flops"] / costs["float32 as241 whole draw"]["flops"]
    )
    print(f"float32 flops the table saves: {cut:.0%} of the transform, {whole:.0%} of the draw")
    if errors is not None:
        print("float32 accuracy against scipy.special.ndtri:")
        for name, e in errors.items():
            print(
                f"  {name:<6} max rel {e['max_rel']:.3g}  max abs {e['max_abs']:.3g}  "
                f"max abs |z|<1.5 {e['max_abs_central']:.3g}  max ulps {e['max_ulps']:.2f}  "
                f"mean abs {e['mean_abs']:.3g}  max |z| {e['max_abs_z']:.4f}"
            )
    print(f"interleaved timing, {args.repeats} calls per side:")
    _print_timing(f"  {args.words:,} normals in one call", words_timing)
    for shape, t in shapes.items():
        _print_timing(f"  scan of 200 steps, {shape} normals per step, fusions {t['fusions']}", t)
    for res in envs:
        fl, rf, sps = (
            res["flops_per_env_step"],
            res["flops_per_env_reset"],
            res["steps_per_s_median"],
        )
        print(
            f"  {res['env']}, N = {res['num_envs']}, auto-resetting: flops per env step "
            f"{fl['as241']:.0f} (as241) / {fl['table']:.0f} (table), per reset "
            f"{rf['as241']:.0f} / {rf['table']:.0f}; median steps/s "
            f"{sps['as241'] / 1e6:.2f} M / {sps['table'] / 1e6:.2f} M"
        )
        _print_timing(f"  {res['env']}", res)
    write_json(
        args.json,
        {
            "words": args.words,
            "repeats": args.repeats,
            "cost_per_normal": costs,
            "accuracy": errors,
            "timing_words": words_timing,
            "timing_shapes": shapes,
            "envs": envs,
            "device": jax.devices()[0].device_kind,
        },
        indent=2,
    )


if __name__ == "__main__":
    main()
