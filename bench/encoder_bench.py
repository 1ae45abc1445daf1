#!/usr/bin/env python
"""Encoder throughput: kerasbert's backbones vs keras-hub's, same run.

For each family asked for (`--family bert|albert|roberta|distil_bert|electra|
all`; BERT by default), builds keras-hub's backbone of that family
(BertBackbone, AlbertBackbone, RobertaBackbone, DistilBertBackbone,
ElectraBackbone) with the config of the
chosen kerasbert preset, converts it with `kerasbert.convert.from_keras_hub`
(identical weights and activation), checks that both produce the same
outputs, then measures sequences/second for

    forward (predict_on_batch, training=False)  x  jit_compile off / on
    train   (train_on_batch: fwd + bwd + AdamW)  x  jit_compile off / on

Both models get the identical treatment: the same wrapper model, the same
compile() call, the same inputs. Measurements alternate between the two models
over several repeats after a warm-up, and the median is reported, because
absolute times on shared machines mean little; read the ratio.

Runs with any Keras backend, e.g. `KERAS_BACKEND=jax python
bench/encoder_bench.py` (jit_compile=True is then jax.jit/XLA; False runs the
step op by op). See bench/docs/encoder_bench.md for the flags.
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

DEFAULTS = {"batch_size": 16, "sequence_length": 128, "repeats": 5, "steps": 3,
            "warmup": 2}
QUICK_DEFAULTS = {"batch_size": 2, "sequence_length": 16, "repeats": 1, "steps": 2,
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


class Family:
    """How the bench drives one family's pair of backbones.

    peer_class: the `keras_hub.models` class; its constructor arguments are
        read from our preset's config (every key must be one it accepts).
    default: the preset for a plain run; `scale=True` sizes it down to
        `_common.DEFAULT_PRESET`'s depth and widths (layers, heads, hidden,
        FFN) so every family's default is the same small size.
    segments: whether the peer takes `segment_ids`. Ours always takes
        `input_type_ids`; without segments it gets zeros (which it ignores).
    pooled: "pooled_output" if the peer returns a dict holding it (BERT,
        ALBERT: a trained tanh pooler on both sides), or "first_token" if the
        peer returns only the sequence tensor; both sides then use
        `sequence_output[:, 0]` (what our `pooled_output` is for these
        families), so both do the same work.
    quick: extra `--quick` config values beyond `_common.QUICK_CONFIG`.
    peer_names: our config key -> the peer's argument name where they
        differ (keras-hub's ElectraBackbone says `vocab_size`).
    """

    def __init__(self, peer_class, default, scale, segments, pooled,
                 quick=None, peer_names=None):
        self.peer_class = peer_class
        self.default = default
        self.scale = scale
        self.segments = segments
        self.pooled = pooled
        self.quick = dict(quick or {})
        self.peer_names = dict(peer_names or {})

    def peer_config(self, config):
        """Our preset config under the peer's argument names."""
        return {self.peer_names.get(k, k): v for k, v in config.items()}

    def peer_input_names(self):
        names = ["token_ids", "padding_mask"]
        return names + ["segment_ids"] if self.segments else names

    def outputs(self, out):
        """(sequence, pooled-or-first-token) of either backbone's output."""
        seq = out["sequence_output"] if isinstance(out, dict) else out
        if self.pooled == "pooled_output":
            return seq, out["pooled_output"]
        return seq, seq[:, 0, :]


# Keyed by kerasbert.models.presets.family_of(our backbone class).
FAMILIES = {
    "bert": Family("BertBackbone", _common.DEFAULT_PRESET, scale=False, segments=True,
                   pooled="pooled_output"),
    "albert": Family("AlbertBackbone", "albert_base", scale=True,
                     segments=True, pooled="pooled_output",
                     # keras-hub always projects E -> H; ours converts only
                     # factorised embeddings (E < H).
                     quick={"embedding_dim": 16, "num_groups": 1,
                            "num_inner_repetitions": 1}),
    "roberta": Family("RobertaBackbone", "roberta_base", scale=True,
                      segments=False, pooled="first_token"),
    "distil_bert": Family("DistilBertBackbone", "distilbert_base", scale=True,
                          segments=False, pooled="first_token"),
    # The discriminator: BERT's encoder behind ELECTRA-Small's factorised
    # embedding (E=128 kept when scaled; 16 in --quick, below hidden 32).
    "electra": Family("ElectraBackbone", "electra_small", scale=True,
                      segments=True, pooled="pooled_output",
                      quick={"embedding_dim": 16},
                      peer_names={"vocabulary_size": "vocab_size"}),
}
# Depth and widths the scaled defaults take from _common.DEFAULT_PRESET.
SCALED_KEYS = ("num_layers", "num_heads", "hidden_dim", "intermediate_dim")

def parse_args(argv):
    p = argparse.ArgumentParser(
        description=(
            "Throughput (sequences/s) of kerasbert's backbones (BERT, "
            "ALBERT, RoBERTa, DistilBERT, ELECTRA) vs keras-hub's with identical "
            "weights, forward and train step, jit_compile off and on."
        )
    )
    _common.add_model_args(p, DEFAULTS)
    p.add_argument(
        "--family",
        choices=[*FAMILIES, "all"],
        default=None,
        help="which family to compare, or all of them one after the other "
        "(default: the family of --preset, else bert). Without --preset each "
        f"family runs its default size: {_common.DEFAULT_PRESET} for BERT, "
        "the family's base preset scaled to the same depth and widths for "
        "the others (a tiny model with --quick)",
    )
    p.add_argument("--jit", choices=("both", "off", "on"), default="both",
                   help="which jit_compile rows to run (default both; 'off' "
                   "skips the slow XLA compiles, 'on' the op-by-op rows)")
    args = p.parse_args(argv)
    _common.finish_model_args(p, args, DEFAULTS, QUICK_DEFAULTS)
    return args


make_inputs = _common.make_bert_inputs


def family_inputs(family, peer_inputs):
    """(ours, peer) input dicts from `make_inputs`' keras-hub-named dict.
    A peer without segments gets no segment_ids; ours then gets zeros."""
    import numpy as np

    peer = {k: peer_inputs[k] for k in family.peer_input_names()}
    ours = {INPUT_NAMES[k]: v for k, v in peer.items()}
    ours.setdefault("input_type_ids",
                    np.zeros_like(peer_inputs["padding_mask"]))
    return ours, peer


def resolve_families(args):
    """[(family name, config name, peer config)] for --family / --preset /
    --quick; bad combinations raise BenchError."""
    import inspect

    import keras_hub

    from kerasbert.models import get_preset
    from kerasbert.models.presets import family_of

    preset = None
    if args.preset is not None:
        try:
            preset = get_preset(args.preset)
        except ValueError as e:
            raise BenchError(str(e)) from None
        preset_family = family_of(preset["backbone_class"])
        if preset_family not in FAMILIES:
            raise BenchError(
                f"--preset {args.preset!r} is a "
                f"{preset['backbone_class'].__name__}, which this bench has "
                f"no keras-hub peer for; families: {', '.join(FAMILIES)}.")
        if args.family == "all":
            raise BenchError(
                "--preset picks one family's model; with --family all each "
                "family runs its default size (drop --preset, or pass "
                f"--family {preset_family}).")
        if args.family not in (None, preset_family):
            raise BenchError(
                f"--preset {args.preset!r} belongs to family {preset_family}, "
                f"not --family {args.family}.")
        names = [preset_family]
    elif args.family in (None, "bert"):
        names = ["bert"]
    else:
        names = list(FAMILIES) if args.family == "all" else [args.family]

    scale_from = get_preset(_common.DEFAULT_PRESET)["config"]
    resolved = []
    for name in names:
        family = FAMILIES[name]
        if preset is not None:
            config_name, config = args.preset, dict(preset["config"])
        else:
            config = dict(get_preset(family.default)["config"])
            if args.quick:
                config_name = "quick"
                config.update({k: v for k, v in _common.QUICK_CONFIG.items()
                               if k in config})
                config.update(family.quick)
            elif family.scale:
                config_name = (f"{family.default} scaled to "
                               f"{_common.DEFAULT_PRESET} size")
                config.update({k: scale_from[k] for k in SCALED_KEYS})
            else:
                config_name = family.default
        peer_cls = getattr(keras_hub.models, family.peer_class)
        accepted = set(inspect.signature(peer_cls.__init__).parameters)
        unknown = sorted(set(family.peer_config(config)) - accepted)
        if unknown:
            raise BenchError(
                f"{config_name}: keras-hub's {family.peer_class} has no "
                f"argument {', '.join(unknown)}; it cannot build the same "
                "model.")
        if args.sequence_length > config["max_sequence_length"]:
            raise BenchError(
                f"--seq-length {args.sequence_length} exceeds the model's "
                f"max_sequence_length {config['max_sequence_length']}"
                + (f" ({name})." if len(names) > 1 else "."))
        resolved.append((name, config_name, config))
    return resolved


def build_wrappers(backbone, input_names, head, family):
    """Forward and train wrappers, identical for both backbones.

    forward: inputs -> [sequence_output, pooled] where pooled is
        `pooled_output` for families whose keras-hub backbone has a pooler
        (BERT, ALBERT) and `sequence_output[:, 0]` on both sides otherwise
        (our extra `encoder_outputs` list is not fetched).
    train: head(pooled) + mean(sequence_output), a scalar per sequence,
        regressed with MSE, so gradients flow through both outputs.
    """
    import keras
    from keras import ops

    inputs = {
        n: keras.Input((None,), dtype="int32", name=n) for n in input_names
    }
    seq, pooled = family.outputs(backbone(inputs))
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


def check_outputs(models, data, tol, pooled_name="pooled_output"):
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
        pooled_name: max_abs_diff(pool_o, pool_p),
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


def _block_lines(meta, results):
    """Header and rows of one family's block."""
    c = meta["config"]
    shape = (f"L={c['num_layers']} H={c['hidden_dim']} heads={c['num_heads']} "
             f"FFN={c['intermediate_dim']}")
    if "embedding_dim" in c:
        shape += f" E={c['embedding_dim']}"
    header = (
        f"kerasbert vs keras-hub {meta['peer_class'].rsplit('.', 1)[-1]}  "
        f"[{meta['config_name']}: {shape} vocab={c['vocabulary_size']}]  "
        f"batch={meta['batch_size']} seq={meta['seq_length']}  "
        f"repeats={meta['repeats']} steps={meta['steps']} "
        f"warmup={meta['warmup']}"
    )
    return [header] + _common.format_ratio_rows(results)


def _match_line(meta):
    labels = {"train_wrapper_output": "train wrapper"}
    d = meta["output_max_abs_diff"]
    return "outputs match: max|diff| " + ", ".join(
        f"{labels.get(k, k)} {v:.2e}" for k, v in d.items())


RATIO_NOTE = ("ratio = median(ours seq/s) / median(keras-hub seq/s); "
              "> 1 means kerasbert is faster.")


def format_table(blocks, env):
    """One block per family (header, rows); a single family prints exactly
    as the BERT-only bench always did."""
    lines = []
    if len(blocks) == 1:
        meta, results = blocks[0]["meta"], blocks[0]["rows"]
        lines += _block_lines(meta, results)
        lines += ["", RATIO_NOTE, _match_line(meta)]
    else:
        for block in blocks:
            lines += _block_lines(block["meta"], block["rows"])
            lines += [_match_line(block["meta"]), ""]
        labels = [r["row"] for r in blocks[0]["rows"]]
        width = max(len(b["family"]) for b in blocks) + 2
        header = f"{'ours/keras-hub':<{width}}" + "".join(
            f"{label:>18}" for label in labels)
        lines += [header, "-" * len(header)]
        for block in blocks:
            lines.append(f"{block['family']:<{width}}" + "".join(
                f"{r['ratio']:>17.3f}x" for r in block["rows"]))
        lines += ["", RATIO_NOTE]
        if any(b["meta"]["pooled"] == "first_token" for b in blocks):
            lines.append(
                "roberta, distil_bert: keras-hub returns only the sequence; "
                "both sides use sequence_output[:, 0] as the pooled vector.")
    lines.append(_common.env_line(env))
    if env["note"]:
        lines.append(f"note: {env['note']}")
    return "\n".join(lines)


def run_family(name, config_name, config, args, policy):
    """Builds, checks and times one family; returns its block
    {"family", "meta", "rows"}."""
    import keras
    import keras_hub
    import numpy as np

    from kerasbert.convert import from_keras_hub

    family = FAMILIES[name]
    keras.utils.set_random_seed(0)
    peer = getattr(keras_hub.models, family.peer_class)(
        **family.peer_config(config), dtype=policy)
    ours = from_keras_hub(peer)

    head_init = keras.initializers.RandomNormal(stddev=0.02, seed=1)
    heads = {
        who: keras.layers.Dense(1, kernel_initializer=head_init, name="head",
                                dtype=policy)
        for who in (OURS, PEER)
    }
    peer_names = family.peer_input_names()
    models = {
        OURS: build_wrappers(ours, list(INPUT_NAMES.values()), heads[OURS],
                             family),
        PEER: build_wrappers(peer, peer_names, heads[PEER], family),
    }
    heads[OURS].set_weights(heads[PEER].get_weights())

    all_inputs = make_inputs(args.batch_size, args.sequence_length,
                             config["vocabulary_size"])
    ours_data, peer_data = family_inputs(family, all_inputs)
    data = {OURS: ours_data, PEER: peer_data}
    targets = np.random.default_rng(1).normal(
        size=(args.batch_size,)).astype("float32")

    tol = 1e-3 if policy.compute_dtype == "float32" else 5e-2
    for who in (OURS, PEER):
        models[who][0].compile(jit_compile=False)
        models[who][1].compile(jit_compile=False)
    diffs = check_outputs(models, data, tol, pooled_name=family.pooled)
    prefix = f"{name}: " if args.family == "all" else ""
    print(
        f"{prefix}outputs match (jit off): max|diff| "
        + ", ".join(f"{k} {v:.2e}" for k, v in diffs.items()),
        flush=True,
    )
    initial_weights = {who: models[who][1].get_weights() for who in models}

    results = []
    mask = peer_data["padding_mask"] > 0
    for kind, jit in ROWS:
        if args.jit != "both" and jit != (args.jit == "on"):
            continue
        label = f"{kind} jit={'on' if jit else 'off'}"
        t0 = time.perf_counter()
        rates, first_call, outs = bench_row(
            kind, jit, models, data, targets, args, initial_weights)
        if kind == "forward":
            # The compiled path must agree too (XLA may fuse differently).
            seq_d = max_abs_diff(outs[OURS][0][mask], outs[PEER][0][mask])
            if not np.isfinite(seq_d) or seq_d > tol:
                raise BenchError(
                    f"{prefix}{label}: sequence_output differs by "
                    f"{seq_d:.3g} > {tol}"
                )
        row = _common.ratio_row(label, rates, first_call, kind=kind,
                                jit_compile=jit, family=name)
        med_o, med_p = row["ours_seq_per_s"], row["keras_hub_seq_per_s"]
        results.append(row)
        print(
            f"  {prefix}{label:<16} ours {med_o:9.1f} seq/s  keras-hub "
            f"{med_p:9.1f} seq/s  ratio {row['ratio']:.3f}x  "
            f"({time.perf_counter() - t0:.1f}s)",
            flush=True,
        )

    meta = {
        "family": name,
        "peer_class": f"keras_hub.models.{family.peer_class}",
        "ours_class": f"kerasbert.models.{type(ours).__name__}",
        "config_name": config_name,
        "config": config,
        "pooled": family.pooled,
        "batch_size": args.batch_size,
        "seq_length": args.sequence_length,
        "repeats": args.repeats,
        "steps": args.steps,
        "warmup": args.warmup,
        "jit": args.jit,
        "output_max_abs_diff": diffs,
    }
    return {"family": name, "meta": meta, "rows": results}


def run(args):
    policy = _common.dtype_policy(args.dtype)
    families = resolve_families(args)

    env = _common.keras_environment(args, _common.LOAD_AT_START.get("value"))
    blocks = [run_family(name, config_name, config, args, policy)
              for name, config_name, config in families]
    env["loadavg_end"] = _loadavg()

    print()
    print(format_table(blocks, env))
    # A single family keeps the BERT-only layout (env, meta, rows); every run
    # also lists its families' blocks, and `rows` holds them all, each row
    # tagged with its family.
    payload = {"env": env, "rows": [r for b in blocks for r in b["rows"]],
               "families": blocks}
    if len(blocks) == 1:
        payload["meta"] = blocks[0]["meta"]
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
