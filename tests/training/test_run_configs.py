"""PretrainConfig and DistillConfig share one base (`LanguageModelRunOptions`):
each shared field and its check is stated once, both configs refuse the
same bad values alike, and the "pretrain" / "distill" entries of a
config.json written before the base existed still load."""

import dataclasses

import pytest

from kerasbert.errors import UsageError
from kerasbert.training.configs import DistillConfig
from kerasbert.training.configs import LanguageModelRunOptions
from kerasbert.training.configs import PretrainConfig

# config.json's "pretrain" and "distill" entries as runs wrote them before
# the shared base (every field, in the old order).
OLD_PRETRAIN = {
    "preset": "bert_tiny", "vocab": "v", "data": "d", "output_dir": "o", "steps": 3,
    "batch_size": 32, "learning_rate": 0.0001, "warmup_steps": None, "end_learning_rate": 0.0,
    "power": 1.0, "optimizer": "adamw", "weight_decay": 0.01, "clipnorm": 1.0,
    "accumulation_steps": 1, "strategy": "auto", "tpu": None, "logical_cpus": 0,
    "precision": "float32", "jit_compile": False, "checkpoint_every": 1000,
    "keep_checkpoints": 3, "log_every": 10, "resume": False, "init_from": None, "seed": 12345,
    "deterministic": False, "dynamic_masking": False, "whole_word_mask": False,
    "sequence_length": None, "max_predictions_per_seq": None, "overrides": {}, "progress": True}
OLD_DISTILL = {
    "teacher": "t", "preset": "bert_tiny", "vocab": "v", "data": "d", "output_dir": "o",
    "steps": 3, "teacher_pretrainer": None, "teacher_layers": None, "temperature": 2.0,
    "alpha_ce": 5.0, "alpha_mlm": 2.0, "alpha_cos": 1.0, "batch_size": 32,
    "learning_rate": 0.0005, "warmup_steps": None, "end_learning_rate": 0.0, "power": 1.0,
    "optimizer": "adamw", "weight_decay": 0.01, "clipnorm": 1.0, "strategy": "auto",
    "tpu": None, "logical_cpus": 0, "precision": "float32", "log_every": 10, "seed": 12345,
    "deterministic": False, "dynamic_masking": False, "sequence_length": None,
    "max_predictions_per_seq": None, "overrides": {}, "progress": True}


#: Fields added since, each with the default an old entry loads with (None:
#: the run decides, as before the field existed).
ADDED_SINCE = {"PretrainConfig": {"masked_lm_prob": None}, "DistillConfig": {}}


@pytest.mark.parametrize("cls, old", [(PretrainConfig, OLD_PRETRAIN),
                                      (DistillConfig, OLD_DISTILL)])
def test_old_config_json_entries_load_with_the_same_fields_and_defaults(cls, old):
    loaded = cls(**old)
    expected = {**old, **ADDED_SINCE[cls.__name__]}
    assert dataclasses.asdict(loaded) == expected
    # Defaults are unchanged too: the required fields alone give the old entry.
    required = {f.name: old[f.name] for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    assert dataclasses.asdict(cls(**required)) == expected


def test_required_fields_stay_positional():
    config = PretrainConfig("bert_tiny", "v", "d", "o", 3)
    assert (config.preset, config.steps, config.learning_rate) == ("bert_tiny", 3, 1e-4)
    distill = DistillConfig("t", "bert_tiny", "v", "d", "o", 3)
    assert (distill.teacher, distill.learning_rate) == ("t", 5e-4)


def test_shared_fields_are_declared_once_in_the_base():
    shared = {f.name for f in dataclasses.fields(LanguageModelRunOptions)}
    assert {"batch_size", "warmup_steps", "precision", "clipnorm", "overrides"} <= shared
    for cls in (PretrainConfig, DistillConfig):
        own = set(cls.__annotations__)
        assert own & shared <= {"learning_rate"}, cls  # only distill's own default rate


@pytest.mark.parametrize("change, message", [
    ({"batch_size": 0}, "--batch-size must be >= 1, got 0"),
    ({"log_every": 0}, "--log-every must be >= 1"),
    ({"learning_rate": -1.0}, "learning-rate"),
    ({"weight_decay": float("nan")}, "--weight-decay"),
    ({"warmup_steps": 4}, "--warmup-steps 4 must be in [0, --steps 3]"),
    ({"precision": "float8"}, "--precision 'float8'"),
])
@pytest.mark.parametrize("cls, old", [(PretrainConfig, OLD_PRETRAIN),
                                      (DistillConfig, OLD_DISTILL)])
def test_both_configs_refuse_a_bad_shared_value_alike(cls, old, change, message):
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("]", r"\]")):
        cls(**dict(old, **change)).validate()


def test_each_config_keeps_its_own_checks():
    with pytest.raises(UsageError, match="--checkpoint-every must be >= 1"):
        PretrainConfig(**dict(OLD_PRETRAIN, checkpoint_every=0)).validate()
    with pytest.raises(UsageError, match="--resume and --init-from exclude each other"):
        PretrainConfig(**dict(OLD_PRETRAIN, resume=True, init_from="RUN")).validate()
    with pytest.raises(UsageError, match="--alpha-ce/--alpha-mlm/--alpha-cos"):
        DistillConfig(**dict(OLD_DISTILL, alpha_ce=0.0, alpha_mlm=0.0,
                             alpha_cos=0.0)).validate()
    with pytest.raises(UsageError, match="MultiWorkerMirroredStrategy"):
        DistillConfig(**dict(OLD_DISTILL, strategy="multi_worker")).validate()


def test_warmup_defaults_to_a_tenth_of_the_steps():
    assert PretrainConfig(**dict(OLD_PRETRAIN, steps=50)).warmup() == 5
    assert DistillConfig(**dict(OLD_DISTILL, warmup_steps=7)).warmup() == 7
