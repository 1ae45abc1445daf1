"""Every override is validated before any work, for every family (issue 37,
item 3): the checks `--set` runs (`Backbone.preset_config`, `check_overrides`)
refuse, naming the key and the value, what no model of the family can have,
the Reformer's chunk lengths, hash and bucket counts and axial shapes
included, and a model larger than the memory budget; nothing is built."""

import pytest

from kerasbert.errors import UsageError
from kerasbert.models import AlbertBackbone
from kerasbert.models import BertBackbone
from kerasbert.models import ReformerBackbone
from kerasbert.models.config_checks import MEMORY_BUDGET_VARIABLE
from kerasbert.models.config_checks import ConfigError
from kerasbert.models.config_checks import check_overrides
from kerasbert.models.config_checks import memory_budget
from kerasbert.models.config_checks import validate_config
from kerasbert.models.presets import get_preset
from kerasbert.models.presets import list_presets

REFORMER_CASES = [
    ({"lsh_chunk_length": 0}, "lsh_chunk_length=0"),
    ({"local_chunk_length": -4}, "local_chunk_length=-4"),
    ({"num_hashes": 0}, "num_hashes=0"),
    ({"num_chunks_before": -1}, "num_chunks_before=-1"),
    ({"num_chunks_after": -2}, "num_chunks_after=-2"),
    ({"num_buckets": 0}, "num_buckets=0"),
    ({"num_buckets": 3}, "num_buckets=3"),
    ({"num_buckets": [4, 5]}, "num_buckets=[4, 5]"),
    ({"num_buckets": "many"}, "num_buckets='many'"),
    ({"head_dim": 0}, "head_dim=0"),
    ({"feed_forward_chunk_size": -1}, "feed_forward_chunk_size=-1"),
    ({"axial_shape": [3, 5]}, "axial_shape=[3, 5] covers 15 positions"),
    ({"axial_shape": [0, 0]}, "axial_shape=[0, 0]"),
    ({"axial_dims": [1, 1]}, "axial_dims=[1, 1] sum to 2"),
    ({"attention_layers": ["lsh", "dense"]}, "attention_layers=['lsh', 'dense']"),
    ({"attention_layers": "lsh"}, "attention_layers='lsh'"),
    ({"attention_dropout": 1.5}, "attention_dropout=1.5"),
    ({"causal": "yes"}, "causal='yes' must be true or false"),
    ({"num_heads": 0}, "num_heads=0"),
]


@pytest.mark.parametrize("overrides, fragment", REFORMER_CASES,
                         ids=[str(case[0]) for case in REFORMER_CASES])
def test_impossible_reformer_overrides_are_refused_before_anything_is_built(overrides,
                                                                            fragment):
    with pytest.raises(UsageError) as err:
        check_overrides("reformer_tiny", overrides)
    assert fragment in str(err.value) and "\n" not in str(err.value)
    # The same checks guard `from_preset` (a ConfigError is a ValueError).
    with pytest.raises(ValueError, match=fragment.split("=")[0]):
        ReformerBackbone.from_preset("reformer_tiny", **overrides)


@pytest.mark.parametrize("name, overrides, fragment", [
    ("bert_tiny", {"num_heads": 0}, "num_heads=0"),
    ("bert_tiny", {"num_heads": 3}, "not divisible by num_heads=3"),
    ("bert_tiny", {"hidden_dim": "wide"}, "hidden_dim='wide'"),
    ("bert_tiny", {"dropout": 1.0}, "dropout=1.0"),
    ("bert_tiny", {"activation": "swish2"}, "activation='swish2'"),
    ("bert_tiny", {"attention": "sparse"}, "attention='sparse'"),
    ("bert_tiny", {"layer_norm_epsilon": 0.0}, "layer_norm_epsilon=0.0"),
    ("albert_base", {"num_groups": 5}, "num_layers=12 is not divisible by num_groups=5"),
    ("bigbird_roberta_base", {"block_size": 0}, "block_size=0"),
    ("gpt1", {"num_layers": 0}, "num_layers=0"),
    ("distilbert_base", {"vocabulary_size": -1}, "vocabulary_size=-1"),
    ("electra_small", {"embedding_dim": 0}, "embedding_dim=0"),
    ("roberta_base", {"unknown_size": 3}, "unknown_size"),
])
def test_every_family_refuses_impossible_overrides(name, overrides, fragment):
    with pytest.raises(UsageError) as err:
        check_overrides(name, overrides)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_overrides_of_a_handle_are_checked_by_key():
    """On published weights the family is known only once they are read;
    each value is still checked by its key before any work."""
    with pytest.raises(UsageError, match="lsh_chunk_length=0"):
        check_overrides("hf://google/reformer-enwik8", {"lsh_chunk_length": 0})
    check_overrides("hf://google/reformer-enwik8", {"dropout": 0.0})  # no network, no error


def test_valid_overrides_pass_and_build():
    check_overrides("reformer_tiny", {"lsh_chunk_length": 8, "num_hashes": 1,
                                      "num_buckets": [2, 4]})
    backbone = ReformerBackbone.from_preset("reformer_tiny", num_layers=1, hidden_dim=16,
                                            num_heads=2, intermediate_dim=16, head_dim=8,
                                            axial_shape=[8, 8], axial_dims=[4, 12],
                                            max_sequence_length=64, lsh_chunk_length=8,
                                            num_buckets=[2, 4])
    assert (backbone.lsh_chunk_length, backbone.num_buckets) == (8, [2, 4])


def test_a_model_beyond_the_memory_budget_is_refused(monkeypatch):
    monkeypatch.setenv(MEMORY_BUDGET_VARIABLE, "1M")
    assert memory_budget()[0] == 2**20
    with pytest.raises(UsageError) as err:
        check_overrides("bert_tiny", {})  # 4.4 M parameters, 17 MB
    message = str(err.value)
    assert "vocabulary_size=30522" in message and "$KERASBERT_MEMORY_BUDGET" in message
    monkeypatch.setenv(MEMORY_BUDGET_VARIABLE, "1G")
    check_overrides("bert_tiny", {})
    monkeypatch.setenv(MEMORY_BUDGET_VARIABLE, "lots")
    with pytest.raises(UsageError, match="KERASBERT_MEMORY_BUDGET='lots'"):
        check_overrides("bert_tiny", {})


def test_without_a_stated_budget_this_machines_memory_is_the_budget(monkeypatch):
    monkeypatch.delenv(MEMORY_BUDGET_VARIABLE, raising=False)
    budget, source = memory_budget()
    assert 2**28 < budget and "machine" in source
    with pytest.raises(UsageError, match="more than the memory budget"):
        check_overrides("bert_base", {"vocabulary_size": 10**12})


def _tiny_arguments(cls, config):
    if "lstm_dim" in config:  # ELMo's sizes are its own
        return {"lstm_dim": 16, "projection_dim": 8, "num_highway": 1, "filters": [[1, 8], [2, 8]]}
    small = {"vocabulary_size": 50, "num_layers": 2, "hidden_dim": 16, "intermediate_dim": 24,
             "max_sequence_length": 64, "num_heads": 2}
    if config.get("embedding_dim"):
        small["embedding_dim"] = 8
    if config.get("axial_shape"):
        small.update(axial_shape=[8, 8], axial_dims=[6, 10])
    if config.get("head_dim"):
        small["head_dim"] = 8
    if "num_groups" in config:
        small["num_groups"] = 1
    if "lsh_chunk_length" in config:
        small.update(lsh_chunk_length=8, local_chunk_length=8, num_buckets=4)
    if "block_size" in config:
        small["block_size"] = 8
    return small


def test_the_parameter_estimate_bounds_the_built_model_for_every_family():
    """`estimate_parameters` (what the memory budget and the checkpoint
    checks compare) equals `count_params()` or exceeds it by at most the
    pooler and embedding LayerNorm a family does without."""
    families = {}
    for name in list_presets():
        families.setdefault(get_preset(name)["backbone_class"], name)
    assert len(families) >= 8
    for cls, name in families.items():
        config = {**cls.default_config(), **get_preset(name)["config"]}
        small = _tiny_arguments(cls, config)
        built = cls.from_preset(name, **small).count_params()
        estimate = cls.estimate_parameters({**config, **small})
        assert built <= estimate <= built + 16 * 16 + 16 + 2 * 16, (cls.__name__, built,
                                                                     estimate)


def test_validate_config_checks_each_override_alone_and_the_familys_rules():
    validate_config({"lsh_chunk_length": 4})
    with pytest.raises(ConfigError, match="num_hashes=0"):
        validate_config({"num_hashes": 0})
    with pytest.raises(ConfigError, match="num_groups=5"):
        validate_config({"num_layers": 12, "num_groups": 5}, AlbertBackbone)
    validate_config({"num_layers": 12, "num_groups": 5}, BertBackbone)  # not BERT's rule
