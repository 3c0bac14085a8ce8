"""Messages/s of `parallax.finance.lob.process_messages` against JAX-LOB's book (issue 39).

The same message streams drive both books (`_jaxlob.generate`: streams of the mappings
that hold, cycling through its five regimes; capacity 100 = JAX-LOB's rows per side):

- ours: `jit(vmap(process_messages))` over B books from `empty_book(100)`, returning the
  final books and, per message, the status, the fill count and the traded size (the
  `Fills` themselves are reduced inside the program, not written out: B x M x 100 of them
  would be gigabytes at B = 1024);
- JAX-LOB's: `jit(vmap(scan_through_entire_array))`, its own whole-stream scan, over B
  pairs of `(100, 6)` sides and a `(100, 6)` trade array (its env's sizes), returning the
  final sides and trades;
- B streams of `--messages` messages each: `--streams` distinct streams tiled to B (the
  books do not share work: each is its own lane of the vmap);
- after a warm-up call of each (whose results are checked: both end in the same resting
  orders on every book), the calls are interleaved, ours then theirs, `--rounds` rounds;
  reported per B: messages/s (B x M / seconds), median and best, and the ratio ours /
  JAX-LOB (median of the per-round ratios, and best over best).

    python benchmarks/lob_messages_speed.py        # B in {1, 64, 1024}, writes nothing
    python benchmarks/lob_messages_speed.py --json benchmarks/results/lob_messages_speed.json
    python benchmarks/lob_messages_speed.py --sizes 1 4 --messages 50 --rounds 1   # a quick look
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from typing import Any

import _jaxlob as jl
import jax
import jax.numpy as jnp
import numpy as np
from _common import add_cpu_threads_option, apply_cpu_threads, interleaved_seconds, write_json

TICK = 100


def streams(count: int, messages: int) -> np.ndarray:
    """`count` streams `(count, messages, 5)`, the regimes in turn, fixed seeds."""
    names = list(jl.REGIMES)
    return np.stack(
        [
            jl.generate(s, messages, jl.REGIMES[names[s % len(names)]], tick=TICK)
            for s in range(count)
        ]
    )


def programs(batch: np.ndarray) -> dict[str, Any]:
    """The two compiled calls on `batch` `(B, M, 5)`, each a zero-argument function."""
    from parallax.finance import lob

    ours_in = jnp.asarray(batch)
    rows = np.stack([jl.to_jaxlob(m, TICK) for m in batch])
    theirs_in = jnp.asarray(rows)

    @jax.jit
    def ours(messages: jax.Array) -> Any:
        def one(m: jax.Array) -> Any:
            book, results = lob.process_messages(lob.empty_book(jl.ROWS), m, tick=TICK)
            return book, results.status, results.fills.count, results.fills.size.sum(-1)

        return jax.vmap(one)(messages)

    jl.load()
    asks, bids = jl.empty_sides()
    fresh = -jnp.ones((jl.ROWS, 6), jnp.int32)

    @jax.jit
    def theirs(rows: jax.Array) -> Any:
        job = __import__(jl.MODULE, fromlist=["_"])
        return jax.vmap(lambda r: job.scan_through_entire_array(r, (asks, bids, fresh)))(rows)

    def run_theirs() -> Any:
        with jax.numpy_dtype_promotion("standard"):  # JAX-LOB needs it (see _jaxlob)
            return theirs(theirs_in)

    return {"parallax": lambda: ours(ours_in), "jaxlob": run_theirs}


def check(batch: np.ndarray, out: dict[str, Any]) -> bool:
    """Both books end every stream with the same resting orders (price, size, id, order)."""
    book = jax.tree.map(np.asarray, out["parallax"][0])
    status = np.asarray(out["parallax"][1])
    asks, bids, _ = (np.asarray(x) for x in out["jaxlob"])
    if not np.all(status == 0):
        return False
    for b in range(len(batch)):
        ours = {}
        for row, side, sign in ((0, 1, -1), (1, -1, 1)):
            slots = np.flatnonzero(book.valid[b, row])
            slots = sorted(slots, key=lambda s: (sign * book.price[b, row, s], book.seq[b, row, s]))
            ours[side] = [
                (
                    int(book.price[b, row, s]) * TICK,
                    int(book.size[b, row, s]),
                    int(book.owner[b, row, s]),
                )
                for s in slots
            ]
        if ours != jl.resting(asks[b], bids[b]):
            return False
    return True


def measure(base: np.ndarray, size: int, rounds: int) -> dict[str, Any]:
    batch = np.concatenate([base] * -(-size // len(base)))[:size]
    progs = programs(batch)
    compile_s, out = {}, {}
    for name, program in progs.items():
        start = time.perf_counter()
        out[name] = jax.block_until_ready(program())  # compiles, and the warm-up call
        compile_s[name] = time.perf_counter() - start
    agree = check(batch, out)
    seconds = interleaved_seconds(progs, rounds)
    work = batch.shape[0] * batch.shape[1]
    result: dict[str, Any] = {
        "books": size,
        "messages": int(batch.shape[1]),
        "final_books_agree": agree,
    }
    for name, times in seconds.items():
        result[name] = {
            "median_messages_per_s": work / statistics.median(times),
            "best_messages_per_s": work / min(times),
            "seconds": times,
            "first_call_s": compile_s[name],
        }
    ours, theirs = seconds["parallax"], seconds["jaxlob"]
    result["median_ratio"] = statistics.median(t / o for o, t in zip(ours, theirs, strict=True))
    result["best_ratio"] = min(theirs) / min(ours)
    return result


def table(results: dict[str, Any]) -> str:
    lines = [
        "| B books x M | ours messages/s (median, best) | JAX-LOB messages/s (median, best) | ratio (median, best) |",
        "|---|---:|---:|---:|",
    ]
    for r in results["cases"]:
        cells = []
        for name in ("parallax", "jaxlob"):
            m, b = r[name]["median_messages_per_s"], r[name]["best_messages_per_s"]
            cells.append(f"{m:,.0f} ({b:,.0f})")
        cells.append(f"{r['median_ratio']:.1f}x ({r['best_ratio']:.1f}x)")
        lines.append(f"| {r['books']} x {r['messages']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[1, 64, 1024])
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument("--streams", type=int, default=64, help="distinct streams, tiled to B")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", default=None, help="write the results to this file")
    add_cpu_threads_option(parser)
    args = parser.parse_args(argv)
    apply_cpu_threads(args)
    load_before = list(os.getloadavg())
    base = streams(min(args.streams, max(args.sizes)), args.messages)
    results: dict[str, Any] = {
        "benchmark": "lob_messages_speed",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "rounds": args.rounds,
        "streams": int(base.shape[0]),
        "load_average_before": load_before,
        "cases": [],
    }
    for size in args.sizes:
        row = measure(base, size, args.rounds)
        results["cases"].append(row)
        print(
            f"B={size}: ours {row['parallax']['median_messages_per_s']:,.0f}/s, JAX-LOB "
            f"{row['jaxlob']['median_messages_per_s']:,.0f}/s, {row['median_ratio']:.1f}x, "
            f"final books agree: {row['final_books_agree']}",
            flush=True,
        )
    results["load_average_after"] = list(os.getloadavg())
    print(table(results))
    write_json(args.json, results, indent=1)
    return results


if __name__ == "__main__":
    main()
