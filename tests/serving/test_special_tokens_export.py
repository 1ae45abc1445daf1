"""`kerasbert export` keeps a run's special-token setting in the graph: a
fine-tuned run whose config.json says special_tokens_in_strings exports a
SavedModel where a client's "[SEP]" is the separator id, and
`--no-special-tokens-in-strings` exports one where it is text. Checked on
the served probabilities against `serve_token_ids` fed with the Python
tokenizer's ids in each setting."""

import json
import os

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the graph's tokenizer ops)
from serving_fixtures import make_finetuned_dir

from kerasbert import cli
from kerasbert.text import WordPieceTokenizer
from kerasbert.text import describe_tokenizer
from kerasbert.text import make_packer

TEXTS = ["the city [SEP] paris", "who [MASK] in london?", "[CLS]x[SEP]"]


def test_export_keeps_the_runs_special_token_setting(tmp_path):
    ft = make_finetuned_dir(str(tmp_path / "ft"), "classification", sequence_length=16)
    on = WordPieceTokenizer(os.path.join(ft, "vocab.txt"), special_tokens_in_strings=True)
    with open(os.path.join(ft, "config.json")) as f:
        config = json.load(f)
    config["tokenizer"] = describe_tokenizer(on)
    with open(os.path.join(ft, "config.json"), "w") as f:
        json.dump(config, f)

    assert cli.main(["export", "--model", ft, "--output", str(tmp_path / "on")]) in (0, None)
    assert cli.main(["export", "--model", ft, "--output", str(tmp_path / "off"),
                     "--no-special-tokens-in-strings"]) in (0, None)
    off = WordPieceTokenizer(os.path.join(ft, "vocab.txt"))
    for name, tokenizer in (("on", on), ("off", off)):
        path = os.path.join(tmp_path, name, "1")
        with open(os.path.join(path, "assets.extra", "export.json")) as f:
            assert json.load(f)["special_tokens_in_strings"] is (name == "on")
        loaded = tf.saved_model.load(path)
        served = loaded.signatures["serving_default"](text=tf.constant(TEXTS))
        packed = make_packer(tokenizer, 16)(tokenizer.tokenize_ids(TEXTS))
        by_ids = loaded.signatures["serve_token_ids"](
            **{k: tf.cast(v, tf.int32) for k, v in packed.items()})
        np.testing.assert_allclose(served["probabilities"].numpy(),
                                   tf.nn.softmax(by_ids["logits"]).numpy(), atol=1e-6)
    ids_on = on.tokenize_ids(TEXTS).to_list()
    assert [on.sep_id in row for row in ids_on] == [True, False, True]
    assert not any(on.sep_id in row for row in off.tokenize_ids(TEXTS).to_list())
