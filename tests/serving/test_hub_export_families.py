"""`kerasbert export-hub` for ALBERT (SentencePiece) and RoBERTa (byte-level
BPE): the TF Hub preprocessor packs the family's way (`<s> a </s></s> b
</s>` for RoBERTa), carries the tokenizer's own files, and with the encoder
gives what our Python pieces give, in a fresh process with only tensorflow
+ tensorflow_text (the source tokenizer files deleted first).

Marked slow (~90 s: two families' exports and a fresh process); the BERT
export-hub test in test_hub_export.py runs by default.
"""

import json
import os
import shutil

import numpy as np
import pytest

from serving_fixtures import run_fresh
from serving_fixtures import tiny_backbone
from serving_fixtures import write_tokenizer
from test_hub_export import cli

from slow_marks import slow_covered_by

FAMILIES = {  # name: (backbone class, tokenizer kind, assets the preprocessor carries)
    "albert": ("AlbertBackbone", "sentencepiece", ["sentencepiece.model"]),
    "roberta": ("RobertaBackbone", "bpe", ["merges.txt", "vocab.json"]),
}
SEQ_LENGTH, PAIR_LENGTH = 24, 20
TEXTS = ["The quick brown fox jumps.", "Café naïve — Paris!", "", "東京 tower " * 10]
SECOND = ["who lives here?", "a cat", "runs", "the city"]
POSITIONS = [[1, 2], [1, 4], [0, 0], [5, 9]]

SCRIPT = """
spec = json.load(open(sys.argv[1]))
result = {}
for name, (pre_dir, enc_dir) in spec.items():
    preprocessor, encoder = tf.saved_model.load(pre_dir), tf.saved_model.load(enc_dir)
    inputs_json = json.load(open(sys.argv[2]))
    texts, second = tf.constant(inputs_json["texts"]), tf.constant(inputs_json["second"])
    inputs = preprocessor(texts)
    pair = preprocessor.bert_pack_inputs(
        [preprocessor.tokenize(texts), preprocessor.tokenize(second)],
        seq_length=tf.constant(%d))
    outputs = encoder(inputs)
    mlm = encoder.mlm(dict(inputs, masked_lm_positions=tf.constant(%s)))
    result[name] = {
        "assets": sorted(os.listdir(os.path.join(pre_dir, "assets"))),
        "single": {k: v.numpy().tolist() for k, v in inputs.items()},
        "pair": {k: v.numpy().tolist() for k, v in pair.items()},
        "special": {k: int(v) for k, v in preprocessor.tokenize.get_special_tokens_dict().items()},
        "sequence_output": outputs["sequence_output"].numpy().tolist(),
        "pooled_output": outputs["pooled_output"].numpy().tolist(),
        "mlm_logits": mlm["mlm_logits"].numpy().tolist(),
        "do_lower_case": bool(encoder.do_lower_case.numpy()),
    }
_check_imports()
print(json.dumps(result))
""" % (PAIR_LENGTH, POSITIONS)


def _expected(vocab, backbone, pretrainer):
    import tensorflow as tf

    from kerasbert.text import load_tokenizer, make_packer

    tokenizer = load_tokenizer(vocab)
    packer = make_packer(tokenizer, SEQ_LENGTH)
    single = packer(tokenizer.tokenize(TEXTS))
    pair = packer(tokenizer.tokenize(TEXTS), tokenizer.tokenize(SECOND), sequence_length=PAIR_LENGTH)
    outputs = backbone(single)
    mlm = pretrainer({**single, "masked_lm_positions": tf.constant(POSITIONS)})
    as_lists = lambda d: {k: v.numpy().tolist() for k, v in d.items()}  # noqa: E731
    return {"single": as_lists(single), "pair": as_lists(pair),
            "special": {k: int(v) for k, v in tokenizer.get_special_tokens_dict().items()},
            "sequence_output": np.asarray(outputs["sequence_output"]),
            "pooled_output": np.asarray(outputs["pooled_output"]),
            "mlm_logits": np.asarray(mlm["mlm_logits"]), "lower_case": tokenizer.lower_case,
            "cls_id": int(tokenizer.cls_id), "sep_id": int(tokenizer.sep_id)}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    import keras

    from kerasbert.tasks import BertPretrainer
    from kerasbert.text import load_tokenizer

    spec, expected = {}, {}
    for name, (family, kind, _) in FAMILIES.items():
        run = tmp_path_factory.mktemp(name)
        vocab = write_tokenizer(str(run / "tokenizer"), kind)
        keras.utils.set_random_seed(2)
        backbone = tiny_backbone(load_tokenizer(vocab).vocabulary_size, family=family)
        pretrainer = BertPretrainer(backbone, objectives=("mlm",))
        pretrainer.save(str(run / "pretrainer.keras"))
        backbone.save(str(run / "backbone.keras"))
        expected[name] = _expected(vocab, backbone, pretrainer)
        out = run / "hub"
        assert cli(["--backbone", str(run / "backbone.keras"), "--vocab", vocab,
                    "--output", str(out), "--seq-length", str(SEQ_LENGTH)]) == 0
        shutil.rmtree(run / "tokenizer")  # The SavedModels carry their own copies.
        spec[name] = (str(out / "preprocess"), str(out / "encoder"))
    root = tmp_path_factory.mktemp("spec")
    (root / "spec.json").write_text(json.dumps(spec))
    (root / "texts.json").write_text(json.dumps({"texts": TEXTS, "second": SECOND}))
    served = json.loads(run_fresh(SCRIPT, root / "spec.json", root / "texts.json")
                        .strip().splitlines()[-1])
    return expected, served


# ~90 s: two families' export-hub runs and a fresh process; the default suite
# checks BERT's export-hub SavedModels, and each family's tokenizer in an
# export's graph (test_pair_export_in_process).
@slow_covered_by("tests/serving/test_hub_export.py::test_savedmodels_match_keras_in_process",
                 "tests/serving/test_export_families.py::test_pair_export_in_process")
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_hub_export_of_family(exported, name):
    expected, served = exported[0][name], exported[1][name]
    assert served["assets"] == FAMILIES[name][2]
    assert served["single"] == expected["single"]
    assert served["pair"] == expected["pair"]
    assert served["special"] == expected["special"]
    assert served["do_lower_case"] == expected["lower_case"]
    for key in ("sequence_output", "pooled_output", "mlm_logits"):
        np.testing.assert_allclose(served[key], expected[key], atol=1e-5)
    # The family's own layout: RoBERTa's pair has two separators in the
    # middle and no second segment type; ALBERT's is BERT's.
    ids, types = served["pair"]["input_word_ids"][0], served["pair"]["input_type_ids"][0]
    separators = ids.count(expected["sep_id"])
    assert ids[0] == expected["cls_id"]
    assert separators == (3 if name == "roberta" else 2)
    assert (max(types) == 0) == (name == "roberta")
