#!/usr/bin/env python
"""Training from raw strings vs from pre-tokenized features: steps/s of the
same model, same batches, in one process (issue 34, item 4).

Two ways to train one `TextClassifier` (built by `from_preset(size,
tokenizer=vocab.txt)`, random weights, compiled with its recipe):

    strings    model.fit(texts, labels, batch_size=B, seed=r)
               -> model.preprocessor.dataset: slices -> shuffle -> batch ->
                  map(tokenize + pack, parallel) -> prefetch
    features   convert_examples(TaskData, tokenizer, T) once (its time is
               shown apart), then model.fit(make_dataset(features, B,
               shuffle=True, seed=r))

Both fit the same model object (one compiled train step), on the same
examples in the same order (seed r in block r), at the same T and B. Every
block is one `fit` call of `warmup + steps` steps; a Keras callback stamps
each step's end (wall clock and process CPU time) and only the `steps` after
the warm-up are timed, so tracing, pipeline fill and each call's setup (shown
apart) are excluded. Blocks alternate (strings, features, then features,
strings, ...) and the table shows the median steps/s of each, the ratio
strings/features (goal >= 0.95), the min..max of the paired ratios (block r
against block r), the process CPU time per step of each (the CPU the
tokenization costs, which on a loaded 2-core machine is less noisy than the
wall clock) and the ratio of those.

Input-only rows drain each input pipeline without a model (batches/s and
CPU ms per batch): how far ahead of the model the tokenizer can run, and
the CPU share of a step tokenization would take if the step needed it. An
estimate for one whole epoch of the examples adds each path's first step
(iterator start and pipeline fill, paid every epoch) to its steady steps.

--profile breaks the strings pipeline's costs down by what its map runs
(nothing, clean_text, + tokenize_ids, + packer, the whole preprocess):
dataset build (the map function's trace, paid once per `fit` call),
iterator start (its instantiation, paid once per epoch) and batches/s.

--variants adds rows that build the strings pipeline other ways from the
bench itself (no library change): `dataset` (model.preprocessor.dataset
passed to fit: our fit override's part), `map1` (map with one parallel
call), `prefetch1` (prefetch depth 1), `chunked` (tokenize 8 batches per
map call, then rebatch), `cached` (tokenize everything once, cache, then
shuffle and batch every epoch).

Text: sentences of the standard library's docstrings (the built-in task,
kerasbert.data.default_task: 5 areas as labels), joined 1-6 consecutive
sentences of one area per example so lengths vary (about 40 pieces on
average, a few truncated at T). Vocabulary: an 8,000-token WordPiece built
by kerasbert.text from the built-in corpus, padded with [unusedN] tokens to
the preset's vocabulary size (30,522), cached under --work-dir.

    python bench/raw_text_bench.py [--sizes bert_tiny,bert_base] [--profile] [--variants all]
    python bench/raw_text_bench.py --quick        # smoke test, numbers mean nothing
"""

import argparse
import gc
import hashlib
import os
import pathlib
import random
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: E402

_common.add_paths()

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

STRINGS, FEATURES = "strings", "features"
VARIANTS = ("dataset", "map1", "prefetch1", "chunked", "cached")
#: Per-size defaults: bert_base's step takes 7-12 s at B=4 on 2 loaded cores
#: and its first call ~75 s, so it gets a small batch and few steps (its
#: section stays near 5 minutes).
SIZE_DEFAULTS = {
    "bert_tiny": dict(batch_size=32, warmup=5, steps=30, repeats=6),
    "bert_base": dict(batch_size=4, warmup=1, steps=3, repeats=2),
}
OTHER_DEFAULTS = dict(batch_size=32, warmup=3, steps=10, repeats=2)
QUICK = dict(batch_size=8, warmup=1, steps=3, repeats=1)
SENTENCES_PER_EXAMPLE = (1, 1, 1, 2, 2, 3, 4, 6)
CORPUS_VOCAB = 8000


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default=None,
                   help="presets, comma-separated (default bert_tiny,bert_base; --quick: "
                   "bert_tiny)")
    p.add_argument("--seq-length", dest="sequence_length", type=int, default=128,
                   help="T, the packed length (default 128)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="B for every size (default: bert_tiny 32, bert_base 4)")
    p.add_argument("--steps", type=int, default=None,
                   help="timed steps per block (default: bert_tiny 30, bert_base 3)")
    p.add_argument("--warmup", type=int, default=None,
                   help="untimed steps at the start of every block (default: bert_tiny 5, "
                   "bert_base 1)")
    p.add_argument("--repeats", type=int, default=None,
                   help="blocks per contender, alternating order (default: bert_tiny 6, "
                   "bert_base 2)")
    p.add_argument("--examples", type=int, default=None,
                   help="training examples (default 4096; at least (warmup + steps) x B)")
    p.add_argument("--variants", default="",
                   help=f"extra strings pipelines for the first size: all, or some of "
                   f"{','.join(VARIANTS)}")
    p.add_argument("--profile", action="store_true",
                   help="also break the strings pipeline's costs down by map function (first "
                   "size): dataset build (trace), iterator start (every epoch), batches/s")
    p.add_argument("--vocab", default=None,
                   help="a WordPiece vocab.txt to use (padded to the preset's size); default: "
                   "built from the built-in corpus and cached under --work-dir")
    p.add_argument("--work-dir",
                   default=str(_common.REPO_ROOT / "bench" / "results" / "raw_text_bench"),
                   help="vocabulary cache (default bench/results/raw_text_bench)")
    p.add_argument("--seed", type=int, default=0, help="examples and model seed (default 0)")
    p.add_argument("--note", default="", help="free text recorded with the results")
    p.add_argument("--json", metavar="OUT", default=None, help="also write the results as JSON")
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes, one repeat: a smoke test, not a measurement")
    args = p.parse_args(argv)
    sizes = args.sizes or ("bert_tiny" if args.quick else "bert_tiny,bert_base")
    args.sizes = [s.strip() for s in sizes.split(",") if s.strip()]
    if args.variants.strip() == "all":
        args.variants = list(VARIANTS)
    else:
        args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
        unknown = [v for v in args.variants if v not in VARIANTS]
        if unknown:
            p.error(f"--variants: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)}, all)")
    for name in ("batch_size", "steps", "warmup", "repeats", "examples", "sequence_length"):
        value = getattr(args, name)
        if value is not None and value < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    if args.sequence_length < 3:
        p.error("--seq-length must be >= 3 ([CLS] x [SEP])")
    if args.examples is None:
        args.examples = 512 if args.quick else 4096
    return args


def settings_for(size, args):
    """B, warm-up, steps and repeats of one size (flags override defaults)."""
    base = QUICK if args.quick else SIZE_DEFAULTS.get(size, OTHER_DEFAULTS)
    s = {k: (getattr(args, k) if getattr(args, k) is not None else v) for k, v in base.items()}
    need = (s["warmup"] + s["steps"]) * s["batch_size"]
    if args.examples < need:
        raise SystemExit(f"error: {size}: --examples {args.examples} < (warmup + steps) x batch "
                         f"= {need}: a block would run out of batches.")
    return s


# ---------------------------------------------------------------- text

def make_examples(count, seed):
    """`count` (text, area) examples from the built-in task's sentences:
    1-6 consecutive sentences of one area joined, so lengths vary."""
    from kerasbert.data import default_task

    rows = default_task.labelled_sentences()
    rng = random.Random(seed)
    texts, labels = [], []
    for _ in range(count):
        start = rng.randrange(len(rows))
        label = rows[start][1]
        k = rng.choice(SENTENCES_PER_EXAMPLE)
        parts = [s for s, area in rows[start:start + k] if area == label]
        texts.append(" ".join(parts))
        labels.append(label)
    return texts, labels


def prepare_vocab(work_dir, size, given=None, log=print):
    """A vocab.txt of exactly `size` tokens: `given`, or an 8,000-token
    WordPiece of the built-in corpus, padded with [unusedN] tokens (cached)."""
    from kerasbert.data.default_corpus import corpus_text
    from kerasbert.text import build_wordpiece_vocab
    from kerasbert.text import load_vocab
    from kerasbert.text import write_vocab

    work = pathlib.Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    if given:
        tokens = list(load_vocab(given))
        tag = hashlib.sha256(pathlib.Path(given).read_bytes()).hexdigest()[:12]
    else:
        text, _ = corpus_text()
        tag = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
        base = work / f"vocab-{tag}-{CORPUS_VOCAB}.txt"
        if not base.exists():
            corpus = work / f"corpus-{tag}.txt"
            corpus.write_text(text, encoding="utf-8")
            log(f"building a {CORPUS_VOCAB:,}-token WordPiece vocabulary from the built-in "
                "corpus (cached) ...")
            write_vocab(build_wordpiece_vocab([str(corpus)], CORPUS_VOCAB), str(base) + ".tmp")
            os.replace(str(base) + ".tmp", base)
        tokens = list(load_vocab(str(base)))
    if len(tokens) > size:
        raise SystemExit(f"error: the vocabulary has {len(tokens)} tokens, more than the "
                         f"model's {size}.")
    path = work / f"vocab-{tag}-{len(tokens)}-padded-{size}.txt"
    if not path.exists():
        taken = set(tokens)
        padding = (f"[unused{i}]" for i in range(size * 2))
        tokens += [t for t in padding if t not in taken][:size - len(tokens)]
        write_vocab(tokens, str(path) + ".tmp")
        os.replace(str(path) + ".tmp", path)
    return str(path)


def length_stats(tokenizer, texts, sequence_length):
    import numpy as np
    import tensorflow as tf

    lengths = np.concatenate([
        tokenizer.tokenize_ids(tf.constant(texts[i:i + 1024])).row_lengths().numpy()
        for i in range(0, len(texts), 1024)])
    return {"pieces_mean": float(lengths.mean()), "pieces_p50": float(np.median(lengths)),
            "pieces_p90": float(np.percentile(lengths, 90)), "pieces_max": int(lengths.max()),
            "truncated_share": float((lengths > sequence_length - 2).mean()),
            "words_mean": float(np.mean([len(t.split()) for t in texts]))}


# ---------------------------------------------------------------- timing

def _clock_class():
    import keras

    class StepClock(keras.callbacks.Callback):
        """Wall and process-CPU stamps at train begin and every step's end."""

        def __init__(self):
            super().__init__()
            self.begin = None
            self.wall, self.cpu = [], []

        def on_train_begin(self, logs=None):
            self.begin = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            self.wall.append(time.perf_counter())
            self.cpu.append(time.process_time())

    return StepClock


def run_block(fit, warmup, steps):
    """One `fit` call of warmup + steps steps -> the block's measurements."""
    clock = _clock_class()()
    gc.collect()
    t0 = time.perf_counter()
    fit([clock], warmup + steps)
    end = time.perf_counter()
    if len(clock.wall) != warmup + steps:
        raise SystemExit(f"error: the fit ran {len(clock.wall)} steps, not {warmup + steps}: "
                         "the input ran out (raise --examples).")
    wall = clock.wall[-1] - clock.wall[warmup - 1]
    cpu = clock.cpu[-1] - clock.cpu[warmup - 1]
    return {"steps_per_s": steps / wall, "cpu_ms_per_step": 1e3 * cpu / steps,
            "setup_s": clock.begin - t0, "first_step_s": clock.wall[0] - clock.begin,
            "call_s": end - t0}


def drain(make_dataset, batches, repeats=2):
    """Input pipeline alone: batches/s and process CPU ms per batch (best of
    `repeats` fresh iterations; the first batch, which fills it, excluded)."""
    best = None
    for _ in range(repeats):
        dataset = make_dataset()
        iterator = iter(dataset)
        next(iterator)
        t, c = time.perf_counter(), time.process_time()
        for _ in range(batches):
            next(iterator)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        result = {"batches_per_s": batches / wall, "cpu_ms_per_batch": 1e3 * cpu / batches}
        if best is None or result["batches_per_s"] > best["batches_per_s"]:
            best = result
        del iterator, dataset
    return best


def summarize(name, blocks, reference):
    """A row: medians of a contender and its ratio against `reference`."""
    rates = [b["steps_per_s"] for b in blocks]
    ref = [b["steps_per_s"] for b in reference]
    cpu = [b["cpu_ms_per_step"] for b in blocks]
    ref_cpu = [b["cpu_ms_per_step"] for b in reference]
    paired = [a / b for a, b in zip(rates, ref)]
    return {
        "contender": name,
        "steps_per_s": statistics.median(rates),
        "ratio": statistics.median(rates) / statistics.median(ref),
        "paired_min": min(paired), "paired_max": max(paired),
        "cpu_ms_per_step": statistics.median(cpu),
        "cpu_ratio": statistics.median(ref_cpu) / statistics.median(cpu),
        "setup_s": statistics.median(b["setup_s"] for b in blocks),
        "first_step_s": statistics.median(b["first_step_s"] for b in blocks),
        "blocks": blocks,
    }


# ---------------------------------------------------------------- one size

def strings_variant(model, kind, texts, labels, batch_size, num_labels, cache):
    """A strings pipeline built in the bench (`--variants`) for seed `s`."""
    import tensorflow as tf

    p = model.preprocessor
    autotune = tf.data.AUTOTUNE

    def preprocess(x, y):
        return p.preprocess(x, y)

    def make(seed):
        if kind == "dataset":
            return p.dataset(texts, labels, batch_size=batch_size, shuffle=True, seed=seed,
                             num_labels=num_labels)
        if kind == "cached":
            if "cached" not in cache:  # one dataset: its cache outlives the fit calls
                x, y, _ = p.slices(texts, labels, None, num_labels)
                tokenized = (tf.data.Dataset.from_tensor_slices((x, y)).batch(1024)
                             .map(preprocess, num_parallel_calls=autotune).unbatch().cache())
                cache["cached"] = (tokenized.shuffle(len(texts), seed=seed,
                                                     reshuffle_each_iteration=True)
                                   .batch(batch_size).prefetch(autotune))
            return cache["cached"]
        x, y, _ = p.slices(texts, labels, None, num_labels)
        ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(
            len(texts), seed=seed, reshuffle_each_iteration=True)
        if kind == "map1":
            return ds.batch(batch_size).map(preprocess, num_parallel_calls=1).prefetch(autotune)
        if kind == "prefetch1":
            return ds.batch(batch_size).map(preprocess, num_parallel_calls=autotune).prefetch(1)
        if kind == "chunked":
            return (ds.batch(8 * batch_size).map(preprocess, num_parallel_calls=autotune)
                    .unbatch().batch(batch_size).prefetch(autotune))
        raise ValueError(kind)

    return make


def bench_size(size, args, texts, labels, vocab_path, variants, profile=False, log=print):
    import keras

    from kerasbert.data.finetuning import TaskData
    from kerasbert.data.finetuning import convert_examples
    from kerasbert.data.finetuning import make_dataset
    from kerasbert.tasks import TextClassifier

    s = settings_for(size, args)
    B, T, warmup, steps = s["batch_size"], args.sequence_length, s["warmup"], s["steps"]
    names = sorted(set(labels))
    keras.utils.set_random_seed(args.seed)
    t = time.perf_counter()
    model = TextClassifier.from_preset(size, num_classes=len(names), tokenizer=vocab_path,
                                       sequence_length=T, label_names=names)
    build_s = time.perf_counter() - t
    tokenizer = model.preprocessor.tokenizer
    t = time.perf_counter()
    data = TaskData([{"text_a": x, "label": y} for x, y in zip(texts, labels)],
                    "classification", label_names=names)
    features = convert_examples(data, tokenizer, T)
    convert_s = time.perf_counter() - t
    log(f"{size}: B={B} T={T}, {warmup} warm-up + {steps} timed steps per block, "
        f"{s['repeats']} blocks each; built in {build_s:.1f}s, convert_examples of "
        f"{len(texts)} examples {convert_s:.2f}s")

    def fit_strings(seed):
        return lambda callbacks, n: model.fit(texts, labels, batch_size=B, epochs=1,
                                              steps_per_epoch=n, seed=seed,
                                              callbacks=callbacks, verbose=0)

    def fit_dataset(make):
        return lambda seed: (lambda callbacks, n: model.fit(
            make(seed), epochs=1, steps_per_epoch=n, shuffle=False, callbacks=callbacks,
            verbose=0))

    contenders = {
        STRINGS: fit_strings,
        FEATURES: fit_dataset(lambda seed: make_dataset(features, B, shuffle=True, seed=seed)),
    }
    cache = {}
    for kind in variants:
        contenders[kind] = fit_dataset(strings_variant(model, kind, texts, labels, B,
                                                       len(names), cache))

    # The first call traces and compiles the train step (and sizes the
    # recipe's schedule); the same step serves every contender after it.
    t = time.perf_counter()
    contenders[STRINGS](args.seed)([], 1)
    first_call_s = time.perf_counter() - t
    log(f"  first fit call (trace + compile + 1 step): {first_call_s:.1f}s")

    order = list(contenders)
    blocks = {n: [] for n in order}
    for r in range(s["repeats"]):
        for name in (order if r % 2 == 0 else order[::-1]):
            block = run_block(contenders[name](args.seed + r), warmup, steps)
            blocks[name].append(block)
            log(f"  block {r} {name:<9} {block['steps_per_s']:7.3f} steps/s  "
                f"{block['cpu_ms_per_step']:8.1f} CPU ms/step  setup {block['setup_s']:.2f}s")

    # Input pipelines alone, at the same B (no model; the CPU is all theirs).
    drained = min(len(texts) // B - 1, 100)
    inputs = {
        STRINGS: drain(lambda: model.preprocessor.dataset(
            texts, labels, batch_size=B, shuffle=True, seed=args.seed,
            num_labels=len(names)), drained),
        FEATURES: drain(lambda: make_dataset(features, B, shuffle=True, seed=args.seed),
                        drained),
    }
    rows = [summarize(name, blocks[name], blocks[FEATURES]) for name in order
            if name != FEATURES]
    rows.insert(1, summarize(FEATURES, blocks[FEATURES], blocks[FEATURES]))
    result = {"size": size, "settings": dict(s, sequence_length=T, examples=len(texts)),
              "build_s": build_s, "convert_s": convert_s, "first_call_s": first_call_s,
              "rows": rows, "inputs": inputs,
              "lengths": length_stats(tokenizer, texts, T)}
    result["estimates"] = estimates(result)
    if profile:
        result["profile"] = profile_pipeline(model, texts, labels, B, len(names))
    return result


def profile_pipeline(model, texts, labels, batch_size, num_labels, starts=3):
    """The strings pipeline's costs by what its map runs (public API only):
    dataset build (traces the map function: once per `fit` call), iterator
    start (instantiates it: once per epoch; median of `starts`) and the
    throughput of the rest of the epoch, all without a model."""
    import tensorflow as tf

    from kerasbert.preprocessing.task_preprocessor import clean_text

    p = model.preprocessor
    tokenizer, packer = p.tokenizer, p.packer
    x, y, _ = p.slices(texts, labels, None, num_labels)
    base = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size)
    stages = {
        "nothing (strings batched)": lambda a, b: (a, b),
        "clean_text": lambda a, b: (clean_text(a), b),
        "+ tokenize_ids": lambda a, b: (tokenizer.tokenize_ids(clean_text(a)), b),
        "+ packer": lambda a, b: (packer(tokenizer.tokenize_ids(clean_text(a))), b),
        "preprocess (+ label checks)": lambda a, b: p.preprocess(a, b),
    }
    rows = []
    for name, fn in stages.items():
        gc.collect()
        t, c = time.perf_counter(), time.process_time()
        dataset = base.map(fn, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
        build = (time.perf_counter() - t, time.process_time() - c)
        start_wall, start_cpu = [], []
        for _ in range(starts):
            t, c = time.perf_counter(), time.process_time()
            iterator = iter(dataset)
            next(iterator)
            start_wall.append(time.perf_counter() - t)
            start_cpu.append(time.process_time() - c)
        t, c, n = time.perf_counter(), time.process_time(), 0
        for _ in iterator:
            n += 1
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        rows.append({"map": name, "build_s": build[0], "build_cpu_s": build[1],
                     "start_s": statistics.median(start_wall),
                     "start_cpu_s": statistics.median(start_cpu),
                     "batches_per_s": n / wall, "cpu_ms_per_batch": 1e3 * cpu / max(n, 1)})
        del iterator, dataset
    return rows


def estimates(result):
    """What the measured parts add up to for one full epoch of the examples,
    and the bound tokenization puts on a CPU-bound step."""
    rows = {r["contender"]: r for r in result["rows"]}
    s, ins = result["settings"], result["inputs"]
    batches = s["examples"] // s["batch_size"]
    epoch = {}
    for name in (STRINGS, FEATURES):
        r = rows[name]  # an epoch: its first step (iterator start + fill), then steady steps
        epoch[name] = r["first_step_s"] + (batches - 1) / r["steps_per_s"]
    same_rate = rows[FEATURES]["steps_per_s"]
    start_only = ((rows[FEATURES]["first_step_s"] + (batches - 1) / same_rate)
                  / (rows[STRINGS]["first_step_s"] + (batches - 1) / same_rate))
    extra_cpu = ins[STRINGS]["cpu_ms_per_batch"] - ins[FEATURES]["cpu_ms_per_batch"]
    step_cpu = rows[FEATURES]["cpu_ms_per_step"]
    return {"batches_per_epoch": batches, "epoch_s": epoch,
            "epoch_ratio": epoch[FEATURES] / epoch[STRINGS],
            "epoch_ratio_start_only": start_only,
            "extra_input_cpu_ms_per_batch": extra_cpu,
            "cpu_bound_ratio": step_cpu / (step_cpu + max(extra_cpu, 0.0))}


# ---------------------------------------------------------------- output

def format_result(result):
    s = result["settings"]
    lines = [f"{result['size']}  B={s['batch_size']} T={s['sequence_length']}  "
             f"{s['steps']} timed steps x {s['repeats']} blocks each  "
             f"(first call {result['first_call_s']:.1f}s, convert_examples "
             f"{result['convert_s']:.2f}s)"]
    header = (f"  {'input':<10} {'steps/s':>8} {'vs features':>12} {'paired min..max':>16} "
              f"{'CPU ms/step':>12} {'CPU ratio':>10} {'setup s':>8} {'1st step s':>10}")
    lines += [header, "  " + "-" * (len(header) - 2)]
    for row in result["rows"]:
        lines.append(
            f"  {row['contender']:<10} {row['steps_per_s']:>8.3f} {row['ratio']:>11.3f}x "
            f"{row['paired_min']:>7.3f}..{row['paired_max']:<7.3f} "
            f"{row['cpu_ms_per_step']:>12.1f} {row['cpu_ratio']:>9.3f}x "
            f"{row['setup_s']:>8.2f} {row['first_step_s']:>10.2f}")
    ins = result["inputs"]
    lines.append(
        f"  input pipelines alone (B={s['batch_size']}): strings "
        f"{ins[STRINGS]['batches_per_s']:.0f} batches/s ({ins[STRINGS]['cpu_ms_per_batch']:.1f} "
        f"CPU ms/batch), features {ins[FEATURES]['batches_per_s']:.0f} batches/s "
        f"({ins[FEATURES]['cpu_ms_per_batch']:.1f} CPU ms/batch); the model takes "
        f"{result['rows'][0]['steps_per_s']:.3f}")
    est = result["estimates"]
    lines.append(
        f"  one epoch of {est['batches_per_epoch']} batches (1st step + steady steps): "
        f"strings/features {est['epoch_ratio']:.3f}x; from the slower epoch start alone "
        f"{est['epoch_ratio_start_only']:.3f}x")
    step_cpu = result["rows"][1]["cpu_ms_per_step"]
    extra = est["extra_input_cpu_ms_per_batch"]
    lines.append(
        f"  tokenizing costs {extra:.1f} CPU ms/batch more than reading features, "
        f"{100 * extra / step_cpu:.2f}% of a step's {step_cpu:.0f} CPU ms: "
        f"{est['cpu_bound_ratio']:.4f}x if the step had to give up that CPU")
    lengths = result["lengths"]
    lines.append(
        f"  text: {s['examples']} examples, {lengths['words_mean']:.1f} words and "
        f"{lengths['pieces_mean']:.1f} pieces on average (median {lengths['pieces_p50']:.0f}, "
        f"p90 {lengths['pieces_p90']:.0f}, max {lengths['pieces_max']}), "
        f"{100 * lengths['truncated_share']:.1f}% truncated at T")
    if result.get("profile"):
        lines.append(f"  strings pipeline by map function (B={s['batch_size']}, no model):")
        head = (f"    {'map runs':<28} {'build s (CPU)':>14} {'iterator start s (CPU)':>23} "
                f"{'batches/s':>10} {'CPU ms/batch':>13}")
        lines += [head, "    " + "-" * (len(head) - 4)]
        for r in result["profile"]:
            lines.append(
                f"    {r['map']:<28} {r['build_s']:>6.2f} ({r['build_cpu_s']:.2f})"
                f"{'':>1} {r['start_s']:>12.2f} ({r['start_cpu_s']:.2f}){'':>3} "
                f"{r['batches_per_s']:>10.0f} {r['cpu_ms_per_batch']:>13.2f}")
    return lines


def environment(args):
    import keras
    import tensorflow as tf

    return {**_common.base_environment(), "tensorflow": tf.__version__,
            "keras": keras.__version__, "backend": keras.backend.backend(),
            "device": "GPU" if tf.config.list_physical_devices("GPU") else "CPU",
            "loadavg_start": _common.LOAD_AT_START.get("value"), "note": args.note}


def run(args):
    from kerasbert.models import get_preset

    texts, labels = make_examples(args.examples, args.seed)
    results = []
    for i, size in enumerate(args.sizes):
        vocabulary = get_preset(size)["config"]["vocabulary_size"]
        vocab_path = prepare_vocab(args.work_dir, vocabulary, args.vocab)
        results.append(bench_size(size, args, texts, labels, vocab_path,
                                  args.variants if i == 0 else (),
                                  profile=args.profile and i == 0))
    env = environment(args)
    env["loadavg_end"] = _common.loadavg()
    print()
    print("training steps/s from raw strings (model.fit(texts, labels)) vs pre-tokenized "
          "features (convert_examples + make_dataset), same model, batches and order; "
          "goal: strings/features >= 0.95")
    for result in results:
        print()
        for line in format_result(result):
            print(line)
    print()
    print(f"env: backend={env['backend']} device={env['device']} tensorflow={env['tensorflow']} "
          f"keras={env['keras']} cpus={env['cpu_count']} python={env['python']} "
          f"loadavg(start/end)={env['loadavg_start']}/{env['loadavg_end']}")
    payload = {"env": env, "results": results}
    if args.json:
        _common.write_json(args.json, payload)
    return payload


def main(argv=None):
    return _common.timed_main(parse_args, run, argv)


if __name__ == "__main__":
    main()
