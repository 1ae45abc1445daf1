#!/usr/bin/env python
"""How fast is what users deploy? Strings in, class probabilities out, for
one BERT classifier with the same weights served four ways, in one run:

    (a) ours       our export's `serving_default` (tokenizer in the graph),
                   loaded with tensorflow + tensorflow_text only; one row per
                   export variant: plain (padded to the exported length),
                   longest (padded to the batch's longest row), xla
                   (XLA-compiled model function), longest_xla, and bf16 /
                   longest_bf16 (`export --precision bfloat16`: weights and
                   matrix products in bfloat16, outputs float32)
    (b) keras-hub  `BertTextClassifier` with its preprocessor: `predict` on
                   strings, `predict_on_batch`, and the direct call
                   `model(model.preprocessor(x))`, eager and in a tf.function
    (c) token ids  our export's `serve_token_ids`, tokenized outside the graph
                   with Hugging Face `tokenizers`
    (d) Model Garden  tf-models-official's `BertClassifier` behind its
                   `BertTokenizer` + `BertPackInputs`, called in a tf.function

for bert_tiny and bert_base at sequence length 128 (requests: sentences of
the built-in task) and bert_base at 512 (requests: paragraphs of the built-in
corpus). Every path's probabilities are checked against (a) plain within
1e-4 before anything is timed.

Measured: p50/p99 latency at batch 1 and 32, throughput at batch 1-64, the
share of (a)'s time spent tokenizing and packing, cold start (a fresh
process: imports, load, first request), and throughput with 1, 2 and 4
client threads sharing one loaded model. The best (a) variant's curve gives
the batching parameters `export` writes (kerasbert/serving/batching.py).

    python bench/serving_bench.py [--quick] [--cases bert_tiny:128,...] [--json OUT]
                                  [--profile DIR]
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: E402

_common.add_paths()

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SIZES = {  # layers, hidden, heads, intermediate (the presets' shapes)
    "bert_tiny": (2, 128, 2, 512),
    "bert_base": (12, 768, 12, 3072),
    "quick": (1, 32, 2, 64),
}
LABELS = ["builtins", "files", "network", "text", "other"]
VARIANTS = {
    "plain": {"pad_to_longest": False, "jit_compile": False},
    "longest": {"pad_to_longest": True, "jit_compile": False},
    "xla": {"pad_to_longest": False, "jit_compile": True},
    "longest_xla": {"pad_to_longest": True, "jit_compile": True},
    "bf16": {"pad_to_longest": False, "jit_compile": False, "precision": "bfloat16"},
    "longest_bf16": {"pad_to_longest": True, "jit_compile": False, "precision": "bfloat16"},
}
#: bfloat16 exports round every matrix product: their probabilities are
#: compared with a looser bound, and their labels counted (`bf16_agreement`).
BF16_TOLERANCE = 5e-2
FULL = dict(cases="bert_tiny:128,bert_base:128,bert_base:512", vocab_size=8000, budget=6.0,
            batches=(1, 2, 4, 8, 16, 32, 64), long_batches=(1, 32), threads=(1, 2, 4),
            pool=3)
# At 512 a bert_base call on 2 cores takes about a second per example: the
# paths whose difference the 128 rows already show (padding alone, XLA alone,
# keras-hub's eager and predict_on_batch calls of the same model) are left out.
LONG_SKIPPED = ("a_longest", "a_xla", "b_predict_on_batch", "b_direct")
QUICK = dict(cases="quick:32", vocab_size=800, budget=0.3, batches=(1, 4), long_batches=(1,),
             threads=(1, 2), pool=2)
TOLERANCE = 1e-4


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a tiny model and a few calls (tests)")
    p.add_argument("--cases", default=None,
                   help="size:length pairs (default bert_tiny:128,bert_base:128,bert_base:512)")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds of calls per measurement (at least 3 calls)")
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--profile", default=None,
                   help="write TensorFlow profiler traces here (one per profiled path) and "
                   "print where each call's time goes (bench/trace_summary.py)")
    p.add_argument("--profile-only", action="store_true",
                   help="with --profile: no timing runs, only the traces of (a) plain, "
                   "(b) predict and (c) at batch 1, and (a) at the largest batch")
    p.add_argument("--workdir", default=None, help="keep the exports here")
    p.add_argument("--curve", default=None, metavar="PATHS",
                   help="only the latency/throughput table of these paths (comma list, e.g. "
                   "a_longest_xla,b_direct_tf_function), at --batches")
    p.add_argument("--batches", default=None,
                   help="batch sizes, comma list (default 1..64; 1,32 at length 512)")
    p.add_argument("--pool", type=int, default=None,
                   help="distinct batches per size, each run once before timing (default 3)")
    args = p.parse_args(argv)
    settings = dict(QUICK if args.quick else FULL)
    if args.budget:
        settings["budget"] = args.budget
    cases = args.cases or settings["cases"]
    args.cases = [(c.split(":")[0], int(c.split(":")[1])) for c in cases.split(",") if c]
    for size, _ in args.cases:
        if size not in SIZES:
            raise _common.BenchError(f"unknown size {size!r}; choose from {', '.join(SIZES)}")
    args.settings = settings
    if args.profile_only and not args.profile:
        raise _common.BenchError("--profile-only needs --profile DIR")
    settings["profile_only"] = args.profile_only
    settings["curve"] = args.curve.split(",") if args.curve else None
    if args.batches:
        settings["batches"] = settings["long_batches"] = tuple(
            int(b) for b in args.batches.split(","))
    if args.pool:
        settings["pool"] = args.pool
    return args


# --- the requests -----------------------------------------------------------

def request_texts(length, count, seed=0):
    """`count` texts: task sentences for short lengths, corpus paragraphs of
    about `length` * 0.7 words for 512 (long documents, few padding)."""
    rng = np.random.default_rng(seed)
    if length <= 128:
        from kerasbert.data.default_task import labelled_sentences

        sentences = [s for s, _ in labelled_sentences(max_per_label=400)]
        return [sentences[i] for i in rng.choice(len(sentences), count, replace=False)]
    from kerasbert.data.default_corpus import corpus_text

    words = corpus_text(max_mb=1.0)[0].split()
    size = int(length * 0.7)
    starts = rng.integers(0, len(words) - size, count)
    return [" ".join(words[s:s + size]) for s in starts]


def batch_pool(texts, batch, pool):
    """`pool` distinct batches of `batch` texts (cycled while timing, so
    lengths vary as in traffic; each is run once before timing)."""
    return [[texts[(i * batch + j) % len(texts)] for j in range(batch)] for i in range(pool)]


# --- the four ways to serve -------------------------------------------------

def build_models(size, length, vocab_path, vocab_size, seed=0):
    """One set of weights in the three libraries: a Model Garden encoder
    with random weights, converted to ours and to keras-hub's; the same
    random classification head on each. Returns a dict."""
    import keras
    import tensorflow as tf
    from official.nlp.modeling import models as tfm_models
    from official.nlp.modeling import networks

    from kerasbert import tasks
    from kerasbert.convert import from_tf_models
    from kerasbert.convert import to_keras_hub

    layers, hidden, heads, inner = SIZES[size]
    tf.random.set_seed(seed)
    keras.utils.set_random_seed(seed)
    encoder = networks.BertEncoder(vocab_size=vocab_size, hidden_size=hidden, num_layers=layers,
                                   num_attention_heads=heads, inner_dim=inner,
                                   max_sequence_length=max(length, 128), type_vocab_size=2,
                                   output_dropout=0.0, attention_dropout=0.0)
    ones = tf.ones((1, 8), tf.int32)
    encoder(dict(input_word_ids=ones, input_mask=ones, input_type_ids=ones * 0))
    ours_backbone = from_tf_models(encoder)
    ours = tasks.TextClassifier(ours_backbone, num_classes=len(LABELS), dropout=0.0)
    rng = np.random.default_rng(seed)
    kernel = rng.normal(0, 0.5, (hidden, len(LABELS))).astype("float32")
    bias = rng.normal(0, 0.1, len(LABELS)).astype("float32")
    ours.output_dense.set_weights([kernel, bias])

    import keras_hub

    hub_tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocab_path, lowercase=True)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(hub_tokenizer,
                                                                   sequence_length=length)
    hub = keras_hub.models.BertTextClassifier(to_keras_hub(ours_backbone), len(LABELS),
                                              preprocessor=preprocessor, activation="softmax",
                                              dropout=0.0)
    hub.output_dense.set_weights([kernel, bias])

    garden = tfm_models.BertClassifier(encoder, num_classes=len(LABELS), dropout_rate=0.0,
                                       use_encoder_pooler=True)
    head = [v for v in garden.classifier.trainable_variables]
    head[0].assign(kernel)
    head[1].assign(bias)
    return {"ours": ours, "hub": hub, "garden": garden}


def garden_function(garden, vocab_path, length):
    """Model Garden's serving path: its tokenizer and packer layers, then
    the classifier, softmax; one tf.function over a string batch."""
    import tensorflow as tf
    from official.nlp.modeling import layers as tfm_layers

    tokenizer = tfm_layers.BertTokenizer(vocab_file=vocab_path, lower_case=True)
    packer = tfm_layers.BertPackInputs(
        length, special_tokens_dict=tokenizer.get_special_tokens_dict())

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(texts):
        return tf.nn.softmax(garden(packer([tokenizer(texts)]), training=False), axis=-1)

    return lambda texts: serve(tf.constant(texts)).numpy()


def hf_token_ids(vocab_path, length):
    """(c)'s client-side tokenizer: texts -> the three int32 [B, T] arrays."""
    from tokenizers import BertWordPieceTokenizer

    tokenizer = BertWordPieceTokenizer(vocab_path, lowercase=True)
    tokenizer.enable_truncation(length)
    tokenizer.enable_padding(length=length)

    def encode(texts):
        encodings = tokenizer.encode_batch(texts)
        return {"input_word_ids": np.array([e.ids for e in encodings], np.int32),
                "input_mask": np.array([e.attention_mask for e in encodings], np.int32),
                "input_type_ids": np.array([e.type_ids for e in encodings], np.int32)}

    return encode


def softmax(logits):
    logits = np.asarray(logits, np.float64)
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def serving_paths(models, exports, vocab_path, length):
    """{path name: texts -> probabilities [B, C]} for every way to serve."""
    import tensorflow as tf

    paths = {}
    for variant, path in exports.items():
        serve = tf.saved_model.load(path).signatures["serving_default"]
        paths[f"a_{variant}"] = (
            lambda texts, serve=serve: serve(text=tf.constant(texts))["probabilities"].numpy())
    hub = models["hub"]
    paths["b_predict"] = lambda texts: hub.predict(texts, batch_size=len(texts), verbose=0)
    paths["b_predict_on_batch"] = lambda texts: np.asarray(hub.predict_on_batch(texts))
    paths["b_direct"] = lambda texts: np.asarray(hub(hub.preprocessor(texts)))
    direct = tf.function(lambda texts: hub(hub.preprocessor(texts)),
                         input_signature=[tf.TensorSpec([None], tf.string)])
    paths["b_direct_tf_function"] = lambda texts: direct(tf.constant(texts)).numpy()
    token_ids = tf.saved_model.load(exports["plain"]).signatures["serve_token_ids"]
    encode = hf_token_ids(vocab_path, length)
    paths["c_token_ids"] = lambda texts: softmax(token_ids(
        **{k: tf.constant(v) for k, v in encode(texts).items()})["logits"].numpy())
    try:
        paths["d_model_garden"] = garden_function(models["garden"], vocab_path, length)
    except Exception as error:  # a peer that cannot be built is reported, not fatal
        print(f"(d) Model Garden: not built: {error}", flush=True)
    return paths


# --- measuring --------------------------------------------------------------

def time_calls(fn, pool, budget, min_calls=3, max_calls=200, warm_all=True):
    """Seconds of each call, cycling `pool`, until `budget` seconds (at
    least `min_calls`). The first batch of the pool, or every batch with
    `warm_all` (XLA compiles per shape: start-up, not serving), runs once
    before timing."""
    start = time.perf_counter()
    for batch in (pool if warm_all else pool[:1]):
        fn(batch)
    warm = time.perf_counter() - start
    times, spent = [], 0.0
    while len(times) < min_calls or (spent < budget and len(times) < max_calls):
        batch = pool[len(times) % len(pool)]
        t = time.perf_counter()
        fn(batch)
        times.append(time.perf_counter() - t)
        spent += times[-1]
    return times, warm


def summarize(times, batch):
    ms = np.asarray(times) * 1e3
    return {"calls": len(times), "p50_ms": round(float(np.percentile(ms, 50)), 3),
            "p99_ms": round(float(np.percentile(ms, 99)), 3),
            "examples_per_s": round(batch * len(times) / float(np.sum(times)), 2)}


def threaded_throughput(fn, pool, threads, seconds):
    """Examples/s with `threads` clients calling `fn` in a loop."""
    done = [0] * threads
    stop = time.perf_counter() + seconds

    def client(i):
        k = i
        while time.perf_counter() < stop:
            batch = pool[k % len(pool)]
            fn(batch)
            done[i] += len(batch)
            k += 1

    workers = [threading.Thread(target=client, args=(i,)) for i in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return round(sum(done) / (time.perf_counter() - start), 2)


def tokenization_seconds(models, tokenizer, length, pool, budget, options):
    """In-graph tokenization + packing alone (the export's own ops, as one
    tf.function): seconds per call over `pool`."""
    import tensorflow as tf

    from kerasbert.serving.exporter import build_serving_module

    module = build_serving_module(models["ours"], tokenizer,
                                  {"task_type": "classification", "label_names": LABELS,
                                   "graph": options}, length)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def encode(texts):
        return module.trim(module.encode_batch(texts))

    times, _ = time_calls(lambda t: encode(tf.constant(t)), pool, budget)
    return float(np.median(times))


COLD_OURS = """
import sys, time
start = time.perf_counter()
import tensorflow as tf, tensorflow_text
imported = time.perf_counter()
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
serve(text=tf.constant(["A first request."]))["probabilities"].numpy()
print(imported - start, time.perf_counter() - imported)
"""
COLD_HUB = """
import sys, time
start = time.perf_counter()
import keras, keras_hub, tensorflow as tf
imported = time.perf_counter()
model = keras.saving.load_model(sys.argv[1])
model.predict(["A first request."], verbose=0)
print(imported - start, time.perf_counter() - imported)
"""


def cold_start(script, path):
    """(import s, load + first request s) in a fresh Python."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", script, path], capture_output=True, text=True,
                          env=env, timeout=600)
    if done.returncode != 0:
        raise _common.BenchError(f"cold start failed:\n{done.stderr[-2000:]}")
    imported, first = map(float, done.stdout.split()[-2:])
    return {"import_s": round(imported, 2), "load_and_first_request_s": round(first, 2)}


def check_agreement(paths, texts):
    """Max |p - p_plain| of every path on `texts`; raises above 1e-4 for
    (a), (b), (c) (5e-2 for the bfloat16 exports; Model Garden's tokenizer
    may split rare text otherwise: reported, not fatal)."""
    want = paths["a_plain"](texts)
    diffs = {}
    for name, fn in paths.items():
        diffs[name] = float(np.max(np.abs(np.asarray(fn(texts), np.float64) - want)))
    bad = {n: d for n, d in diffs.items() if not n.startswith("d_")
           and d > (BF16_TOLERANCE if n.endswith("bf16") else TOLERANCE)}
    if bad:
        raise _common.BenchError(f"paths disagree with (a) plain beyond {TOLERANCE}: {bad}")
    return diffs


def bf16_agreement(paths, texts, batch=32):
    """{path: {"same_label": share, "max_abs_probability": d}} of every
    bfloat16 export against (a) plain over `texts` (the weights here are
    random, so near-ties are common: a fine-tuned model's agreement is
    padding_bench.py's)."""
    bf16 = [n for n in paths if n.endswith("bf16")]
    if not bf16:
        return {}
    chunks = [texts[i:i + batch] for i in range(0, len(texts), batch)]
    want = np.concatenate([paths["a_plain"](c) for c in chunks])
    out = {}
    for name in bf16:
        got = np.concatenate([paths[name](c) for c in chunks])
        out[name] = {"same_label": round(float(np.mean(got.argmax(-1) == want.argmax(-1))), 4),
                     "max_abs_probability": round(float(np.max(np.abs(got - want))), 5),
                     "requests": len(texts)}
    return out


def measure_case(size, length, root, vocab_path, settings, profile=None):
    from kerasbert.serving.exporter import export_model
    from kerasbert.text import load_tokenizer

    vocab_size = sum(1 for _ in open(vocab_path, encoding="utf-8"))
    tokenizer = load_tokenizer(vocab_path, lower_case=True)
    models = build_models(size, length, vocab_path, vocab_size)
    case_dir = os.path.join(root, f"{size}_{length}")
    exports = {}
    wanted = {name[2:] for name in settings.get("curve") or ()}
    for variant, options in VARIANTS.items():
        if wanted and variant not in wanted | {"plain"}:
            continue  # --curve: only the exports it times (and plain, the reference)
        exports[variant] = export_model(models["ours"], tokenizer, "classification",
                                        os.path.join(case_dir, variant), label_names=LABELS,
                                        sequence_length=length, graph=options)["path"]
    texts = request_texts(length, 256)
    paths = serving_paths(models, exports, vocab_path, length)
    result = {"size": size, "sequence_length": length,
              "agreement_max_abs": check_agreement(paths, texts[:8]),
              "bf16_agreement": bf16_agreement(paths, texts[:settings.get("agreement", 64)])}
    mean_pieces = float(np.mean([len(tokenizer.tokenize_ids([t])[0]) for t in texts[:64]]))
    result["mean_pieces_per_request"] = round(mean_pieces, 1)
    print(f"{size}@{length}: paths agree (max |dp| "
          f"{max(v for k, v in result['agreement_max_abs'].items() if not k.startswith('d_')):.1e}); "
          f"requests average {mean_pieces:.0f} pieces", flush=True)

    batches = settings["batches"] if length <= 128 else settings["long_batches"]
    budget = settings["budget"] * (1 if length <= 128 else 2)
    if settings.get("profile_only"):
        result["profile"] = profile_paths(
            paths, texts, profile, f"{size}_{length}",
            [("a_plain", 1), ("b_predict", 1), ("c_token_ids", 1), ("a_plain", batches[-1])])
        return result
    unknown = set(settings.get("curve") or ()) - set(paths)
    if unknown:
        raise _common.BenchError(f"--curve: no path {sorted(unknown)}; paths: {sorted(paths)}")
    table = {}
    for name, fn in paths.items():
        if settings.get("curve"):
            if name not in settings["curve"]:
                continue
        elif length > 128 and name in LONG_SKIPPED:
            continue
        table[name] = {}
        for batch in batches:
            pool = batch_pool(texts, batch, settings["pool"])
            times, warm = time_calls(fn, pool, budget, warm_all="xla" in name)
            row = summarize(times, batch)
            row["warmup_s"] = round(warm, 2)
            table[name][batch] = row
        print(f"  {name:<22} " + "  ".join(
            f"b{b}: {r['p50_ms']:.1f} ms, {r['examples_per_s']:.1f}/s"
            for b, r in table[name].items()), flush=True)
    result["paths"] = table
    result["speed_vs_a_plain"] = speed_vs_plain(table)
    if result["bf16_agreement"]:
        print(f"  bfloat16 vs float32 labels: {json.dumps(result['bf16_agreement'])}")
    print(f"  examples/s against a_plain: {json.dumps(result['speed_vs_a_plain'])}", flush=True)
    if settings.get("curve"):
        return result

    # The batching file is measured on the default (float32) export.
    ours = {n: t for n, t in table.items() if n.startswith("a_") and not n.endswith("bf16")}
    best = min(ours, key=lambda n: sum(ours[n][b]["p50_ms"] / b for b in batches))
    result["best_ours"] = best
    hub_direct = [n for n in table if n.startswith("b_") and n != "b_predict"]
    result["best_keras_hub_direct"] = {
        b: min(hub_direct, key=lambda n: table[n][b]["p50_ms"]) for b in batches}

    share = {}
    for batch in (b for b in (1, 32) if b in batches):
        pool = batch_pool(texts, batch, settings["pool"])
        seconds = tokenization_seconds(models, tokenizer, length, pool, budget,
                                       VARIANTS[best[2:]])
        share[batch] = round(seconds * 1e3 / table[best][batch]["p50_ms"], 4)
    result["tokenization_share"] = share

    threads = {}
    for name in (best, "b_direct_tf_function"):
        for batch in (1, 8):
            if batch not in batches and batch != 1:
                continue
            pool = batch_pool(texts, batch, settings["pool"])
            threads[f"{name} b{batch}"] = {
                k: threaded_throughput(paths[name], pool, k, budget) for k in settings["threads"]}
    result["threads"] = threads

    hub_file = os.path.join(case_dir, "keras_hub.keras")
    models["hub"].save(hub_file)
    result["cold_start"] = {"a_plain": cold_start(COLD_OURS, exports["plain"]),
                            best: cold_start(COLD_OURS, exports[best[2:]]),
                            "b_keras_hub": cold_start(COLD_HUB, hub_file)}
    if profile:
        result["profile"] = profile_paths(paths, texts, profile, f"{size}_{length}",
                                          [(best, b) for b in batches])
    return result


def profile_paths(paths, texts, root, case, plan, calls=3):
    """Traces `calls` calls of each (path, batch) of `plan` (after a warm
    call) into root/case/path_bBATCH; returns {that name: wall ms per call
    and trace_summary.summarize's op times}."""
    import tensorflow as tf

    import trace_summary

    out = {}
    for name, batch in plan:
        pool = batch_pool(texts, batch, calls)
        paths[name](pool[0])
        trace_dir = os.path.join(root, case, f"{name}_b{batch}")
        tf.profiler.experimental.start(trace_dir)
        start = time.perf_counter()
        for texts_batch in pool:
            paths[name](texts_batch)
        wall = (time.perf_counter() - start) / len(pool)
        tf.profiler.experimental.stop()
        summary = trace_summary.summarize(trace_dir)
        summary["op_ms"] = {k: round(v / len(pool), 1) for k, v in summary["op_ms"].items()}
        out[f"{name}_b{batch}"] = {"wall_ms_per_call": round(wall * 1e3, 1), **summary}
        print(f"  trace {name} b{batch}: {wall * 1e3:.1f} ms/call; op ms/call "
              f"{json.dumps(summary['op_ms'])}", flush=True)
    return out


def speed_vs_plain(table):
    """{path: {batch: p50(a_plain) / p50(path)}}: each path's examples/s
    over the float32 export's, batch by batch (when a_plain was timed)."""
    plain = table.get("a_plain")
    if not plain:
        return {}
    return {name: {b: round(plain[b]["p50_ms"] / row[b]["p50_ms"], 2) for b in row if b in plain}
            for name, row in table.items() if name != "a_plain"}


def goals(result):
    """The issue's goals, checked on one case's numbers."""
    t = result["paths"]
    best = result["best_ours"]
    batches = sorted(t[best])
    out = {}
    if 1 in t[best]:
        out["a_vs_predict_b1"] = round(t["b_predict"][1]["p50_ms"] / t[best][1]["p50_ms"], 2)
    if 32 in t[best]:
        out["a_vs_predict_b32"] = round(t["b_predict"][32]["p50_ms"] / t[best][32]["p50_ms"], 2)
    out["a_vs_best_keras_hub_direct"] = {
        b: round(t[result["best_keras_hub_direct"][b]][b]["p50_ms"] / t[best][b]["p50_ms"], 2)
        for b in batches}
    out["a_vs_token_ids"] = {
        b: round(t["c_token_ids"][b]["p50_ms"] / t[best][b]["p50_ms"], 2) for b in batches}
    out["plain_vs_token_ids"] = {
        b: round(t["c_token_ids"][b]["p50_ms"] / t["a_plain"][b]["p50_ms"], 2) for b in batches}
    for name in ("a_bf16", "a_longest_bf16"):
        if name in t:
            out[f"{name}_vs_best_keras_hub_direct"] = {
                b: round(t[result["best_keras_hub_direct"][b]][b]["p50_ms"] / t[name][b]["p50_ms"],
                         2) for b in batches}
    return out


def measured_entry(result):
    """The case as a `kerasbert.serving.batching.MEASURED` entry."""
    layers, hidden, _, _ = SIZES[result["size"]]
    best = result["best_ours"]
    one = {k: v for k, v in result["threads"].items() if k.startswith(best) and k.endswith("b1")}
    rates = next(iter(one.values()), {1: 1})
    return {"name": result["size"], "num_layers": layers, "hidden_dim": hidden,
            "sequence_length": result["sequence_length"], "graph": best[2:],
            "throughput": {b: r["examples_per_s"] for b, r in result["paths"][best].items()},
            "best_threads": int(max(rates, key=lambda k: rates[k]))}


def run(args):
    from kerasbert.data.default_corpus import write_default_corpus
    from kerasbert.serving.batching import batching_parameters
    from kerasbert.text import vocabulary
    from kerasbert.text import wordpiece_training

    settings = args.settings
    results = {"settings": {k: v for k, v in settings.items()},
               "environment": _common.base_environment(), "cases": []}
    with tempfile.TemporaryDirectory() as scratch:
        root = args.workdir or scratch
        os.makedirs(root, exist_ok=True)
        corpus = os.path.join(root, "corpus.txt")
        write_default_corpus(corpus, max_mb=1.0 if not args.quick else 0.2)
        vocab_path = os.path.join(root, "vocab.txt")
        vocabulary.write_vocab(wordpiece_training.build_wordpiece_vocab(
            [corpus], settings["vocab_size"]), vocab_path)
        for size, length in args.cases:
            result = measure_case(size, length, root, vocab_path, settings, args.profile)
            results["cases"].append(result)
            if settings["profile_only"] or settings["curve"]:
                continue
            result["goals"] = goals(result)
            entry = measured_entry(result)
            result["batching"] = {"measured_entry": entry,
                                  "parameters": batching_parameters(entry["throughput"],
                                                                    entry["best_threads"])}
            print(f"  best ours: {result['best_ours']}; goals {json.dumps(result['goals'])}")
            print(f"  tokenization share {result['tokenization_share']}; threads "
                  f"{json.dumps(result['threads'])}")
            print(f"  cold start {json.dumps(result['cold_start'])}")
            print(f"  batching {json.dumps(result['batching'])}", flush=True)
    if args.json:
        _common.write_json(args.json, results)
    return results


def main(argv=None):
    return _common.timed_main(parse_args, run, argv)


if __name__ == "__main__":
    main()
