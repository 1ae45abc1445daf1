"""`run_pretraining(config)`: the whole pretraining run behind
`kerasbert pretrain`.

    metadata.json check -> strategy -> backbone + BertPretrainer + optimizer
    (in the strategy's scope) -> host tf.data iterator -> resume or init ->
    TrainStep loop (progress, TensorBoard, history, checkpoints) -> final
    checkpoint, backbone.keras, pretrainer.keras, training_curve.png

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
import numpy as np
import tensorflow as tf

from kerasbert.sources import handles
from kerasbert.convert.hf_heads import discriminator_head_from_hf
from kerasbert.convert.hf_heads import pretraining_heads_from_hf
from kerasbert.convert.hf_heads import set_discriminator_head
from kerasbert.convert.hf_heads import set_pretraining_heads
from kerasbert.data import pretraining_dataset
from kerasbert.data import reader
from kerasbert.data.metadata import read_metadata
from kerasbert.data.metadata import vocab_fingerprint
from kerasbert.errors import UsageError
from kerasbert.models.electra import ElectraBackbone
from kerasbert.models.electra.electra_presets import published_generator_fraction
from kerasbert.optimizers import create_optimizer
from kerasbert import runs
from kerasbert.saving import load_model
from kerasbert.tasks import BertPretrainer
from kerasbert.tasks import CausalLM
from kerasbert.tasks import ElectraPretrainer
from kerasbert.tasks.elmo_pretrainer import ElmoPretrainer
from kerasbert.tasks.elmo_pretrainer import token_character_table
from kerasbert.loading.backbones import load_backbone
from kerasbert.sources.source import HF
from kerasbert.sources.source import resolve
from kerasbert.models import presets
from kerasbert.models.vocabulary_growth import grow_vocabulary
from kerasbert.text.families import added_special_count
from kerasbert.text.families import read_vocabulary
from kerasbert.text.tokenizer_loading import load_tokenizer
from kerasbert.training.configs import reads_characters
from kerasbert.training.checkpoints import list_checkpoints
from kerasbert.training.checkpoints import read_manifest
from kerasbert.training.checkpoints import TrainingCheckpoint
from kerasbert.training.loop import data_errors_as_usage_errors
from kerasbert.training.loop import progress_verbosity
from kerasbert.training.loop import TrainStep
from kerasbert.training.strategies import resolve_strategy
from kerasbert.training.strategies import split_cpu
from kerasbert.training.strategies import worker_info

OBJECTIVES_BY_DATA = {"nsp": ("mlm", "nsp"), "sop": ("mlm", "sop"), "none": ("mlm",)}
#: ELMo: the full softmax up to this many words, a sampled one (this many
#: draws, log-uniform) above: the published biLM sampled 8192.
ELMO_FULL_SOFTMAX_WORDS = ELMO_NUM_SAMPLED = 8192


# --- data -------------------------------------------------------------------


def data_description(config):
    """(metadata or None, sequence_length, max_predictions_per_seq, objective,
    stored masks?) of the --data files, checked against the vocabulary."""

    try:
        files = reader.expand_files(config.data)
        # Nothing to train on: refused here, before the model is built
        # (a repeated empty dataset would spin forever).
        reader.check_not_empty(files)
        meta = read_metadata(os.path.dirname(files[0]))
    except ValueError as err:
        raise UsageError(f"--data {config.data!r}: {err}") from None
    sha, vocab_size = vocab_fingerprint(config.vocab)
    if meta is None:
        if not (config.sequence_length and config.max_predictions_per_seq):
            raise UsageError(f"{os.path.dirname(files[0])} has no metadata.json: pass "
                             "--max-seq-length and --max-predictions-per-seq.")
        try:
            names = reader.describe_files(files, config.sequence_length,
                                          config.max_predictions_per_seq)[0]
        except ValueError as err:  # not pretraining records, none readable, ...
            raise UsageError(f"--data {config.data!r}: {err}") from None
        objective = "nsp" if "next_sentence_labels" in names else "none"
        return None, config.sequence_length, config.max_predictions_per_seq, objective, True
    if meta.get("vocab_size") is not None and meta["vocab_size"] != vocab_size:
        raise UsageError(f"--data was written with a vocabulary of {meta['vocab_size']} tokens "
                         f"but --vocab {config.vocab} has {vocab_size}.")
    if meta.get("vocab_sha256") and meta["vocab_sha256"] != sha:
        raise UsageError(f"--data was written with a different vocabulary (sha256 "
                         f"{meta['vocab_sha256'][:12]}...) than --vocab {config.vocab} "
                         f"(sha256 {sha[:12]}...).")
    # (the option, its flag, metadata.json's field)
    for name, flag, key in (("sequence_length", "--max-seq-length", "max_seq_length"),
                            ("max_predictions_per_seq", "--max-predictions-per-seq",
                             "max_predictions_per_seq")):
        given = getattr(config, name)
        if given is not None and given != meta[key]:
            raise UsageError(f"{flag} {given} differs from the data's metadata.json "
                             f"({meta[key]}).")
    return (meta, meta["max_seq_length"], meta["max_predictions_per_seq"], meta["objective"],
            meta.get("masking", "static") == "static")


# --- model ------------------------------------------------------------------


def build_backbone(config, vocab_size, sequence_length, added_tokens=0):
    """The backbone to pretrain; `added_tokens`: how many of the vocabulary's
    tokens the tokenizer appended to a published one (GPT-1's specials),
    for which a checkpoint's embeddings grow."""
    overrides = dict(config.overrides)
    if reads_characters(config.preset):
        # ELMo has no token table: it reads each token's characters
        # (`make_pretrainer`); the vocabulary sizes its softmax only.
        try:
            return load_backbone(config.preset, **overrides)
        except (ValueError, TypeError) as err:
            raise UsageError(str(err)) from None
    if overrides.get("vocabulary_size", vocab_size) != vocab_size:
        raise UsageError(f"vocabulary_size={overrides['vocabulary_size']} differs from "
                         f"--vocab ({vocab_size} tokens).")
    published = vocab_size - added_tokens
    try:
        # A preset builds an architecture; a handle (hf://, a model
        # directory, ...) continues pretraining from published weights.
        overrides["vocabulary_size"] = vocab_size
        backbone = load_backbone(config.preset, **overrides)
    except UsageError:
        if not added_tokens or presets.is_preset(config.preset):
            raise
        overrides["vocabulary_size"] = published
        backbone = load_backbone(config.preset, **overrides)
    except (ValueError, TypeError) as err:
        raise UsageError(str(err)) from None
    if backbone.vocabulary_size == published != vocab_size:
        backbone = grow_vocabulary(backbone, vocab_size)
    if sequence_length > backbone.max_sequence_length:
        raise UsageError(f"The data's sequences have {sequence_length} tokens but {config.preset} "
                         f"has {backbone.max_sequence_length} positions.")
    return backbone


def make_pretrainer(backbone, objectives, tokens=None, tokenizer=None):
    """The pretraining task model for the backbone's family (built inside
    the strategy scope by the caller).

    Args:
        backbone: a kerasbert backbone.
        objectives: from the data's objective (`OBJECTIVES_BY_DATA`).

    Returns:
        A model with the training-loop protocol of kerasbert.training.loop.
        A model with `needs_masked_lm = False` (the causal LM, ELMo) is fed
        unmasked batches (`pretraining_dataset(masked_lm=False)`).

    ELMo (`tokens`: the vocabulary's strings, `tokenizer`: its [CLS] / [SEP]
    ids) trains its forward and backward LMs on the same token-id records:
    each token's characters come from a constant [V, C] table of the
    vocabulary's strings, and the targets are the next / previous token
    ([CLS] and [SEP] stand for <S> and </S>).
    """
    if "input_char_ids" in backbone.input:
        if tuple(objectives) != ("mlm",):
            raise UsageError(
                "ELMo trains two language models on single sequences: write the data with "
                f"--objective none; this data has the {objectives[-1]} objective.")
        size = len(tokens)
        return ElmoPretrainer(
            backbone, size, bos_id=tokenizer.cls_id, eos_id=tokenizer.sep_id,
            num_sampled=0 if size <= ELMO_FULL_SOFTMAX_WORDS else ELMO_NUM_SAMPLED,
            token_characters=token_character_table(tokens, backbone.max_characters_per_token))

    if getattr(backbone, "causal", False):
        # GPT, a causal Reformer: next-token prediction on whole sequences
        # (--objective none).
        if tuple(objectives) != ("mlm",):
            raise UsageError(
                f"A causal backbone ({type(backbone).__name__}) trains a causal LM on single "
                "sequences: write the data with --objective none (this data has the "
                f"{objectives[-1]} objective).")

        return CausalLM(backbone)

    if isinstance(backbone, ElectraBackbone):
        # ELECTRA: generator MLM + replaced-token detection on single
        # sequences; `backbone` is the discriminator (RUN/backbone.keras).
        if tuple(objectives) != ("mlm",):
            raise UsageError(
                "ELECTRA trains replaced-token detection on single sequences: write the data "
                "with --objective none (and --no-masking for dynamic masks); this data has "
                f"the {objectives[-1]} objective.")

        return ElectraPretrainer(backbone,
                                 generator_fraction=published_generator_fraction(backbone))

    return BertPretrainer(backbone, objectives=objectives)


def dummy_batch(sequence_length, num_predictions, with_sentence):
    batch = {
        "input_word_ids": np.zeros((1, sequence_length), "int32"),
        "input_mask": np.ones((1, sequence_length), "int32"),
        "input_type_ids": np.zeros((1, sequence_length), "int32"),
        "masked_lm_positions": np.zeros((1, num_predictions), "int32"),
        "masked_lm_ids": np.zeros((1, num_predictions), "int32"),
        "masked_lm_weights": np.ones((1, num_predictions), "float32"),
    }
    if with_sentence:
        batch["next_sentence_labels"] = np.zeros((1,), "int32")
    return batch


def _make_optimizer(config, warmup_steps):


    optimizer = create_optimizer(
        config.learning_rate, num_train_steps=config.steps, warmup_steps=warmup_steps,
        optimizer=config.optimizer, weight_decay=config.weight_decay,
        end_learning_rate=config.end_learning_rate, power=config.power,
        clipnorm=None,  # the training step clips the all-reduced gradient
        accumulation_steps=1,  # and accumulates micro-batches itself
    )
    if config.precision == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def _init_from(source, pretrainer):
    """Loads weights from another run (RUN dir, RUN/checkpoints, a ckpt
    prefix or a .keras file): the whole pretrainer when its structure
    matches, else the backbone only (e.g. phase 2 with other heads)."""


    found = (resolve(source) if handles.is_remote(source) or os.path.isdir(source)
             else None)
    if found is not None and found.is_published:
        published = load_backbone(found)
        try:
            pretrainer.backbone.set_weights(published.get_weights())
        except ValueError as err:
            raise UsageError(f"--init-from {source}: its {type(published).__name__} does not "
                             f"match --preset's architecture ({err}); --preset {source} builds "
                             "the architecture from it.") from None
        written = None
        if found.kind == HF and hasattr(pretrainer, "masked_lm_head"):
            heads = pretraining_heads_from_hf(found.path, found.model_type)
            written = heads and set_pretraining_heads(pretrainer, heads, source)
        elif found.kind == HF and hasattr(pretrainer, "rtd_head"):
            # ELECTRA: the discriminator's head; the generator starts fresh.
            head = discriminator_head_from_hf(found.path)
            written = head and set_discriminator_head(pretrainer, head, source)
        if not written:
            return f"{source} (backbone; the pretraining heads start fresh)"
        return f"{source} (backbone and the published {' and '.join(written)} heads)"
    keras_file = None
    if source.endswith(".keras") and os.path.isfile(source):
        keras_file = source
    elif os.path.isfile(runs.run_path(source, runs.PRETRAINER)):
        keras_file = runs.run_path(source, runs.PRETRAINER)
    if keras_file:
        loaded = load_model(keras_file)
        source_backbone = getattr(loaded, "backbone", loaded)
        shapes = [w.shape for w in loaded.weights]
        if shapes == [w.shape for w in pretrainer.weights]:
            pretrainer.set_weights(loaded.get_weights())
            return f"{keras_file} (backbone and heads)"
        try:
            pretrainer.backbone.set_weights(source_backbone.get_weights())
        except ValueError as err:
            raise UsageError(f"--init-from {source}: its backbone does not match "
                             f"this one ({err}).") from None
        return f"{keras_file} (backbone only)"
    folder = runs.run_path(source, runs.CHECKPOINTS)
    folder = folder if os.path.isdir(folder) else source
    prefixes = list_checkpoints(folder) if os.path.isdir(folder) else [source]
    if not prefixes or not tf.io.gfile.exists(prefixes[0] + ".index"):
        raise UsageError(f"--init-from {source}: no pretrainer.keras, .keras file or "
                         "checkpoint found there.")
    status = tf.train.Checkpoint(model=pretrainer).read(prefixes[0])
    status.expect_partial()
    return f"{prefixes[0]} (model weights)"


# --- the run ----------------------------------------------------------------


def _check_run_dir(config, is_chief):
    ckpt_dir = runs.run_path(config.output_dir, runs.CHECKPOINTS)
    existing = list_checkpoints(ckpt_dir) if os.path.isdir(ckpt_dir) else []
    if existing and not config.resume:
        raise UsageError(f"{config.output_dir} already holds checkpoints ({existing[0]}); "
                         "pass --resume to continue it, or choose a new --output-dir.")
    if config.resume and not existing:
        print(f"--resume: no checkpoint in {ckpt_dir} yet; starting from step 0.",
              file=sys.stderr)
    # The folder is made by the first checkpoint (TrainingCheckpoint.save): a
    # run refused before its first step leaves nothing.
    return ckpt_dir


# --- resume: the run's config.json against this invocation -------------------

# Backbone config entries that are not architecture.
_NOT_ARCHITECTURE = ("name", "trainable", "dtype")


def _previous_config(config, ckpt_dir):
    """The run's config.json when --resume will restore a checkpoint, else
    None (a new run, or a run killed before its first checkpoint)."""
    import json


    path = runs.run_path(config.output_dir, runs.CONFIG)
    if not (config.resume and list_checkpoints(ckpt_dir) and os.path.exists(path)):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as err:
        raise UsageError(f"--resume: {path} cannot be read ({err}); it describes the run "
                         "to resume, so it must be intact.") from None


def _short_value(value):
    import json

    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."


def check_same_architecture(previous, backbone, objectives, output_dir):
    """UsageError naming every architecture value (backbone config, family,
    pretraining objectives) that differs between the run's config.json and
    this invocation: a checkpoint only fits the model it was saved from."""
    import json

    if previous is None:
        return
    given = json.loads(json.dumps(backbone.get_config()))
    run = previous.get("backbone") or {}
    diffs = []
    if previous.get("backbone_class") not in (None, type(backbone).__name__):
        diffs.append(f"backbone: run {previous['backbone_class']} vs given "
                     f"{type(backbone).__name__}")
    for key in sorted(set(run) | set(given)):
        if key in _NOT_ARCHITECTURE or run.get(key) == given.get(key):
            continue
        diffs.append(f"{key}: run {_short_value(run.get(key))} vs given "
                     f"{_short_value(given.get(key))}")
    if previous.get("objectives") not in (None, list(objectives)):
        diffs.append(f"objectives: run {'+'.join(previous['objectives'])} vs given "
                     f"{'+'.join(objectives)}")
    if diffs:
        raise UsageError(
            f"--resume: {output_dir} was trained with another architecture than the one "
            f"given ({'; '.join(diffs)}); resume with the run's --preset and --set values, "
            "or start a new run (--init-from takes weights across phases).")


def _shards_differ(run, given):
    """One phrase naming the first difference between two describe_shards
    lists, or None when they are the same."""
    if run == given:
        return None
    if len(run) != len(given):
        return f"the run read {len(run)} files, the given data has {len(given)}"
    for old, new in zip(run, given):
        if old["file"] != new["file"]:
            return f"the run read {old['file']} where the given data has {new['file']}"
        for key in ("bytes", "records"):
            if old.get(key) != new.get(key):
                return (f"{old['file']} had {old.get(key)} {key} in the run, the given one "
                        f"has {new.get(key)}")
    return "the files differ"


def saved_input(prefix, previous):
    """The input settings the input position in checkpoint `prefix` belongs
    to: {batch_size, sequence_length, max_predictions_per_seq, workers,
    shards, seed, start_step} from its manifest, else (a checkpoint from
    before manifests) from the run's config.json `previous`, else None."""

    info = (read_manifest(prefix) or {}).get("info") if prefix else None
    if isinstance(info, dict) and "batch_size" in info:
        return info
    if previous is None:
        return None
    run, data = previous.get("pretrain") or {}, previous.get("data") or {}
    return {"batch_size": run.get("batch_size"),
            "max_seq_length": data.get("max_seq_length"),
            "max_predictions_per_seq": data.get("max_predictions_per_seq"),
            "workers": (previous.get("strategy") or {}).get("workers"),
            "shards": data.get("shards"), "seed": data.get("seed"),
            "start_step": data.get("start_step")}


def resume_changes(saved, config, sequence_length, num_predictions, shards, num_workers=1):
    """{name: [run value, given value]} of the input changes --resume
    accepts (batch size, sequence length, masked positions, number of
    input pipelines) between `saved` (`saved_input`) and this invocation;
    they change the shape of the batches, so the saved input position
    cannot be reused.

    Other data (other shards, not just moved) at the same sequence length
    is refused: the saved position means nothing in it. New data with a
    new sequence length is the second phase of a run (BERT's 128 -> 512
    tokens) and is accepted as a change."""
    if saved is None:
        return {}
    changes = {}
    for key, new in (("batch_size", config.batch_size), ("max_seq_length", sequence_length),
                     ("max_predictions_per_seq", num_predictions), ("workers", num_workers)):
        old = saved.get(key)
        if old is not None and old != new:
            changes[key] = [old, new]
    new_shape = {"max_seq_length", "max_predictions_per_seq"} & changes.keys()
    if saved.get("shards") is not None and not new_shape:
        problem = _shards_differ(saved["shards"], shards)
        if problem:
            raise UsageError(
                f"--resume: --data {config.data} is not the data this run was trained on "
                f"({problem}); pass the run's data (it may have moved: any path to it "
                "works), or start a new run with --init-from.")
    return changes


def _progress_bar(total, initial, enabled):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, unit="step", dynamic_ncols=True,
                desc="pretrain", file=sys.stdout)


def run_pretraining(config):
    """Runs (or resumes) a pretraining run; returns a dict of results:
    final step, last logged metrics, output paths."""
    config.validate()


    meta, sequence_length, num_predictions, objective, stored_masks = data_description(config)
    objectives = OBJECTIVES_BY_DATA[objective]
    dynamic = config.dynamic_masking or not stored_masks

    split_cpu(config.logical_cpus)
    if config.deterministic:
        tf.config.experimental.enable_op_determinism()
    keras.utils.set_random_seed(config.seed)
    keras.mixed_precision.set_dtype_policy(config.precision)
    strategy = resolve_strategy(config.strategy, config.tpu)
    is_chief, worker_index, num_workers = worker_info(strategy)
    replicas = strategy.num_replicas_in_sync
    if config.batch_size % replicas:
        raise UsageError(f"--batch-size {config.batch_size} is not divisible by the "
                         f"{replicas} replicas of the strategy.")
    ckpt_dir = _check_run_dir(config, is_chief)
    previous = _previous_config(config, ckpt_dir)
    # The shards, as a resume recognises them wherever they lie.
    shards = reader.describe_shards(reader.expand_files(config.data))
    warmup_steps = (config.warmup_steps if config.warmup_steps is not None
                    else config.steps // 10)


    kind, files, tokens = read_vocabulary(config.vocab)
    vocab_size = len(tokens)
    # The run keeps a copy of its tokenizer (save_run below): it is usable
    # from any directory, whatever path --vocab was given as.
    tokenizer = load_tokenizer(config.vocab, lower_case=(meta or {}).get("lower_case"))
    with strategy.scope():
        backbone = build_backbone(config, vocab_size, sequence_length,
                                  added_tokens=added_special_count(kind, files, tokens))
        pretrainer = make_pretrainer(backbone, objectives, tokens, tokenizer)
        # A causal LM reads the tokens unmasked: no masks drawn or stored.
        masked_lm = getattr(pretrainer, "needs_masked_lm", True)
        if not masked_lm and (config.dynamic_masking or config.whole_word_mask):
            raise UsageError(f"--dynamic-masking / --whole-word-mask do not apply to "
                             f"{config.preset}: it predicts every next token, unmasked.")
        dynamic = dynamic and masked_lm
        pretrainer(dummy_batch(sequence_length, num_predictions, len(objectives) > 1))
        optimizer = _make_optimizer(config, warmup_steps)
        optimizer.build(pretrainer.trainable_variables)
        step_var = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    check_same_architecture(previous, backbone, objectives, config.output_dir)

    context = tf.distribute.InputContext(num_input_pipelines=num_workers,
                                         input_pipeline_id=worker_index,
                                         num_replicas_in_sync=num_workers)

    def make_dataset(seed):
        try:
            return pretraining_dataset(
                config.data, config.batch_size, input_context=context,
                dynamic_masking=dynamic, masked_lm=masked_lm, seed=seed,
                deterministic=config.deterministic, vocab_file=config.vocab,
                vocab_size=vocab_size, sequence_length=sequence_length,
                max_predictions_per_seq=num_predictions,
                whole_word_mask=config.whole_word_mask)
        except reader.EmptyDataError as err:
            raise UsageError(f"--data {config.data!r}: {err}") from None

    # Weights, optimizer and step first; the input position after, into a
    # pipeline built for it. The checkpoint holds the chief's input position
    # only (other workers' checkpoints go to temporary folders); on resume
    # the other workers skip the batches they consumed instead, which is
    # exact with --deterministic.
    checkpoint = TrainingCheckpoint(ckpt_dir, model=pretrainer, optimizer=optimizer,
                                    step=step_var, is_chief=is_chief,
                                    max_to_keep=config.keep_checkpoints)
    started_from = None
    if config.resume:
        started_from = checkpoint.restore_latest()
    elif config.init_from:
        started_from = _init_from(config.init_from, pretrainer)
    if started_from and is_chief:
        print(f"{'Resumed' if config.resume else 'Initialised'} from {started_from}")
    start_step = int(step_var.numpy())
    if config.resume and start_step > config.steps:
        raise UsageError(f"--resume: {config.output_dir} is already at step {start_step}, past "
                         f"--steps {config.steps}: nothing to train (--steps counts from the "
                         f"run's start; give more than {start_step} to train further).")

    # The data's seed and the step it started at: kept across exact
    # resumes; a resume that cannot continue the saved input position
    # starts the data over, on a new shuffle (seed + step). What the saved
    # position belongs to is read from the restored checkpoint's manifest
    # (config.json may already describe a later, killed invocation).
    resumed = bool(config.resume and started_from)
    saved = saved_input(started_from, previous) if resumed else None
    changes = resume_changes(saved, config, sequence_length, num_predictions, shards, num_workers)
    data_seed, data_start_step = config.seed, 0
    restart = None
    if resumed and changes:
        restart = ", ".join(f"{k} {old} -> {new}" for k, (old, new) in changes.items())
    elif resumed:
        if saved and saved.get("seed") is not None:
            data_seed, data_start_step = saved["seed"], saved.get("start_step") or 0
        dataset = make_dataset(data_seed)
        iterator = iter(dataset)
        if is_chief:
            problem = checkpoint.restore_iterator(started_from, iterator)
            if problem:
                restart = (f"the input position saved in {os.path.basename(started_from)} "
                           f"does not fit this input pipeline ({problem})")
        else:
            iterator = iter(dataset.skip((start_step - data_start_step)
                                         * config.accumulation_steps))
    if restart is not None:
        data_seed, data_start_step = config.seed + start_step, start_step
        if is_chief:
            print(f"warning: --resume at step {start_step}: {restart}; the data starts over "
                  f"on a new shuffle (seed {data_seed}); recorded in history.jsonl.",
                  file=sys.stderr, flush=True)
    if restart is not None or not resumed:
        dataset = make_dataset(data_seed)
        iterator = iter(dataset)
    if is_chief:
        checkpoint.attach_iterator(iterator)
    checkpoint.info = {"batch_size": config.batch_size, "max_seq_length": sequence_length,
                       "max_predictions_per_seq": num_predictions, "workers": num_workers,
                       "shards": shards, "seed": data_seed, "start_step": data_start_step}
    if is_chief:
        runs.save_run(config.output_dir, {}, tokenizer=tokenizer, config={
            "pretrain": {k: v for k, v in dataclasses.asdict(config).items()},
            "objectives": list(objectives),
            "warmup_steps": warmup_steps,
            "optimizer": type(optimizer).__name__,
            "dynamic_masking": dynamic,
            "backbone_class": type(backbone).__name__,
            "backbone": backbone.get_config(),
            "data": {"max_seq_length": sequence_length, "max_predictions_per_seq": num_predictions,
                     "objective": objective, "metadata": meta, "shards": shards,
                     "seed": data_seed, "start_step": data_start_step},
            "strategy": {"name": config.strategy, "class": type(strategy).__name__,
                         "replicas": replicas, "workers": num_workers},
        })

    train_step = TrainStep(strategy, pretrainer, optimizer,
                           accumulation_steps=config.accumulation_steps,
                           clipnorm=config.clipnorm, jit_compile=config.jit_compile)
    history = runs.History(config.output_dir, start_step, enabled=is_chief)
    if restart is not None:
        # Not a metrics row: a note of what changed at which step.
        history.append({"step": start_step, "event": "resume",
                        "changed": {k: {"run": old, "given": new}
                                    for k, (old, new) in changes.items()},
                        "data": "restarted", "reason": restart, "data_seed": data_seed})
    tensorboard = runs.TensorBoardLog(config.output_dir, enabled=is_chief)
    verbosity = progress_verbosity(is_chief and config.progress)
    bar = _progress_bar(config.steps, start_step, verbosity == 1)
    sequences_per_step = config.batch_size * config.accumulation_steps

    last = {}
    window, window_start = [], time.perf_counter()
    try:
        while int(step_var.numpy()) < config.steps:
            # A corrupt record, an out-of-range id or a pass that reads nothing
            # reaches the loop as a TensorFlow op error: the user gets one
            # line, `FILE record N: cause` (exit 2), not a traceback.
            with data_errors_as_usage_errors():
                sums = train_step.step(iterator)
            step_var.assign_add(1)
            step = int(step_var.numpy())
            metrics = pretrainer.summarize_terms({k: v.numpy() for k, v in sums.items()})
            if not math.isfinite(metrics["loss"]):
                raise FloatingPointError(
                    f"Non-finite loss ({metrics['loss']}) at step {step}: stopping. "
                    "Lower --learning-rate, check the data, or use --precision "
                    "mixed_bfloat16 / float32.")
            window.append(metrics)
            if step % config.log_every == 0 or step == config.steps:
                elapsed = time.perf_counter() - window_start
                row = {k: sum(m[k] for m in window) / len(window) for k in window[0]}
                row["step"] = step
                row["learning_rate"] = float(keras.ops.convert_to_numpy(
                    optimizer.learning_rate))
                row["sequences_per_second"] = len(window) * sequences_per_step / max(elapsed, 1e-9)
                history.append(row)
                tensorboard.write(step, {k: v for k, v in row.items() if k != "step"})
                last = row
                if verbosity == 2:  # stdout is a file: one line per logged step, no bar
                    print(f"step {step}/{config.steps}: " + ", ".join(
                        f"{label} {row[name]:.3f}" for label, name
                        in pretrainer.progress_metrics.items() if name in row)
                        + f", {row['sequences_per_second']:.1f} seq/s", flush=True)
                window, window_start = [], time.perf_counter()
            if bar is not None:
                bar.update(1)
                bar.set_postfix(**{label: f"{metrics[name]:.3f}" for label, name
                                   in pretrainer.progress_metrics.items()},
                                seq_s=f"{last.get('sequences_per_second', 0.0):.1f}")
            if step % config.checkpoint_every == 0 and step < config.steps:
                checkpoint.save()
        if int(step_var.numpy()) > start_step:
            checkpoint.save()
    finally:
        if bar is not None:
            bar.close()
        tensorboard.close()
        checkpoint.close()

    outputs = {}
    if is_chief:
        saved = runs.save_run(config.output_dir, {runs.BACKBONE: backbone,
                                                  runs.PRETRAINER: pretrainer})
        outputs["backbone"], outputs["pretrainer"] = saved[runs.BACKBONE], saved[runs.PRETRAINER]
        curve = runs.plot_training_curve(config.output_dir)
        if curve:
            outputs["training_curve"] = curve
        outputs["checkpoints"] = ckpt_dir
        outputs["logs"] = runs.run_path(config.output_dir, runs.LOGS)
    return {"step": int(step_var.numpy()), "metrics": last, "outputs": outputs,
            "is_chief": is_chief}
