"""The JSON of a checkpoint (config.json, bert_config.json, a keras-hub
config, a safetensors header or index) is parsed within limits (issue 37,
item 1): depth is counted before Python's recursive parser runs (100,000
levels used to end in a RecursionError traceback), size is capped before
reading on, repeated keys and NaN are refused; each refusal is one line
naming the file."""

import json

import pytest

from kerasbert.errors import CheckpointError
from kerasbert.errors import UsageError
from kerasbert.sources import source
from kerasbert.sources.sentence_transformers import read_sentence_model
from kerasbert.sources.source import MAX_JSON_DEPTH
from kerasbert.sources.source import NotJsonError
from kerasbert.sources.source import json_depth
from kerasbert.sources.source import parse_json
from kerasbert.sources.source import read_json_file

DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize("raw, depth", [
    (b"{}", 1), (b'{"a": [1, {"b": 2}]}', 3), (b'"[[[["', 0), (b'{"x": "\\"[{"}', 1),
    (b'["\\\\", ["\\\\"]]', 2), (DEEP, 100_000), (b"3", 0),
    (b'"unterminated \\', 0), (b'"\\"' * 50_000, 0),
])
def test_depth_is_counted_without_parsing_and_ignores_strings(raw, depth):
    assert json_depth(raw) == depth


def test_a_real_config_parses_as_json_does():
    text = json.dumps({"model_type": "bert", "vocab_size": 30522, "architectures": ["BertModel"],
                       "id2label": {"0": "NEG", "1": "POS"}, "note": "[{\u00e9\u4e2d}]"})
    assert parse_json(text.encode(), "config.json") == json.loads(text)


@pytest.mark.parametrize("raw, error, fragment", [
    (b'{"x": ' + DEEP + b"}", CheckpointError, "nested 100001 levels"),
    (b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1), CheckpointError, "nested 65"),
    (b'{"vocab_size": 30, "vocab_size": 50000000}', CheckpointError, "'vocab_size' appears twice"),
    (b'{"layer_norm_eps": NaN}', CheckpointError, "NaN is not a JSON number"),
    (b'{"vocab_size": -Infinity}', CheckpointError, "-Infinity is not a JSON number"),
    (b'{"vocab_size": ' + b"9" * 5000 + b"}", CheckpointError, "digits"),
    (b'{"vocab_size": 3', NotJsonError, "not JSON"),
    (b"\xff\xfe{}", NotJsonError, "not UTF-8"),
])
def test_json_past_the_limits_is_refused_in_one_line(raw, error, fragment):
    with pytest.raises(error) as err:
        parse_json(raw, "DIR/config.json")
    message = str(err.value)
    assert fragment in message and message.startswith("DIR/config.json: ") and "\n" not in message


def test_a_file_past_the_size_limit_is_refused_without_reading_it_all(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"pad": "x" * 1000}))
    with pytest.raises(CheckpointError, match="more than 100 bytes"):
        read_json_file(str(path), max_bytes=100)
    assert read_json_file(str(path))["pad"] == "x" * 1000


def test_a_directory_with_a_hostile_config_is_refused_when_resolved(tmp_path):
    (tmp_path / "config.json").write_bytes(b'{"model_type": "bert", "x": ' + DEEP + b"}")
    with pytest.raises(CheckpointError) as err:
        source.resolve(str(tmp_path))
    assert "config.json: JSON nested 100001 levels" in str(err.value)
    # A config.json that is not JSON at all leaves the directory what it was.
    (tmp_path / "config.json").write_text("not json")
    assert source.resolve(str(tmp_path)).kind == source.DIRECTORY


def test_a_sentence_transformers_file_nested_deeply_is_one_line(tmp_path):
    (tmp_path / "modules.json").write_bytes(DEEP)
    with pytest.raises(UsageError) as err:
        read_sentence_model(str(tmp_path))
    assert "modules.json" in str(err.value) and "\n" not in str(err.value)
