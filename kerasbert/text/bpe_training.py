"""Trains a RoBERTa-layout byte-level BPE vocabulary (vocab.json +
merges.txt) from text files with Hugging Face `tokenizers`' trainer.

Layout, as in the released RoBERTa files: `<s>`=0, `<pad>`=1, `</s>`=2,
`<unk>`=3, then the 256 byte-characters and the learned merges, and
`<mask>` last. Pre-tokenization is GPT-2's (no prefix space, no lower
casing), so `BytePairTokenizer` on the result gives the trainer's own ids.
"""

import json
import os
import tempfile

from kerasbert.io_utils import atomic_write_text

LEADING_SPECIAL_TOKENS = ("<s>", "<pad>", "</s>", "<unk>")
MASK_TOKEN = "<mask>"
VOCAB_FILENAME = "vocab.json"
MERGES_FILENAME = "merges.txt"
# Special tokens + every byte must fit; merges come on top.
MIN_VOCAB_SIZE = len(LEADING_SPECIAL_TOKENS) + 256 + 1


def train_bpe(input_files, vocab_size, output_dir, min_frequency=2, show_progress=False):
    """Learns a byte-level BPE vocabulary of at most `vocab_size` tokens.

    Args:
        input_files: paths of UTF-8 text files (one sentence or document
            per line; the trainer sees lines).
        vocab_size: total size including the 5 special tokens and the 256
            byte-characters (RoBERTa: 50265). A small corpus can stop short
            of it (no pair left to merge `min_frequency` times).
        output_dir: folder that gets vocab.json and merges.txt (created;
            each file is written to a temporary name, then renamed).
        min_frequency: a pair is merged only if seen this often.
        show_progress: the trainer's progress bar.

    Returns:
        {"vocabulary_file": path, "merges_file": path}.

    Raises:
        ValueError: vocab_size below 261, a missing or unreadable file.
    """
    from tokenizers import ByteLevelBPETokenizer

    if isinstance(input_files, (str, os.PathLike)):
        input_files = [input_files]
    input_files = [os.fspath(f) for f in input_files]
    if not input_files:
        raise ValueError("train_bpe needs at least one input file.")
    missing = [f for f in input_files if not os.path.isfile(f)]
    if missing:
        raise ValueError(f"Input file(s) not found: {', '.join(missing)}")
    if vocab_size < MIN_VOCAB_SIZE:
        raise ValueError(
            f"vocab_size must be at least {MIN_VOCAB_SIZE} (5 special tokens "
            f"+ 256 bytes) for a byte-level BPE, got {vocab_size}."
        )
    tokenizer = ByteLevelBPETokenizer()  # No prefix space, no lower casing.
    try:
        # One slot is kept for <mask>, which goes last.
        tokenizer.train(
            input_files,
            vocab_size=vocab_size - 1,
            min_frequency=min_frequency,
            special_tokens=list(LEADING_SPECIAL_TOKENS),
            show_progress=show_progress,
        )
    except Exception as err:  # The Rust trainer raises plain Exceptions.
        raise ValueError(
            f"BPE training failed on {', '.join(input_files)}: {err}"
        ) from err
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer.save_model(tmp)
        with open(os.path.join(tmp, VOCAB_FILENAME), encoding="utf-8") as f:
            vocab = json.load(f)
        with open(os.path.join(tmp, MERGES_FILENAME), encoding="utf-8") as f:
            merges = f.read()
    for expected, token in enumerate(LEADING_SPECIAL_TOKENS):
        if vocab.get(token) != expected:  # The trainer's layout changed.
            raise RuntimeError(f"{token} got id {vocab.get(token)}, not {expected}.")
    vocab[MASK_TOKEN] = len(vocab)
    os.makedirs(output_dir, exist_ok=True)
    vocab_path = os.path.join(output_dir, VOCAB_FILENAME)
    merges_path = os.path.join(output_dir, MERGES_FILENAME)
    # Id order (not key order) so the file reads like the released one.
    ordered = dict(sorted(vocab.items(), key=lambda item: item[1]))
    atomic_write_text(vocab_path, json.dumps(ordered, ensure_ascii=False) + "\n")
    atomic_write_text(merges_path, merges)
    return {"vocabulary_file": vocab_path, "merges_file": merges_path}
