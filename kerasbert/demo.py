"""`make demo` / `kerasbert demo`: the library end to end, offline.

1. Model checks: presets, a padded batch through BERT, exact weight parity
   with keras-hub, `.keras` and original-checkpoint round trips.
2. The main job on the built-in corpus (the Python standard library's
   docstrings, kerasbert.data.default_corpus): WordPiece vocabulary ->
   pretraining TFRecords -> a short masked-LM + NSP pretraining of
   `bert_tiny` -> fill-in-the-blank predictions of the trained model.
3. Fine-tuning on the built-in task (kerasbert.data.default_task: which
   area of the standard library a documentation sentence comes from; real
   text, real labels): validation accuracy next to the majority baseline.
4. Export of the fine-tuned classifier as a TF Serving SavedModel with the
   tokenizer in the graph, queried on raw text from a fresh process that
   imports only tensorflow and tensorflow_text (`kerasbert predict`).

Every step prints what it checked; any mismatch raises, so the demo fails
loudly. `quick=True` (the test) shrinks the corpus and the run.
"""

import os
import time

import numpy as np

from kerasbert import convert
from kerasbert.data import create_pretraining_data
from kerasbert.data.default_corpus import write_default_corpus
from kerasbert.data.default_task import write_default_task
from kerasbert.models import BertBackbone
from kerasbert.models import list_presets
from kerasbert.models.presets import get_preset
from kerasbert.saving import load_model
from kerasbert.serving.exporter import export_finetuned
from kerasbert.text import WordPieceTokenizer
from kerasbert.text import vocabulary
from kerasbert.text import wordpiece_training
from kerasbert.training.configs import FinetuneConfig
from kerasbert.training.configs import PretrainConfig
from kerasbert.training.finetune import run_finetuning
from kerasbert.training.pretrain import run_pretraining


def _step(title):
    print(f"\n== {title}")


def _batch(vocabulary_size, batch=4, length=16, seed=0):
    """Random ids with real padding: row i keeps length - 3*i tokens."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocabulary_size, (batch, length), dtype="int32")
    mask = np.zeros((batch, length), "int32")
    for i in range(batch):
        mask[i, : max(1, length - 3 * i)] = 1
    ids = ids * mask
    type_ids = np.zeros_like(ids)
    type_ids[:, length // 2 :] = 1
    return {
        "input_word_ids": ids,
        "input_mask": mask,
        "input_type_ids": type_ids * mask,
    }


def _max_diff(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))))


def run_demo(output_dir="runs/demo", quick=False):
    model_checks(output_dir)
    pretraining_pipeline(output_dir, quick=quick)
    print("\nDemo finished: every check passed.")


def model_checks(output_dir):
    import keras
    import keras_hub

    os.makedirs(output_dir, exist_ok=True)
    _step(f"{len(list_presets())} presets (architectures; no download)")
    print(", ".join(list_presets()))
    start = time.perf_counter()
    count = BertBackbone.from_preset("bert_base").count_params()
    print(f"bert_base: {count:,} parameters (built in {time.perf_counter() - start:.1f}s)")
    # bert_large is counted from its config (the formula every checkpoint is
    # checked with before it is built): building it would allocate 1.3 GB and
    # take about 10 s on two cores for the same number.
    large = get_preset("bert_large")
    count = large["backbone_class"].estimate_parameters(
        {**large["backbone_class"].default_config(), **large["config"]})
    print(f"bert_large: {count:,} parameters (from its config, not built)")

    _step("bert_tiny forward pass on a padded batch")
    backbone = BertBackbone.from_preset("bert_tiny")
    print(backbone.describe())
    inputs = _batch(backbone.vocabulary_size)
    outputs = backbone(inputs)
    for key, value in outputs.items():
        shapes = [tuple(v.shape) for v in value] if isinstance(value, list) else tuple(value.shape)
        print(f"  {key}: {shapes}")
    print(f"  real tokens per row: {inputs['input_mask'].sum(1).tolist()}")

    _step("parity with keras-hub's BertBackbone (same weights)")
    peer = keras_hub.models.BertBackbone(
        vocabulary_size=1000, num_layers=2, num_heads=2, hidden_dim=64,
        intermediate_dim=256, max_sequence_length=64,
    )
    ours = convert.from_keras_hub(peer)
    small = _batch(1000)
    expected = peer({
        "token_ids": small["input_word_ids"],
        "padding_mask": small["input_mask"],
        "segment_ids": small["input_type_ids"],
    })
    got = ours(small)
    for key in ("sequence_output", "pooled_output"):
        diff = _max_diff(expected[key], got[key])
        print(f"  {key}: max |ours - keras-hub| = {diff:.2e}")
        if diff > 1e-5:
            raise AssertionError(f"{key} differs from keras-hub by {diff}")

    _step("save and reload (.keras, safe mode)")
    path = os.path.join(output_dir, "bert_tiny.keras")
    backbone.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    diff = _max_diff(outputs["sequence_output"], restored(inputs)["sequence_output"])
    print(f"  {path}: reloaded, max difference {diff:.1e}")
    if diff > 0:
        raise AssertionError("reloaded model differs")

    if hasattr(convert, "save_bert_checkpoint"):
        _step("original google-research/bert checkpoint layout round trip")
        prefix = os.path.join(output_dir, "tf1", "bert_model.ckpt")
        convert.save_bert_checkpoint(backbone, prefix)
        loaded = convert.load_bert_checkpoint(
            prefix, os.path.join(os.path.dirname(prefix), "bert_config.json")
        )
        diff = _max_diff(outputs["pooled_output"], loaded(inputs)["pooled_output"])
        print(f"  wrote {prefix}.index/.data-*, bert_config.json; reloaded, "
              f"max difference {diff:.1e}")
        if diff > 1e-6:
            raise AssertionError("checkpoint round trip changed the model")


# Sizes: the full demo takes a few minutes on 2 CPU cores.
FULL = dict(corpus_mb=None, vocab_size=8000, dupe_factor=2, steps=300, batch_size=32,
            task_per_label=800, epochs=3)
QUICK = dict(corpus_mb=0.3, vocab_size=2000, dupe_factor=1, steps=20, batch_size=8,
             task_per_label=40, epochs=1)
SEQ_LENGTH, PREDICTIONS = 64, 10  # short sequences keep the demo to minutes on a CPU
FILL_IN = ("The [MASK] returns a new list of the items.",
           "Raise an [MASK] if the file does not exist.")


def pretraining_pipeline(output_dir, quick=False):
    sizes = QUICK if quick else FULL
    _step("built-in corpus: the Python standard library's docstrings")
    corpus = os.path.join(output_dir, "corpus.txt")
    stats = write_default_corpus(corpus, max_mb=sizes["corpus_mb"])
    print(f"  {corpus}: {stats['documents']:,} documents, {stats['sentences']:,} "
          f"sentences, {stats['bytes'] / 2**20:.1f} MB")

    _step(f"WordPiece vocabulary ({sizes['vocab_size']:,} tokens)")
    vocab = os.path.join(output_dir, "vocab.txt")
    tokens = wordpiece_training.build_wordpiece_vocab([corpus], sizes["vocab_size"])
    vocabulary.write_vocab(tokens, vocab)
    print(f"  {vocab}: {len(tokens):,} tokens")

    _step(f"pretraining TFRecords (masked LM + next sentence, sequence {SEQ_LENGTH})")
    data = os.path.join(output_dir, "data")
    meta = create_pretraining_data(
        [corpus], vocab, data, sequence_length=SEQ_LENGTH, max_predictions_per_seq=PREDICTIONS,
        dupe_factor=sizes["dupe_factor"], num_shards=2, workers=2, overwrite=True)
    print(f"  {data}: {meta['num_instances']:,} instances in {len(meta['shards'])} shards")

    _step(f"pretraining bert_tiny for {sizes['steps']} steps")
    run_dir = os.path.join(output_dir, "pretrain")
    if os.path.isdir(run_dir):  # a fresh run each time the demo runs
        import shutil

        shutil.rmtree(run_dir)
    result = run_pretraining(PretrainConfig(
        preset="bert_tiny", vocab=vocab, data=data, output_dir=run_dir,
        steps=sizes["steps"], batch_size=sizes["batch_size"], learning_rate=1e-3,
        warmup_steps=sizes["steps"] // 10, checkpoint_every=max(1, sizes["steps"] // 2),
        log_every=max(1, sizes["steps"] // 20)))
    metrics = result["metrics"]
    print(f"  step {result['step']}: loss {metrics['loss']:.3f}, masked-LM accuracy "
          f"{metrics['mlm_accuracy']:.3f}, next-sentence accuracy "
          f"{metrics['sentence_accuracy']:.3f}")
    for name, path in result["outputs"].items():
        print(f"  {name:<15} {path}")
    _fill_in_the_blanks(result["outputs"]["pretrainer"], vocab)
    _finetune_default_task(output_dir, result["outputs"]["backbone"], vocab, sizes)


def _finetune_default_task(output_dir, backbone, vocab, sizes):
    _step("fine-tuning on the built-in task: which area of the standard library "
          "a sentence documents")
    task = write_default_task(os.path.join(output_dir, "task"), sizes["task_per_label"])
    for split in ("train", "validation"):
        counts = task["counts"][split]
        print(f"  {split}: {sum(counts.values()):,} sentences "
              f"({', '.join(f'{k} {v}' for k, v in counts.items())})")
    result = run_finetuning(FinetuneConfig(
        task=f"csv:{task['train']}", validation=task["validation"],
        output_dir=os.path.join(output_dir, "finetune"), vocab=vocab, backbone=backbone,
        epochs=sizes["epochs"], batch_size=32, learning_rate=5e-4,
        sequence_length=SEQ_LENGTH, overwrite=True))  # a fresh run each time the demo runs
    metrics = result["metrics"]
    print(f"  validation accuracy {metrics['accuracy']:.3f} (majority-class baseline "
          f"{metrics['majority_baseline_accuracy']:.3f}), macro F1 {metrics['f1']:.3f}")
    for name, path in result["outputs"].items():
        print(f"  {name:<17} {path}")
    _export_and_serve(output_dir, os.path.join(output_dir, "finetune"))


SERVE_TEXTS = (
    "Open the file for reading and return a stream.",
    "Create a socket connected to the given host and port.",
    "Split the string at every comma.",
)


def _export_and_serve(output_dir, finetune_dir):
    """Exports the fine-tuned classifier for TF Serving, then queries the
    SavedModel in a fresh Python that imports only tensorflow and
    tensorflow_text, as a deployment would."""
    import json
    import subprocess
    import sys

    _step("export for TF Serving (tokenizer in the graph) and query it in a fresh process")
    result = export_finetuned(finetune_dir, os.path.join(output_dir, "export", "stdlib_area"),
                              version=1, overwrite=True)
    print(f"  {result['path']}: signatures {', '.join(result['signatures'])}; "
          f"custom ops {', '.join(result['custom_ops'])}")
    args = [sys.executable, "-m", "kerasbert", "predict", "--saved-model", result["path"]]
    for text in SERVE_TEXTS:
        args += ["--text", text]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    for text, line in zip(SERVE_TEXTS, out.strip().splitlines()):
        row = json.loads(line)
        print(f"  {text!r}\n    -> {row['label']} ({max(row['probabilities']):.2f})")


def _fill_in_the_blanks(pretrainer_path, vocab, sequence_length=32):
    """Top-5 predictions of the trained masked-LM head for a few sentences."""
    import numpy as np

    _step("fill in the blank with the trained model")
    pretrainer = load_model(pretrainer_path)
    tokenizer = WordPieceTokenizer(vocab)
    id_to_token = open(vocab, encoding="utf-8").read().splitlines()
    for text in FILL_IN:
        left, right = text.split("[MASK]")
        pieces = tokenizer.tokenize_ids([left, right]).to_list()
        ids = [tokenizer.cls_id, *pieces[0], tokenizer.mask_id, *pieces[1], tokenizer.sep_id]
        word_ids = np.full((1, sequence_length), tokenizer.pad_id, "int32")
        word_ids[0, :len(ids)] = ids
        outputs = pretrainer({
            "input_word_ids": word_ids,
            "input_mask": (np.arange(sequence_length) < len(ids)).astype("int32")[None],
            "input_type_ids": np.zeros_like(word_ids),
            "masked_lm_positions": np.array([[len(pieces[0]) + 1]], "int32"),
        })
        top = np.argsort(-np.asarray(outputs["mlm_logits"])[0, 0])[:5]
        print(f"  {text}\n    -> {', '.join(id_to_token[i] for i in top)}")
