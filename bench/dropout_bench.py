#!/usr/bin/env python
"""Did a Philox dropout pay for itself? A whole pretraining step with a
Philox-bit dropout mask against the same step with Keras' dropout.

kerasbert once drew every dropout mask with its own kernel (below,
`philox_dropout`: 32 Philox bits per element compared with an integer
threshold, about half the cost of Keras' mask for a 1M-element tensor with
XLA on a CPU). Code like that stays only if a whole step gains by more than
the noise; this bench measured that it does not
(bench/docs/dropout_bench.md), so the models use `keras.layers.Dropout`
again and the kernel lives only here, to repeat the measurement.

Both `BertPretrainer`s (bert_mini, T=128, P=20, dropout 0.1, our AdamW) are
built from the same weights in one process; the "philox" one is traced while
Keras' backend dropout is replaced by `philox_dropout` (what
`keras.layers.Dropout.call` reaches), so the two graphs differ only in how
the masks are drawn. Steps alternate in blocks (a, b, then b, a, ...); a gain
counts only when every paired per-block ratio is above 1. TensorFlow backend.

    python bench/dropout_bench.py [--jit both|on|off] [--quick] [--json OUT]
"""

import argparse
import os
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: E402

_common.add_paths()
from _common import BenchError  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

DEFAULTS = {"batch_size": 16, "sequence_length": 128, "predictions": 20,
            "repeats": 7, "steps": 3, "warmup": 2}
QUICK_DEFAULTS = {"batch_size": 2, "sequence_length": 16, "predictions": 4,
                  "repeats": 2, "steps": 1, "warmup": 1}
PHILOX, KERAS = "philox", "keras"


def parse_args(argv):
    p = argparse.ArgumentParser(description=(
        "Whole BertPretrainer training steps with kerasbert's Philox dropout "
        "vs Keras' dropout, same weights, alternating."))
    _common.add_model_args(p, DEFAULTS)
    p.add_argument("--predictions", type=int, default=None,
                   help=f"masked positions per sequence (default {DEFAULTS['predictions']})")
    p.add_argument("--jit", choices=("both", "off", "on"), default="both",
                   help="which jit_compile rows to run (default both)")
    args = p.parse_args(argv)
    _common.finish_model_args(p, args, DEFAULTS, QUICK_DEFAULTS, counts=("predictions",))
    return args


def philox_dropout(inputs, rate, seed_generator):
    """Training-time dropout of `inputs` (scaled by 1 / (1 - rate)).

    Args:
        inputs: float tensor.
        rate: float in [0, 1] (1 drops everything).
        seed_generator: a `keras.random.SeedGenerator`; each call draws the
            next seed from it, so runs are reproducible.

    Keras draws the mask with `tf.nn.experimental.stateless_dropout`:
    uniform floats from the "auto_select" generator, which under XLA on a
    CPU is ThreeFry. Under TensorFlow the mask here is 32 Philox bits per
    element compared with the integer floor(rate * 2^32) (an element is
    kept with probability 1 - rate to within 2^-32), applied as one
    multiply by the scaled 0/1 mask, whose gradient is the same multiply.
    Measured on 2 CPU cores, forward and backward of a 1M-element mask (the
    attention probabilities of one bert_mini layer at batch 16, T = 128):
    14 ms with XLA for Keras', 7.7 ms for this; ~6 ms each without XLA.
    The masks differ from Keras' for the same seed; the distribution is
    the same. TensorFlow only.
    """
    import tensorflow as tf

    if rate <= 0:
        return inputs
    if rate >= 1:  # everything dropped (as Keras does)
        return tf.zeros_like(inputs)

    seed = tf.cast(seed_generator.next(), tf.int32)
    bits = tf.random.stateless_uniform(
        tf.shape(inputs), seed, minval=None, maxval=None, dtype=tf.uint32, alg="philox"
    )
    threshold = tf.constant(min(int(rate * 2.0**32), 2**32 - 1), tf.uint32)
    keep = tf.cast(bits >= threshold, inputs.dtype)
    return inputs * (keep * tf.cast(1.0 / (1.0 - rate), inputs.dtype))


def build(config, policy, jit, weights=None):
    import keras

    from kerasbert.models import BertBackbone
    from kerasbert.optimizers import AdamW
    from kerasbert.tasks import BertPretrainer

    backbone = BertBackbone(**{**config, "dropout": 0.1}, dtype=policy)
    model = BertPretrainer(backbone, objectives=("mlm",))
    if weights is not None:
        model.set_weights(weights)
    model.compile(optimizer=AdamW(learning_rate=1e-4, weight_decay=0.01, epsilon=1e-6),
                  jit_compile=jit)
    keras.utils.set_random_seed(0)
    return model


def features(args, vocab):
    import numpy as np

    x = _common.make_bert_inputs(args.batch_size, args.sequence_length, vocab, seed=0)
    rng = np.random.default_rng(1)
    positions = np.stack([np.sort(rng.choice(np.arange(1, n), args.predictions, replace=False))
                          for n in x["padding_mask"].sum(axis=1)]).astype("int32")
    ids = np.take_along_axis(x["token_ids"], positions, axis=1)
    return {"input_word_ids": x["token_ids"], "input_mask": x["padding_mask"],
            "input_type_ids": x["segment_ids"], "masked_lm_positions": positions,
            "masked_lm_ids": ids, "masked_lm_weights": np.ones_like(positions, "float32")}


def bench_row(args, config, policy, jit):
    from keras.src import backend  # the module keras.layers.Dropout calls into

    batch = features(args, config["vocabulary_size"])
    keras_model = build(config, policy, jit)
    philox = build(config, policy, jit, keras_model.get_weights())
    steps = {KERAS: lambda: keras_model.train_on_batch(batch)}
    # The philox model is traced (its first call) with the Philox mask in
    # place of Keras' backend dropout; the traced step keeps it afterwards.
    original = backend.random.dropout
    backend.random.dropout = (lambda inputs, rate, noise_shape=None, seed=None:
                              philox_dropout(inputs, rate, seed))
    try:
        philox.train_on_batch(batch)
    finally:
        backend.random.dropout = original
    steps[PHILOX] = lambda: philox.train_on_batch(batch)
    rates, first_call_s, _ = _common.time_steps(steps, args)
    paired = [a / b for a, b in zip(rates[PHILOX], rates[KERAS])]
    return {
        "jit_compile": jit,
        "philox_seq_per_s": statistics.median(rates[PHILOX]),
        "keras_seq_per_s": statistics.median(rates[KERAS]),
        "ratio": statistics.median(rates[PHILOX]) / statistics.median(rates[KERAS]),
        "paired_ratios": paired,
        "gain_outside_noise": min(paired) > 1.0,
        "first_call_s": first_call_s,
    }


def run(args):
    import keras

    if keras.config.backend() != "tensorflow":
        raise BenchError("the Philox mask is TensorFlow's; run with KERAS_BACKEND=tensorflow.")
    name, config = _common.resolve_bert_config(args)
    policy = _common.dtype_policy(args.dtype)
    jits = {"both": (False, True), "off": (False,), "on": (True,)}[args.jit]
    rows = [bench_row(args, config, policy, jit) for jit in jits]
    env = _common.keras_environment(args, _common.LOAD_AT_START.get("value"))
    print(_common.env_line(env))
    print(f"model {name}, batch {args.batch_size}, T={args.sequence_length}, "
          f"P={args.predictions}, dropout 0.1, {args.dtype}")
    print("| jit_compile | philox seq/s | keras seq/s | philox / keras | paired ratios "
          "(min..max) | gain outside the noise |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {'on' if r['jit_compile'] else 'off'} | {r['philox_seq_per_s']:.1f} | "
              f"{r['keras_seq_per_s']:.1f} | {r['ratio']:.3f} | "
              f"{min(r['paired_ratios']):.3f}..{max(r['paired_ratios']):.3f} | "
              f"{'yes' if r['gain_outside_noise'] else 'no'} |")
    payload = {"env": env, "model": name, "rows": rows}
    if args.json:
        _common.write_json(args.json, payload)
    return payload


def main(argv=None):
    try:
        return _common.timed_main(parse_args, run, argv)
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
