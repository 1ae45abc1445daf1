"""One pretraining-data run's checked settings, and the output-folder rules
both drivers follow (kerasbert.data.writer, kerasbert.data.beam_writer).

`Run` validates every option and resolves the tokenizer's special ids
before anything is read or written; `Run.metadata` builds metadata.json
from the counts a driver measured.
"""

import glob
import os

from kerasbert.data import instances as inst_lib
from kerasbert.data import metadata as meta_lib
from kerasbert.data import schema
from kerasbert.data.text_input import FORMATS
from kerasbert.errors import UsageError
from kerasbert.text.families import BERT_BPE
from kerasbert.text.families import BPE
from kerasbert.text.families import BYTES
from kerasbert.text.families import absolute_vocab
from kerasbert.text.tokenizer_paths import read_vocabulary
from kerasbert.text.families import special_ids
from kerasbert.version import __version__


RUNNERS = ("local", "direct", "portable", "flink", "spark", "dataflow")


class Run:
    """One run's checked settings, shared by both drivers.

    options: every creation flag, keyed as metadata.json's "options" has
        always spelled them.
    config: what a ChunkMaker needs (plain values that pickle).
    """

    def __init__(self, inputs, vocab_file, *, sequence_length, max_predictions_per_seq,
                 masked_lm_prob, dupe_factor, short_seq_prob, random_seed, lower_case,
                 whole_word_mask, objective, masking, num_shards, workers, gzip, text_field,
                 input_format, runner):
        self.options = dict(
            max_seq_length=sequence_length, max_predictions_per_seq=max_predictions_per_seq,
            masked_lm_prob=masked_lm_prob, dupe_factor=dupe_factor,
            short_seq_prob=short_seq_prob, random_seed=random_seed, lower_case=lower_case,
            whole_word_mask=whole_word_mask, objective=objective, masking=masking,
            num_shards=num_shards, workers=workers, gzip=gzip, text_field=text_field,
            input_format=input_format, inputs=list(inputs), runner=runner,
        )
        validate_options(self.options)
        if runner not in RUNNERS:
            raise UsageError(f"--runner {runner!r}: expected one of {RUNNERS}.")
        self.kind, specials = read_specials(vocab_file)
        if self.kind == BPE:
            if objective != "none":
                raise UsageError(
                    f"--objective {objective}: byte-level BPE (RoBERTa) data is written with "
                    "--objective none (FULL-SENTENCES: <s> sentences </s>, no sentence label); "
                    "sentence pairs are for WordPiece (nsp) and SentencePiece (sop, ALBERT).")
        if self.kind in (BPE, BERT_BPE):
            lower_case = False  # byte-level BPE is cased by construction
            self.options["lower_case"] = False
        if self.kind == BYTES:
            if objective != "none" or masking:
                raise UsageError(
                    "--vocab bytes has no [MASK] and no sentence pairs: write character-level "
                    "data with --objective none --no-masking (for causal language models).")
            lower_case = False  # bytes are the text as it is
            self.options["lower_case"] = False
        self.inputs = list(inputs)
        self.vocab_file = vocab_file
        self.config = dict(
            vocab_file=absolute_vocab(vocab_file), lower_case=lower_case, specials=specials,
            random_seed=random_seed, dupe_factor=dupe_factor,
            instance_options=inst_lib.InstanceOptions(
                sequence_length=sequence_length, max_predictions_per_seq=max_predictions_per_seq,
                masked_lm_prob=masked_lm_prob, short_seq_prob=short_seq_prob,
                whole_word_mask=whole_word_mask, objective=objective, masking=masking,
            ),
        )

    def metadata(self, shard_counts, num_documents, seconds):
        """metadata.json's dict for shards {file name: instance count}."""
        o = self.options
        sha, vocab_lines = meta_lib.vocab_fingerprint(self.vocab_file)
        names = schema.feature_names(o["objective"], o["masking"])
        return {
            "schema_version": schema.SCHEMA_VERSION,
            "features": schema.describe_features(
                names, o["max_seq_length"], o["max_predictions_per_seq"]),
            "max_seq_length": o["max_seq_length"],
            "max_predictions_per_seq": o["max_predictions_per_seq"],
            "objective": o["objective"],
            "masking": "static" if o["masking"] else "dynamic",
            "whole_word_mask": o["whole_word_mask"],
            "tokenizer": self.kind,
            "vocab_sha256": sha,
            "vocab_size": vocab_lines,
            "lower_case": o["lower_case"],
            "random_seed": o["random_seed"],
            "options": o,
            "shards": dict(shard_counts),
            "num_instances": sum(shard_counts.values()),
            "num_documents": num_documents,
            "compression": "GZIP" if o["gzip"] else None,
            "created_by": f"kerasbert {__version__} create-pretraining-data",
            "seconds": round(seconds, 3),
        }


def shard_name(index, num_shards, gzip=False):
    return f"part-{index:05d}-of-{num_shards:05d}.tfrecord" + (".gz" if gzip else "")


# ---------------------------------------------------------------- options


def validate_options(o):
    """Raises UsageError naming the first bad option."""
    if o["objective"] not in schema.OBJECTIVES:
        raise UsageError(f"--objective {o['objective']!r}: expected one of {schema.OBJECTIVES}.")
    min_len = 3 if o["objective"] == "none" else 5
    if o["max_seq_length"] < min_len:
        raise UsageError(f"--max-seq-length {o['max_seq_length']} is too short (>= {min_len}).")
    if not 1 <= o["max_predictions_per_seq"] <= o["max_seq_length"]:
        raise UsageError(
            f"--max-predictions-per-seq {o['max_predictions_per_seq']} must be in "
            f"[1, max_seq_length={o['max_seq_length']}]."
        )
    for key in ("masked_lm_prob", "short_seq_prob"):
        if not 0.0 <= o[key] <= 1.0:
            raise UsageError(f"--{key.replace('_', '-')} {o[key]} is not a probability in [0, 1].")
    if o["masking"] and o["masked_lm_prob"] <= 0.0:
        raise UsageError("--masked-lm-prob must be > 0 (or use --no-masking).")
    for key in ("dupe_factor", "num_shards", "workers"):
        if o[key] < 1:
            raise UsageError(f"--{key.replace('_', '-')} {o[key]} must be >= 1.")
    if o["input_format"] not in FORMATS:
        raise UsageError(f"--input-format {o['input_format']!r}: expected one of {FORMATS}.")


def read_specials(vocab_path):
    """(tokenizer kind, `Specials`) of any `--vocab` path: the family's
    start / separator / mask / padding tokens looked up by string
    ([CLS] [SEP] [MASK] [PAD]; ALBERT's <pad>; RoBERTa's <s> </s> <mask>
    <pad>), never assumed. Plain Python: the main process stays free of
    TensorFlow."""
    kind, files, tokens = read_vocabulary(vocab_path)
    try:
        ids = special_ids(kind, tokens, files[0] if files else vocab_path)
    except ValueError as error:
        raise UsageError(str(error)) from None
    # The byte vocabulary has no [MASK] (None): masking it is refused.
    return kind, inst_lib.Specials(
        vocab_size=len(tokens), cls_id=ids["cls_id"], sep_id=ids["sep_id"],
        mask_id=ids.get("mask_id"), pad_id=ids["pad_id"])


def check_output_dir(output_dir, overwrite):
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        raise UsageError(f"--output-dir {output_dir} exists and is not a folder.")
    existing = final_files(output_dir)
    if existing and not overwrite:
        raise UsageError(
            f"--output-dir {output_dir} already holds pretraining data "
            f"({os.path.basename(existing[0])}, ...); pass --overwrite or pick another folder."
        )


def check_produced(num_docs, num_instances, inputs):
    """Refuses to commit an empty result: 0 instances is never a success
    (a later `pretrain` would have nothing to read)."""
    if num_docs == 0:
        raise UsageError(f"no documents in --input {' '.join(inputs)}: nothing to write.")
    if num_instances == 0:
        raise UsageError(
            f"no instances from the {num_docs} document(s) in --input {' '.join(inputs)}: "
            "their sentences tokenize to no tokens.")


def final_files(output_dir):
    found = glob.glob(os.path.join(output_dir, "part-*-of-*.tfrecord*"))
    meta = os.path.join(output_dir, meta_lib.METADATA_FILE)
    return sorted(found) + ([meta] if os.path.exists(meta) else [])
