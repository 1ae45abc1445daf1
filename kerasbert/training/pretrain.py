"""`run_pretraining(config)`: the whole pretraining run behind
`kerasbert pretrain`.

    metadata.json check -> strategy -> backbone + BertPretrainer + optimizer
    (in the strategy's scope) -> host tf.data iterator -> resume or init ->
    TrainStep loop (progress, TensorBoard, history, checkpoints) -> final
    checkpoint, backbone.keras, pretrainer.keras, training_curve.png

Each arrow is a step of `PretrainingRun`; the steps `kerasbert distill`
shares are in run_setup.py, the model in pretrain_model.py, the --resume
checks in resume_checks.py.

Run directory:
    RUN/config.json          this config, the backbone config, data metadata
    RUN/checkpoints/         ckpt-<step>.* (step-exact resume, see checkpoints.py)
    RUN/logs/train/          TensorBoard
    RUN/history.jsonl        logged metrics
    RUN/backbone.keras       final backbone
    RUN/pretrainer.keras     final backbone + heads
    RUN/training_curve.png   loss and masked-LM accuracy
"""

import dataclasses
import math
import os
import sys
import time

import keras
import tensorflow as tf

from kerasbert import runs
from kerasbert.data import reader
from kerasbert.errors import UsageError
from kerasbert.models.presets import family_of
from kerasbert.optimizers.recipes import pretraining_masked_lm_prob
from kerasbert.text.families import added_special_count
from kerasbert.text.tokenizer_paths import read_vocabulary
from kerasbert.text.tokenizer_loading import load_tokenizer
from kerasbert.training.checkpoints import TrainingCheckpoint
from kerasbert.training.loop import data_errors_as_usage_errors
from kerasbert.training.loop import progress_verbosity
from kerasbert.training.loop import TrainStep
from kerasbert.training.pretrain_model import OBJECTIVES_BY_DATA
from kerasbert.training.pretrain_model import build_backbone
from kerasbert.training.pretrain_model import init_weights_from
from kerasbert.training.pretrain_model import make_pretrainer
from kerasbert.training.resume_checks import check_run_dir
from kerasbert.training.resume_checks import check_same_architecture
from kerasbert.training.resume_checks import previous_config
from kerasbert.training.resume_checks import resume_changes
from kerasbert.training.resume_checks import saved_input
from kerasbert.training.run_setup import data_description
from kerasbert.training.run_setup import dummy_batch
from kerasbert.training.run_setup import log_row
from kerasbert.training.run_setup import pretraining_batches
from kerasbert.training.run_setup import run_optimizer
from kerasbert.training.run_setup import save_outputs
from kerasbert.training.run_setup import start_strategy
from kerasbert.training.strategies import worker_info


def run_pretraining(config):
    """Runs (or resumes) a pretraining run; returns a dict of results:
    final step, last logged metrics, output paths."""
    return PretrainingRun(config).run()


class PretrainingRun:
    """One `kerasbert pretrain` invocation, step by step: `__init__` checks
    the options and the data and starts the strategy; `run` builds the
    model, restores or initialises it, opens the input at the right
    position, writes config.json, trains and saves.

    Args:
        config: a `PretrainConfig` (validated here).
    """

    def __init__(self, config):
        config.validate()
        self.config = config
        (self.meta, self.sequence_length, self.num_predictions, self.objective,
         stored_masks) = data_description(config)
        self.objectives = OBJECTIVES_BY_DATA[self.objective]
        self.dynamic = config.dynamic_masking or not stored_masks
        if config.masked_lm_prob is not None and not self.dynamic:
            raise UsageError(f"--masked-lm-prob {config.masked_lm_prob} applies to dynamic "
                             "masking: this data stores its masks (add --dynamic-masking, or "
                             "write the data with --no-masking).")
        self.strategy = start_strategy(config)
        keras.mixed_precision.set_dtype_policy(config.precision)
        self.is_chief, self.worker_index, self.num_workers = worker_info(self.strategy)
        self.ckpt_dir = check_run_dir(config)
        self.previous = previous_config(config, self.ckpt_dir)
        # The shards, as a resume recognises them wherever they lie.
        self.shards = reader.describe_shards(reader.expand_files(config.data))

    def run(self):
        """The whole run; returns {step, metrics, outputs, is_chief}."""
        self.build_model()
        check_same_architecture(self.previous, self.backbone, self.objectives,
                                self.config.output_dir)
        # Weights, optimizer and step first; the input position after, into a
        # pipeline built for it. The checkpoint holds the chief's input
        # position only (other workers' checkpoints go to temporary folders);
        # on resume the other workers skip the batches they consumed instead,
        # which is exact with --deterministic.
        self.checkpoint = TrainingCheckpoint(
            self.ckpt_dir, model=self.pretrainer, optimizer=self.optimizer, step=self.step,
            is_chief=self.is_chief, max_to_keep=self.config.keep_checkpoints)
        started_from, start_step = self.restore_or_init()
        restart, changes = self.open_input(started_from, start_step)
        if self.is_chief:
            self.write_config()
        last = self.train(start_step, restart, changes)
        outputs = {}
        if self.is_chief:
            outputs = save_outputs(self.config.output_dir, self.backbone, self.pretrainer)
            outputs["checkpoints"] = self.ckpt_dir
        return {"step": int(self.step.numpy()), "metrics": last, "outputs": outputs,
                "is_chief": self.is_chief}

    # --- the model ------------------------------------------------------------

    def build_model(self):
        """The tokenizer, backbone, pretrainer, optimizer and step counter,
        made in the strategy's scope."""
        config = self.config
        kind, files, tokens = read_vocabulary(config.vocab)
        self.vocab_size = len(tokens)
        # The run keeps a copy of its tokenizer (write_config): it is usable
        # from any directory, whatever path --vocab was given as.
        self.tokenizer = load_tokenizer(config.vocab,
                                        lower_case=(self.meta or {}).get("lower_case"))
        with self.strategy.scope():
            self.backbone = build_backbone(config, self.vocab_size, self.sequence_length,
                                           added_tokens=added_special_count(kind, files, tokens))
            self.pretrainer = make_pretrainer(self.backbone, self.objectives, tokens,
                                              self.tokenizer)
            # A causal LM reads the tokens unmasked: no masks drawn or stored.
            self.masked_lm = getattr(self.pretrainer, "needs_masked_lm", True)
            if not self.masked_lm and (config.dynamic_masking or config.whole_word_mask):
                raise UsageError(f"--dynamic-masking / --whole-word-mask do not apply to "
                                 f"{config.preset}: it predicts every next token, unmasked.")
            self.dynamic = self.dynamic and self.masked_lm
            # The share dynamic masking chooses: --masked-lm-prob, else the family's.
            self.masked_lm_prob = (config.masked_lm_prob or
                                   pretraining_masked_lm_prob(family_of(type(self.backbone))))
            self._warn_of_a_capped_rate()
            self.pretrainer(dummy_batch(self.sequence_length, self.num_predictions,
                                        len(self.objectives) > 1))
            # The training step clips the all-reduced gradient and
            # accumulates micro-batches itself.
            self.optimizer = run_optimizer(config, clipnorm=None, accumulation_steps=1)
            if config.precision == "mixed_float16":
                self.optimizer = keras.optimizers.LossScaleOptimizer(self.optimizer)
            self.optimizer.build(self.pretrainer.trainable_variables)
            self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")

    def _warn_of_a_capped_rate(self):
        """A warning when the data's max_predictions_per_seq holds fewer
        masks than the rate chooses in a full row (ModernBERT's 30% of 126
        tokens is 38; the default 20 would quietly mask 16%)."""
        wanted = round(self.masked_lm_prob * (self.sequence_length - 2))
        if self.dynamic and self.is_chief and wanted > self.num_predictions:
            print(f"warning: the data's max_predictions_per_seq {self.num_predictions} caps "
                  f"dynamic masking at {self.num_predictions} of a full row's "
                  f"{self.sequence_length - 2} tokens, not {self.masked_lm_prob:g} ({wanted}); "
                  f"write the data with --max-predictions-per-seq {wanted} for the full rate.",
                  file=sys.stderr, flush=True)

    def restore_or_init(self):
        """(what the run started from or None, the step it starts at):
        the latest checkpoint with --resume, another run's weights with
        --init-from."""
        config = self.config
        started_from = None
        if config.resume:
            started_from = self.checkpoint.restore_latest()
        elif config.init_from:
            started_from = init_weights_from(config.init_from, self.pretrainer)
        if started_from and self.is_chief:
            print(f"{'Resumed' if config.resume else 'Initialised'} from {started_from}")
        start_step = int(self.step.numpy())
        if config.resume and start_step > config.steps:
            raise UsageError(f"--resume: {config.output_dir} is already at step {start_step}, "
                             f"past --steps {config.steps}: nothing to train (--steps counts "
                             f"from the run's start; give more than {start_step} to train "
                             "further).")
        return started_from, start_step

    # --- the input --------------------------------------------------------------

    def make_dataset(self, seed):
        """This worker's pretraining batches, shuffled by `seed`."""
        context = tf.distribute.InputContext(num_input_pipelines=self.num_workers,
                                             input_pipeline_id=self.worker_index,
                                             num_replicas_in_sync=self.num_workers)
        return pretraining_batches(
            self.config, self.sequence_length, self.num_predictions, dynamic=self.dynamic,
            seed=seed, input_context=context, masked_lm=self.masked_lm,
            vocab_size=self.vocab_size, whole_word_mask=self.config.whole_word_mask,
            masked_lm_prob=self.masked_lm_prob)

    def open_input(self, started_from, start_step):
        """Sets `self.iterator` (and the data's seed and first step) and
        returns (why the input restarts or None, the input changes).

        The data's seed and the step it started at are kept across exact
        resumes; a resume that cannot continue the saved input position
        starts the data over, on a new shuffle (seed + step). What the saved
        position belongs to is read from the restored checkpoint's manifest
        (config.json may already describe a later, killed invocation)."""
        config = self.config
        resumed = bool(config.resume and started_from)
        saved = saved_input(started_from, self.previous) if resumed else None
        changes = resume_changes(saved, config, self.sequence_length, self.num_predictions,
                                 self.shards, self.num_workers)
        self.data_seed, self.data_start_step = config.seed, 0
        restart = None
        if resumed and changes:
            restart = ", ".join(f"{k} {old} -> {new}" for k, (old, new) in changes.items())
        elif resumed:
            restart = self._continue_input(started_from, start_step, saved)
        if restart is not None:
            self.data_seed, self.data_start_step = config.seed + start_step, start_step
            if self.is_chief:
                print(f"warning: --resume at step {start_step}: {restart}; the data starts "
                      f"over on a new shuffle (seed {self.data_seed}); recorded in "
                      "history.jsonl.", file=sys.stderr, flush=True)
        if restart is not None or not resumed:
            self.iterator = iter(self.make_dataset(self.data_seed))
        if self.is_chief:
            self.checkpoint.attach_iterator(self.iterator)
        self.checkpoint.info = {
            "batch_size": config.batch_size, "max_seq_length": self.sequence_length,
            "max_predictions_per_seq": self.num_predictions, "workers": self.num_workers,
            "shards": self.shards, "seed": self.data_seed, "start_step": self.data_start_step}
        return restart, changes

    def _continue_input(self, started_from, start_step, saved):
        """Sets `self.iterator` at the saved input position: restored from
        the checkpoint on the chief, skipped to on the other workers.
        Returns why that position does not fit, or None."""
        if saved and saved.get("seed") is not None:
            self.data_seed, self.data_start_step = saved["seed"], saved.get("start_step") or 0
        dataset = self.make_dataset(self.data_seed)
        if not self.is_chief:
            self.iterator = iter(dataset.skip((start_step - self.data_start_step)
                                              * self.config.accumulation_steps))
            return None
        self.iterator = iter(dataset)
        problem = self.checkpoint.restore_iterator(started_from, self.iterator)
        if problem:
            return (f"the input position saved in {os.path.basename(started_from)} "
                    f"does not fit this input pipeline ({problem})")
        return None

    def write_config(self):
        """RUN/config.json (this config, the model, the data and the
        strategy) and the run's copy of the tokenizer."""
        config, strategy = self.config, self.strategy
        runs.save_run(config.output_dir, {}, tokenizer=self.tokenizer, config={
            "pretrain": dataclasses.asdict(config),
            "objectives": list(self.objectives),
            "warmup_steps": config.warmup(),
            "optimizer": type(self.optimizer).__name__,
            "dynamic_masking": self.dynamic,
            "masked_lm_prob": self.masked_lm_prob if self.dynamic else None,
            "backbone_class": type(self.backbone).__name__,
            "backbone": self.backbone.get_config(),
            "data": {"max_seq_length": self.sequence_length,
                     "max_predictions_per_seq": self.num_predictions,
                     "objective": self.objective, "metadata": self.meta,
                     "shards": self.shards, "seed": self.data_seed,
                     "start_step": self.data_start_step},
            "strategy": {"name": config.strategy, "class": type(strategy).__name__,
                         "replicas": strategy.num_replicas_in_sync,
                         "workers": self.num_workers},
        })

    # --- training ---------------------------------------------------------------

    def train(self, start_step, restart, changes):
        """The step loop up to --steps, with progress, logs and checkpoints;
        returns the last logged metrics row."""
        config = self.config
        train_step = TrainStep(self.strategy, self.pretrainer, self.optimizer,
                               accumulation_steps=config.accumulation_steps,
                               clipnorm=config.clipnorm, jit_compile=config.jit_compile)
        self.history = runs.History(config.output_dir, start_step, enabled=self.is_chief)
        if restart is not None:
            # Not a metrics row: a note of what changed at which step.
            self.history.append({"step": start_step, "event": "resume",
                                 "changed": {k: {"run": old, "given": new}
                                             for k, (old, new) in changes.items()},
                                 "data": "restarted", "reason": restart,
                                 "data_seed": self.data_seed})
        self.tensorboard = runs.TensorBoardLog(config.output_dir, enabled=self.is_chief)
        self.verbosity = progress_verbosity(self.is_chief and config.progress)
        bar = _progress_bar(config.steps, start_step, self.verbosity == 1)
        try:
            last = self._step_loop(train_step, bar)
            if int(self.step.numpy()) > start_step:
                self.checkpoint.save()
        finally:
            if bar is not None:
                bar.close()
            self.tensorboard.close()
            self.checkpoint.close()
        return last

    def _step_loop(self, train_step, bar):
        config = self.config
        last, window, window_start = {}, [], time.perf_counter()
        while int(self.step.numpy()) < config.steps:
            # A corrupt record, an out-of-range id or a pass that reads nothing
            # reaches the loop as a TensorFlow op error: the user gets one
            # line, `FILE record N: cause` (exit 2), not a traceback.
            with data_errors_as_usage_errors():
                sums = train_step.step(self.iterator)
            self.step.assign_add(1)
            step = int(self.step.numpy())
            metrics = self.pretrainer.summarize_terms({k: v.numpy() for k, v in sums.items()})
            if not math.isfinite(metrics["loss"]):
                raise FloatingPointError(
                    f"Non-finite loss ({metrics['loss']}) at step {step}: stopping. "
                    "Lower --learning-rate, check the data, or use --precision "
                    "mixed_bfloat16 / float32.")
            window.append(metrics)
            if step % config.log_every == 0 or step == config.steps:
                last = self._log_window(step, window, time.perf_counter() - window_start)
                window, window_start = [], time.perf_counter()
            if bar is not None:
                bar.update(1)
                bar.set_postfix(**{label: f"{metrics[name]:.3f}" for label, name
                                   in self.pretrainer.progress_metrics.items()},
                                seq_s=f"{last.get('sequences_per_second', 0.0):.1f}")
            if step % config.checkpoint_every == 0 and step < config.steps:
                self.checkpoint.save()
        return last

    def _log_window(self, step, window, elapsed):
        """One metrics row: the window's means, logged and (without a bar)
        printed."""
        sequences = len(window) * self.config.batch_size * self.config.accumulation_steps
        row = log_row({k: sum(m[k] for m in window) / len(window) for k in window[0]}, step,
                      self.optimizer, sequences, elapsed, self.history, self.tensorboard)
        if self.verbosity == 2:  # stdout is a file: one line per logged step, no bar
            print(f"step {step}/{self.config.steps}: " + ", ".join(
                f"{label} {row[name]:.3f}" for label, name
                in self.pretrainer.progress_metrics.items() if name in row)
                + f", {row['sequences_per_second']:.1f} seq/s", flush=True)
        return row


def _progress_bar(total, initial, enabled):
    if not enabled:
        return None
    from tqdm.auto import tqdm  # lazy: only for a terminal

    return tqdm(total=total, initial=initial, unit="step", dynamic_ncols=True,
                desc="pretrain", file=sys.stdout)
