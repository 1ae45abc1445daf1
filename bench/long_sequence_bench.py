#!/usr/bin/env python
"""Long sequences: BigBird block-sparse attention vs full attention.

For each sequence length (default 1024, 2048, 4096, 8192) and each attention
("full", "bigbird") one fresh subprocess builds the same `BigBirdBackbone`
(same width, depth and weights layout; only `attention=` differs) and runs
training steps (forward + backward + SGD update, `train_on_batch`). Each
worker reports:

    time per step   median wall time of --steps steps after --warmup
                    untimed ones (the first traces/compiles)
    peak RSS        the worker's lifetime peak (resource.getrusage
                    ru_maxrss)
    step memory     peak RSS minus the RSS after the model was built and
                    compiled, before the first step: what training adds
                    (activations, gradients, optimizer slots, the traced
                    graph; the last two do not grow with the length)

A subprocess per configuration keeps the peaks apart: a process's peak
never comes back down, and TensorFlow's CPU allocator keeps memory it freed
for reuse, so "RSS before a step" already holds the previous step's
working set (measured here: 1.2 MB "per step" for full attention at 2048
tokens, whose score tensors alone are 33 MB each).

Prints one table (full / BigBird ratios of time and memory) and the growth
factor of each attention's step memory per doubling of the length:
about 2 means linear, about 4 quadratic. --json OUT writes everything
(atomically). --quick: tiny sizes, a smoke test whose numbers mean
nothing. See bench/README.md.
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: E402

_common.add_paths()
from _common import BenchError  # noqa: E402,F401

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ATTENTIONS = ("full", "bigbird")
DEFAULTS = dict(seq_lengths="1024,2048,4096,8192", batch_size=1, num_layers=2,
                hidden_dim=128, num_heads=2, intermediate_dim=512, block_size=64,
                num_random_blocks=3, vocabulary_size=1000, steps=3, warmup=1)
QUICK = dict(seq_lengths="64,128", batch_size=1, num_layers=1, hidden_dim=16, num_heads=2,
             intermediate_dim=32, block_size=8, num_random_blocks=1, vocabulary_size=100,
             steps=1, warmup=1)
MODEL_KEYS = ("num_layers", "hidden_dim", "num_heads", "intermediate_dim", "block_size",
              "num_random_blocks", "vocabulary_size")
LINEAR_LIMIT = 2.6  # a doubling that grows memory by more is not linear


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seq-lengths", help="comma-separated lengths (default 1024,2048,4096,8192)")
    for name, help_ in (("batch_size", "sequences per step"), ("num_layers", "encoder layers"),
                        ("hidden_dim", "width"), ("num_heads", "attention heads"),
                        ("intermediate_dim", "feed-forward width"),
                        ("block_size", "BigBird block size"),
                        ("num_random_blocks", "BigBird random blocks per query block"),
                        ("vocabulary_size", "token table rows"),
                        ("steps", "timed steps per configuration"),
                        ("warmup", "untimed steps first (the first compiles)")):
        p.add_argument(f"--{name.replace('_', '-')}", type=int,
                       help=f"{help_} (default {DEFAULTS[name]})")
    p.add_argument("--jit", action="store_true", help="compile(jit_compile=True) (XLA)")
    p.add_argument("--timeout", type=float, default=1800,
                   help="seconds per worker before it counts as failed (default 1800)")
    p.add_argument("--backend-note", default="", help="free text stored with the results")
    p.add_argument("--json", metavar="OUT", help="also write the results as JSON")
    p.add_argument("--quick", action="store_true",
                   help="tiny model, lengths 64 and 128: a smoke test, not a measurement")
    p.add_argument("--worker", nargs=2, metavar=("ATTENTION", "LENGTH"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    for name, value in (QUICK if args.quick else DEFAULTS).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    for name in ("batch_size", "num_layers", "hidden_dim", "num_heads", "intermediate_dim",
                 "block_size", "vocabulary_size", "steps", "warmup"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.num_random_blocks < 0:
        p.error(f"--num-random-blocks must be >= 0, got {args.num_random_blocks}")
    return args


def seq_lengths(args):
    """The sorted lengths; each must be above BigBird's full-attention
    threshold, or both columns would time full attention."""
    from kerasbert.layers.block_sparse_attention import sparse_threshold

    try:
        lengths = sorted({int(v) for v in str(args.seq_lengths).split(",") if v.strip()})
    except ValueError:
        raise BenchError(f"--seq-lengths {args.seq_lengths!r}: give integers like "
                         "1024,2048") from None
    threshold = sparse_threshold(args.block_size, args.num_random_blocks)
    short = [n for n in lengths if n <= threshold]
    if not lengths or short:
        raise BenchError(
            f"--seq-lengths {short or args.seq_lengths}: BigBird uses full attention up to "
            f"(5 + 2 * {args.num_random_blocks}) * {args.block_size} = {threshold} tokens; "
            "give longer sequences (or a smaller --block-size).")
    if args.hidden_dim % args.num_heads:
        raise BenchError(f"--hidden-dim {args.hidden_dim} is not divisible by --num-heads "
                         f"{args.num_heads}.")
    return lengths


# --- worker (one configuration, in its own process) --------------------------


def _rss_mb():
    """Current resident set size (Linux /proc; elsewhere the peak so far,
    which makes step memory a lower bound)."""
    import resource

    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(args, attention, length):
    import resource

    import keras
    import numpy as np

    from kerasbert.models import BigBirdBackbone

    keras.utils.set_random_seed(0)
    config = {k: getattr(args, k) for k in MODEL_KEYS}
    backbone = BigBirdBackbone(**config, max_sequence_length=length, attention=attention)
    inputs = {k: keras.Input((length,), dtype="int32", name=k) for k in backbone.input}
    score = keras.layers.Dense(1, name="head")(backbone(inputs)["pooled_output"])
    model = keras.Model(inputs, score)
    model.compile(optimizer=keras.optimizers.SGD(1e-3), loss="mse", jit_compile=args.jit)
    rng = np.random.default_rng(0)
    batch = args.batch_size
    mask = np.ones((batch, length), "int32")
    mask[1:, length * 3 // 4:] = 0  # rows after the first carry padding
    x = {"input_word_ids": rng.integers(1, args.vocabulary_size, (batch, length), dtype="int32"),
         "input_mask": mask, "input_type_ids": np.zeros((batch, length), "int32")}
    y = np.zeros((batch, 1), "float32")

    before = _rss_mb()
    start = time.perf_counter()
    losses = [float(model.train_on_batch(x, y))]
    first = time.perf_counter() - start
    for _ in range(args.warmup - 1):
        losses.append(float(model.train_on_batch(x, y)))
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        losses.append(float(model.train_on_batch(x, y)))
        times.append(time.perf_counter() - start)
    # The kernel's high-water mark (ru_maxrss) can trail a VmRSS reading by
    # a few pages; the peak is at least every RSS seen.
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, before, _rss_mb())
    sparse = backbone.transformer_layers[0].attention
    return {
        "attention": attention, "seq_length": length,
        "block_sparse": bool(getattr(sparse, "uses_block_sparse", lambda n: False)(length)),
        "step_s": statistics.median(times), "step_s_all": times, "first_step_s": first,
        "rss_after_build_mb": before, "peak_rss_mb": peak,
        "step_memory_mb": peak - before, "losses": losses, "params": backbone.count_params(),
    }


# --- driver --------------------------------------------------------------------


def run_worker(args, attention, length):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", attention, str(length)]
    for name in (*MODEL_KEYS, "batch_size", "steps", "warmup"):
        cmd += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    cmd += ["--jit"] if args.jit else []
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env,
                              timeout=args.timeout)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{attention} at {length} tokens took over {args.timeout:.0f}s "
                         "(--timeout)") from None
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        raise BenchError(f"{attention} at {length} tokens failed (exit {proc.returncode}):\n"
                         f"{proc.stderr[-2000:]}")
    return json.loads(lines[-1])


def growth(rows, attention, lengths):
    """Step-memory factor per doubling (or per step of the lengths given)."""
    mem = {r["seq_length"]: r["step_memory_mb"] for r in rows if r["attention"] == attention}
    return [{"from": a, "to": b, "factor": mem[b] / mem[a] if mem[a] > 0 else float("nan")}
            for a, b in zip(lengths, lengths[1:])]


def format_table(result):
    rows, env = result["rows"], result["env"]
    by = {(r["attention"], r["seq_length"]): r for r in rows}
    header = (f"{'seq_len':>7} {'full ms/step':>13} {'bigbird ms/step':>16} {'full/bigbird':>13}"
              f" {'full step MB':>13} {'bigbird step MB':>16} {'full/bigbird':>13}"
              f" {'full peak MB':>13} {'bigbird peak MB':>16}")
    lines = [f"BigBird vs full attention, train step (fwd+bwd+SGD)  [{result['config_name']}: "
             + ", ".join(f"{k}={v}" for k, v in result["config"].items()) + "]",
             header, "-" * len(header)]
    for n in result["seq_lengths"]:
        f, b = by[("full", n)], by[("bigbird", n)]
        lines.append(
            f"{n:>7} {f['step_s'] * 1e3:>13.1f} {b['step_s'] * 1e3:>16.1f}"
            f" {f['step_s'] / b['step_s']:>12.2f}x"
            f" {f['step_memory_mb']:>13.1f} {b['step_memory_mb']:>16.1f}"
            f" {_ratio(f['step_memory_mb'], b['step_memory_mb']):>12.2f}x"
            f" {f['peak_rss_mb']:>13.1f} {b['peak_rss_mb']:>16.1f}")
    for attention in ATTENTIONS:
        steps = result["growth"][attention]
        lines.append(f"{attention} step memory growth: " + ", ".join(
            f"{g['from']}->{g['to']} x{g['factor']:.2f}" for g in steps))
    lines.append(f"bigbird memory growth is {result['bigbird_memory']} (every factor <= "
                 f"{LINEAR_LIMIT} per doubling: linear; ~4: quadratic)")
    lines.append(_common.env_line(env))
    return "\n".join(lines)


def _ratio(a, b):
    return a / b if b > 0 else float("nan")


def run(args):
    if args.worker:
        attention, length = args.worker
        print(json.dumps(worker(args, attention, int(length))))
        return None
    lengths = seq_lengths(args)
    env = _common.keras_environment(
        argparse.Namespace(dtype="float32", backend_note=args.backend_note),
        _common.LOAD_AT_START.get("value"))
    rows = []
    for i, n in enumerate(lengths):
        # Alternate the order so load drift hits both alike.
        for attention in (ATTENTIONS if i % 2 == 0 else ATTENTIONS[::-1]):
            row = run_worker(args, attention, n)
            print(f"  {attention:>7} {n:>6} tokens: {row['step_s'] * 1e3:.1f} ms/step, "
                  f"step memory {row['step_memory_mb']:.1f} MB", flush=True)
            rows.append(row)
    env["loadavg_end"] = _common.loadavg()
    rows.sort(key=lambda r: (r["seq_length"], ATTENTIONS.index(r["attention"])))
    result = {
        "env": env, "config_name": "quick" if args.quick else "default",
        "config": {k: getattr(args, k) for k in (*MODEL_KEYS, "batch_size", "steps", "warmup")}
        | {"jit": args.jit}, "seq_lengths": lengths, "rows": rows,
        "growth": {a: growth(rows, a, lengths) for a in ATTENTIONS},
    }
    doublings = [g["factor"] for g in result["growth"]["bigbird"]
                 if g["to"] == 2 * g["from"]]
    result["bigbird_memory"] = ("linear" if doublings and max(doublings) <= LINEAR_LIMIT
                                else "NOT linear" if doublings else "unchecked (no doubling)")
    print()
    print(format_table(result))
    if args.json:
        _common.write_json(args.json, result)
    return result


def main(argv=None):
    return _common.timed_main(parse_args, run, argv)


if __name__ == "__main__":
    import logging

    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    try:
        main()
    except BenchError as e:
        print(f"long_sequence_bench: error: {e}", file=sys.stderr)
        sys.exit(2)
