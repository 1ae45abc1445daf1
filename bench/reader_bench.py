#!/usr/bin/env python
"""Pretraining reader throughput (examples/s): kerasbert vs Model Garden.

Writes N synthetic examples (seq 128, 20 predictions, NSP labels) into 4
shards + metadata.json in a temporary folder, then times, in the same run:

    peer      tf-models-official BertPretrainDataLoader (parse per record)
    ours      pretraining_dataset, stored masks (with the corrupt-data checks)
    ours+dyn  pretraining_dataset, dynamic masking on the same files

Each reader is run `--repeats` times alternately over `--batches` batches
after one warm-up pass; the median is printed with the ratio to the peer.
No network, no real text needed (reader cost does not depend on the words).
bench/data_bench.py runs the same measurement (`measure`) on the files our
writer made from real text.
"""

import argparse
import os
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: E402

_common.add_paths("tests/data")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

PEER = "peer (Model Garden)"
OURS = "ours"
OURS_DYNAMIC = "ours+dynamic masking"


def peer_dataset(pattern, batch_size, sequence_length, num_pred):
    from official.nlp.data import pretrain_dataloader

    config = pretrain_dataloader.BertPretrainDataConfig(
        input_path=pattern, global_batch_size=batch_size, is_training=True,
        seq_length=sequence_length, max_predictions_per_seq=num_pred,
        use_next_sentence_label=True)
    return pretrain_dataloader.BertPretrainDataLoader(config).load()


def time_batches(ds, batches, batch_size):
    it = iter(ds)
    next(it)  # pipeline start-up is not throughput
    start = time.perf_counter()
    for _ in range(batches):
        next(it)
    return batches * batch_size / (time.perf_counter() - start)


def measure(pattern, vocab_file, sequence_length=128, num_pred=20, batch_size=32, batches=300,
            repeats=3):
    """examples/s of the three readers on the shards `pattern`: `repeats`
    interleaved runs of `batches` batches each. Returns {name: [rates]}."""
    from kerasbert.data.reader import pretraining_dataset

    readers = {
        PEER: lambda: peer_dataset(pattern, batch_size, sequence_length, num_pred),
        OURS: lambda: pretraining_dataset(pattern, batch_size, seed=1),
        OURS_DYNAMIC: lambda: pretraining_dataset(
            pattern, batch_size, seed=1, dynamic_masking=True, vocab_file=vocab_file),
    }
    return _common.interleaved(
        {name: (lambda make=make: time_batches(make(), batches, batch_size))
         for name, make in readers.items()},
        repeats)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=20000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sequence_length, num_pred = 128, 20

    import reader_records as rr

    with tempfile.TemporaryDirectory() as tmp:
        vocab = os.path.join(tmp, "vocab.txt")
        vocab_size = rr.write_vocab(vocab)
        instances = rr.make_instances(args.examples, sequence_length, num_pred, seed=0,
                                      vocab_size=vocab_size, min_len=64)
        rr.write_shards(tmp, instances, num_shards=4, sequence_length=sequence_length,
                        num_pred=num_pred, vocab_file=vocab)
        results = measure(os.path.join(tmp, "*.tfrecord"), vocab, sequence_length, num_pred,
                          args.batch_size, args.batches, args.repeats)
    peer = _common.median(results[PEER])
    print(f"reader throughput, seq {sequence_length}, P {num_pred}, batch {args.batch_size}, "
          f"{os.cpu_count()} CPUs, median of {args.repeats}")
    for name, values in results.items():
        median = _common.median(values)
        print(f"  {name:24s} {median:10.0f} examples/s   x{median / peer:.2f} vs peer")


if __name__ == "__main__":
    main()
