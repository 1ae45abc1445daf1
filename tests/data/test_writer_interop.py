"""Interop: files written with default options are read by tf-models-official's
`BertPretrainDataLoader`, with the same values we read ourselves."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from pretrain_fixtures import read_shards  # noqa: E402
from pretrain_fixtures import write_corpus  # noqa: E402
from pretrain_fixtures import write_vocab  # noqa: E402


def test_model_garden_bert_pretrain_loader_reads_our_files(tmp_path):
    from official.nlp.data import pretrain_dataloader

    from kerasbert.data.writer import create_pretraining_data

    vocab = write_vocab(str(tmp_path))
    corpus = write_corpus(str(tmp_path / "corpus.txt"), 60, max_sentences=30)
    out = tmp_path / "out"
    # Default options (128 / 20 / nsp / static masking), smaller dupe factor.
    meta = create_pretraining_data([corpus], vocab, str(out), dupe_factor=2, progress=False)
    ours = read_shards(str(out), 128, 20)

    config = pretrain_dataloader.BertPretrainDataConfig(
        input_path=os.path.join(out, "part-*"),
        seq_length=128,
        max_predictions_per_seq=20,
        global_batch_size=8,
        use_next_sentence_label=True,
        is_training=False,
    )
    batch = next(iter(pretrain_dataloader.BertPretrainDataLoader(config).load()))
    assert batch["input_word_ids"].shape == (8, 128)
    assert batch["masked_lm_positions"].shape == (8, 20)
    assert batch["next_sentence_labels"].shape == (8, 1)
    expected = {
        "input_word_ids": ours["input_ids"][:8],
        "input_mask": ours["input_mask"][:8],
        "input_type_ids": ours["segment_ids"][:8],
        "masked_lm_positions": ours["masked_lm_positions"][:8],
        "masked_lm_ids": ours["masked_lm_ids"][:8],
        "masked_lm_weights": ours["masked_lm_weights"][:8],
        "next_sentence_labels": ours["next_sentence_labels"][:8],
    }
    for name, value in expected.items():
        np.testing.assert_array_equal(batch[name].numpy(), value, err_msg=name)
    assert meta["num_instances"] >= 8


def test_our_reader_reads_static_and_unmasked_files(tmp_path):
    import kerasbert.data as kdata
    from kerasbert.data.writer import create_pretraining_data

    vocab = write_vocab(str(tmp_path))
    corpus = write_corpus(str(tmp_path / "corpus.txt"), 40)
    kw = dict(sequence_length=32, max_predictions_per_seq=5, dupe_factor=1, progress=False)
    create_pretraining_data([corpus], vocab, str(tmp_path / "s"), **kw)
    create_pretraining_data([corpus], vocab, str(tmp_path / "d"), objective="none",
                            masking=False, **kw)
    ours = read_shards(str(tmp_path / "s"), 32, 5)
    batch = next(iter(kdata.pretraining_dataset(
        str(tmp_path / "s" / "part-*"), 4, shuffle=False, repeat=False)))
    # The reader interleaves shards, so match each read row to a written one.
    written = {
        (tuple(ids), tuple(lm)) for ids, lm in zip(ours["input_ids"], ours["masked_lm_ids"])
    }
    for ids, lm in zip(batch["input_word_ids"].numpy(), batch["masked_lm_ids"].numpy()):
        assert (tuple(ids), tuple(lm)) in written
    dynamic = next(iter(kdata.pretraining_dataset(
        str(tmp_path / "d" / "part-*"), 4, dynamic_masking=True, vocab_file=vocab,
        shuffle=False, repeat=False)))
    assert dynamic["masked_lm_positions"].shape == (4, 5)
    assert "next_sentence_labels" not in dynamic
