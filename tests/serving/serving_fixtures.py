"""Fine-tuning directories with tiny random models, and a fresh-process
runner that may import only tensorflow and tensorflow_text."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np

from kerasbert.testing.files import write_vocabulary

WORDS = (
    "the a an of to in and is was for on with as by at from it this that be are were "
    "paris london berlin city river france germany john mary smith company bank tower "
    "who what where when which answer question capital lives works near old new big small "
    "quick brown fox jumps over lazy dog cat runs fast slow red blue green one two three "
    "caf naive tokyo"
).split()
SUFFIXES = ["##s", "##ed", "##ing", "##er", "##e"]
PUNCTUATION = list(".,!?;:'\"()-—")
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# Keeps the fresh process honest: it fails if anything of ours (or Keras)
# was imported while loading or running the SavedModel.
FRESH_PREAMBLE = """
import json, os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np
import tensorflow as tf
import tensorflow_text  # registers the tokenizer ops (and itself imports keras)

_BASELINE = set(sys.modules)

def _check_imports():
    ours = sorted(m for m in sys.modules if m.split(".")[0] in ("kerasbert", "keras_hub", "keras_nlp"))
    assert not ours, f"the SavedModel pulled in {ours[:5]}"
    added = sorted(m for m in set(sys.modules) - _BASELINE if "keras" in m)
    assert not added, f"loading the SavedModel imported {added[:5]}"
"""


def write_vocab(directory):
    tokens = SPECIALS + list("abcdefghijklmnopqrstuvwxyz") + PUNCTUATION + list(WORDS) + SUFFIXES
    return write_vocabulary(directory, tokens)


def write_corpus(path, lines=1500, seed=0):
    """Sentences of WORDS (some capitalised, with punctuation): a corpus for
    training tiny SentencePiece / BPE vocabularies in tests."""
    rng = np.random.default_rng(seed)
    words = list(WORDS) + ["Paris", "John", "Mary", "London", "Tokyo", "naïve", "café"]
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(lines):
            sentence = " ".join(rng.choice(words, size=rng.integers(3, 12)))
            f.write(sentence + rng.choice([".", "?", "!", ","]) + "\n")
    return path


def write_tokenizer(directory, kind="wordpiece"):
    """Writes a tiny tokenizer of a family into `directory`; returns the path
    `kerasbert.text.load_tokenizer` takes (vocab.txt, a .model, a BPE dir)."""
    os.makedirs(directory, exist_ok=True)
    if kind == "wordpiece":
        return write_vocab(directory)
    corpus = write_corpus(os.path.join(directory, "corpus.txt"))
    if kind == "sentencepiece":
        from kerasbert.text import train_sentencepiece

        model, _ = train_sentencepiece([corpus], 100, os.path.join(directory, "albert"),
                                       character_coverage=1.0, num_threads=1)
        return model
    if kind == "bpe":
        from kerasbert.text import train_bpe

        return os.path.dirname(train_bpe([corpus], 400, directory)["vocabulary_file"])
    raise ValueError(kind)


def tiny_backbone(vocabulary_size, sequence_length=64, family="BertBackbone", **options):
    """A 1-layer, width-16 backbone of `family`; `options` override its
    arguments (e.g. num_layers, a family's own)."""
    from kerasbert import models

    # ALBERT's factorised embeddings default to 128 wide: keep them tiny too.
    extra = {"embedding_dim": 8} if family == "AlbertBackbone" else {}
    arguments = dict(vocabulary_size=vocabulary_size, num_layers=1, num_heads=2, hidden_dim=16,
                     intermediate_dim=32, max_sequence_length=sequence_length, dropout=0.0,
                     **extra)
    return getattr(models, family)(**{**arguments, **options})


def make_finetuned_dir(directory, task_type, label_names=None, num_choices=3,
                       sequence_length=32, seed=0, qa_options=None, task="test",
                       family="BertBackbone", tokenizer="wordpiece", backbone_options=None):
    """Writes FT/{model.keras, config.json, tokenizer files} as `kerasbert
    finetune` does, with a random tiny model of the task type.

    `tokenizer` "wordpiece" writes FT/vocab.txt and a config.json without a
    "tokenizer" entry (as FT dirs before ALBERT/RoBERTa support);
    "sentencepiece" / "bpe" train a tiny tokenizer in `directory + "_src"`
    and copy it into FT as `kerasbert finetune` does. `backbone_options`:
    `tiny_backbone`'s overrides."""
    import keras

    from kerasbert import tasks
    from kerasbert.text import load_tokenizer, save_tokenizer_files

    os.makedirs(directory, exist_ok=True)
    description = None
    if tokenizer == "wordpiece":
        vocab = write_vocab(directory)
        size = load_tokenizer(vocab).vocabulary_size
    else:
        source = load_tokenizer(write_tokenizer(directory + "_src", tokenizer))
        description = save_tokenizer_files(source, directory)
        size = source.vocabulary_size
    keras.utils.set_random_seed(seed)
    backbone = tiny_backbone(size, sequence_length=max(64, sequence_length), family=family,
                             **(backbone_options or {}))
    if task_type in ("classification", "pair"):
        label_names = label_names or ["negative", "neutral", "positive"]
        model = tasks.TextClassifier(backbone, num_classes=len(label_names), dropout=0.0)
    elif task_type == "regression":
        model = tasks.TextClassifier(backbone, num_classes=1, dropout=0.0)
    elif task_type == "tagging":
        label_names = label_names or ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
        model = tasks.TokenClassifier(backbone, num_labels=len(label_names), dropout=0.0)
    elif task_type == "qa":
        model = tasks.QuestionAnswerer(backbone, dropout=0.0)
    elif task_type == "multiple_choice":
        model = tasks.MultipleChoice(backbone, num_choices=num_choices, dropout=0.0)
    else:
        raise ValueError(task_type)
    # Random heads give near-uniform outputs; larger weights make argmaxes
    # and spans depend on the input, so the parity checks mean something.
    for weight in model.weights:
        if "kernel" in weight.path and weight.path.split("/")[0] != backbone.name:
            weight.assign(np.asarray(weight.numpy()) * 40.0)
    model.save(os.path.join(directory, "model.keras"))
    qa = dict(doc_stride=8, max_query_length=8, max_answer_length=6,
              null_score_diff_threshold=0.0)
    qa.update(qa_options or {})
    config = {
        "task": task, "task_type": task_type, "label_names": label_names,
        "max_seq_length": sequence_length, "lower_case": True, "columns": {},
        "vocab": "vocab.txt", "model_class": type(model).__name__, "qa": qa,
    }
    if description is not None:
        config.update(tokenizer=description, vocab=description["files"][0],
                      lower_case=description["lower_case"])
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)
    return directory


def shared_export(shared_builds, task_type):
    """(FT dir, export info) of `task_type`'s tiny run (`make_finetuned_dir`,
    seed 0; the QA run as `squad_v2`) and its SavedModel with the default
    graph options, made once per session (the `shared_builds` fixture).

    The export is made from a copy of the FT dir that is deleted afterwards,
    so the SavedModel is known to need nothing of its source; the FT dir
    itself stays for tests that compare with the Keras model or export it
    again with other options. Export info is `export_finetuned`'s dict.
    """
    def build(folder):
        from kerasbert.serving.exporter import export_finetuned
        from kerasbert.testing.shared_builds import private_copy

        ft = make_finetuned_dir(str(folder / "ft"), task_type,
                                task="squad_v2" if task_type == "qa" else "test")
        copy = private_copy(ft, folder / "ft_copy")
        info = export_finetuned(str(copy), str(folder / "export"))
        shutil.rmtree(copy)
        (folder / "export_info.json").write_text(json.dumps(info))

    folder = shared_builds(f"export-{task_type}", build)
    return str(folder / "ft"), json.loads((folder / "export_info.json").read_text())


def run_fresh(script, *args, timeout=600):
    """Runs FRESH_PREAMBLE + `script` in a new Python; returns its stdout.
    The script should call `_check_imports()` after using the model."""
    code = FRESH_PREAMBLE + textwrap.dedent(script)
    env = dict(os.environ, PYTHONPATH="")
    result = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                            text=True, timeout=timeout, env=env, cwd="/")
    assert result.returncode == 0, f"fresh process failed:\n{result.stderr[-4000:]}"
    return result.stdout


# What FRESH_PREAMBLE gives a script, in this process: the same names, and
# an import check that cannot apply here (kerasbert is loaded already).
IN_PROCESS_PREAMBLE = """
import json, os, sys
import numpy as np
import tensorflow as tf
import tensorflow_text

def _check_imports():
    pass
"""


def run_in_process(script, *args):
    """Runs a `run_fresh` script in this process (sys.argv set to `args`);
    returns its stdout. The same SavedModels, inputs and outputs as in a
    fresh process, without the start-up of one (and without its check that
    nothing of ours is imported): the default suite's form of a
    fresh-process check whose slow form keeps the fresh process."""
    import contextlib
    import io

    code = IN_PROCESS_PREAMBLE + textwrap.dedent(script)
    out, argv = io.StringIO(), sys.argv
    sys.argv = ["-c", *map(str, args)]
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "<in-process script>", "exec"), {"__name__": "__main__"})
    finally:
        sys.argv = argv
    return out.getvalue()
