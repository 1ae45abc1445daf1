"""A run directory, and the one module that knows its file names: what
`pretrain`, `distill` and `finetune` write, and what `evaluate`,
`export`, `generate`, `distill --teacher` and `pretrain --init-from` read.
(A data folder's `metadata.json` belongs to the data: kerasbert.data.metadata.)

    RUN/config.json           what made the run: flags, backbone config, task, tokenizer
                              (or, for a model that reads characters, "input": ELMo's
                              character input, `INPUT`, instead of a tokenizer)
    RUN/model.keras           finetune: the task model (with its optimizer state)
    RUN/backbone.keras        pretrain, distill: the encoder
    RUN/pretrainer.keras      pretrain, distill: the encoder with its pretraining heads
    RUN/<tokenizer files>     finetune: under kerasbert.text.families.SAVED_FILES names
    RUN/metrics.json          finetune: validation metrics and the per-epoch history
    RUN/evaluation.json       the last `kerasbert evaluate`
    RUN/confusion_matrix.png  finetune of a classifier
    RUN/history.jsonl         pretrain, distill: one JSON object per logged step
    RUN/training_curve.png    loss and accuracy against steps (or epochs)
    RUN/checkpoints/          pretrain: step checkpoints (kerasbert.training.checkpoints)
    RUN/logs/train/           TensorBoard event files

Everything is written through a temporary name and renamed (io_utils), so a
reader never sees half a file.
"""

import dataclasses
import json
import os

from kerasbert.data.finetuning.load import parse_task_spec
from kerasbert.errors import UsageError
from kerasbert.io_utils import atomic_file
from kerasbert.io_utils import atomic_write_json
from kerasbert.io_utils import atomic_write_text
from kerasbert.plotting import new_figure
from kerasbert.plotting import save_figure_atomically
from kerasbert.sources import handles
from kerasbert.text.tokenizer_loading import load_saved_tokenizer
from kerasbert.text.tokenizer_loading import load_tokenizer
from kerasbert.text.tokenizer_loading import pretraining_vocab
from kerasbert.text.tokenizer_loading import save_tokenizer_files
from kerasbert.text.tokenizer_loading import saved_tokenizer_files
from kerasbert.text.tokenizer_loading import tokenizer_kind
from kerasbert.text.character_tokenizer import CharacterTokenizer
from kerasbert.text.character_tokenizer import given_token_options
from kerasbert.text.character_tokenizer import refuse_token_options
from kerasbert.text.families import ELMO_CHARACTERS

CONFIG = "config.json"
MODEL = "model.keras"
BACKBONE = "backbone.keras"
PRETRAINER = "pretrainer.keras"
METRICS = "metrics.json"
EVALUATION = "evaluation.json"
CONFUSION_MATRIX = "confusion_matrix.png"
HISTORY = "history.jsonl"
CURVE = "training_curve.png"
CHECKPOINTS = "checkpoints"
LOGS = "logs"
#: config.json's key for a model that reads no tokenizer's ids (ELMo: its
#: character input, e.g. {"type": "elmo_characters", "max_characters": 50}).
INPUT = "input"

#: The saved models a run may hold, the most complete first: a pretraining
#: run's pretrainer (encoder and heads), a fine-tuned task model, a backbone.
MODEL_FILES = (PRETRAINER, MODEL, BACKBONE)


def run_path(run_dir, name):
    """RUN/name."""
    return os.path.join(run_dir, name)


def read_config(run_dir):
    """RUN/config.json as a dict; None when there is none. A file that is
    not JSON is a UsageError naming it."""
    path = run_path(run_dir, CONFIG)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as err:
        raise UsageError(f"{path}: not readable as JSON ({err}).") from None


def write_json(run_dir, name, data):
    """Writes RUN/name (config.json, metrics.json, evaluation.json)
    atomically; returns its path."""
    path = run_path(run_dir, name)
    atomic_write_json(path, data)
    return path


def save_model(model, run_dir, name):
    """`model.save(RUN/name)` through a temporary name in the same folder;
    returns the path."""
    path = run_path(run_dir, name)
    with atomic_file(path, suffix=".keras") as tmp:
        model.save(tmp)
    return path


def save_run(run_dir, models, tokenizer=None, config=None):
    """Writes a finished run: each `{file name: Keras model}`, then the
    tokenizer's files (under their fixed names), then config.json with the
    tokenizer's description in it (config.json last: a run whose
    config.json names its files has all of them). Returns {file name: path}."""
    os.makedirs(run_dir, exist_ok=True)
    written = {name: save_model(model, run_dir, name) for name, model in models.items()}
    if tokenizer is not None:
        record = _TOKENIZER_RECORDS.get(tokenizer_kind(tokenizer), _saved_files_record)
        config = dict(config or {}, **record(tokenizer, run_dir))
    if config is not None:
        written[CONFIG] = write_json(run_dir, CONFIG, config)
    return written


def _saved_files_record(tokenizer, run_dir):
    """The tokenizer's files copied into the run; config.json's "tokenizer"
    (its description) and "vocab" (the first file; "bytes" for the byte
    tokenizer, which has none: readers of older run directories use it)."""
    description = save_tokenizer_files(tokenizer, run_dir)
    files = description["files"]
    return {"tokenizer": description, "vocab": files[0] if files else description["type"]}


#: How config.json records a tokenizer family that has no vocabulary to
#: describe (default `_saved_files_record`): ELMo's characters are the
#: model's input (`INPUT`), and no file is copied.
_TOKENIZER_RECORDS = {
    ELMO_CHARACTERS: lambda tokenizer, run_dir: {INPUT: tokenizer.describe()},
}


def reads_characters(config):
    """A run whose model reads characters, not a tokenizer's ids: its
    config.json names the input (`INPUT`) instead of a tokenizer."""
    return bool(config) and INPUT in config and "tokenizer" not in config


@dataclasses.dataclass
class Run:
    """An existing run directory and its config.json (None if it has none)."""

    directory: str
    config: dict = None

    def path(self, name):
        return run_path(self.directory, name)

    def has(self, name):
        return os.path.exists(self.path(name))

    @property
    def is_pretraining(self):
        """Written by `pretrain` (its config.json has the "pretrain" flags)."""
        return bool(self.config) and "pretrain" in self.config

    @property
    def is_generation(self):
        """A pretraining run of a causal backbone: a GPT preset, a causal
        Reformer (`kerasbert export` exports it as a text-generation model)."""
        if not self.is_pretraining:
            return False
        return (self.config.get("backbone_class") == "GptBackbone"
                or bool((self.config.get("backbone") or {}).get("causal", False)))

    def model_file(self):
        """The most complete saved model of the run (`MODEL_FILES` order)."""
        for name in MODEL_FILES:
            if os.path.isfile(self.path(name)):
                return self.path(name)
        raise UsageError(f"{self.directory}: no {', '.join(MODEL_FILES)} (not a kerasbert "
                         "pretrain, distill or finetune run).")

    def load_model(self, name=None, compile=True):
        """One of the run's models (default `model_file()`), in any process."""
        # lazy: saving imports every Keras class (TensorFlow); the commands
        # read run directories before they need a model
        from kerasbert.saving import load_model

        return load_model(self.path(name) if name else self.model_file(), compile=compile)

    def tokenizer(self, vocab=None, lower_case=None, **switches):
        """`vocab` when given; else a fine-tuning run's saved tokenizer files
        (with the settings its config.json keeps), or the vocabulary a
        pretraining run was trained with. `switches`
        (`kerasbert.text.tokenizer_loading.SWITCHES`) other than None override the
        saved settings."""
        if vocab is not None:
            return load_tokenizer(vocab, lower_case=lower_case, **switches)
        if reads_characters(self.config):
            return _character_tokenizer(self.directory, self.config[INPUT], switches)
        if self.is_pretraining and "tokenizer" not in self.config:
            return self._pretraining_tokenizer()  # written before runs kept a copy
        if self.config and ("tokenizer" in self.config or "vocab" in self.config):
            return load_saved_tokenizer(self.directory, self.config, **switches)
        raise UsageError(f"{self.directory}: no config.json naming the tokenizer; pass --vocab.")

    def _pretraining_tokenizer(self):
        vocab, lower_case = pretraining_vocab(self.directory, self.config)
        return load_tokenizer(vocab, lower_case=lower_case)


def _character_tokenizer(directory, description, switches):
    """ELMo's `CharacterTokenizer` from a run's "input"; a subword switch
    set over it is refused (it has nothing for one to change)."""
    refuse_token_options(directory, given_token_options(switches))
    return CharacterTokenizer.from_description(description)


def open_run(directory):
    """The `Run` of an existing directory."""
    if not os.path.isdir(directory):
        raise UsageError(f"{directory}: not a run directory.")
    return Run(os.fspath(directory), read_config(directory))


def open_finetuned(directory, flag="--model"):
    """The `Run` of a `kerasbert finetune` output, checked: config.json with
    the task, the model and every tokenizer file it names."""
    run = open_run(directory) if os.path.isdir(directory) else None
    if run is None or run.config is None:
        raise UsageError(f"{flag} {directory}: no {CONFIG} (not a kerasbert finetune output).")
    path = run.path(CONFIG)
    for key in ("task_type", "max_seq_length"):
        if key not in run.config:
            raise UsageError(f"{path}: missing {key!r}; re-run kerasbert finetune.")
    if ("tokenizer" not in run.config and "vocab" not in run.config
            and not reads_characters(run.config)):
        raise UsageError(f"{path}: missing 'tokenizer' (or 'vocab'); re-run kerasbert finetune.")
    files = [] if reads_characters(run.config) else saved_tokenizer_files(directory, run.config)
    for name in [run.path(MODEL)] + files:
        if not os.path.isfile(name):
            raise UsageError(f"{flag} {directory}: missing {os.path.basename(name)}.")
    return run


def file_spec(spec):
    """(kind, path) of a local-file task spec; None for a TFDS name,
    --features or anything else."""
    try:
        kind, path = parse_task_spec(spec)
    except Exception:  # noqa: BLE001 - not a spec this run can keep as a file
        return None
    return None if kind == "tfds" else (kind, path)


def portable_spec(spec, run_dir):
    """A task spec as a run keeps it: a local file's path relative to the
    run directory (read from any working directory, and still right when
    the run and its data move together); a TFDS name unchanged."""
    found = file_spec(spec) if spec else None
    if found is None:
        return spec
    kind, path = found
    return f"{kind}:{os.path.relpath(os.path.abspath(path), os.path.abspath(run_dir))}"


def located_spec(spec, run_dir):
    """`portable_spec`'s inverse: the spec with its file found from here."""
    found = file_spec(spec) if spec else None
    if found is None or os.path.isabs(found[1]):
        return spec
    kind, path = found
    return f"{kind}:{os.path.normpath(os.path.join(run_dir, path))}"


def beside(path, name):
    """RUN/name for a file inside RUN (e.g. the pretrainer.keras beside a
    --teacher backbone.keras)."""
    return os.path.join(os.path.dirname(os.path.abspath(path)), name)


# --- what a training run logs -------------------------------------------------


def read_history(run_dir):
    path = os.path.join(run_dir, HISTORY)
    if not os.path.exists(path):
        return []
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    break  # a line cut by a kill: everything after it is lost anyway
    return rows


class History:
    """Appends logged rows to RUN/history.jsonl; on resume, rows after the
    restored step are dropped (they will be logged again)."""

    def __init__(self, run_dir, resume_step=0, enabled=True):
        self.path = os.path.join(run_dir, HISTORY)
        self.enabled = enabled
        if not enabled:
            return
        rows = [r for r in read_history(run_dir) if r["step"] <= resume_step]
        atomic_write_text(self.path, "".join(json.dumps(r) + "\n" for r in rows))

    def append(self, row):
        if self.enabled:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
                f.flush()


class TensorBoardLog:
    """Scalars under RUN/logs/train (chief only)."""

    def __init__(self, run_dir, enabled=True):
        self.writer = None
        if enabled:
            import tensorflow as tf  # lazy: tensorflow (config checks stay light)

            self.writer = tf.summary.create_file_writer(os.path.join(run_dir, LOGS, "train"))

    def write(self, step, scalars):
        if self.writer is None:
            return
        import tensorflow as tf  # lazy: tensorflow

        with self.writer.as_default(step=step):
            for name, value in scalars.items():
                tf.summary.scalar(name, value)
        self.writer.flush()

    def close(self):
        if self.writer is not None:
            self.writer.close()


def plot_training_curve(run_dir):
    """RUN/training_curve.png from history.jsonl: loss (left) and masked-LM
    accuracy (right) against the step. Returns the path or None."""
    rows = [r for r in read_history(run_dir) if "loss" in r]  # not the resume notes
    if not rows:
        return None
    steps = [r["step"] for r in rows]
    fig = new_figure(figsize=(10, 3.6))
    ax_loss, ax_acc = fig.subplots(1, 2)
    ax_loss.plot(steps, [r["loss"] for r in rows], label="total")
    # Each pretrainer logs its own terms (masked LM; the causal LM's lm_*).
    for key, label in (("mlm_loss", "masked LM"), ("lm_loss", "next token")):
        if key in rows[0]:
            ax_loss.plot(steps, [r[key] for r in rows], label=label)
    if "sentence_loss" in rows[0]:
        ax_loss.plot(steps, [r["sentence_loss"] for r in rows], label="sentence")
    ax_loss.set(xlabel="step", ylabel="loss", title="Training loss")
    ax_loss.legend()
    for key, label in (("mlm_accuracy", "masked LM"), ("lm_accuracy", "next token")):
        if key in rows[0]:
            ax_acc.plot(steps, [r[key] for r in rows], label=label)
    if "sentence_accuracy" in rows[0]:
        ax_acc.plot(steps, [r["sentence_accuracy"] for r in rows], label="sentence")
    ax_acc.set(xlabel="step", ylabel="accuracy", title="Accuracy", ylim=(0, 1))
    ax_acc.legend()
    for ax in (ax_loss, ax_acc):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path = os.path.join(run_dir, CURVE)
    save_figure_atomically(fig, path)
    return path


def default_vocab(preset=None, backbone=None, init_checkpoint=None):
    """Where the tokenizer is when --vocab is not given: the model's own
    source (a hub handle or model directory, the run directory of a saved
    backbone, a google-research/bert directory). A built-in preset is an
    architecture without a tokenizer: --vocab is required."""
    for source in (preset, init_checkpoint):
        if source and (handles.is_remote(source) or os.path.isdir(source)):
            return source
    if backbone:
        folder = backbone if os.path.isdir(backbone) else os.path.dirname(os.path.abspath(backbone))
        if os.path.isfile(run_path(folder, CONFIG)):
            return folder
    raise UsageError("Give --vocab: the tokenizer files of the backbone (a built-in preset "
                     "is an architecture without a tokenizer; a hub handle or model "
                     "directory brings its own).")
