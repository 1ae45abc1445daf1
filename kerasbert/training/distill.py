"""`run_distillation(config)`: the distillation run behind `kerasbert distill`.

    metadata.json check -> strategy -> (in its scope) frozen teacher
    pretrainer loaded from a pretraining run, student from a preset with
    the teacher's embeddings and every other layer, Distiller + optimizer
    -> `model.fit` on pretraining batches -> backbone.keras, pretrainer.keras

The data, backbone, strategy, optimizer and saving steps are `kerasbert pretrain`'s
(kerasbert.training.run_setup, pretrain_model). Training uses
`model.fit` (the Distiller computes its own loss with replica-exact
denominators), so every strategy `fit` supports works: the CPU, one or
several GPUs (mirrored, also over logical CPUs), TPU; not multi-worker
(DESIGN §6).

Run directory:
    RUN/config.json          this config, teacher and student configs, data
    RUN/logs/train/          TensorBoard
    RUN/history.jsonl        logged metrics (loss, ce_loss, mlm_loss,
                             cos_loss, mlm_accuracy, teacher_agreement)
    RUN/backbone.keras       the student backbone
    RUN/pretrainer.keras     the student backbone + masked-LM head
    RUN/training_curve.png   loss and masked-LM accuracy
"""

import dataclasses
import math
import os
import time

import keras

from kerasbert.errors import UsageError
from kerasbert import runs
from kerasbert.saving import load_model
from kerasbert.tasks import BertPretrainer
from kerasbert.tasks.distiller import Distiller
from kerasbert.tasks.distiller import init_student_from_teacher
from kerasbert.loading.masked_lm import load_masked_lm_from_handle
from kerasbert.text.vocabulary import load_vocab
from kerasbert.training.loop import data_errors_as_usage_errors
from kerasbert.training.pretrain_model import build_backbone
from kerasbert.training.run_setup import data_description
from kerasbert.training.run_setup import dummy_batch
from kerasbert.training.run_setup import log_row
from kerasbert.training.run_setup import pretraining_batches
from kerasbert.training.run_setup import run_optimizer
from kerasbert.training.run_setup import save_outputs
from kerasbert.training.run_setup import start_strategy


# --- teacher ----------------------------------------------------------------


def _load(path, flag):
    try:
        return load_model(path)
    except UsageError as err:
        raise UsageError(f"{flag} {err}") from None


def load_teacher(teacher, teacher_pretrainer=None):
    """The frozen teacher pretrainer (backbone + masked-LM head).

    `teacher` is a backbone .keras file (RUN/backbone.keras), a
    pretrainer .keras file, or a handle with a masked-LM head (hf://...,
    a Hugging Face masked-LM directory, a pretraining run). The masked-LM head comes from
    `teacher_pretrainer`, else from the pretrainer.keras beside `teacher`;
    the backbone weights are always `teacher`'s.
    """
    if not (os.path.isfile(teacher) and teacher.endswith(".keras")):
        # A handle (hf://..., a Hugging Face masked-LM directory, a
        # pretraining run): its own masked-LM head gives the soft targets.
        if teacher_pretrainer is not None:
            raise UsageError("--teacher-pretrainer goes with a --teacher .keras backbone; a "
                             f"--teacher handle ({teacher}) brings its own masked-LM head.")
        try:
            return load_masked_lm_from_handle(teacher)
        except UsageError as err:
            raise UsageError(f"--teacher {err}") from None
    model = _load(teacher, "--teacher")
    if hasattr(model, "masked_lm_head") and teacher_pretrainer is None:
        return model
    backbone = getattr(model, "backbone", model)
    if teacher_pretrainer is None:
        teacher_pretrainer = runs.beside(teacher, runs.PRETRAINER)
        if not os.path.isfile(teacher_pretrainer):
            raise UsageError(
                f"--teacher {teacher} is a backbone without a masked-LM head, and "
                f"{teacher_pretrainer} does not exist: pass --teacher-pretrainer "
                "RUN/pretrainer.keras (the soft targets come from the teacher's head).")
    pretrainer = _load(teacher_pretrainer, "--teacher-pretrainer")
    if not hasattr(pretrainer, "masked_lm_head"):
        raise UsageError(f"--teacher-pretrainer {teacher_pretrainer} has no masked-LM head "
                         f"(it is a {type(pretrainer).__name__}).")
    if backbone is not pretrainer.backbone:
        try:
            pretrainer.backbone.set_weights(backbone.get_weights())
        except ValueError as err:
            raise UsageError(f"--teacher {teacher} does not fit the backbone of "
                             f"--teacher-pretrainer {teacher_pretrainer} ({err}).") from None
    return pretrainer


# --- the run ----------------------------------------------------------------


def _student_overrides(config, teacher_backbone):
    """Student overrides: the user's --set values, with the teacher's
    position count unless given (its position table is copied)."""
    overrides = dict(config.overrides)
    overrides.setdefault("max_sequence_length", teacher_backbone.max_sequence_length)
    return overrides


def _run_log_callback(config, history, tensorboard, optimizer):
    class RunLog(keras.callbacks.Callback):
        """Logs each `log_every`-step epoch; stops at exactly `steps`."""

        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter()
            self.first_step = int(optimizer.iterations.numpy())

        def on_train_batch_end(self, batch, logs=None):
            if int(optimizer.iterations.numpy()) >= config.steps:
                self.model.stop_training = True

        def on_epoch_end(self, epoch, logs=None):
            step = int(optimizer.iterations.numpy())
            row = {k: float(v) for k, v in (logs or {}).items()}
            if not math.isfinite(row.get("loss", 0.0)):
                raise FloatingPointError(
                    f"Non-finite loss ({row['loss']}) by step {step}: stopping. Lower "
                    "--learning-rate or use --precision float32 / mixed_bfloat16.")
            self.last = log_row(row, step, optimizer, (step - self.first_step) * config.batch_size,
                                time.perf_counter() - self.start, history, tensorboard)
            if config.progress:
                print(f"step {step}/{config.steps}: loss {row['loss']:.4f}, ce "
                      f"{row['ce_loss']:.4f}, mlm {row['mlm_loss']:.4f}, cos "
                      f"{row['cos_loss']:.4f}, agreement {row['teacher_agreement']:.3f}",
                      flush=True)

    return RunLog()


def run_distillation(config):
    """Distils a teacher into a student preset; returns a dict: final step,
    last logged metrics, teacher layers used, output paths."""
    config.validate()
    meta, sequence_length, num_predictions, objective, stored_masks = data_description(config)
    dynamic = config.dynamic_masking or not stored_masks
    for name in (runs.BACKBONE, runs.PRETRAINER):
        if os.path.exists(runs.run_path(config.output_dir, name)):
            raise UsageError(f"{config.output_dir} already holds {name}; choose a new "
                             "--output-dir.")
    strategy = start_strategy(config)
    vocab_size = len(load_vocab(config.vocab))
    os.makedirs(config.output_dir, exist_ok=True)
    with strategy.scope():
        teacher, student, layer_map = _teacher_and_student(config, vocab_size, sequence_length,
                                                           num_predictions)
        distiller = Distiller(teacher, student, temperature=config.temperature,
                              weights=(config.alpha_ce, config.alpha_mlm, config.alpha_cos))
        # Under mixed_float16 the Distiller's `compile` wraps the optimizer in
        # a LossScaleOptimizer (its policy is the student's).
        distiller.compile(optimizer=run_optimizer(config))
    teacher_weights = [w.numpy() for w in teacher.weights]
    dataset = pretraining_batches(config, sequence_length, num_predictions, dynamic=dynamic,
                                  seed=config.seed)
    runs.write_json(config.output_dir, runs.CONFIG, {
        "distill": dataclasses.asdict(config), "teacher_layers": layer_map,
        "warmup_steps": config.warmup(), "dynamic_masking": dynamic,
        "teacher_class": type(teacher.backbone).__name__, "teacher": teacher.backbone.get_config(),
        "backbone_class": type(student.backbone).__name__,
        "backbone": student.backbone.get_config(),
        "data": {"max_seq_length": sequence_length, "max_predictions_per_seq": num_predictions,
                 "objective": objective, "metadata": meta},
        "strategy": {"name": config.strategy, "class": type(strategy).__name__,
                     "replicas": strategy.num_replicas_in_sync},
    })
    inner, last = _fit(config, distiller, dataset)
    # The teacher is frozen: a changed weight would mean a wiring bug.
    for before, after in zip(teacher_weights, teacher.weights):
        if not (before == after.numpy()).all():
            raise RuntimeError(f"The teacher's {after.path} changed during distillation.")
    outputs = save_outputs(config.output_dir, student.backbone, student)
    return {"step": int(inner.iterations.numpy()), "metrics": last,
            "teacher_layers": layer_map, "outputs": outputs}


def _teacher_and_student(config, vocab_size, sequence_length, num_predictions):
    """(the frozen teacher, the student pretrainer built and initialised
    from the teacher's layers, the teacher layer of each student layer);
    called in the strategy's scope."""
    # The teacher keeps the policy it was saved with; the student (and
    # so the Distiller and its optimizer) takes --precision.
    teacher = load_teacher(config.teacher, config.teacher_pretrainer)
    t_backbone = teacher.backbone
    if t_backbone.vocabulary_size != vocab_size:
        raise UsageError(f"The teacher has a vocabulary of {t_backbone.vocabulary_size} "
                         f"tokens but --vocab {config.vocab} has {vocab_size}.")
    keras.mixed_precision.set_dtype_policy(config.precision)
    try:
        student_config = dataclasses.replace(
            config, overrides=_student_overrides(config, t_backbone))
        backbone = build_backbone(student_config, vocab_size, sequence_length)
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    if backbone.hidden_dim != t_backbone.hidden_dim:
        raise UsageError(
            f"The student ({config.preset}) has hidden_dim {backbone.hidden_dim}, the "
            f"teacher {t_backbone.hidden_dim}: distillation copies the teacher's "
            f"layers and compares hidden states, so they must match (--set "
            f"hidden_dim={t_backbone.hidden_dim} and matching num_heads, "
            "intermediate_dim).")
    student = BertPretrainer(backbone, objectives=("mlm",))
    student(dummy_batch(sequence_length, num_predictions, False))
    try:
        layer_map = init_student_from_teacher(student, teacher, config.teacher_layers)
    except ValueError as err:
        raise UsageError(f"Cannot initialise the student from the teacher: {err}") from None
    return teacher, student, layer_map


def _fit(config, distiller, dataset):
    """`distiller.fit` up to --steps, one epoch per --log-every steps;
    returns (the inner optimizer, the last logged metrics row)."""
    history = runs.History(config.output_dir, 0)
    tensorboard = runs.TensorBoardLog(config.output_dir)
    inner = getattr(distiller.optimizer, "inner_optimizer", distiller.optimizer)
    callback = _run_log_callback(config, history, tensorboard, inner)
    try:
        # A corrupt record or a vanished shard: one line naming the file.
        with data_errors_as_usage_errors():
            distiller.fit(dataset, steps_per_epoch=config.log_every,
                          epochs=math.ceil(config.steps / config.log_every),
                          callbacks=[callback], verbose=0)
    finally:
        tensorboard.close()
    return inner, getattr(callback, "last", {})
