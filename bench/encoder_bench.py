#!/usr/bin/env python
"""Encoder throughput: kerasbert's BertBackbone vs keras-hub's, same run.

Builds a `keras_hub.models.BertBackbone`, converts it with
`kerasbert.convert.from_keras_hub` (identical weights and activation), checks
that both produce the same outputs, then measures sequences/second for

    forward (predict_on_batch, training=False)  x  jit_compile off / on
    train   (train_on_batch: fwd + bwd + AdamW)  x  jit_compile off / on

Both models get the identical treatment: the same wrapper model, the same
compile() call, the same inputs. Measurements alternate between the two models
over several repeats after a warm-up, and the median is reported, because
absolute times on shared machines mean little; read the ratio.

Runs with any Keras backend, e.g. `KERAS_BACKEND=jax python
bench/encoder_bench.py` (jit_compile=True is then jax.jit/XLA; False runs the
step op by op). See bench/README.md for the flags.
"""

import argparse
import os
import pathlib
import platform
import statistics
import sys
import time

# Allow `python bench/encoder_bench.py` from a checkout without installing.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: E402

_common.add_paths()
from _common import loadavg as _loadavg  # noqa: E402
from _common import write_json  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

DEFAULT_PRESET = "bert_mini"  # 4 layers, hidden 256, 4 heads, FFN 1024.
DEFAULTS = {"batch_size": 16, "seq_length": 128, "repeats": 5, "steps": 3,
            "warmup": 2}
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
QUICK_DEFAULTS = {"batch_size": 2, "seq_length": 16, "repeats": 1, "steps": 2,
                  "warmup": 1}

# keras-hub input name -> kerasbert input name.
INPUT_NAMES = {
    "token_ids": "input_word_ids",
    "padding_mask": "input_mask",
    "segment_ids": "input_type_ids",
}
ROWS = [
    ("forward", False),
    ("forward", True),
    ("train", False),
    ("train", True),
]
OURS, PEER = "kerasbert", "keras_hub"


class BenchError(Exception):
    """A problem with the arguments or the models; exits non-zero."""


def parse_args(argv):
    p = argparse.ArgumentParser(
        description=(
            "Throughput (sequences/s) of kerasbert's BertBackbone vs "
            "keras-hub's with identical weights, forward and train step, "
            "jit_compile off and on."
        )
    )
    p.add_argument(
        "--preset",
        default=None,
        help=f"a name from kerasbert.models.list_presets() "
        f"(default {DEFAULT_PRESET}; with --quick a tiny 2-layer model)",
    )
    p.add_argument("--batch-size", type=int, default=None,
                   help=f"sequences per step (default {DEFAULTS['batch_size']})")
    p.add_argument("--seq-length", type=int, default=None,
                   help=f"tokens per sequence (default {DEFAULTS['seq_length']})")
    p.add_argument("--repeats", type=int, default=None,
                   help="timed blocks per model and row; the median is "
                   f"reported (default {DEFAULTS['repeats']})")
    p.add_argument("--steps", type=int, default=None,
                   help="calls per timed block "
                   f"(default {DEFAULTS['steps']})")
    p.add_argument("--warmup", type=int, default=None,
                   help="untimed calls per model and row before timing, the "
                   f"first one traces/compiles (default {DEFAULTS['warmup']})")
    p.add_argument("--dtype", default="float32",
                   help="dtype policy for both backbones, e.g. float32, "
                   "bfloat16, mixed_bfloat16, mixed_float16 (default float32)")
    p.add_argument("--backend-note", default="",
                   help="free text recorded with the results (machine, "
                   "driver, anything worth keeping)")
    p.add_argument("--json", metavar="OUT", default=None,
                   help="also write the results as JSON to this file")
    p.add_argument("--quick", action="store_true",
                   help="tiny config, 1 repeat, few steps: a smoke test, "
                   "not a measurement")
    args = p.parse_args(argv)
    base = QUICK_DEFAULTS if args.quick else DEFAULTS
    for name, value in base.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    for name in ("batch_size", "seq_length", "repeats", "steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, "
                    f"got {getattr(args, name)}")
    if args.warmup < 1:
        p.error(f"--warmup must be >= 1 (the first call compiles), "
                f"got {args.warmup}")
    return args


def resolve_config(args):
    from kerasbert.models import get_preset

    if args.preset is None and args.quick:
        return "quick", dict(QUICK_CONFIG)
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
    keys = ("vocabulary_size", "num_layers", "num_heads", "hidden_dim",
            "intermediate_dim", "max_sequence_length", "num_segments",
            "dropout")
    return name, {k: preset["config"][k] for k in keys}


# 1-minute load average when main() started, before this process did any
# work: clearly above 0 means other processes were competing for the CPUs.
_LOAD_AT_START = {}


def environment(args):
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
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "dtype_policy": args.dtype,
        "note": args.backend_note,
        "loadavg_start": _LOAD_AT_START.get("value"),
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


def make_inputs(batch, length, vocab, seed=0):
    """keras-hub-named int32 inputs with realistic padding and two segments."""
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


def ours_inputs(peer_inputs):
    return {INPUT_NAMES[k]: v for k, v in peer_inputs.items()}


def build_wrappers(backbone, input_names, head):
    """Forward and train wrappers, identical for both backbones.

    forward: inputs -> [sequence_output, pooled_output] (the two outputs both
        backbones share; our extra `encoder_outputs` list is not fetched).
    train: head(pooled_output) + mean(sequence_output), a scalar per
        sequence, regressed with MSE, so gradients flow through both outputs.
    """
    import keras
    from keras import ops

    inputs = {
        n: keras.Input((None,), dtype="int32", name=n) for n in input_names
    }
    out = backbone(inputs)
    seq, pooled = out["sequence_output"], out["pooled_output"]
    forward = keras.Model(inputs, [seq, pooled], name=f"{backbone.name}_fwd")
    score = ops.squeeze(head(pooled), -1) + ops.mean(
        ops.cast(seq, "float32"), axis=(1, 2))
    train = keras.Model(inputs, score, name=f"{backbone.name}_train")
    return forward, train


def max_abs_diff(a, b):
    import numpy as np

    return float(np.max(np.abs(np.asarray(a, "float64") -
                                np.asarray(b, "float64"))))


def block_until_ready(model):
    """Waits for pending (async) updates of `model`'s last variable."""
    if model.trainable_variables:
        _ = model.trainable_variables[-1].numpy()


def bench_row(kind, jit, models, data, targets, args, initial_weights):
    """Times one row; returns per-model lists of seq/s and compile times."""
    import keras

    step_fns = {}
    first_call_s = {}
    for who in (OURS, PEER):
        fwd, train = models[who]
        # Same starting weights for each row (the train wrapper holds the
        # backbone and the head), fresh optimizer state from compile().
        train.set_weights(initial_weights[who])
        if kind == "forward":
            fwd.compile(jit_compile=jit)

            def step(fwd=fwd, x=data[who]):
                return fwd.predict_on_batch(x)

        else:
            train.compile(
                optimizer=keras.optimizers.AdamW(learning_rate=1e-5),
                loss="mse",
                jit_compile=jit,
            )

            def step(train=train, x=data[who]):
                loss = train.train_on_batch(x, targets)
                block_until_ready(train)
                return loss

        step_fns[who] = step

    outputs = {}
    for who in (OURS, PEER):
        t0 = time.perf_counter()
        outputs[who] = step_fns[who]()
        first_call_s[who] = time.perf_counter() - t0
        for _ in range(args.warmup - 1):
            outputs[who] = step_fns[who]()

    rates = {OURS: [], PEER: []}
    for r in range(args.repeats):
        order = (OURS, PEER) if r % 2 == 0 else (PEER, OURS)
        for who in order:
            fn = step_fns[who]
            t0 = time.perf_counter()
            for _ in range(args.steps):
                fn()
            dt = time.perf_counter() - t0
            rates[who].append(args.steps * args.batch_size / dt)
    return rates, first_call_s, outputs


def check_outputs(models, data, tol):
    """Asserts both backbones compute the same thing; returns the diffs."""
    import numpy as np

    f_ours, t_ours = models[OURS]
    f_peer, t_peer = models[PEER]
    seq_o, pool_o = f_ours.predict_on_batch(data[OURS])
    seq_p, pool_p = f_peer.predict_on_batch(data[PEER])
    mask = data[PEER]["padding_mask"].astype(bool)
    diffs = {
        # Padded positions are garbage-in on both sides; compare real tokens.
        "sequence_output": max_abs_diff(seq_o[mask], seq_p[mask]),
        "pooled_output": max_abs_diff(pool_o, pool_p),
        "train_wrapper_output": max_abs_diff(
            t_ours.predict_on_batch(data[OURS]),
            t_peer.predict_on_batch(data[PEER]),
        ),
    }
    for name, d in diffs.items():
        if not np.isfinite(d) or d > tol:
            raise BenchError(
                f"kerasbert and keras-hub outputs differ: max |diff| of "
                f"{name} is {d:.3g} > {tol:g}; the comparison would not be "
                "apples to apples."
            )
    return diffs


def format_table(results, env, meta):
    lines = []
    lines.append(
        f"kerasbert vs keras-hub BertBackbone  [{meta['config_name']}: "
        f"L={meta['config']['num_layers']} H={meta['config']['hidden_dim']} "
        f"heads={meta['config']['num_heads']} "
        f"FFN={meta['config']['intermediate_dim']} "
        f"vocab={meta['config']['vocabulary_size']}]  batch={meta['batch_size']}"
        f" seq={meta['seq_length']}  repeats={meta['repeats']} "
        f"steps={meta['steps']} warmup={meta['warmup']}"
    )
    header = (f"{'row':<18} {'ours seq/s':>11} {'keras-hub seq/s':>16} "
              f"{'ours/keras-hub':>15}   {'paired ratios min..max':>23} "
              f"{'1st call s (ours/kh)':>21}")
    lines.append(header)
    lines.append("-" * len(header))
    for row in results:
        lines.append(
            f"{row['row']:<18} {row['ours_seq_per_s']:>11.1f} "
            f"{row['keras_hub_seq_per_s']:>16.1f} "
            f"{row['ratio']:>14.3f}x   "
            f"{row['paired_ratio_min']:>10.3f}..{row['paired_ratio_max']:<11.3f}"
            f"  {row['first_call_s_ours']:>8.2f} / "
            f"{row['first_call_s_keras_hub']:<8.2f}"
        )
    lines.append("")
    lines.append("ratio = median(ours seq/s) / median(keras-hub seq/s); "
                 "> 1 means kerasbert is faster.")
    d = meta["output_max_abs_diff"]
    lines.append(
        "outputs match: max|diff| sequence_output "
        f"{d['sequence_output']:.2e}, pooled_output {d['pooled_output']:.2e},"
        f" train wrapper {d['train_wrapper_output']:.2e}"
    )
    env_bits = [f"backend={env['backend']}", f"device={env['device']}",
                f"keras={env['keras']}", f"keras_hub={env['keras_hub']}",
                f"tensorflow={env['tensorflow']}"]
    if "jax" in env:
        env_bits.append(f"jax={env['jax']}")
    env_bits += [f"dtype={env['dtype_policy']}", f"cpus={env['cpu_count']}",
                 f"python={env['python']}",
                 f"loadavg(start/end)={env['loadavg_start']}/"
                 f"{env.get('loadavg_end')}"]
    lines.append("env: " + " ".join(env_bits))
    if env["note"]:
        lines.append(f"note: {env['note']}")
    return "\n".join(lines)


def run(args):
    import keras
    import keras_hub
    import numpy as np

    from kerasbert.convert import from_keras_hub

    config_name, config = resolve_config(args)
    if args.seq_length > config["max_sequence_length"]:
        raise BenchError(
            f"--seq-length {args.seq_length} exceeds the model's "
            f"max_sequence_length {config['max_sequence_length']}."
        )
    try:
        policy = keras.dtype_policies.get(args.dtype)
    except ValueError as e:
        raise BenchError(f"--dtype {args.dtype!r}: {e}") from None

    keras.utils.set_random_seed(0)
    peer = keras_hub.models.BertBackbone(**config, dtype=policy)
    ours = from_keras_hub(peer)

    head_init = keras.initializers.RandomNormal(stddev=0.02, seed=1)
    heads = {
        OURS: keras.layers.Dense(1, kernel_initializer=head_init, name="head",
                                 dtype=policy),
        PEER: keras.layers.Dense(1, kernel_initializer=head_init, name="head",
                                 dtype=policy),
    }
    models = {
        OURS: build_wrappers(ours, list(INPUT_NAMES.values()), heads[OURS]),
        PEER: build_wrappers(peer, list(INPUT_NAMES), heads[PEER]),
    }
    heads[OURS].set_weights(heads[PEER].get_weights())

    peer_data = make_inputs(args.batch_size, args.seq_length,
                            config["vocabulary_size"])
    data = {OURS: ours_inputs(peer_data), PEER: peer_data}
    targets = np.random.default_rng(1).normal(
        size=(args.batch_size,)).astype("float32")

    tol = 1e-3 if policy.compute_dtype == "float32" else 5e-2
    for who in (OURS, PEER):
        models[who][0].compile(jit_compile=False)
        models[who][1].compile(jit_compile=False)
    diffs = check_outputs(models, data, tol)
    print(
        "outputs match (jit off): max|diff| "
        + ", ".join(f"{k} {v:.2e}" for k, v in diffs.items()),
        flush=True,
    )
    initial_weights = {who: models[who][1].get_weights() for who in models}

    env = environment(args)
    results = []
    for kind, jit in ROWS:
        label = f"{kind} jit={'on' if jit else 'off'}"
        t0 = time.perf_counter()
        rates, first_call, outs = bench_row(
            kind, jit, models, data, targets, args, initial_weights)
        if kind == "forward":
            # The compiled path must agree too (XLA may fuse differently).
            seq_d = max_abs_diff(outs[OURS][0][peer_data["padding_mask"] > 0],
                                 outs[PEER][0][peer_data["padding_mask"] > 0])
            if not np.isfinite(seq_d) or seq_d > tol:
                raise BenchError(
                    f"{label}: sequence_output differs by {seq_d:.3g} > {tol}"
                )
        med_o = statistics.median(rates[OURS])
        med_p = statistics.median(rates[PEER])
        paired = [o / p for o, p in zip(rates[OURS], rates[PEER])]
        row = {
            "row": label,
            "kind": kind,
            "jit_compile": jit,
            "ours_seq_per_s": med_o,
            "keras_hub_seq_per_s": med_p,
            "ratio": med_o / med_p,
            "paired_ratio_median": statistics.median(paired),
            "paired_ratio_min": min(paired),
            "paired_ratio_max": max(paired),
            "ours_seq_per_s_all": rates[OURS],
            "keras_hub_seq_per_s_all": rates[PEER],
            "first_call_s_ours": first_call[OURS],
            "first_call_s_keras_hub": first_call[PEER],
        }
        results.append(row)
        print(
            f"  {label:<16} ours {med_o:9.1f} seq/s  keras-hub {med_p:9.1f} "
            f"seq/s  ratio {row['ratio']:.3f}x  "
            f"({time.perf_counter() - t0:.1f}s)",
            flush=True,
        )

    env["loadavg_end"] = _loadavg()
    meta = {
        "config_name": config_name,
        "config": config,
        "batch_size": args.batch_size,
        "seq_length": args.seq_length,
        "repeats": args.repeats,
        "steps": args.steps,
        "warmup": args.warmup,
        "output_max_abs_diff": diffs,
    }
    print()
    print(format_table(results, env, meta))
    payload = {"env": env, "meta": meta, "rows": results}
    if args.json:
        write_json(args.json, payload)
        print(f"wrote {args.json}")
    return payload


def main(argv=None):
    _LOAD_AT_START["value"] = _loadavg()
    args = parse_args(argv)
    t0 = time.perf_counter()
    payload = run(args)
    print(f"total {time.perf_counter() - t0:.1f}s")
    return payload


if __name__ == "__main__":
    # Each compile() makes a new predict/train function; TF's "retracing"
    # warning about that is expected here, not a sign of per-step tracing.
    import logging

    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    try:
        main()
    except BenchError as e:
        print(f"encoder_bench: error: {e}", file=sys.stderr)
        sys.exit(2)
