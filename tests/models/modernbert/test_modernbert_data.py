"""`kerasbert create-pretraining-data --vocab` a ModernBERT folder or its
bare tokenizer.json (`bert_bpe`): records of [CLS] a document's sentences
[SEP] whose ids are the `tokenizers` library's for each line, in process
and through the console script (relative --vocab, worker processes)."""

import json
import pathlib
import sys

import pytest

from modernbert_folders import write_tokenizer
from reliability.console import kerasbert
from reliability.console import ok

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "data"))
from pretrain_fixtures import read_shards  # noqa: E402

pytest.importorskip("tokenizers")

DOCUMENTS = [["Paris is the capital of France.", "café 한국어 naïve, e\u0301 too."],
             ["A second document.", "  two spaces  and [MASK] text."]]
LENGTH = 128


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("modernbert_data")
    lines = [line for document in DOCUMENTS for line in document] * 30
    reference = write_tokenizer(root / "modernbert", lines, vocab_size=400)
    (root / "modernbert" / "config.json").write_text(json.dumps({"model_type": "modernbert"}))
    (root / "corpus.txt").write_text(
        "".join("\n".join(document) + "\n\n" for document in DOCUMENTS), encoding="utf-8")
    return root, reference


def expected_rows(reference):
    """[CLS] each document's lines, each encoded alone, [SEP]: one row (the
    writer packs both documents into one instance of LENGTH). The writer
    reads a line without its surrounding spaces (google-research/bert's
    input format) and text as text ("[MASK]" typed in the corpus is no
    mask): `tokenizers` with its special tokens off."""
    cls, sep = reference.token_to_id("[CLS]"), reference.token_to_id("[SEP]")
    reference.encode_special_tokens = True
    row = [cls]
    for document in DOCUMENTS:
        for line in document:
            row += reference.encode(line.strip(), add_special_tokens=False).ids
        row.append(sep)
    return [row]


def written_rows(directory):
    data = read_shards(str(directory), LENGTH, 20, objective="none", masked=False)
    return [ids[mask > 0].tolist() for ids, mask in zip(data["input_ids"], data["input_mask"])]


ARGS = ("--objective", "none", "--no-masking", "--max-seq-length", LENGTH, "--dupe-factor", 1,
        "--no-progress")


@pytest.mark.parametrize("vocab", ["modernbert", "modernbert/tokenizer.json"])
def test_records_hold_the_tokenizers_ids(corpus, vocab, tmp_path, monkeypatch):
    from kerasbert import cli

    monkeypatch.setenv("KERASBERT_CACHE", str(tmp_path / "cache"))
    root, reference = corpus
    out = tmp_path / "out"
    assert cli.main(["create-pretraining-data", "--input", str(root / "corpus.txt"), "--vocab",
                     str(root / vocab), "--output-dir", str(out), *map(str, ARGS)]) == 0
    meta = json.loads((out / "metadata.json").read_text())
    assert (meta["tokenizer"], meta["lower_case"]) == ("bert_bpe", False)
    assert meta["vocab_size"] == reference.get_vocab_size()
    assert written_rows(out) == expected_rows(reference)


def test_the_console_script_reads_a_relative_tokenizer_json(corpus, tmp_path):
    root, reference = corpus
    ok(kerasbert("create-pretraining-data", "--input", "corpus.txt", "--vocab",
                 "modernbert/tokenizer.json", "--output-dir", tmp_path / "out", "--workers", 2,
                 *ARGS, cwd=root, KERASBERT_CACHE=tmp_path / "cache"))
    assert written_rows(tmp_path / "out") == expected_rows(reference)
