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
import sys
import time

# Allow `python bench/encoder_bench.py` from a checkout without installing.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: E402

_common.add_paths()
from _common import OURS, PEER, BenchError  # noqa: E402,F401
from _common import loadavg as _loadavg  # noqa: E402
from _common import max_abs_diff, write_json  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

DEFAULTS = {"batch_size": 16, "seq_length": 128, "repeats": 5, "steps": 3,
            "warmup": 2}
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

def parse_args(argv):
    p = argparse.ArgumentParser(
        description=(
            "Throughput (sequences/s) of kerasbert's BertBackbone vs "
            "keras-hub's with identical weights, forward and train step, "
            "jit_compile off and on."
        )
    )
    _common.add_model_args(p, DEFAULTS)
    args = p.parse_args(argv)
    _common.finish_model_args(p, args, DEFAULTS, QUICK_DEFAULTS)
    return args


# 1-minute load average when main() started, before this process did any
# work: clearly above 0 means other processes were competing for the CPUs.
make_inputs = _common.make_bert_inputs


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


def bench_row(kind, jit, models, data, targets, args, initial_weights):
    """Times one row; returns per-model lists of seq/s and compile times."""
    import keras

    step_fns = {}
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
                _common.block_until_ready(train.trainable_variables)
                return loss

        step_fns[who] = step

    return _common.time_steps(step_fns, args)


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
    lines += _common.format_ratio_rows(results)
    lines.append("")
    lines.append("ratio = median(ours seq/s) / median(keras-hub seq/s); "
                 "> 1 means kerasbert is faster.")
    d = meta["output_max_abs_diff"]
    lines.append(
        "outputs match: max|diff| sequence_output "
        f"{d['sequence_output']:.2e}, pooled_output {d['pooled_output']:.2e},"
        f" train wrapper {d['train_wrapper_output']:.2e}"
    )
    lines.append(_common.env_line(env))
    if env["note"]:
        lines.append(f"note: {env['note']}")
    return "\n".join(lines)


def run(args):
    import keras
    import keras_hub
    import numpy as np

    from kerasbert.convert import from_keras_hub

    config_name, config = _common.resolve_bert_config(args)
    policy = _common.dtype_policy(args.dtype)

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

    env = _common.keras_environment(args, _common.LOAD_AT_START.get("value"))
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
        row = _common.ratio_row(label, rates, first_call, kind=kind,
                                jit_compile=jit)
        med_o, med_p = row["ours_seq_per_s"], row["keras_hub_seq_per_s"]
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
    return _common.timed_main(parse_args, run, argv)


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
