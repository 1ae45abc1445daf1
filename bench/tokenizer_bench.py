"""Tokenizer throughput: kerasbert.text.WordPieceTokenizer vs HF `tokenizers`.

Same lines (the offline multilingual sample of tests/text, repeated to
--megabytes), same vocabulary (built by our builder from the sample), same
casing. Checks the ids are identical, then prints input MB/s of each and the
ratio. Ours runs batched in tf.data (the way data pipelines use it); HF runs
`encode_batch` on the same batches (it uses every core through Rayon).
bench/data_bench.py runs the same measurement (`measure`) on its corpus.

    python bench/tokenizer_bench.py [--megabytes 8] [--batch-size 1024] [--cased]
"""

import argparse
import os
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: E402

_common.add_paths("tests/text")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

OURS_LABEL = "kerasbert WordPieceTokenizer (tf.data, batched)"
HF_LABEL = "HF tokenizers BertWordPieceTokenizer"


def measure(lines, vocab_file, lower_case=True, batch_size=1024, repeats=3):
    """Ids of both tokenizers on `lines` (compared on every line, special-
    token strings as text in both: our default, and `tokenizers` with its
    encode_special_tokens switch), then input MB/s of each: `repeats`
    interleaved passes, median.

    Returns a dict: megabytes, lines, identical (line count), differing
    (up to 10 (index, line) pairs), ours_mb_s, hf_mb_s, ratio (ours / HF),
    and the per-repeat rates."""
    import tensorflow as tf
    import tokenizers

    from kerasbert.text import WordPieceTokenizer

    ours = WordPieceTokenizer(vocab_file, lower_case=lower_case)
    hf = tokenizers.BertWordPieceTokenizer(
        str(vocab_file), lowercase=lower_case, strip_accents=lower_case
    )
    hf._tokenizer.encode_special_tokens = True  # "[MASK]" in text is text, as ours
    megabytes = sum(len(l.encode("utf-8")) + 1 for l in lines) / 2**20
    batches = [lines[i : i + batch_size] for i in range(0, len(lines), batch_size)]
    dataset = (
        tf.data.Dataset.from_tensor_slices(tf.constant(lines))
        .batch(batch_size)
        .map(ours.tokenize_ids, num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )

    # Identical ids first (on the whole input).
    got = [row for batch in dataset for row in batch.to_list()]
    expected = [e.ids for b in batches for e in hf.encode_batch(b, add_special_tokens=False)]
    differing = [i for i, (a, b) in enumerate(zip(got, expected)) if list(a) != b]

    def run_ours():
        start = time.perf_counter()
        for _ in dataset:
            pass
        return megabytes / (time.perf_counter() - start)

    def run_hf():
        start = time.perf_counter()
        for b in batches:
            hf.encode_batch(b, add_special_tokens=False)
        return megabytes / (time.perf_counter() - start)

    rates = _common.interleaved({"ours": run_ours, "hf": run_hf}, repeats)
    ours_rate, hf_rate = _common.median(rates["ours"]), _common.median(rates["hf"])
    return {
        "megabytes": megabytes,
        "lines": len(lines),
        "identical": len(lines) - len(differing),
        "differing": [(i, lines[i]) for i in differing[:10]],
        "ours_mb_s": ours_rate,
        "hf_mb_s": hf_rate,
        "ratio": ours_rate / hf_rate,
        "ours_mb_s_all": rates["ours"],
        "hf_mb_s_all": rates["hf"],
        "batch_size": batch_size,
        "repeats": repeats,
    }


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

    from kerasbert.text import build_wordpiece_vocab
    from kerasbert.text import write_vocab

    sample = list(multilingual_sample.multilingual_lines())
    sample_bytes = sum(len(l.encode("utf-8")) + 1 for l in sample)
    copies = max(1, int(args.megabytes * 2**20 / sample_bytes))
    with tempfile.TemporaryDirectory() as tmp:
        text_file = pathlib.Path(tmp) / "sample.txt"
        text_file.write_text("\n".join(sample[::4]) + "\n", encoding="utf-8")
        vocab = build_wordpiece_vocab([text_file], args.vocab_size, lower_case=lower_case)
        vocab_file = pathlib.Path(tmp) / "vocab.txt"
        write_vocab(vocab, vocab_file)
        r = measure(sample * copies, vocab_file, lower_case, args.batch_size, args.repeats)

    print(f"lines {r['lines']:,} ({r['megabytes']:.1f} MB, {copies} x {len(sample):,} sample "
          f"lines), vocab {len(vocab):,}, {'uncased' if lower_case else 'cased'}; "
          f"identical ids on {r['identical']:,}/{r['lines']:,} lines")
    print(f"{'tokenizer':<48} {'MB/s':>8}")
    print(f"{OURS_LABEL:<48} {r['ours_mb_s']:>8.2f}")
    print(f"{HF_LABEL:<48} {r['hf_mb_s']:>8.2f}")
    print(f"ratio ours / HF: {r['ratio']:.2f}x  (median of {args.repeats}, "
          f"cores: {os.cpu_count()})")
    if r["identical"] != r["lines"]:
        sys.exit("ids differ")


if __name__ == "__main__":
    main()
