"""Tokenizer throughput: kerasbert.text.WordPieceTokenizer vs HF `tokenizers`.

Same lines (the offline multilingual sample of tests/text, repeated to
--megabytes), same vocabulary (built by our builder from the sample), same
casing. Checks the ids are identical, then prints input MB/s of each and the
ratio. Ours runs batched in tf.data (the way data pipelines use it); HF runs
`encode_batch` on the same batches (it uses every core through Rayon).

    python bench/tokenizer_bench.py [--megabytes 8] [--batch-size 1024] [--cased]
"""

import argparse
import os
import pathlib
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "text"))


def best_of(repeats, fn):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=8.0)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--cased", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    lower_case = not args.cased

    import multilingual_sample
    import tensorflow as tf
    import tokenizers

    from kerasbert.text import WordPieceTokenizer
    from kerasbert.text import build_wordpiece_vocab
    from kerasbert.text import write_vocab

    sample = list(multilingual_sample.multilingual_lines())
    # Lines HF handles differently on purpose (see tests/text/test_hf_parity.py).
    sample = [l for l in sample if l not in multilingual_sample.DIVERGENT_LINES]
    with tempfile.TemporaryDirectory() as tmp:
        text_file = pathlib.Path(tmp) / "sample.txt"
        text_file.write_text("\n".join(sample[::4]) + "\n", encoding="utf-8")
        vocab = build_wordpiece_vocab([text_file], args.vocab_size, lower_case=lower_case)
        vocab_file = pathlib.Path(tmp) / "vocab.txt"
        write_vocab(vocab, vocab_file)
        ours = WordPieceTokenizer(vocab_file, lower_case=lower_case)
        hf = tokenizers.BertWordPieceTokenizer(
            str(vocab_file), lowercase=lower_case, strip_accents=lower_case
        )

    sample_bytes = sum(len(l.encode("utf-8")) + 1 for l in sample)
    copies = max(1, int(args.megabytes * 2**20 / sample_bytes))
    lines = sample * copies
    megabytes = sample_bytes * copies / 2**20
    batches = [lines[i : i + args.batch_size] for i in range(0, len(lines), args.batch_size)]

    dataset = (
        tf.data.Dataset.from_tensor_slices(tf.constant(lines))
        .batch(args.batch_size)
        .map(ours.tokenize_ids, num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )

    # Identical ids first (on the whole input).
    got = [row for batch in dataset for row in batch.to_list()]
    expected = [e.ids for b in batches for e in hf.encode_batch(b, add_special_tokens=False)]
    same = sum(list(a) == b for a, b in zip(got, expected))
    print(f"lines {len(lines):,} ({megabytes:.1f} MB, {copies} x {len(sample):,} sample lines), "
          f"vocab {len(vocab):,}, {'uncased' if lower_case else 'cased'}; "
          f"identical ids on {same:,}/{len(lines):,} lines")

    def run_ours():
        for _ in dataset:
            pass

    def run_hf():
        for b in batches:
            hf.encode_batch(b, add_special_tokens=False)

    t_ours = best_of(args.repeats, run_ours)
    t_hf = best_of(args.repeats, run_hf)
    print(f"{'tokenizer':<44} {'MB/s':>8}")
    print(f"{'kerasbert WordPieceTokenizer (tf.data, batched)':<44} {megabytes / t_ours:>8.2f}")
    print(f"{'HF tokenizers BertWordPieceTokenizer':<44} {megabytes / t_hf:>8.2f}")
    print(f"ratio ours / HF: {t_hf / t_ours:.2f}x  (cores: {os.cpu_count()})")
    if same != len(lines):
        sys.exit("ids differ")


if __name__ == "__main__":
    main()
