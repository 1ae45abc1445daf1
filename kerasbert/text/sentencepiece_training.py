"""Trains an ALBERT-style SentencePiece model (`.model` + `.vocab`).

Same recipe as google-research/albert's vocabulary: a unigram model, "<pad>"
id 0, "<unk>" id 1, the control symbols [CLS] [SEP] [MASK] as ids 2-4 (they
never come out of text, so user input cannot inject them), no BOS/EOS, NFKC
normalisation (SentencePiece's default `nmt_nfkc`), character coverage
0.99995. ALBERT's uncased models lower-case before SentencePiece, so the
corpus is lower-cased here exactly when the tokenizer will lower-case.

Input: text files with one sentence per line (blank lines between documents
are skipped), as for the pretraining data.
"""

import io
import os

from kerasbert.io_utils import atomic_file
from kerasbert.text.text_files import read_lines

PAD, UNK = "<pad>", "<unk>"
CONTROL_SYMBOLS = ("[CLS]", "[SEP]", "[MASK]")


def _read_sentences(input_files, lower_case):
    """The non-blank lines of UTF-8 files, stripped (a byte that is not
    UTF-8 raises a UsageError naming the file and its offset)."""
    for path in input_files:
        for line in read_lines(path):
            line = line.strip()
            if line:
                yield line.lower() if lower_case else line


def _vocab_text(model_proto):
    """The `.vocab` SentencePiece writes: "piece<TAB>score" per id."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_proto=model_proto)
    return "".join(
        f"{sp.id_to_piece(i)}\t{sp.get_score(i):g}\n"
        for i in range(sp.get_piece_size())
    )


def train_sentencepiece(
    input_files,
    vocab_size,
    output_prefix,
    lower_case=True,
    model_type="unigram",
    character_coverage=0.99995,
    input_sentence_size=10_000_000,
    user_defined_symbols=(),
    seed=12345,
    num_threads=None,
):
    """Trains a SentencePiece model for ALBERT.

    Args:
        input_files: path or list of paths of UTF-8 text files, one sentence
            per line.
        vocab_size: int. Exact size of the vocabulary, special pieces
            included (ALBERT: 30000).
        output_prefix: writes `<output_prefix>.model` (the serialized
            ModelProto the tokenizer loads) and `<output_prefix>.vocab`.
        lower_case: lower-case the corpus (ALBERT uncased); pass the same
            value to `SentencePieceTokenizer`.
        model_type: "unigram" (ALBERT) or "bpe", "char", "word".
        character_coverage: fraction of characters covered by the alphabet;
            the rarest rest become "<unk>". Use 1.0 for small corpora whose
            every character must survive.
        input_sentence_size: at most this many sentences are sampled
            (deterministically, with `seed`) for training.
        user_defined_symbols: pieces always kept whole (ALBERT used
            `( ) " - . – £ €`).
        seed: seed of SentencePiece's sampling, so the same corpus and
            arguments give byte-identical files.
        num_threads: trainer threads (default: the CPU count, at most 16).

    Returns:
        (model_path, vocab_path).

    Raises:
        FileNotFoundError: an input file does not exist.
        ValueError: no text in the input, or `vocab_size` is larger than the
            corpus can fill (SentencePiece's message is included).
    """
    input_files = _checked_inputs(input_files, vocab_size, user_defined_symbols)
    output_prefix = os.fspath(output_prefix)
    model_path, vocab_path = output_prefix + ".model", output_prefix + ".vocab"
    os.makedirs(os.path.dirname(os.path.abspath(model_path)), exist_ok=True)
    proto = _train_proto(
        input_files, lower_case, seed,
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=character_coverage,
        input_sentence_size=input_sentence_size,
        user_defined_symbols=list(user_defined_symbols),
        num_threads=num_threads or min(16, os.cpu_count() or 1),
    )
    _write_bytes(model_path, proto)
    _write_bytes(vocab_path, _vocab_text(proto).encode("utf-8"))
    return model_path, vocab_path


def _checked_inputs(input_files, vocab_size, user_defined_symbols):
    """`input_files` as a list of paths, each an existing file; raises
    `train_sentencepiece`'s errors before any training starts."""
    if isinstance(input_files, (str, os.PathLike)):
        input_files = [input_files]
    input_files = [os.fspath(p) for p in input_files]
    for path in input_files:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"SentencePiece input file not found: {path}")
    if not any(True for _ in _read_sentences(input_files, False)):
        raise ValueError(
            f"No text to train SentencePiece on in {', '.join(input_files)}."
        )
    specials = len(CONTROL_SYMBOLS) + 2 + len(user_defined_symbols)
    if vocab_size <= specials:
        raise ValueError(
            f"vocab_size {vocab_size} leaves no room beyond the {specials} "
            "special pieces."
        )
    return input_files


def _train_proto(input_files, lower_case, seed, **options):
    """The trained model's serialized ModelProto (bytes).

    `options`: the trainer's arguments that `train_sentencepiece` passes
    through (vocab_size, model_type, ...); the ALBERT recipe's fixed ones
    (special ids and pieces, no BOS/EOS, shuffled sampling) are set here.
    A trainer failure becomes a ValueError naming the files.
    """
    import sentencepiece as spm

    spm.set_random_generator_seed(seed)
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=_read_sentences(input_files, lower_case),
            model_writer=model,
            shuffle_input_sentence=True,
            pad_id=0,
            pad_piece=PAD,
            unk_id=1,
            unk_piece=UNK,
            bos_id=-1,
            eos_id=-1,
            control_symbols=list(CONTROL_SYMBOLS),
            minloglevel=2,
            **options,
        )
    except RuntimeError as error:
        raise ValueError(
            f"SentencePiece training on {', '.join(input_files)} with "
            f"vocab_size={options['vocab_size']} failed: {error}"
        ) from None
    return model.getvalue()


def _write_bytes(path, data):
    """`data` written beside `path` and renamed over it: never half-written."""
    with atomic_file(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
