"""The options of a pretraining, fine-tuning or distillation run: one
dataclass per command (fields = the CLI flags, same names), checked by
`validate()` in plain Python, so a mistyped flag is refused before
TensorFlow loads. The runs themselves: pretrain.py, finetune.py, distill.py.
"""

import dataclasses
import json
import math
import os
import zipfile

from kerasbert.sources import handles
from kerasbert.sources.source import elmo_files
from kerasbert import runs
from kerasbert.convert.bert_config import bert_config_to_kwargs
from kerasbert.errors import UsageError
from kerasbert.io_utils import check_output_kind
from kerasbert.optimizers.hyperparameters import check_finite
from kerasbert.optimizers.hyperparameters import check_learning_rate
from kerasbert.text.tokenizer_paths import resolve_tokenizer_path
from kerasbert.training.strategy_checks import check_strategy
from kerasbert.optimizers.recipes import get_recipe

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
#: batch padding modes (`kerasbert.data.finetuning.padding.PADDING_MODES`).
PADDINGS = ("longest", "max_length")



@dataclasses.dataclass(kw_only=True)
class LanguageModelRunOptions:
    """The options `kerasbert pretrain` and `kerasbert distill` share (the
    CLI flags, same names): batches, the optimizer and its schedule, the
    strategy, precision, logging, seeds and the data's shapes. Each field
    and its check is stated here once; a subclass adds its own fields and
    checks (`_validate_own`) and the counts that must be >= 1
    (`_positive_counts`).

    Keyword-only, so the subclasses keep their required fields (`preset`,
    `steps`, ...) first and positional, and a config.json "pretrain" /
    "distill" entry written by any earlier run loads as `Config(**entry)`.
    """

    batch_size: int = 32
    learning_rate: float = 1e-4
    warmup_steps: int = None  # None: 10% of steps (BERT used 10k of 1M)
    end_learning_rate: float = 0.0
    power: float = 1.0
    optimizer: str = "adamw"
    weight_decay: float = 0.01
    clipnorm: float = 1.0
    strategy: str = "auto"
    tpu: str = None
    logical_cpus: int = 0
    precision: str = "float32"
    log_every: int = 10
    seed: int = 12345
    deterministic: bool = False
    dynamic_masking: bool = False
    sequence_length: int = None
    max_predictions_per_seq: int = None
    overrides: dict = dataclasses.field(default_factory=dict)
    progress: bool = True  # progress bar (pretrain) / lines (distill) on the chief

    #: the options that count something and must be >= 1.
    _positive_counts = ("steps", "batch_size", "log_every")

    def validate(self):
        """UsageError naming the first bad option (no TensorFlow needed)."""
        for name in self._positive_counts:
            if getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be >= 1, "
                                 f"got {getattr(self, name)}.")
        check_learning_rate(self.learning_rate)
        check_finite("--end-learning-rate", self.end_learning_rate, low_inclusive=True)
        check_finite("--weight-decay", self.weight_decay, low_inclusive=True)
        if self.warmup_steps is not None and not 0 <= self.warmup_steps <= self.steps:
            raise UsageError(f"--warmup-steps {self.warmup_steps} must be in "
                             f"[0, --steps {self.steps}].")
        if self.precision not in PRECISIONS:
            raise UsageError(f"--precision {self.precision!r}: expected one of {PRECISIONS}.")
        self._validate_own()
        check_strategy(self.strategy, self.tpu)  # no TPU, no TF_CONFIG: one line, at once

    def _validate_own(self):
        """The subclass's own checks, run before the strategy's."""

    def warmup(self):
        """The warm-up length in updates: --warmup-steps, else 10% of --steps."""
        return self.warmup_steps if self.warmup_steps is not None else self.steps // 10


@dataclasses.dataclass
class PretrainConfig(LanguageModelRunOptions):
    """Every `kerasbert pretrain` option (the CLI flags, same names); the
    shared ones are `LanguageModelRunOptions`'.

    Example:

    >>> from kerasbert.training import PretrainConfig
    >>> config = PretrainConfig(preset="bert_tiny", vocab="vocab.txt", data="data/*.tfrecord",
    ...                         output_dir="run", steps=0)
    >>> config.batch_size, config.learning_rate              # the CLI's defaults
    (32, 0.0001)
    >>> config.validate()                                    # checked before TensorFlow loads
    Traceback (most recent call last):
    ...
    kerasbert.errors.UsageError: --steps must be >= 1, got 0.
    """

    preset: str
    vocab: str
    data: str
    output_dir: str
    steps: int
    accumulation_steps: int = 1
    jit_compile: bool = False
    checkpoint_every: int = 1000
    keep_checkpoints: int = 3
    resume: bool = False
    init_from: str = None
    whole_word_mask: bool = False
    masked_lm_prob: float = None  # None: the family's (recipes.pretraining_masked_lm_prob)

    _positive_counts = ("steps", "batch_size", "accumulation_steps", "checkpoint_every",
                        "log_every", "keep_checkpoints")

    def _validate_own(self):
        if self.masked_lm_prob is not None and not 0.0 < self.masked_lm_prob <= 1.0:
            raise UsageError(f"--masked-lm-prob {self.masked_lm_prob}: must be in (0, 1].")
        if self.resume and self.init_from:
            raise UsageError("--resume and --init-from exclude each other (resume continues this "
                             "run; init-from starts a new run from another one's weights).")

    def validate(self):
        super().validate()
        resolve_tokenizer_path(self.vocab)  # names a missing file


def reads_characters(handle):
    """Whether a --preset/--backbone handle is an ELMo biLM, which reads
    characters and needs no --vocab: an ELMo preset (the registry is not
    loaded yet: its names start with "elmo_") or a directory of its
    options.json + weights.hdf5, or a `kerasbert pretrain` run of one.
    `run_finetuning` checks the loaded model."""
    handle = os.fspath(handle) if handle else ""
    if handle.startswith("elmo_") or (os.path.isdir(handle) and bool(elmo_files(handle))):
        return True
    # A `kerasbert pretrain` run of one (its directory or its .keras files).
    folder = handle if os.path.isdir(handle) else os.path.dirname(handle)
    config = runs.read_config(folder) if handle and os.path.isdir(folder) else None
    if bool(config) and config.get("backbone_class") == "ElmoBackbone":
        return True
    return _keras_archive_class(handle) == "ElmoBackbone"


def _keras_archive_class(path):
    """The top class name a `.keras` archive's config.json states (read from
    the zip without Keras), or None for anything else or a damaged file:
    loading reports those."""
    if not (path.endswith(".keras") and os.path.isfile(path)):
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            info = archive.getinfo("config.json")
            if info.file_size > (64 << 20):
                return None
            return json.loads(archive.read(info)).get("class_name")
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None


@dataclasses.dataclass
class FinetuneConfig:
    """Every `kerasbert finetune` option (CLI flags, same names)."""

    task: str  # None only with `features`
    output_dir: str
    vocab: str = None
    backbone: str = None
    preset: str = None
    init_checkpoint: str = None
    bert_config: str = None
    task_type: str = None
    columns: dict = dataclasses.field(default_factory=dict)
    validation: str = None
    features: str = None
    # None: the recipe's value (`recipe`, else the model's size default:
    # kerasbert.optimizers.recipes), resolved once the backbone is loaded.
    epochs: int = None
    batch_size: int = None
    learning_rate: float = None
    warmup_ratio: float = None
    layerwise_lr_decay: float = None
    weight_decay: float = None
    recipe: str = None
    early_stopping: int = None  # epochs without a better dev metric before stopping
    sequence_length: int = None
    # text2text: the target's packed length T (with [start] / [end]) and the
    # longest generation; None: the source's (--max-seq-length).
    target_length: int = None
    doc_stride: int = 128
    max_query_length: int = 64
    max_answer_length: int = 30
    null_score_diff_threshold: float = 0.0
    lower_case: bool = None  # None: the tokenizer source's casing (else uncased)
    # None: off (text is text); True: special-token strings are matched (special_strings)
    special_tokens_in_strings: bool = None
    truncate_at_nul: bool = None  # None: off (no text is dropped); True: as keras-hub
    exact_unigram: bool = None  # None: off (the op's Viterbi); True: the library's ids
    dropout: float = 0.1
    # The feature-based use: the backbone's weights stay as loaded, only the
    # head trains (ELMo: and its scalar mix).
    freeze_backbone: bool = False
    lm_weight: float = 0.5  # GPT: weight of the auxiliary LM loss (GPT-1: 0.5)
    # The model's dtype policy: float32, or mixed_bfloat16 (bfloat16 matrix
    # products; float32 weights, optimizer state, softmax, LayerNorm, loss and
    # residual stream).
    precision: str = "float32"
    # Each batch padded to its longest row ("longest") or to the full
    # --max-seq-length ("max_length"); --bucket-by-length groups similar lengths.
    padding: str = "longest"
    bucket_by_length: bool = False
    strategy: str = "auto"
    logical_cpus: int = 0
    seed: int = 12345
    progress: bool = True
    overwrite: bool = False  # replace a model already in output_dir

    def validate(self):
        if not self.task and not self.features:
            raise UsageError("Give --task SPEC (or --features DIR from create-finetuning-data).")
        if not self.task:
            self.task = f"features:{self.features}"
        check_finite("--lm-weight", self.lm_weight, low_inclusive=True)
        if self.precision not in PRECISIONS:
            raise UsageError(f"--precision {self.precision!r}: expected one of {PRECISIONS}.")
        if self.padding not in PADDINGS:
            raise UsageError(f"--padding {self.padding!r}: expected one of {PADDINGS}.")
        check_strategy(self.strategy)  # no TPU, no TF_CONFIG: one line, at once
        for name in ("epochs", "batch_size", "early_stopping"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be >= 1, got {value}.")
        if self.learning_rate is not None:
            check_learning_rate(self.learning_rate)
        if self.weight_decay is not None:
            check_finite("--weight-decay", self.weight_decay, low_inclusive=True)
        if self.warmup_ratio is not None and not 0.0 <= self.warmup_ratio <= 1.0:
            raise UsageError(f"--warmup-ratio must be in [0, 1], got {self.warmup_ratio}.")
        if self.recipe is not None:
            get_recipe(self.recipe)  # an unknown name lists the known ones
        if self.target_length is not None:
            if self.target_length < 2:
                raise UsageError(f"--max-target-length must be at least 2 (a piece and [end]), "
                                 f"got {self.target_length}.")
            if self.features:
                raise UsageError("--max-target-length applies to raw text (--task): --features "
                                 "store each target at the source's length.")
        if self.layerwise_lr_decay is not None and not 0.0 < self.layerwise_lr_decay <= 1.0:
            raise UsageError(f"--layerwise-lr-decay must be in (0, 1], got {self.layerwise_lr_decay}.")
        if self.backbone and self.preset:
            raise UsageError("Give one of --backbone RUN/backbone.keras or --preset NAME_OR_HANDLE.")
        if not (self.backbone or self.preset or self.init_checkpoint):
            raise UsageError("Give --preset NAME_OR_HANDLE or --backbone RUN/backbone.keras.")
        if self.vocab is None and not reads_characters(self.preset or self.backbone):
            self.vocab = runs.default_vocab(self.preset, self.backbone, self.init_checkpoint)
        if self.vocab is None and self.features:
            raise UsageError("--features are token ids; an ELMo model reads the text itself: "
                             "give --task.")
        if self.bert_config:  # an architecture that cannot be built: refused before any work
            try:
                bert_config_to_kwargs(self.bert_config)
            except (FileNotFoundError, ValueError) as err:
                raise UsageError(f"--bert-config {err}") from None
        if (self.vocab is not None and not handles.is_remote(self.vocab)
                and not os.path.isdir(self.vocab)):
            resolve_tokenizer_path(self.vocab)  # UsageError naming a missing file
        self.check_output_dir()

    def check_output_dir(self):
        """A finished fine-tuning run is never replaced silently."""
        check_output_kind(self.output_dir, "folder", "--output-dir")
        if os.path.exists(runs.run_path(self.output_dir, runs.MODEL)) and not self.overwrite:
            raise UsageError(f"--output-dir {self.output_dir} already holds a fine-tuned model "
                             "(model.keras); pass --overwrite to replace it, or pick another "
                             "folder.")


@dataclasses.dataclass
class DistillConfig(LanguageModelRunOptions):
    """Every `kerasbert distill` option (the CLI flags, same names); the
    shared ones are `LanguageModelRunOptions`'."""

    teacher: str
    preset: str
    vocab: str
    data: str
    output_dir: str
    steps: int
    teacher_pretrainer: str = None
    teacher_layers: list = None  # None: 0, 2, 4, ...
    temperature: float = 2.0
    alpha_ce: float = 5.0
    alpha_mlm: float = 2.0
    alpha_cos: float = 1.0
    learning_rate: float = dataclasses.field(default=5e-4, kw_only=True)  # DistilBERT's

    def _validate_own(self):
        check_finite("--temperature", self.temperature)
        alphas = (self.alpha_ce, self.alpha_mlm, self.alpha_cos)
        if not all(math.isfinite(a) for a in alphas) or min(alphas) < 0 or max(alphas) == 0:
            raise UsageError(f"--alpha-ce/--alpha-mlm/--alpha-cos must be >= 0 and not "
                             f"all 0, got {alphas}.")
        if self.strategy == "multi_worker":
            raise UsageError("kerasbert distill trains with model.fit, which Keras 3 cannot "
                             "drive under MultiWorkerMirroredStrategy; use auto, cpu, "
                             "mirrored or tpu.")

    def validate(self):
        super().validate()
        for flag, path in (("--vocab", self.vocab), ("--teacher", self.teacher),
                           ("--teacher-pretrainer", self.teacher_pretrainer)):
            if flag == "--teacher" and (handles.is_remote(path) or os.path.isdir(path)):
                continue  # a handle: loading it says what is wrong with it
            if path is not None and not os.path.isfile(path):
                raise UsageError(f"{flag} file not found: {path}")
