"""A keras-hub preset's tokenizer is keras-hub's: `load_tokenizer(PRESET)`
gives the ids of the keras-hub tokenizer that `save_to_preset` wrote the
preset with, through keras-hub's TensorFlow path (as in tf.data and its
exports), on the multilingual and the adversarial sample, in the preset's
own special-token setting, in Python and in a SavedModel. The peer files
are written by keras-hub (the vocabularies by tokenizers' and
sentencepiece's trainers).

keras-hub's WordPiece and byte-level BPE tokenizers drop the text after a
NUL character (their tensorflow-text regex split reads C strings); ours
keep it unless `truncate_at_nul`. Both settings are compared on every line:
on, with keras-hub's ids; off, with the ids of the same pipeline reading
the whole text (keras-hub's WordPiece on the text with each NUL as \x01,
another control character it drops the same way; `tokenizers`' byte-level
BPE on the same vocabulary, merges and special tokens)."""

import json

import pytest
import tensorflow as tf

from kerasbert.text import load_tokenizer
from test_source_tokenizer_parity import _check_saved_model
from test_source_tokenizer_parity import _hf_ids
from test_source_tokenizer_parity import _report
from test_source_tokenizer_parity import adversarial  # noqa: F401  (fixture)
from test_source_tokenizer_parity import albert_directory  # noqa: F401  (fixture)
from test_source_tokenizer_parity import lines  # noqa: F401  (fixture)
from test_source_tokenizer_parity import roberta_directory  # noqa: F401  (fixture)

from slow_marks import slow_covered_by

tokenizers = pytest.importorskip("tokenizers")
keras_hub = pytest.importorskip("keras_hub")


def _keras_hub_preset(directory, tokenizer, backbone):
    """A keras-hub preset's tokenizer files as keras-hub's save_to_preset
    writes them (tokenizer.json with its config, assets/tokenizer/), and
    the config.json marker of a preset of `backbone`."""
    tokenizer.save_to_preset(str(directory))
    (directory / "config.json").write_text(json.dumps(
        {"registered_name": f"keras_hub>{backbone}"}))
    return directory


def _albert_preset(directory, albert_directory):
    """(keras-hub's AlbertTokenizer of the ALBERT sample files, its preset
    directory written to `directory`)."""
    albert = keras_hub.models.AlbertTokenizer(
        proto=str(albert_directory[0] / "model" / "spiece.model"))
    return albert, _keras_hub_preset(directory, albert, "AlbertBackbone")


def _roberta_preset(directory, roberta_directory):
    """(keras-hub's RobertaTokenizer of the RoBERTa sample files, its preset
    directory written to `directory`, `tokenizers`' byte-level BPE of the
    same files with the four special tokens keras-hub matches)."""
    files = roberta_directory[0] / "model"
    roberta = keras_hub.models.RobertaTokenizer(vocabulary=str(files / "vocab.json"),
                                                merges=str(files / "merges.txt"))
    reference = tokenizers.ByteLevelBPETokenizer(str(files / "vocab.json"),
                                                 str(files / "merges.txt"))
    reference.add_special_tokens(["<s>", "</s>", "<pad>", "<mask>"])
    return roberta, _keras_hub_preset(directory, roberta, "RobertaBackbone"), reference


def _keras_hub_ids(tokenizer, texts):
    """keras-hub's ids through its TensorFlow path (as in tf.data and its
    exports; eagerly keras-hub runs a pure-Python path)."""
    return tf.function(lambda t: tokenizer(t))(tf.constant(texts)).to_list()


@pytest.mark.parametrize("lower_case", [
    # 21 s: lower-casing (NFKC case folding) and a SavedModel in both settings; the default
    # suite runs the same keras-hub pipeline cased on every line, and SavedModels of loaded
    # WordPiece tokenizers.
    pytest.param(True, id="uncased", marks=slow_covered_by(
        "tests/text/test_keras_hub_tokenizer_parity.py::test_keras_hub_bert_presets",
        "tests/text/test_source_tokenizer_parity.py::test_wordpiece_directories")),
    pytest.param(False, id="cased")])
def test_keras_hub_bert_presets(tmp_path, lines, adversarial, lower_case):
    """keras-hub's BertTokenizer reads text its own way (no control-character
    clean-up, NFKC case folding, 100-byte words, its four special tokens):
    a keras-hub preset loads with that pipeline and the preset's own
    special_tokens_in_strings, and gives keras-hub's ids on every line."""
    trained = tokenizers.BertWordPieceTokenizer(lowercase=True, strip_accents=True)
    trained.train_from_iterator(lines[::3], vocab_size=6000, min_frequency=1,
                                show_progress=False,
                                special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    trained.save_model(str(tmp_path))
    for on in (False, True):
        peer = keras_hub.models.BertTokenizer(vocabulary=str(tmp_path / "vocab.txt"),
                                              lowercase=lower_case,
                                              special_tokens_in_strings=on)
        directory = _keras_hub_preset(tmp_path / f"preset_{on}", peer, "BertBackbone")
        for truncate in (True, False):
            # The preset's own special-token setting.
            ours = load_tokenizer(str(directory), truncate_at_nul=truncate)
            assert ours.normalization == "keras_hub" and ours.special_tokens_in_strings is on
            assert ours.truncate_at_nul is truncate
            for name, texts in (("multilingual", lines), ("adversarial", adversarial)):
                got = ours.tokenize_ids(texts).to_list()
                expected = _keras_hub_ids(peer, texts if truncate else _nul_as_soh(texts))
                assert _report(f"keras-hub bert, truncate_at_nul={truncate}", on, name, got,
                               expected) == len(texts), [
                    line for line, a, b in zip(texts, got, expected) if a != b][:5]
            ids, starts, ends = ours.tokenize_with_offsets(adversarial)
            assert ids.to_list() == ours.tokenize_ids(adversarial).to_list()
        assert ours.detokenize(ours.tokenize_ids(["hello, world"])).numpy()[0] == b"hello , world"
        if lower_case:
            _check_saved_model(directory, adversarial, tmp_path / f"saved_{on}",
                               truncate_at_nul=True)
    # The sample tests something: text after a NUL.
    assert sum("\x00" in line.rstrip("\x00") for line in adversarial) > 10


def _nul_as_soh(texts):
    """The texts with each NUL as \x01 (a control character keras-hub's
    WordPiece split drops as it would a NUL it read)."""
    return [text.replace("\x00", "\x01") for text in texts]


def _check_albert_preset(folder, albert_source, label, **samples):
    """keras-hub's SentencePiece preset of `albert_source` (the
    albert_directory fixture), saved in `folder`: ours loads it cased and
    gives keras-hub's ids on every line of each of `samples` (name=texts),
    reported under `label`."""
    albert, directory = _albert_preset(folder, albert_source)
    ours = load_tokenizer(str(directory))
    assert ours.lower_case is False
    for name, texts in samples.items():
        got, expected = ours.tokenize_ids(texts).to_list(), _keras_hub_ids(albert, texts)
        assert _report(label, False, name, got, expected) == len(texts)


def test_keras_hub_albert_and_roberta_presets_on_a_sample(tmp_path, lines, adversarial,
                                                         albert_directory, roberta_directory):
    """The check below on a slice of both samples (every 40th multilingual
    line, every 10th adversarial line of up to 80 characters), in Python:
    keras-hub's SentencePiece preset, and its byte-level BPE preset with
    and without `truncate_at_nul`."""
    multilingual = lines[::40]
    short = [line for line in adversarial if len(line) <= 80][::10]
    assert sum("\x00" in line.rstrip("\x00") for line in short) > 0  # text after a NUL
    _check_albert_preset(tmp_path / "albert", albert_directory, "keras-hub albert slice",
                         multilingual=multilingual, adversarial=short)
    roberta, directory, reference = _roberta_preset(tmp_path / "roberta", roberta_directory)
    texts = multilingual + short  # one keras-hub trace for both (~4 s each)
    for truncate in (True, False):
        ours = load_tokenizer(str(directory), special_tokens_in_strings=True,
                              truncate_at_nul=truncate)
        got = ours.tokenize_ids(texts).to_list()
        expected = (_keras_hub_ids(roberta, texts) if truncate
                    else _hf_ids(reference._tokenizer, texts, True))
        assert _report(f"keras-hub roberta slice, truncate_at_nul={truncate}", True, "both",
                       got, expected) == len(texts)


# 32 s: every multilingual line (a quarter for RoBERTa), all short adversarial lines, and
# SavedModels in both NUL settings; the default suite checks a slice in Python.
@slow_covered_by(
    "tests/text/test_keras_hub_tokenizer_parity.py::test_keras_hub_albert_and_roberta_presets_on_a_sample",
    "tests/text/test_source_tokenizer_parity.py::test_bpe_tokenizer_json_on_a_sample")
def test_keras_hub_albert_and_roberta_presets(tmp_path, lines, adversarial, albert_directory,
                                              roberta_directory):
    """keras-hub's SentencePiece tokenizer (no lower-casing, no special
    tokens in text) and byte-level BPE (its four special tokens matched
    always: ours with the switch on). keras-hub's BPE drops the text after
    a NUL character (tensorflow-text's regex split reads C strings): ours
    with `truncate_at_nul` gives keras-hub's ids on every line, without it
    the ids of `tokenizers`' byte-level BPE on the same vocabulary, merges
    and special tokens on every line, in Python and in a SavedModel.
    keras-hub's BPE takes minutes on the long words, so it sees the
    adversarial lines of up to 80 characters (special-token strings,
    control characters, empty lines); our BPE's long words are compared
    with `tokenizers` in test_source_tokenizer_parity.py."""
    _check_albert_preset(tmp_path / "albert", albert_directory, "keras-hub albert",
                         multilingual=lines, adversarial=adversarial)

    roberta, directory, reference = _roberta_preset(tmp_path / "roberta", roberta_directory)
    short = [line for line in adversarial if len(line) <= 80]
    assert sum("\x00" in line.rstrip("\x00") for line in short) > 5  # text after a NUL
    for truncate in (True, False):
        ours = load_tokenizer(str(directory), special_tokens_in_strings=True,
                              truncate_at_nul=truncate)
        assert ours.truncate_at_nul is truncate
        for name, texts in (("multilingual", lines[::4]), ("adversarial, short lines", short)):
            got = ours.tokenize_ids(texts).to_list()
            expected = (_keras_hub_ids(roberta, texts) if truncate
                        else _hf_ids(reference._tokenizer, texts, True))
            assert _report(f"keras-hub roberta, truncate_at_nul={truncate}", True, name, got,
                           expected) == len(texts), [
                line for line, a, b in zip(texts, got, expected) if a != b][:5]
        _check_saved_model(directory, short, tmp_path / f"saved_{truncate}", settings=(True,),
                           truncate_at_nul=truncate)
