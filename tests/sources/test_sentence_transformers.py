"""Reading a sentence-transformers folder (files only, no TensorFlow)."""

import json
import os
import tempfile

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from kerasbert.errors import UsageError
from kerasbert.sources.sentence_transformers import POOLING_MODES
from kerasbert.sources.sentence_transformers import SentenceModel
from kerasbert.sources.sentence_transformers import read_sentence_model
from kerasbert.testing.sentence_models import write_sentence_files


def _edit(path, **changes):
    with open(path) as f:
        value = json.load(f)
    value.update(changes)
    with open(path, "w") as f:
        json.dump(value, f)


def test_all_minilm_layout(tmp_path):
    # all-MiniLM-L6-v2's three files: mean pooling, Normalize, 256 tokens.
    write_sentence_files(tmp_path, ("mean",), normalize=True, max_seq_length=256,
                         embedding_dim=384)
    model = read_sentence_model(tmp_path)
    assert model == SentenceModel(path=str(tmp_path), pooling=("mean",), normalize=True,
                                  max_seq_length=256, do_lower_case=False, embedding_dim=384)
    assert model.output_dim == 384 and model.encoder_path == str(tmp_path)


@pytest.mark.parametrize("pooling", [("cls",), ("max",), ("mean_sqrt_len",),
                                     ("cls", "mean"), ("max", "mean")])
def test_modes_are_read_in_concatenation_order(tmp_path, pooling):
    write_sentence_files(tmp_path, tuple(reversed(pooling)), normalize=False,
                         max_seq_length=None, do_lower_case=True)
    model = read_sentence_model(tmp_path)
    assert model.pooling == tuple(m for m in POOLING_MODES if m in pooling)
    assert not model.normalize and model.max_seq_length is None and model.do_lower_case
    assert model.output_dim == 16 * len(pooling)


def test_a_folder_without_modules_json_is_no_sentence_model(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    assert read_sentence_model(tmp_path) is None


def test_pooling_mode_string_and_transformer_subfolder(tmp_path):
    # Older saves keep the encoder in 0_Transformer/ with its
    # sentence_bert_config.json; the library's constructor also takes a
    # "pooling_mode" string.
    write_sentence_files(tmp_path, ("mean",), normalize=False)
    modules = json.loads((tmp_path / "modules.json").read_text())
    modules[0]["path"] = "0_Transformer"
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    os.makedirs(tmp_path / "0_Transformer")
    os.replace(tmp_path / "sentence_bert_config.json",
               tmp_path / "0_Transformer" / "sentence_bert_config.json")
    _edit(tmp_path / "1_Pooling" / "config.json", pooling_mode="cls")
    model = read_sentence_model(tmp_path)
    assert model.pooling == ("cls",) and model.max_seq_length == 16
    assert model.encoder_path == os.path.join(str(tmp_path), "0_Transformer")


@pytest.mark.parametrize("key", ["pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"])
def test_unsupported_pooling_names_file_and_key(tmp_path, key):
    write_sentence_files(tmp_path)
    _edit(tmp_path / "1_Pooling" / "config.json", **{key: True})
    with pytest.raises(UsageError, match=rf"1_Pooling.config\.json: \"{key}\": true is a "
                       "pooling mode kerasbert does not compute"):
        read_sentence_model(tmp_path)


@pytest.mark.parametrize("value", [True, False])
def test_an_unknown_pooling_switch_is_refused(tmp_path, value):
    # The library's Pooling takes no such argument; mean pooling in its
    # place would be a silent guess.
    write_sentence_files(tmp_path)
    _edit(tmp_path / "1_Pooling" / "config.json", pooling_mode_median_tokens=value)
    with pytest.raises(UsageError, match=r"1_Pooling.config\.json: \"pooling_mode_median_tokens\" "
                       "is no pooling switch"):
        read_sentence_model(tmp_path)


def test_unknown_module_and_order_are_refused(tmp_path):
    write_sentence_files(tmp_path, extra_modules=["sentence_transformers.models.Dense"])
    with pytest.raises(UsageError, match=r"modules\.json: module 3 has \"type\": "
                       r"'sentence_transformers\.models\.Dense'"):
        read_sentence_model(tmp_path)
    write_sentence_files(tmp_path, extra_modules=["sentence_transformers.models.Pooling"])
    with pytest.raises(UsageError, match="Transformer -> Pooling -> Normalize -> Pooling"):
        read_sentence_model(tmp_path)


@pytest.mark.parametrize("file, text, message", [
    ("modules.json", "{not json", r"modules\.json: not a readable JSON file"),
    ("modules.json", '{"a": 1}', r"modules\.json: expected a JSON list, got dict"),
    ("modules.json", '[{"idx": 0}]', r"modules\.json: entry 0 has no \"type\" string"),
    ("1_Pooling/config.json", "[]", r"config\.json: expected a JSON object, got list"),
    ("1_Pooling/config.json", '{"pooling_mode_mean_tokens": "yes"}',
     r"\"pooling_mode_mean_tokens\" must be true or false, got 'yes'"),
    ("1_Pooling/config.json", '{"pooling_mode_mean_tokens": false}', "no pooling mode is on"),
    ("1_Pooling/config.json", '{"pooling_mode": "median"}', "'median' is not a pooling mode"),
    ("sentence_bert_config.json", '{"max_seq_length": 0}',
     r"sentence_bert_config\.json: \"max_seq_length\" must be a positive integer, got 0"),
    ("sentence_bert_config.json", '{"do_lower_case": 1}', r"\"do_lower_case\" must be true"),
])
def test_malformed_files_name_file_and_field(tmp_path, file, text, message):
    write_sentence_files(tmp_path)
    (tmp_path / file).write_text(text)
    with pytest.raises(UsageError, match=message):
        read_sentence_model(tmp_path)


def test_missing_pooling_config_and_escaping_path(tmp_path):
    write_sentence_files(tmp_path)
    os.remove(tmp_path / "1_Pooling" / "config.json")
    with pytest.raises(UsageError, match=r"1_Pooling.config\.json: missing"):
        read_sentence_model(tmp_path)
    modules = json.loads((tmp_path / "modules.json").read_text())
    modules[1]["path"] = "../elsewhere"
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(UsageError, match="expected a folder inside the model folder"):
        read_sentence_model(tmp_path)


def test_pooling_names_agree_with_the_layer():
    from kerasbert.layers.sentence_pooling import POOLING_MODES as LAYER_MODES

    assert POOLING_MODES == LAYER_MODES


# Issue 51: the property-based check of the untrusted-folder reader, on
# sentence-transformers folders: any one value of its three JSON files
# replaced by any JSON value is read or refused in one UsageError line;
# never another exception.
JSON_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 2**40), st.floats(),
                        st.text(max_size=6), st.lists(st.integers(), max_size=2),
                        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
FIELDS = (("1_Pooling/config.json", "pooling_mode_mean_tokens"),
          ("1_Pooling/config.json", "pooling_mode_cls_token"),
          ("1_Pooling/config.json", "pooling_mode"),
          ("1_Pooling/config.json", "word_embedding_dimension"),
          ("sentence_bert_config.json", "max_seq_length"),
          ("sentence_bert_config.json", "do_lower_case"))


@settings(max_examples=80, deadline=None, derandomize=True)
@given(field=st.sampled_from(FIELDS + (("modules.json", 0), ("modules.json", 1))),
       value=JSON_VALUES)
def test_any_changed_value_is_read_or_refused_in_one_line(field, value):
    directory = tempfile.mkdtemp()
    write_sentence_files(directory)
    name, key = field
    path = os.path.join(directory, name)
    with open(path) as f:
        content = json.load(f)
    content[key] = value  # a key's value, or a whole entry of modules.json
    with open(path, "w") as f:
        json.dump(content, f)
    try:
        model = read_sentence_model(directory)
    except UsageError as err:
        assert "\n" not in str(err) and str(err)
        return
    assert set(model.pooling) <= set(POOLING_MODES) and model.pooling
