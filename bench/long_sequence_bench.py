#!/usr/bin/env python
"""Long sequences: full attention vs BigBird vs the Reformer vs ModernBERT, by length and depth.

Two sweeps, in one run, of one training step (forward + backward + SGD
update, `train_on_batch`) for each attention:

    length   --seq-lengths (default 1024,4096,16384,65536) at
             --num-layers (default 2)
    depth    --depths (default 2,6,12) at each of --depth-lengths
             (default 16384,65536)

"full" and "bigbird" are the same `BigBirdBackbone` with `attention=`
switched (same weights); "reformer" is a `ReformerBackbone` of the same
width, heads and feed-forward (streams of --hidden-dim, layers alternating
local / LSH attention in chunks of --chunk-length, 2 hashing rounds,
length / chunk buckets so that a bucket holds about one chunk (factorised
into two powers of two above 64, as the published models do: the hash
projections are then (b1 + b2) / 2 wide instead of b / 2), reversible
layers trained with the recomputing backward pass). "modernbert" is a
`ModernBertBackbone` of the same width, heads and depth (GeGLU of the same
intermediate width; a global layer every third, the others local with
windows of 128; global layers with query-chunked attention),
"modernbert_plain" the same with the plain [T, T] global attention
(`global_attention_chunk=None`) and "modernbert_local" one whose every
layer is local. Each configuration runs in a fresh subprocess, which
reports:

    time per step   median wall time of --steps steps after --warmup
                    untimed ones (the first traces/compiles)
    peak RSS        the worker's lifetime peak (resource.getrusage)
    step memory     peak RSS minus the RSS after the model was built and
                    compiled, before the first step: what training adds

A worker whose resident memory passes --memory-cap-gb (default 20, on
this 24 GB machine) is killed and recorded as failed at that point, as is
one that exits with an error: the table reports where each attention
stops fitting instead of stopping the run.

A subprocess per configuration keeps the peaks apart: a process's peak
never comes back down, and TensorFlow's CPU allocator keeps memory it freed
for reuse, so "RSS before a step" already holds the previous step's
working set.

--serve-lengths adds forward-only rows (`predict_on_batch`, the serving
cost) at those lengths; --padding-check trains ModernBERT on texts of mixed
lengths padded to the longest vs length-aware batches
(`long_sequence_padding.py`).

Prints the two tables, the growth of each attention's step memory per step
of the lengths (x4 per 4x length is linear, x16 quadratic) and the
Reformer's memory ratio from the shallowest to the deepest model. --json
OUT writes everything (atomically); --plot PNG draws step memory against
length. --quick: tiny sizes, a smoke test whose numbers mean nothing. See
bench/docs/long_sequence_bench.md.
"""

import argparse
import json
import math
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: E402

_common.add_paths()
from _common import BenchError  # noqa: E402,F401

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ATTENTIONS = ("full", "bigbird", "reformer", "modernbert_plain", "modernbert",
              "modernbert_local")
DEFAULT_ATTENTIONS = ("full", "bigbird", "reformer")
MODERNBERT_WINDOW = 128  # local_attention (both sides), the published models'
DEFAULTS = dict(seq_lengths="1024,4096,16384,65536", depths="2,6,12",
                depth_lengths="16384,65536",
                batch_size=1, num_layers=2, hidden_dim=128, num_heads=2, intermediate_dim=512,
                block_size=64, num_random_blocks=3, chunk_length=64, vocabulary_size=1000,
                query_chunk=512, steps=2, warmup=1)
QUICK = dict(seq_lengths="64,128", depths="1,2", depth_lengths="128", batch_size=1, num_layers=1,
             hidden_dim=16, num_heads=2, intermediate_dim=32, block_size=8,
             num_random_blocks=1, chunk_length=8, vocabulary_size=100, query_chunk=32, steps=1,
             warmup=1)
MODEL_KEYS = ("hidden_dim", "num_heads", "intermediate_dim", "block_size",
              "num_random_blocks", "chunk_length", "vocabulary_size", "query_chunk")
# Memory that grows by more than this power of the length ratio is not
# linear (1.0 exactly linear; 2.0 quadratic): 1.3 allows fixed costs.
LINEAR_EXPONENT = 1.3
FLAT_DEPTH_LIMIT = 1.2  # the goal: <= 1.2x from the shallowest to the deepest


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seq-lengths", help="comma-separated lengths (default 1024,2048,4096,8192)")
    p.add_argument("--depths", help="comma-separated layer counts of the depth sweep "
                   "(default 2,6,12)")
    p.add_argument("--depth-lengths", help="comma-separated sequence lengths of the depth "
                   "sweep (default 16384,65536)")
    p.add_argument("--sweeps", default="length,depth",
                   help="which sweeps to run: length, depth or both (default)")
    for name, help_ in (("batch_size", "sequences per step"),
                        ("num_layers", "layers of the length sweep"),
                        ("hidden_dim", "width (each Reformer stream)"),
                        ("num_heads", "attention heads"),
                        ("intermediate_dim", "feed-forward width"),
                        ("block_size", "BigBird block size"),
                        ("num_random_blocks", "BigBird random blocks per query block"),
                        ("chunk_length", "Reformer attention chunk"),
                        ("query_chunk", "ModernBERT global layers' query chunk"),
                        ("vocabulary_size", "token table rows"),
                        ("steps", "timed steps per configuration"),
                        ("warmup", "untimed steps first (the first compiles)")):
        p.add_argument(f"--{name.replace('_', '-')}", type=int,
                       help=f"{help_} (default {DEFAULTS[name]})")
    p.add_argument("--attentions", default=",".join(DEFAULT_ATTENTIONS),
                   help=f"comma-separated subset of {','.join(ATTENTIONS)} (default "
                        f"{','.join(DEFAULT_ATTENTIONS)})")
    p.add_argument("--serve-lengths", default="",
                   help="comma-separated lengths of forward-only rows (none by default)")
    p.add_argument("--padding-check", action="store_true",
                   help="ModernBERT on mixed lengths: padded to the longest vs length-aware")
    p.add_argument("--memory-cap-gb", type=float, default=20.0,
                   help="a worker above this resident memory is stopped and recorded as "
                        "failed (default 20)")
    p.add_argument("--plot", metavar="PNG", help="draw step memory against length")
    p.add_argument("--jit", action="store_true", help="compile(jit_compile=True) (XLA)")
    p.add_argument("--timeout", type=float, default=1800,
                   help="seconds per worker before it counts as failed (default 1800)")
    p.add_argument("--backend-note", default="", help="free text stored with the results")
    p.add_argument("--json", metavar="OUT", help="also write the results as JSON")
    p.add_argument("--quick", action="store_true",
                   help="tiny model, lengths 64 and 128: a smoke test, not a measurement")
    p.add_argument("--worker", nargs=3, metavar=("ATTENTION", "LENGTH", "LAYERS"),
                   help=argparse.SUPPRESS)
    p.add_argument("--worker-mode", default="train", choices=("train", "serve", "padding"),
                   help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    for name, value in (QUICK if args.quick else DEFAULTS).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    for name in ("batch_size", "num_layers", "hidden_dim", "num_heads", "intermediate_dim",
                 "block_size", "chunk_length", "vocabulary_size", "query_chunk", "steps",
                 "warmup"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.num_random_blocks < 0:
        p.error(f"--num-random-blocks must be >= 0, got {args.num_random_blocks}")
    args.sweeps = tuple(a.strip() for a in args.sweeps.split(",") if a.strip())
    if not args.sweeps or set(args.sweeps) - {"length", "depth"}:
        p.error(f"--sweeps {','.join(args.sweeps)}: choose length, depth or both")
    args.attentions = tuple(a.strip() for a in args.attentions.split(",") if a.strip())
    unknown = [a for a in args.attentions if a not in ATTENTIONS]
    if unknown or not args.attentions:
        p.error(f"--attentions {','.join(unknown) or '(none)'}: choose from "
                f"{','.join(ATTENTIONS)}")
    return args


def _int_list(text, flag):
    try:
        values = sorted({int(v) for v in str(text).split(",") if v.strip()})
    except ValueError:
        raise BenchError(f"{flag} {text!r}: give integers like 1024,4096") from None
    if not values or min(values) < 1:
        raise BenchError(f"{flag} {text!r}: give positive integers")
    return values


def seq_lengths(args):
    """The sorted lengths of the length sweep; with BigBird in the run,
    each (and the depth sweep's length) must be above its full-attention
    threshold, or its column would time full attention."""
    from kerasbert.layers.block_sparse_attention import sparse_threshold

    lengths = _int_list(args.seq_lengths, "--seq-lengths")
    if "bigbird" in args.attentions:
        threshold = sparse_threshold(args.block_size, args.num_random_blocks)
        short = [n for n in lengths + depth_lengths(args) if n <= threshold]
        if short:
            raise BenchError(
                f"--seq-lengths / --depth-length {short}: BigBird uses full attention up to "
                f"(5 + 2 * {args.num_random_blocks}) * {args.block_size} = {threshold} tokens; "
                "give longer sequences (or a smaller --block-size).")
    if args.hidden_dim % args.num_heads:
        raise BenchError(f"--hidden-dim {args.hidden_dim} is not divisible by --num-heads "
                         f"{args.num_heads}.")
    return lengths


def depths(args):
    return _int_list(args.depths, "--depths")


def depth_lengths(args):
    return _int_list(args.depth_lengths, "--depth-lengths")


def reformer_buckets(length, chunk):
    """length / chunk buckets (a bucket then holds about one chunk of
    tokens), as an even int up to 64 and as a factorised pair of powers of
    two above."""
    target = max(2, 2 * (-(-length // chunk) // 2))
    if target <= 64:
        return target
    exponent = max(2, (target - 1).bit_length())
    low = exponent // 2
    return [2 ** low, 2 ** (exponent - low)]


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


def build_model(args, attention, length, num_layers):
    """(backbone, the scored model) of one configuration."""
    import keras

    from kerasbert.models import BigBirdBackbone
    from kerasbert.models import ReformerBackbone

    common = dict(vocabulary_size=args.vocabulary_size, num_layers=num_layers,
                  num_heads=args.num_heads, hidden_dim=args.hidden_dim,
                  intermediate_dim=args.intermediate_dim, max_sequence_length=length)
    if attention.startswith("modernbert"):
        backbone = modernbert_backbone(attention, common, args.query_chunk)
    elif attention == "reformer":
        chunk = args.chunk_length
        backbone = ReformerBackbone(
            **common, attention_layers=["local", "lsh"], num_hashes=2,
            num_buckets=reformer_buckets(length, chunk), lsh_chunk_length=chunk,
            local_chunk_length=chunk, causal=False, dropout=0.0)
    else:
        backbone = BigBirdBackbone(**common, attention=attention, block_size=args.block_size,
                                   num_random_blocks=args.num_random_blocks)
    inputs = {k: keras.Input((length,), dtype="int32", name=k) for k in backbone.input}
    score = keras.layers.Dense(1, name="head")(backbone(inputs)["pooled_output"])
    return backbone, keras.Model(inputs, score)


def modernbert_backbone(attention, common, query_chunk=512):
    """ModernBERT of the bench's sizes; "modernbert_local": every layer
    local; "modernbert_plain": global layers on the plain [T, T] matrix."""
    from kerasbert.models import ModernBertBackbone

    class AllLocal(ModernBertBackbone):
        @staticmethod
        def global_layers(num_layers, every):
            return [False] * num_layers

    cls = AllLocal if attention == "modernbert_local" else ModernBertBackbone
    chunk = None if attention == "modernbert_plain" else query_chunk
    return cls(**common, local_attention=MODERNBERT_WINDOW, global_attention_chunk=chunk)


def worker(args, attention, length, num_layers=None, mode="train"):
    import resource

    import keras
    import numpy as np

    num_layers = num_layers or args.num_layers
    keras.utils.set_random_seed(0)
    backbone, model = build_model(args, attention, length, num_layers)
    if mode == "padding":
        import long_sequence_padding

        return long_sequence_padding.padding_check(args, backbone,
                                                   "quick" if args.quick else "default")
    model.compile(optimizer=keras.optimizers.SGD(1e-3), loss="mse", jit_compile=args.jit)
    rng = np.random.default_rng(0)
    batch = args.batch_size
    mask = np.ones((batch, length), "int32")
    mask[1:, length * 3 // 4:] = 0  # rows after the first carry padding
    x = {"input_word_ids": rng.integers(1, args.vocabulary_size, (batch, length), dtype="int32"),
         "input_mask": mask, "input_type_ids": np.zeros((batch, length), "int32")}
    y = np.zeros((batch, 1), "float32")

    def step():  # a training step, or (serve) the forward pass alone
        if mode == "serve":
            return float(np.asarray(model.predict_on_batch(x))[0, 0])
        return float(model.train_on_batch(x, y))

    before = _rss_mb()
    start = time.perf_counter()
    losses = [step()]
    first = time.perf_counter() - start
    for _ in range(args.warmup - 1):
        losses.append(step())
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        losses.append(step())
        times.append(time.perf_counter() - start)
    # The kernel's high-water mark (ru_maxrss) can trail a VmRSS reading by
    # a few pages; the peak is at least every RSS seen.
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, before, _rss_mb())
    first_attention = getattr(backbone.transformer_layers[0], "attention", None)
    return {
        "attention": attention, "seq_length": length, "num_layers": num_layers, "ok": True,
        "mode": mode,
        "block_sparse": bool(getattr(first_attention, "uses_block_sparse",
                                     lambda n: False)(length)),
        "step_s": statistics.median(times), "step_s_all": times, "first_step_s": first,
        "rss_after_build_mb": before, "peak_rss_mb": peak,
        "step_memory_mb": peak - before, "losses": losses, "params": backbone.count_params(),
    }


# --- driver --------------------------------------------------------------------


def _process_rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def run_worker(args, attention, length, num_layers, mode="train"):
    """One configuration in a subprocess: its row, or a failed row saying
    why (over the memory cap, an error exit, the timeout)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", attention, str(length),
           str(num_layers), "--worker-mode", mode]
    for name in (*MODEL_KEYS, "batch_size", "steps", "warmup"):
        cmd += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    cmd += ["--jit"] if args.jit else []
    cmd += ["--quick"] if args.quick else []
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    cap = args.memory_cap_gb * 1024
    failed = {"attention": attention, "seq_length": length, "num_layers": num_layers,
              "ok": False, "mode": mode}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env)
        start, peak = time.monotonic(), 0.0
        while proc.poll() is None:
            peak = max(peak, _process_rss_mb(proc.pid))
            if peak > cap or time.monotonic() - start > args.timeout:
                proc.kill()
                proc.wait()
                reason = (f"over {args.memory_cap_gb:g} GB" if peak > cap
                          else f"over {args.timeout:.0f} s")
                return dict(failed, reason=reason, peak_rss_mb=peak)
            time.sleep(0.05)
        out.seek(0)
        err.seek(0)
        lines = [ln for ln in out.read().splitlines() if ln.startswith("{")]
        stderr = err.read()
    if proc.returncode or not lines:
        last = [ln for ln in stderr.splitlines() if ln.strip()][-1:] or ["no output"]
        kind = "out of memory" if "ResourceExhausted" in stderr or "MemoryError" in stderr \
            else f"exit {proc.returncode}"
        return dict(failed, reason=f"{kind}: {last[0][:160]}", peak_rss_mb=peak)
    return json.loads(lines[-1])


def growth(rows, attention, lengths):
    """Step memory from each length to the next, and the exponent of that
    growth (log of the memory ratio over log of the length ratio: 1 is
    linear, 2 quadratic), over the lengths where the attention ran."""
    mem = {r["seq_length"]: r["step_memory_mb"] for r in rows
           if r["attention"] == attention and r.get("ok", True)
           and r.get("num_layers") in (None, rows[0].get("num_layers"))}
    ran = [n for n in lengths if n in mem]
    out = []
    for a, b in zip(ran, ran[1:]):
        factor = mem[b] / mem[a] if mem[a] > 0 else float("nan")
        exponent = math.log(factor) / math.log(b / a) if factor > 0 else float("nan")
        out.append({"from": a, "to": b, "factor": factor, "exponent": exponent})
    return out


def _cell(row, key, scale=1.0, fmt="{:.1f}"):
    if row is None:
        return "-"
    if not row.get("ok", True):
        return "FAILED"
    return fmt.format(row[key] * scale)


def format_table(result):
    attentions, env = result["attentions"], result["env"]
    by = {(r["attention"], r["seq_length"], r.get("num_layers")): r for r in result["rows"]}
    config = ", ".join(f"{k}={v}" for k, v in result["config"].items())
    width = max(14, 4 + max(len(a) for a in attentions))
    lines = [f"One training step (fwd+bwd+SGD)  [{result['config_name']}: {config}]", ""]

    def table(title, keys, label):
        header = (f"{label:>8}" + "".join(f"{a + ' ms':>{width}}" for a in attentions)
                  + "".join(f"{a + ' MB':>{width}}" for a in attentions))
        lines.extend([title, header, "-" * len(header)])
        for key, n_layers in keys:
            rows = [by.get((a, key, n_layers)) for a in attentions]
            lines.append(f"{key if label == 'seq_len' else n_layers:>8}"
                         + "".join(f"{_cell(r, 'step_s', 1e3):>{width}}" for r in rows)
                         + "".join(f"{_cell(r, 'step_memory_mb'):>{width}}" for r in rows))
        lines.append("")

    base = result["config"]["num_layers"]
    if result["seq_lengths"]:
        table(f"By length ({base} layers; MB = step memory)",
              [(n, base) for n in result["seq_lengths"]], "seq_len")
    for length in result["depth_lengths"]:
        table(f"By depth ({length} tokens)", [(length, d) for d in result["depths"]], "layers")
    for r in result["rows"]:
        if not r.get("ok", True):
            lines.append(f"{r['attention']} at {r['seq_length']} tokens, {r['num_layers']} "
                         f"layers: FAILED ({r['reason']})")
    for attention in attentions:
        steps = result["growth"][attention]
        if steps:
            lines.append(f"{attention} step memory by length: " + ", ".join(
                f"{g['from']}->{g['to']} x{g['factor']:.2f} (exponent {g['exponent']:.2f})"
                for g in steps))
    for length, ratios in result["depth_ratio"].items():
        for attention, ratio in ratios.items():
            lines.append(f"{attention} step memory {result['depths'][0]}->"
                         f"{result['depths'][-1]} layers at {length} tokens: x{ratio:.2f}")
    verdicts = result.get("reformer_verdicts")
    if verdicts:
        lines.append(f"reformer: memory {verdicts['length']} in length (exponent <= "
                     f"{LINEAR_EXPONENT}); in depth (<= {FLAT_DEPTH_LIMIT}x from the shallowest "
                     f"to the deepest): {verdicts['depth']}")
    for r in result.get("serve_rows", []):
        lines.append(f"{r['attention']} forward only at {r['seq_length']} tokens: "
                     f"{_cell(r, 'step_s', 1e3)} ms, {_cell(r, 'step_memory_mb')} MB")
    for v in result.get("vs_bigbird", []):
        lines.append(f"{v['attention']} / bigbird at {v['seq_length']} tokens ({v['mode']}): "
                     f"memory x{v['memory']:.2f}, time x{v['time']:.2f}")
    padding = result.get("padding")
    if padding:
        import long_sequence_padding

        lines.append(long_sequence_padding.format_padding(padding) if padding.get("rows")
                     else f"padding check FAILED ({padding.get('reason')})")
    lines.append(_common.env_line(env))
    return "\n".join(lines)


def plot(result, path):
    """Step memory against length (log-log) and, with a depth sweep, against
    depth at its longest length; failed runs are marked at the cap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    depth_length = max(result["depth_lengths"]) if result["depth_lengths"] else None
    panels = [("length", result["config"]["num_layers"], result["seq_lengths"])]
    if depth_length is not None:
        panels.append(("depth", depth_length, result["depths"]))
    fig, axes = plt.subplots(1, len(panels), figsize=(6.4 * len(panels), 4.2), squeeze=False)
    cap = result["memory_cap_gb"] * 1024
    for ax, (sweep, fixed, values) in zip(axes[0], panels):
        for attention in result["attentions"]:
            def point(r):
                return r["seq_length"] if sweep == "length" else r["num_layers"]
            rows = [r for r in result["rows"] if r["attention"] == attention and point(r) in values
                    and (r["num_layers"] if sweep == "length" else r["seq_length"]) == fixed]
            rows.sort(key=point)
            ok = [(point(r), r["step_memory_mb"]) for r in rows if r.get("ok", True)]
            color = f"C{ATTENTIONS.index(attention)}"
            if ok:
                ax.plot(*zip(*ok), marker="o", label=attention, color=color)
            for r in rows:
                if not r.get("ok", True):
                    ax.scatter([point(r)], [cap], marker="x", color=color)
                    ax.annotate(f"{attention} fails", (point(r), cap), color=color,
                                textcoords="offset points", fontsize=8,
                                xytext=(-24, 6 + 10 * ATTENTIONS.index(attention)))
        ax.set_yscale("log")
        if sweep == "length":
            ax.set_xscale("log", base=2)
            ax.set_xlabel("sequence length (tokens)")
            ax.set_title(f"By length: {fixed} layers, width {result['config']['hidden_dim']}")
        else:
            ax.set_xlabel("layers")
            ax.set_title(f"By depth: {fixed} tokens")
        ax.set_ylabel("training-step memory (MB)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    tmp = f"{path}.tmp.png"
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)


def run(args):
    if args.worker:
        attention, length, layers = args.worker
        print(json.dumps(worker(args, attention, int(length), int(layers),
                                args.worker_mode)))
        return None
    lengths = seq_lengths(args) if "length" in args.sweeps else []
    layer_counts = depths(args) if "depth" in args.sweeps else []
    at_lengths = depth_lengths(args) if layer_counts else []
    if "depth" in args.sweeps and "bigbird" in args.attentions:
        seq_lengths(argparse.Namespace(**{**vars(args), "seq_lengths": args.depth_lengths}))
    env = _common.keras_environment(
        argparse.Namespace(dtype="float32", backend_note=args.backend_note),
        _common.LOAD_AT_START.get("value"))
    plan = [(n, args.num_layers) for n in lengths]
    plan += [(n, d) for n in at_lengths for d in layer_counts if (n, d) not in plan]
    rows = []
    for i, (n, layers) in enumerate(plan):
        # Alternate the order so load drift hits every attention alike.
        order = args.attentions if i % 2 == 0 else args.attentions[::-1]
        for attention in order:
            row = run_worker(args, attention, n, layers)
            status = (f"{row['step_s'] * 1e3:.1f} ms/step, step memory "
                      f"{row['step_memory_mb']:.1f} MB" if row.get("ok", True)
                      else f"FAILED ({row['reason']})")
            print(f"  {attention:>8} {n:>6} tokens {layers:>2} layers: {status}", flush=True)
            rows.append(row)
    env["loadavg_end"] = _common.loadavg()
    rows.sort(key=lambda r: (r["num_layers"], r["seq_length"],
                             ATTENTIONS.index(r["attention"])))
    base_rows = [r for r in rows if r["num_layers"] == args.num_layers]
    result = {
        "env": env, "config_name": "quick" if args.quick else "default",
        "config": {k: getattr(args, k) for k in (*MODEL_KEYS, "num_layers", "batch_size",
                                                  "steps", "warmup")}
        | {"jit": args.jit}, "attentions": list(args.attentions), "seq_lengths": lengths,
        "depths": layer_counts, "depth_lengths": at_lengths, "memory_cap_gb": args.memory_cap_gb, "rows": rows,
        "growth": {a: growth(base_rows, a, lengths) for a in args.attentions},
        "depth_ratio": {n: depth_ratios(rows, args, layer_counts, n) for n in at_lengths},
    }
    if "reformer" in args.attentions:
        result["reformer_verdicts"] = reformer_verdicts(result)
    extra_rows(args, result, lengths)
    print()
    print(format_table(result))
    if args.json:
        _common.write_json(args.json, result)
    if args.plot:
        plot(result, args.plot)
    return result


def extra_rows(args, result, lengths):
    """The forward-only rows (--serve-lengths), the padding check and each
    ModernBERT's memory and time over BigBird's, into `result`."""
    serve = _int_list(args.serve_lengths, "--serve-lengths") if args.serve_lengths else []
    result["serve_rows"] = []
    for n in serve:
        for attention in args.attentions:
            row = run_worker(args, attention, n, args.num_layers, mode="serve")
            print(f"  {attention:>8} {n:>6} tokens, forward only: "
                  f"{_cell(row, 'step_s', 1e3)} ms, {_cell(row, 'step_memory_mb')} MB", flush=True)
            result["serve_rows"].append(row)
    result["vs_bigbird"] = vs_bigbird(result["rows"] + result["serve_rows"])
    if args.padding_check:
        longest = max(lengths or serve or [1024])
        row = run_worker(args, "modernbert", longest, args.num_layers, mode="padding")
        result["padding"] = row


def vs_bigbird(rows):
    """[{attention, seq_length, mode, memory, time}]: each ModernBERT row's
    step memory and time over BigBird's at the same length, layers and mode."""
    ok = {(r["attention"], r["seq_length"], r["num_layers"], r.get("mode", "train")): r
          for r in rows if r.get("ok", True)}
    out = []
    for (attention, n, layers, mode), r in sorted(ok.items()):
        peer = ok.get(("bigbird", n, layers, mode))
        if attention.startswith("modernbert") and peer and peer["step_memory_mb"] > 0:
            out.append({"attention": attention, "seq_length": n, "num_layers": layers,
                        "mode": mode, "memory": r["step_memory_mb"] / peer["step_memory_mb"],
                        "time": r["step_s"] / peer["step_s"]})
    return out


def depth_ratios(rows, args, layer_counts, length):
    """{attention: step memory at the deepest / at the shallowest depth}
    at `length` tokens."""
    if len(layer_counts) < 2:
        return {}
    mem = {(r["attention"], r["num_layers"]): r["step_memory_mb"] for r in rows
           if r["seq_length"] == length and r.get("ok", True)}
    lo, hi = layer_counts[0], layer_counts[-1]
    return {a: mem[(a, hi)] / mem[(a, lo)] for a in args.attentions
            if (a, lo) in mem and (a, hi) in mem and mem[(a, lo)] > 0}


def reformer_verdicts(result):
    """{"length": "linear" | "NOT linear" | "unchecked", "depth": one
    verdict per depth-sweep length, e.g. "flat at 65536 tokens (x1.18)"}."""
    steps = result["growth"]["reformer"]
    length = ("unchecked" if not steps else "linear"
              if max(g["exponent"] for g in steps) <= LINEAR_EXPONENT else "NOT linear")
    depth = [f"{'flat' if r['reformer'] <= FLAT_DEPTH_LIMIT else 'NOT flat'} at {n} tokens "
             f"(x{r['reformer']:.2f})"
             for n, r in result["depth_ratio"].items() if "reformer" in r]
    return {"length": length, "depth": ", ".join(depth) or "unchecked"}


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
