#!/usr/bin/env python
"""Pretraining throughput: kerasbert's BertPretrainer vs keras-hub's
BertMaskedLM, same run.

Builds a `keras_hub.models.BertMaskedLM` on a `keras_hub.models.BertBackbone`,
converts the backbone with `kerasbert.convert.from_keras_hub` (identical
weights and activation), wraps it in `kerasbert.tasks.BertPretrainer(backbone,
objectives=("mlm",))` and copies keras-hub's masked-LM head weights into ours.
Both models see the same batch (random token ids, ragged padding, two
segments, P sorted masked positions per sequence, all weights 1), the same
dtype policy (unless `--ours-dtype` says otherwise, below), dropout on, and
the same optimizer settings (AdamW, lr 1e-4,
weight decay 0.01 not applied to bias/LayerNorm variables, epsilon 1e-6, no
clipping): each library's own AdamW, as its users train (keras-hub: Keras'
`keras.optimizers.AdamW`; ours: `kerasbert.optimizers.AdamW`, the same update
formula with a fused kernel under TensorFlow).
Before timing it checks that both give the same masked-LM logits
(training=False; max |diff| 1e-4 when both run in float32; when either side
computes in a lower precision 5e-2 times max(1, max |logit|), since bfloat16
rounding misses by a fraction of the logits' size) and exits with code 2
when they do not.

Precision: `--dtype POLICY` (default float32) sets the policy of both models;
`--ours-dtype POLICY` (default: the same as `--dtype`) sets ours alone, so

    python bench/pretrain_bench.py --ours-dtype mixed_bfloat16

trains our pretrainer in mixed_bfloat16 against keras-hub's BertMaskedLM in
float32. That is the bfloat16 row: each side in the precision its user would
pick. With the TensorFlow backend keras-hub (0.32) cannot train in mixed
precision at all: its MaskedLMHead adds the float32 output bias to
half-precision logits and TensorFlow refuses the mixed-dtype add (`--dtype
mixed_bfloat16` stops with exit code 2 and says so), so its float32 is the
fastest keras-hub step a TensorFlow user has. Our model is still built from
the peer's converted weights (the float32 variables are copied, then our
layers compute in the chosen policy). The table, the env line and the JSON
(`meta["dtype_policy"]`: {"ours": ..., "keras_hub": ...}) say which policy
each side ran; under JAX, where keras-hub's head works in mixed precision,
give both the same `--dtype` to compare like with like.

Rows (sequences/second, ours / keras-hub, measured alternately):

    train jit=off/on      ours: BertPretrainer.train_on_batch(features)
                          peer: BertMaskedLM.train_on_batch(x, y, sample_weight)
                          each after compile(optimizer, jit_compile=off/on);
                          the peer keeps keras-hub's default loss
                          (SparseCategoricalCrossentropy(from_logits=True),
                          weighted by the mask weights) and weighted metric
                          (SparseCategoricalAccuracy); ours computes its own
                          loss and mlm_loss/mlm_accuracy metrics.
    TrainStep jit=off/on  ours: kerasbert.training.loop.TrainStep, the step
                          `kerasbert pretrain` runs (strategy "auto": one
                          device), clipnorm off, fed by a tf.data iterator
                          that repeats the same batch; the peer as above
                          (its step from the train row with the same jit
                          setting, timed again alternately with TrainStep).
                          TensorFlow backend only.

Model FLOPs (stated here, used for the TFLOP/s columns), per sequence of T
tokens with P masked positions, L layers, hidden H, feed-forward F,
vocabulary V (multiply-add = 2 FLOPs; the embedding lookups, softmax,
LayerNorm, GELU, dropout and the unused pooler are not counted):

    forward = 2 * L * (4 * H^2 + 2 * H * F) * T     # Q, K, V, output, FFN
            + 2 * 2 * L * T^2 * H                   # Q K^T and probs V
            + 2 * P * (H^2 + H * V)                 # MLM transform + tied decoder
    train   = 3 * forward                           # backward = 2 x forward

    achieved TFLOP/s = train * sequences/s / 1e12.

For bert_mini (L=4, H=256, F=1024, V=30522) at T=128, P=20 that is 1.188
GFLOP forward, 3.563 GFLOP per trained sequence; the MLM decoder alone is 26%
of it (the model is small and the vocabulary is not). `--peak-tflops X` adds
the model FLOPs utilisation (achieved / X), e.g. 989 for bf16 on an H100.

Runs with any Keras backend, e.g. `KERAS_BACKEND=jax python
bench/pretrain_bench.py` (jit_compile=True is jax.jit/XLA, False runs the step
op by op; the TrainStep rows are skipped). See bench/docs/pretrain_bench.md.
"""

import argparse
import contextlib
import os
import pathlib
import re
import sys
import time

# Allow `python bench/pretrain_bench.py` from a checkout without installing.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: E402

_common.add_paths()
from _common import OURS, PEER, BenchError  # noqa: E402,F401
from _common import max_abs_diff, write_json  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

DEFAULTS = {"batch_size": 16, "sequence_length": 128, "predictions": 20,
            "repeats": 5, "steps": 3, "warmup": 2}
QUICK_DEFAULTS = {"batch_size": 2, "sequence_length": 16, "predictions": 4,
                  "repeats": 1, "steps": 2, "warmup": 1}
LEARNING_RATE = 1e-4
MASK_TOKEN_ID = 103  # [MASK] in the uncased BERT vocabulary (1 if smaller).
# (label, how ours trains, jit_compile), in the order they run: the peer is
# compiled once per jit setting and its step reused by the TrainStep row.
ROWS = [
    ("train jit=off", "train_on_batch", False),
    ("TrainStep jit=off", "TrainStep", False),
    ("train jit=on", "train_on_batch", True),
    ("TrainStep jit=on", "TrainStep", True),
]
# keras-hub input name -> kerasbert feature name.
FEATURE_NAMES = {
    "token_ids": "input_word_ids",
    "padding_mask": "input_mask",
    "segment_ids": "input_type_ids",
    "mask_positions": "masked_lm_positions",
}


def parse_args(argv):
    p = argparse.ArgumentParser(
        description=(
            "Training throughput (sequences/s, model TFLOP/s) of kerasbert's "
            "BertPretrainer (MLM) vs keras-hub's BertMaskedLM with identical "
            "weights, jit_compile off and on, plus kerasbert's TrainStep."
        )
    )
    _common.add_model_args(p, DEFAULTS)
    p.add_argument("--predictions", type=int, default=None,
                   help="masked positions per sequence, P "
                   f"(default {DEFAULTS['predictions']})")
    p.add_argument("--jit", choices=("both", "off", "on"), default="both",
                   help="which jit_compile rows to run (default both; 'on' "
                   "skips the slow op-by-op rows, e.g. JAX on a GPU)")
    p.add_argument("--ours-dtype", default=None, metavar="POLICY",
                   help="dtype policy for kerasbert's pretrainer alone "
                   "(default: --dtype), e.g. mixed_bfloat16 against keras-hub "
                   "in float32: keras-hub's BertMaskedLM fails under a mixed "
                   "policy with the TensorFlow backend")
    p.add_argument("--peak-tflops", type=float, default=None,
                   help="the device's peak TFLOP/s at this precision; adds "
                   "model FLOPs utilisation (e.g. 989 for bf16 on an H100)")
    args = p.parse_args(argv)
    _common.finish_model_args(p, args, DEFAULTS, QUICK_DEFAULTS,
                              counts=("predictions",))
    if args.predictions >= args.sequence_length:
        p.error(f"--predictions {args.predictions} must be smaller than "
                f"--seq-length {args.sequence_length}")
    if args.ours_dtype is None:
        args.ours_dtype = args.dtype
    for flag, name in (("--dtype", args.dtype), ("--ours-dtype", args.ours_dtype)):
        try:
            _common.dtype_policy(name)
        except BenchError as e:
            p.error(str(e).replace("--dtype", flag, 1))
    return args


def train_flops_per_sequence(config, sequence_length, predictions):
    """Training FLOPs of one sequence (formula in the module docstring)."""
    L, H = config["num_layers"], config["hidden_dim"]
    F, V = config["intermediate_dim"], config["vocabulary_size"]
    T, P = sequence_length, predictions
    encoder_matmul_params = L * (4 * H * H + 2 * H * F)
    forward = (2 * encoder_matmul_params * T
               + 2 * 2 * L * T * T * H
               + 2 * P * (H * H + H * V))
    return 3 * forward


def make_batch(batch, length, predictions, vocab, seed=0):
    """keras-hub-named inputs plus labels: P distinct masked positions per
    row, sorted, inside the real tokens and never position 0 ([CLS]); the
    inputs there are [MASK], the labels the original ids, weights 1."""
    import numpy as np

    x = _common.make_bert_inputs(batch, length, vocab, seed=seed)
    rng = np.random.default_rng(seed + 1)
    lengths = x["padding_mask"].sum(axis=1)
    if lengths.min() - 1 < predictions:
        raise BenchError(
            f"--predictions {predictions} does not fit in the shortest row "
            f"({lengths.min()} tokens); use fewer predictions or a longer "
            "--seq-length."
        )
    positions = np.stack([
        np.sort(rng.choice(np.arange(1, n), size=predictions, replace=False))
        for n in lengths
    ]).astype("int32")
    ids = np.take_along_axis(x["token_ids"], positions, axis=1).astype("int32")
    mask_id = MASK_TOKEN_ID if vocab > MASK_TOKEN_ID else 1
    np.put_along_axis(x["token_ids"], positions, mask_id, axis=1)
    x["mask_positions"] = positions
    weights = np.ones((batch, predictions), "float32")
    return x, ids, weights


def ours_features(x, ids, weights):
    features = {FEATURE_NAMES[k]: v for k, v in x.items()}
    features["masked_lm_ids"] = ids
    features["masked_lm_weights"] = weights
    return features


def make_optimizer(who):
    """The one optimizer configuration every model here trains with, in
    each library's own AdamW: Keras' for keras-hub, ours for kerasbert
    (same formula; under TensorFlow one fused kernel per variable)."""
    import keras

    if who == OURS:
        from kerasbert.optimizers import AdamW

        # Its default exclusions are the same names: bias, gamma, beta.
        return AdamW(learning_rate=LEARNING_RATE, weight_decay=0.01, epsilon=1e-6)
    optimizer = keras.optimizers.AdamW(
        learning_rate=LEARNING_RATE, weight_decay=0.01, epsilon=1e-6)
    optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
    return optimizer


@contextlib.contextmanager
def global_dtype_policy(policy):
    """Keras' global dtype policy set to `policy` inside the block (the
    layers built there take it), restored afterwards."""
    import keras

    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def build_ours(peer_task, policy=None):
    """Our pretrainer with the peer's backbone and MLM-head weights, under
    `policy` (default: the peer backbone's).

    The converted backbone takes the peer's policy; for another one it is
    rebuilt from its config with `dtype=policy` and given the same weights
    (cast only where `policy` stores variables in another dtype, as
    "bfloat16" does; mixed policies keep float32 variables). The head
    follows the backbone's policy.

    keras-hub's BertMaskedLM head uses the erf GELU and LayerNorm epsilon
    1e-5 (its defaults) while its backbone uses the tanh GELU; our head
    follows the backbone's settings. So that the two compute the same
    function, our head's transform is switched to the peer's activation and
    epsilon before anything is traced (same ops, same cost)."""
    import keras

    from kerasbert.convert import from_keras_hub
    from kerasbert.layers.activations import get_activation
    from kerasbert.tasks import BertPretrainer

    backbone = from_keras_hub(peer_task.backbone)
    policy = keras.dtype_policies.get(policy or backbone.dtype_policy)
    with global_dtype_policy(policy):
        if policy.name != backbone.dtype_policy.name:
            converted = backbone
            backbone = type(converted).from_config(
                {**converted.get_config(), "dtype": policy})
            backbone.set_weights(converted.get_weights())
        ours = BertPretrainer(backbone, objectives=("mlm",))
    src = peer_task.masked_lm_head
    head = ours.masked_lm_head
    head.dense.activation = get_activation("gelu")
    head.layer_norm.epsilon = src._intermediate_layer_norm.epsilon
    head.dense.set_weights(src._intermediate_dense.get_weights())
    head.layer_norm.set_weights(src._intermediate_layer_norm.get_weights())
    head.output_bias.assign(src._bias)
    return ours


def logits_tolerance(policies, peer_logits):
    """Largest max |diff| of the masked-LM logits accepted as the same
    function: 1e-4 when both sides compute in float32; otherwise 5e-2 times
    the logits' scale, max(1, max |keras-hub logit|): one side rounding to
    bfloat16 (8 significant bits) misses the float32 logits by a fixed
    fraction of their size, measured 1.6% of the largest logit for bert_base
    at batch 16 (0.041 of 2.6) and 1.0% for bert_mini (0.013 of 1.35),
    mixed_bfloat16 against float32 on a CPU."""
    import numpy as np

    if all(p.compute_dtype == "float32" for p in policies.values()):
        return 1e-4
    return 5e-2 * max(1.0, float(np.max(np.abs(peer_logits))))


def check_logits(models, data, policies):
    """(max |diff|, tolerance) of the masked-LM logits (training=False);
    raises on a mismatch, so every timed number compares the same
    function."""
    import numpy as np
    from keras import ops

    ours_x, peer_x = data[OURS]["x"], data[PEER]["x"]
    logits_o = models[OURS](
        {k: ops.convert_to_tensor(v) for k, v in ours_x.items()},
        training=False)["mlm_logits"]
    try:
        logits_p = models[PEER](
            {k: ops.convert_to_tensor(v) for k, v in peer_x.items()},
            training=False)
    except Exception as e:  # the peer's own failure, reported as such
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        detail = next((line for line in lines if "cannot compute" in line), lines[-1] if lines else "")
        detail = re.sub(r"\x1b\[[0-9;]*m", "", detail)[:200]
        raise BenchError(
            f"keras-hub's BertMaskedLM fails on this configuration "
            f"({type(e).__name__}: {detail}). Known: "
            "under a mixed dtype policy with the TensorFlow backend its "
            "MaskedLMHead adds the float32 output bias to half-precision "
            "logits; run mixed precision under KERAS_BACKEND=jax, or keep "
            "keras-hub in float32 and give ours alone the mixed policy "
            "(--dtype float32 --ours-dtype mixed_bfloat16).") from None
    logits_o = ops.convert_to_numpy(logits_o)
    logits_p = ops.convert_to_numpy(logits_p)
    if logits_o.shape != logits_p.shape:
        raise BenchError(f"logit shapes differ: {logits_o.shape} vs "
                         f"{logits_p.shape}")
    diff = max_abs_diff(logits_o, logits_p)
    tol = logits_tolerance(policies, logits_p)
    if not np.isfinite(diff) or diff > tol:
        raise BenchError(
            f"kerasbert and keras-hub masked-LM logits differ: max |diff| "
            f"{diff:.3g} > {tol:g}; the comparison would not be apples to "
            "apples."
        )
    return diff, tol


class TrainStepRunner:
    """Ours as `kerasbert pretrain` trains: a pretrainer built in the
    strategy's scope ("auto": one device), driven by TrainStep."""

    def __init__(self, peer_task, policy):
        import keras
        import tensorflow as tf

        from kerasbert.training.strategies import resolve_strategy

        self.strategy = resolve_strategy("auto")
        with self.strategy.scope():
            self.model = build_ours(peer_task, policy)
        self.policy = policy
        self.tf = tf
        self.keras = keras

    def make_step(self, jit, features, initial_weights):
        from kerasbert.training.loop import TrainStep

        tf = self.tf
        self.model.set_weights(initial_weights)
        with self.strategy.scope():
            optimizer = make_optimizer(OURS)
            if self.policy.name == "mixed_float16":
                optimizer = self.keras.optimizers.LossScaleOptimizer(optimizer)
            optimizer.build(self.model.trainable_variables)
        train_step = TrainStep(self.strategy, self.model, optimizer,
                               clipnorm=None, jit_compile=jit)
        dataset = tf.data.Dataset.from_tensors(
            {k: tf.constant(v) for k, v in features.items()}).repeat()
        iterator = iter(dataset)

        def step():
            sums = train_step.step(iterator)
            # As the CLI does every step: fetch the sums (waits for the step).
            return {k: float(v.numpy()) for k, v in sums.items()}

        return step


def bench_row(mode, jit, models, data, args, initial_weights, runner,
              peer_steps):
    """Compiles both models for one row and times them; returns
    (rates, first_call_s) as `_common.time_steps`.

    The peer is compiled once per jit setting (fresh weights and optimizer);
    a later row with the same setting reuses that step (`peer_steps`:
    {jit: (step, first-call seconds)}), and reports its first call."""
    step_fns = {}
    peer = models[PEER]
    if jit not in peer_steps:
        peer.set_weights(initial_weights[PEER])
        peer.compile(optimizer=make_optimizer(PEER), jit_compile=jit)
        px = data[PEER]

        def peer_step():
            logs = peer.train_on_batch(px["x"], px["y"],
                                       sample_weight=px["sample_weight"])
            _common.block_until_ready(peer.trainable_variables)
            return logs

        peer_steps[jit] = (peer_step, None)
    peer_step, peer_first_call = peer_steps[jit]

    if mode == "train_on_batch":
        ours = models[OURS]
        ours.set_weights(initial_weights[OURS])
        ours.compile(optimizer=make_optimizer(OURS), jit_compile=jit)
        ox = data[OURS]["x"]

        def ours_step():
            logs = ours.train_on_batch(ox)
            _common.block_until_ready(ours.trainable_variables)
            return logs
    else:
        ours_step = runner.make_step(jit, data[OURS]["x"],
                                     initial_weights[OURS])
    step_fns[OURS] = ours_step
    step_fns[PEER] = peer_step
    rates, first_call_s, _ = _common.time_steps(step_fns, args)
    if peer_first_call is None:
        peer_steps[jit] = (peer_step, first_call_s[PEER])
    else:
        first_call_s[PEER] = peer_first_call
    return rates, first_call_s


def format_table(results, env, meta):
    c = meta["config"]
    lines = [
        f"kerasbert BertPretrainer(mlm) vs keras-hub BertMaskedLM, training "
        f"[{meta['config_name']}: L={c['num_layers']} H={c['hidden_dim']} "
        f"heads={c['num_heads']} FFN={c['intermediate_dim']} "
        f"vocab={c['vocabulary_size']}]  batch={meta['batch_size']} "
        f"seq={meta['seq_length']} P={meta['predictions']}  "
        f"repeats={meta['repeats']} steps={meta['steps']} "
        f"warmup={meta['warmup']}"
    ]
    extra = [("TFLOP/s ours/kh", 15,
              lambda r: f"{r['ours_tflops']:.3g}/{r['keras_hub_tflops']:.3g}")]
    if meta.get("peak_tflops"):
        extra.append(("MFU ours/kh", 13,
                      lambda r: f"{100 * r['ours_mfu']:.1f}%/"
                      f"{100 * r['keras_hub_mfu']:.1f}%"))
    lines += _common.format_ratio_rows(results, extra)
    lines.append("")
    lines.append("ratio = median(ours seq/s) / median(keras-hub seq/s); "
                 "> 1 means kerasbert is faster. TrainStep rows: ours via "
                 "kerasbert.training.loop.TrainStep (the CLI's step), "
                 "keras-hub via train_on_batch.")
    lines.append(dtype_line({OURS: meta["dtype_policy"]["ours"],
                             PEER: meta["dtype_policy"]["keras_hub"]},
                            env["backend"]))
    lines.append(
        f"model FLOPs per trained sequence {meta['train_gflops_per_seq']:.3f} "
        "GFLOP = 3 x forward (formula in pretrain_bench.py); masked-LM "
        f"logits match: max|diff| {meta['logits_max_abs_diff']:.2e} "
        f"(tolerance {meta['logits_tolerance']:.2g})"
    )
    if meta.get("skipped_rows"):
        lines.append("skipped: " + "; ".join(meta["skipped_rows"]))
    lines.append(_common.env_line(env))
    if env["note"]:
        lines.append(f"note: {env['note']}")
    return "\n".join(lines)


def run(args):
    import keras_hub  # noqa: F401  (fails here, before any work, if missing)

    config_name, config = _common.resolve_bert_config(args)
    policies = {OURS: _common.dtype_policy(args.ours_dtype),
                PEER: _common.dtype_policy(args.dtype)}
    # keras-hub's task model (and its head) takes the global policy, ours
    # its backbone's; restored afterwards, so an in-process caller (a test)
    # is left as it was.
    with global_dtype_policy(policies[PEER]):
        return _run(args, config_name, config, policies)


def dtype_line(names, backend):
    """Which policy each side ran ({OURS: name, PEER: name}), and why they
    differ when they do."""
    line = f"dtype policy: ours {names[OURS]}, keras-hub {names[PEER]}"
    if names[OURS] != names[PEER]:
        if backend == "tensorflow" and names[PEER] == "float32":
            line += (" (keras-hub's BertMaskedLM fails under a mixed policy "
                     "on TensorFlow, so it runs float32, the precision its "
                     "user can train in)")
        else:
            line += " (--ours-dtype)"
    return line


def _run(args, config_name, config, policies):
    import keras
    import keras_hub

    keras.utils.set_random_seed(0)
    peer_backbone = keras_hub.models.BertBackbone(**config, dtype=policies[PEER])
    peer = keras_hub.models.BertMaskedLM(backbone=peer_backbone,
                                         preprocessor=None)
    ours = build_ours(peer, policies[OURS])
    models = {OURS: ours, PEER: peer}
    backend = keras.backend.backend()
    policy_names = {who: p.name for who, p in policies.items()}
    print(dtype_line(policy_names, backend), flush=True)

    x, ids, weights = make_batch(args.batch_size, args.sequence_length,
                                 args.predictions, config["vocabulary_size"])
    data = {
        OURS: {"x": ours_features(x, ids, weights)},
        PEER: {"x": x, "y": ids, "sample_weight": weights},
    }
    diff, tol = check_logits(models, data, policies)
    print(f"masked-LM logits match (training=False): max|diff| {diff:.2e} "
          f"(tolerance {tol:.2g})", flush=True)
    initial_weights = {who: m.get_weights() for who, m in models.items()}

    rows, skipped, runner, peer_steps = [], [], None, {}
    for label, mode, jit in ROWS:
        if args.jit != "both" and jit != (args.jit == "on"):
            continue
        if mode == "TrainStep" and backend != "tensorflow":
            skipped.append(f"{label} (TrainStep is TensorFlow-only; backend "
                           f"{backend})")
            continue
        if mode == "TrainStep" and runner is None:
            runner = TrainStepRunner(peer, policies[OURS])
            if len(runner.model.trainable_variables) != len(
                    ours.trainable_variables):
                raise BenchError("the TrainStep model's variables differ "
                                 "from the pretrainer's")
        t0 = time.perf_counter()
        rates, first_call = bench_row(mode, jit, models, data, args,
                                      initial_weights, runner, peer_steps)
        rows.append(_common.ratio_row(label, rates, first_call, mode=mode,
                                      jit_compile=jit))
        r = rows[-1]
        print(f"  {label:<18} ours {r['ours_seq_per_s']:9.1f} seq/s  "
              f"keras-hub {r['keras_hub_seq_per_s']:9.1f} seq/s  ratio "
              f"{r['ratio']:.3f}x  ({time.perf_counter() - t0:.1f}s)",
              flush=True)

    flops = train_flops_per_sequence(config, args.sequence_length, args.predictions)
    for r in rows:
        for who in ("ours", "keras_hub"):
            r[f"{who}_tflops"] = flops * r[f"{who}_seq_per_s"] / 1e12
            if args.peak_tflops:
                r[f"{who}_mfu"] = r[f"{who}_tflops"] / args.peak_tflops

    env = _common.keras_environment(args, _common.LOAD_AT_START.get("value"))
    env["loadavg_end"] = _common.loadavg()
    env["ours_dtype_policy"] = policy_names[OURS]
    meta = {
        "config_name": config_name,
        "config": config,
        "batch_size": args.batch_size,
        "seq_length": args.sequence_length,
        "predictions": args.predictions,
        "repeats": args.repeats,
        "steps": args.steps,
        "warmup": args.warmup,
        "learning_rate": LEARNING_RATE,
        "dtype_policy": {"ours": policy_names[OURS],
                         "keras_hub": policy_names[PEER]},
        "logits_tolerance": tol,
        "train_flops_per_seq": flops,
        "train_gflops_per_seq": flops / 1e9,
        "peak_tflops": args.peak_tflops,
        "logits_max_abs_diff": diff,
        "skipped_rows": skipped,
    }
    print()
    print(format_table(rows, env, meta))
    payload = {"env": env, "meta": meta, "rows": rows}
    if args.json:
        write_json(args.json, payload)
        print(f"wrote {args.json}")
    return payload


# 1-minute load average when main() started, before this process did any
# work: clearly above 0 means other processes were competing for the CPUs.
def main(argv=None):
    return _common.timed_main(parse_args, run, argv)


if __name__ == "__main__":
    # Each compile() makes a new train function; TF's "retracing" warning
    # about that is expected here, not a sign of per-step tracing.
    import logging
    import warnings

    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    # Both models carry a pooler the MLM loss does not use.
    warnings.filterwarnings("ignore", message="Gradients do not exist for")
    try:
        main()
    except BenchError as e:
        print(f"pretrain_bench: error: {e}", file=sys.stderr)
        sys.exit(2)
