"""Helpers shared by the bench scripts (no TensorFlow import here)."""

import os
import pathlib
import platform
import statistics
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent


def add_paths(*relative):
    """Puts the repo root (so `python bench/x.py` works from a checkout
    without installing) and `relative` folders of the repo on sys.path."""
    for p in (REPO_ROOT, *(REPO_ROOT / r for r in relative)):
        if str(p) not in sys.path:
            sys.path.insert(0, str(p))


def loadavg():
    """1-minute load average, or None where the OS has none."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


# The 1-minute load average when the bench started, before it did any work
# (set by `timed_main`; recorded in each bench's env line).
LOAD_AT_START = {}


def timed_main(parse_args, run, argv=None):
    """A bench's `main`: records the start load, parses, runs, prints the
    total time; returns `run`'s result."""
    LOAD_AT_START["value"] = loadavg()
    args = parse_args(argv)
    start = time.perf_counter()
    payload = run(args)
    print(f"total {time.perf_counter() - start:.1f}s")
    return payload


def base_environment():
    """Versions and machine facts every bench records."""
    from kerasbert.hardware import cpu_model  # here: `add_paths` puts the repo on sys.path first

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
    }


def write_json(path, payload):
    """Results JSON, written atomically (never half-written)."""
    from kerasbert.io_utils import atomic_write_json

    atomic_write_json(path, payload)


def interleaved(fns, repeats):
    """Calls each of `fns` ({name: fn() -> rate}) `repeats` times, in
    alternating order (a, b, c, then c, b, a, ...), so drift in machine load
    hits every contender alike. Returns {name: [rate per repeat]}."""
    names = list(fns)
    rates = {n: [] for n in names}
    for r in range(repeats):
        for n in (names if r % 2 == 0 else names[::-1]):
            rates[n].append(fns[n]())
    return rates


def median(values):
    return statistics.median(values)


# --- Model benches (encoder_bench, pretrain_bench) ------------------------
# Everything below imports Keras/TensorFlow lazily, inside the functions.

OURS, PEER = "kerasbert", "keras_hub"
DEFAULT_PRESET = "bert_mini"  # 4 layers, hidden 256, 4 heads, FFN 1024.
# --quick: a tiny model for smoke tests (a few seconds per row).
QUICK_CONFIG = {
    "vocabulary_size": 512,
    "num_layers": 1,
    "num_heads": 2,
    "hidden_dim": 32,
    "intermediate_dim": 64,
    "max_sequence_length": 32,
    "num_segments": 2,
    "dropout": 0.1,
}
_BERT_KEYS = tuple(QUICK_CONFIG)


class BenchError(Exception):
    """A problem with the arguments or the models; exits non-zero."""


def add_model_args(p, defaults):
    """The flags every model bench shares (defaults filled in later by
    `finish_model_args`, because --quick changes them)."""
    p.add_argument(
        "--preset",
        default=None,
        help=f"a name from kerasbert.models.list_presets() "
        f"(default {DEFAULT_PRESET}; with --quick a tiny 1-layer model)",
    )
    p.add_argument("--batch-size", type=int, default=None,
                   help=f"sequences per step (default {defaults['batch_size']})")
    p.add_argument("--seq-length", dest="sequence_length", type=int, default=None,
                   help=f"tokens per sequence (default {defaults['sequence_length']})")
    p.add_argument("--repeats", type=int, default=None,
                   help="timed blocks per model and row; the median is "
                   f"reported (default {defaults['repeats']})")
    p.add_argument("--steps", type=int, default=None,
                   help="calls per timed block "
                   f"(default {defaults['steps']})")
    p.add_argument("--warmup", type=int, default=None,
                   help="untimed calls per model and row before timing, the "
                   f"first one traces/compiles (default {defaults['warmup']})")
    p.add_argument("--dtype", default="float32",
                   help="dtype policy for both models, e.g. float32, "
                   "bfloat16, mixed_bfloat16, mixed_float16 (default float32)")
    p.add_argument("--backend-note", default="",
                   help="free text recorded with the results (machine, "
                   "driver, anything worth keeping)")
    p.add_argument("--json", metavar="OUT", default=None,
                   help="also write the results as JSON to this file")
    p.add_argument("--quick", action="store_true",
                   help="tiny config, 1 repeat, few steps: a smoke test, "
                   "not a measurement")


def finish_model_args(p, args, defaults, quick_defaults, counts=()):
    """Fills unset flags from `defaults` (or `quick_defaults` with --quick)
    and rejects counts < 1 with a parser error (exit 2)."""
    base = quick_defaults if args.quick else defaults
    for name, value in base.items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)
    flags = {"sequence_length": "--seq-length"}
    for name in ("batch_size", "sequence_length", "repeats", "steps", *counts):
        if getattr(args, name) < 1:
            flag = flags.get(name, "--" + name.replace("_", "-"))
            p.error(f"{flag} must be >= 1, got {getattr(args, name)}")
    if args.warmup < 1:
        p.error(f"--warmup must be >= 1 (the first call compiles), "
                f"got {args.warmup}")
    return args


def resolve_bert_config(args):
    """(name, keras-hub BertBackbone kwargs) for --preset / --quick."""
    from kerasbert.models import get_preset

    if args.preset is None and args.quick:
        name, config = "quick", dict(QUICK_CONFIG)
    else:
        name = args.preset or DEFAULT_PRESET
        try:
            preset = get_preset(name)
        except ValueError as e:
            raise BenchError(str(e)) from None
        if preset["backbone_class"].__name__ != "BertBackbone":
            raise BenchError(
                f"--preset {name!r} is a {preset['backbone_class'].__name__}; "
                "this bench compares BertBackbone presets only."
            )
        config = {k: preset["config"][k] for k in _BERT_KEYS}
    if args.sequence_length > config["max_sequence_length"]:
        raise BenchError(
            f"--seq-length {args.sequence_length} exceeds the model's "
            f"max_sequence_length {config['max_sequence_length']}."
        )
    return name, config


def dtype_policy(name):
    import keras

    try:
        return keras.dtype_policies.get(name)
    except ValueError as e:
        raise BenchError(f"--dtype {name!r}: {e}") from None


def keras_environment(args, loadavg_start):
    """Versions, backend, device and load of a model bench run."""
    import keras
    import keras_hub
    import numpy as np

    import kerasbert

    backend = keras.backend.backend()
    env = {
        "backend": backend,
        "keras": keras.__version__,
        "keras_hub": keras_hub.__version__,
        "kerasbert": getattr(kerasbert, "__version__", "?"),
        "numpy": np.__version__,
        **base_environment(),
        "dtype_policy": args.dtype,
        "note": args.backend_note,
        "loadavg_start": loadavg_start,
    }
    try:
        import tensorflow as tf

        env["tensorflow"] = tf.__version__
    except ImportError:
        env["tensorflow"] = None
    if backend == "jax":
        import jax

        env["jax"] = jax.__version__
        env["device"] = ", ".join(
            f"{d.platform}:{d.id} {getattr(d, 'device_kind', '')}".strip()
            for d in jax.devices()
        )
    elif backend == "tensorflow":
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            names = []
            for g in gpus:
                details = tf.config.experimental.get_device_details(g)
                names.append(details.get("device_name", g.name))
            env["device"] = "GPU: " + ", ".join(names)
        else:
            env["device"] = "CPU"
    elif backend == "torch":
        import torch

        env["torch"] = torch.__version__
        env["device"] = (
            torch.cuda.get_device_name(0) if torch.cuda.is_available()
            else "CPU"
        )
    else:
        env["device"] = "?"
    return env


def env_line(env):
    """One 'env: ...' line for the printed table."""
    bits = [f"backend={env['backend']}", f"device={env['device']}",
            f"keras={env['keras']}", f"keras_hub={env['keras_hub']}",
            f"tensorflow={env['tensorflow']}"]
    if "jax" in env:
        bits.append(f"jax={env['jax']}")
    dtype = env["dtype_policy"]
    ours_dtype = env.get("ours_dtype_policy", dtype)
    if ours_dtype != dtype:  # pretrain_bench --ours-dtype
        dtype = f"{ours_dtype}(ours)/{dtype}(keras-hub)"
    bits += [f"dtype={dtype}", f"cpus={env['cpu_count']}",
             f"python={env['python']}",
             f"loadavg(start/end)={env['loadavg_start']}/"
             f"{env.get('loadavg_end')}"]
    return "env: " + " ".join(bits)


def make_bert_inputs(batch, length, vocab, seed=0):
    """keras-hub-named int32 inputs (token_ids, padding_mask, segment_ids)
    with realistic padding (lengths T/2..T, row 0 full) and two segments."""
    import numpy as np

    rng = np.random.default_rng(seed)
    lengths = rng.integers(max(1, length // 2), length + 1, size=batch)
    lengths[0] = length  # At least one full row.
    positions = np.arange(length)[None, :]
    mask = (positions < lengths[:, None]).astype("int32")
    token_ids = rng.integers(1, vocab, size=(batch, length)).astype("int32")
    token_ids *= mask
    segment_ids = ((positions >= (lengths[:, None] // 2)) * mask).astype(
        "int32")
    return {
        "token_ids": token_ids,
        "padding_mask": mask,
        "segment_ids": segment_ids,
    }


def max_abs_diff(a, b):
    import numpy as np

    return float(np.max(np.abs(np.asarray(a, "float64") -
                                np.asarray(b, "float64"))))


def block_until_ready(variables):
    """Waits for pending (async) updates by reading the last variable."""
    if variables:
        _ = variables[-1].numpy()


def time_steps(step_fns, args):
    """Times `step_fns` ({name: fn()}) like every model bench does.

    Each fn is called once (timed: trace/compile + run, "1st call") and
    `args.warmup - 1` more times untimed; then `args.repeats` blocks of
    `args.steps` calls each, the models alternating (a, b, then b, a, ...)
    so that load drift hits all of them alike.

    Returns (rates {name: [seq/s per block]}, first_call_s {name: s},
    outputs {name: the last call's return value}).
    """
    names = list(step_fns)
    first_call_s, outputs = {}, {}
    for who in names:
        t0 = time.perf_counter()
        outputs[who] = step_fns[who]()
        first_call_s[who] = time.perf_counter() - t0
        for _ in range(args.warmup - 1):
            outputs[who] = step_fns[who]()
    rates = {who: [] for who in names}
    for r in range(args.repeats):
        for who in (names if r % 2 == 0 else names[::-1]):
            fn = step_fns[who]
            t0 = time.perf_counter()
            for _ in range(args.steps):
                fn()
            dt = time.perf_counter() - t0
            rates[who].append(args.steps * args.batch_size / dt)
    return rates, first_call_s, outputs


def ratio_row(label, rates, first_call_s, ours=OURS, peer=PEER, **extra):
    """The result dict of one row: medians, ratio ours/peer, paired ratios
    (block r of ours / block r of the peer) and first-call times."""
    med_o = statistics.median(rates[ours])
    med_p = statistics.median(rates[peer])
    paired = [o / p for o, p in zip(rates[ours], rates[peer])]
    return {
        "row": label,
        **extra,
        "ours_seq_per_s": med_o,
        "keras_hub_seq_per_s": med_p,
        "ratio": med_o / med_p,
        "paired_ratio_median": statistics.median(paired),
        "paired_ratio_min": min(paired),
        "paired_ratio_max": max(paired),
        "ours_seq_per_s_all": rates[ours],
        "keras_hub_seq_per_s_all": rates[peer],
        "first_call_s_ours": first_call_s[ours],
        "first_call_s_keras_hub": first_call_s[peer],
    }


def format_ratio_rows(rows, extra=()):
    """Header, rule and one line per `ratio_row` result; `extra` adds
    columns as (header, width, fn(row) -> str)."""
    width = max([18] + [len(r["row"]) + 1 for r in rows])
    header = (f"{'row':<{width}} {'ours seq/s':>11} {'keras-hub seq/s':>16} "
              f"{'ours/keras-hub':>15}   {'paired ratios min..max':>23} "
              f"{'1st call s (ours/kh)':>21}")
    header += "".join(f"  {h:>{w}}" for h, w, _ in extra)
    lines = [header, "-" * len(header)]
    for row in rows:
        lines.append(
            f"{row['row']:<{width}} {row['ours_seq_per_s']:>11.1f} "
            f"{row['keras_hub_seq_per_s']:>16.1f} "
            f"{row['ratio']:>14.3f}x   "
            f"{row['paired_ratio_min']:>10.3f}..{row['paired_ratio_max']:<11.3f}"
            f"  {row['first_call_s_ours']:>8.2f} / "
            f"{row['first_call_s_keras_hub']:<8.2f}"
            + "".join(f"  {fn(row):>{w}}" for _, w, fn in extra)
        )
    return lines
