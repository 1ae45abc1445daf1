"""Flag groups that several commands share, each defined once so they
cannot drift apart:

    add_task_arguments(parser)          # --task, --task-type, --*-column
    columns = columns_from_args(args)   # {column key: name} for load_task
    add_backbone_arguments(parser)      # --backbone | --preset [--init-checkpoint]
    backbone = load_backbone_from_args(args)
    add_preset_arguments(parser)        # --preset NAME --set KEY=VALUE ...

No TensorFlow import here (the CLI's `--help` stays instant).
"""

import argparse

from kerasbert.data.finetuning.task_formats import TASK_TYPES
from kerasbert.errors import UsageError
from kerasbert.text.tokenizer_loading import SWITCHES

def positive_int(text):
    """argparse type of a count or length: a whole number of at least 1
    (0 would mean "not given" further on, or an empty model)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


# flag -> (column key of load_task's `columns`, help).
COLUMN_FLAGS = (
    ("--text-column", "text", "Text (first segment) of classification/pair/regression rows."),
    ("--text-pair-column", "text_pair", "Second segment of pair/regression rows."),
    ("--label-column", "label", "Label column (class name or id; a number for regression; "
     "the right choice index for multiple choice)."),
    ("--tokens-column", "tokens", "Tagging: the words (a JSON list, or space-separated text)."),
    ("--labels-column", "labels", "Tagging: one label per word (same forms as the words)."),
    ("--id-column", "id", "QA: question id."),
    ("--question-column", "question", "QA question (multiple choice: the start phrase)."),
    ("--context-column", "context", "QA / multiple-choice context."),
    ("--answers-column", "answers", 'QA answers: [{"text", "answer_start"}] or '
     '{"text": [...], "answer_start": [...]}.'),
    ("--is-impossible-column", "is_impossible", "QA v2: true when the question has no answer."),
    ("--choices-columns", "choices", "Multiple choice: comma-separated choice columns "
     "(a,b,c), or one column holding a list."),
    ("--source-column", "source", "text2text: the text to rewrite (e.g. the sentence to "
     "translate)."),
    ("--target-column", "target", "text2text: its rewriting (e.g. the translation)."),
)


def add_task_arguments(parser, require_task=True):
    """Adds --task, --task-type and every column flag to an argparse parser.

    Args:
        parser: an `argparse.ArgumentParser` (or argument group).
        require_task: False for commands where --task is optional (e.g.
            `finetune --features DIR`).

    Returns:
        parser.
    """
    parser.add_argument(
        "--task", required=require_task, metavar="SPEC",
        help="glue/NAME (cola sst2 mrpc stsb qqp mnli qnli rte wnli), squad, squad_v2, "
        "conll2003, wmt14_translate/SRC-TGT (TFDS; e.g. wmt14_translate/de-en); "
        "builtin/reverse_words (text2text, made offline); swag:PATH, csv:PATH, tsv:PATH, "
        "jsonl:PATH, conll:PATH, "
        "squad_json:PATH (local files, UTF-8: one with a byte that is not UTF-8 is refused, "
        "naming the file and the byte offset; a bare PATH picks the reader by extension).",
    )
    parser.add_argument(
        "--task-type", choices=TASK_TYPES, default=None,
        help="Task type of a local CSV/TSV/JSONL file (inferred from its columns "
        "when unset; regression must be asked for). Fixed for the other tasks.",
    )
    group = parser.add_argument_group(
        "columns", "Column names of local CSV/TSV/JSONL files (unset: common names "
        "are tried, e.g. text/sentence, label, tokens, question, context).")
    for flag, key, text in COLUMN_FLAGS:
        group.add_argument(flag, dest=_dest(key), metavar="NAME" if key != "choices" else "A,B,...",
                           default=None, help=text)
    return parser


def _dest(key):
    return f"{key}_column" if key != "choices" else "choices_columns"


def columns_from_args(args):
    """{column key: name} for `load_task(columns=...)`, only the flags set.

    `--choices-columns a,b,c` becomes a list ["a", "b", "c"]; one name
    stays a string (a column holding a list of choices).
    """
    columns = {}
    for _, key, _ in COLUMN_FLAGS:
        value = getattr(args, _dest(key), None)
        if value is None or value == "":
            continue
        if key == "choices":
            names = [name.strip() for name in value.split(",") if name.strip()]
            value = names if len(names) > 1 else (names[0] if names else None)
            if value is None:
                continue
        columns[key] = value
    return columns


def comma_list(text):
    """argparse type: "a,b,c" -> ["a", "b", "c"] (empty items dropped)."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
    return items


TOKENIZER_HELP = ("Tokenizer files: a WordPiece vocab.txt (BERT), a SentencePiece .model "
                  "(ALBERT), or a directory with vocab.json + merges.txt, or that vocab.json "
                  "(byte-level BPE, RoBERTa).")


def add_tokenizer_arguments(parser, dest="do_lower_case", help=TOKENIZER_HELP, required=True):
    """--vocab FILES_OR_MODEL [--no-lower-case] [--special-tokens-in-strings
    (`add_special_tokens_argument`)] [--truncate-at-nul
    (`add_truncate_at_nul_argument`)]; `dest` holds False for
    cased, True for uncased, None for "as the source says" (a model
    directory's or hub handle's own setting; uncased for plain files).
    --do-lower-case, google-research/bert's flag, is accepted and hidden.
    `required=False`: the command defaults --vocab to the model's source."""
    parser.add_argument("--vocab", required=required, help=help)
    parser.add_argument("--no-lower-case", dest=dest, action="store_false", default=None,
                        help="Keep case and accents (cased models). Default: the model "
                        "source's setting (tokenizer_config.json, ...), else lower-case and "
                        "strip accents (uncased). Byte-level BPE is always cased.")
    parser.add_argument("--do-lower-case", dest=dest, action="store_true", default=None,
                        help=argparse.SUPPRESS)
    add_tokenizer_switches(parser)
    return parser


def add_tokenizer_switches(parser, special_tokens_help=None, truncate_at_nul_help=None):
    """The tokenizer switches (`add_special_tokens_argument`,
    `add_truncate_at_nul_argument`, --exact-unigram);
    `tokenizer_switches(args)` reads them back. A `*_help` replaces a
    flag's default help."""
    add_special_tokens_argument(parser, special_tokens_help or SPECIAL_TOKENS_HELP)
    add_truncate_at_nul_argument(parser, truncate_at_nul_help or TRUNCATE_AT_NUL_HELP)
    parser.add_argument("--exact-unigram", action=argparse.BooleanOptionalAction, default=None,
                        help=EXACT_UNIGRAM_HELP)
    return parser


EXACT_UNIGRAM_HELP = (
    "SentencePiece and Unigram tokenizer.json models: segment with kerasbert's own Unigram "
    "lattice, whose arithmetic is the source library's (float32 as sentencepiece, float64 as "
    "tokenizers), so the ids equal that library's on every text; about 4x slower than "
    "tensorflow-text's op, which differs on rare ties (3 of 12,891 sample lines). Default "
    "off, or the run's setting. Other families ignore it.")


def tokenizer_switches(args):
    """{switch: bool} for the tokenizer switches given on the command line
    (`kerasbert.text.tokenizer_loading.SWITCHES`); one left out keeps the run's or
    the source's setting."""
    return {name: getattr(args, name) for name in SWITCHES if getattr(args, name, None) is not None}


TRUNCATE_AT_NUL_HELP = (
    "Drop the text after a NUL character, as keras-hub's tokenizers do (their tensorflow-text "
    "regex split reads C strings): gives a keras-hub preset's exact ids. Default off: no text "
    "is dropped. A run keeps the setting; its export uses it.")


def add_truncate_at_nul_argument(parser, help=TRUNCATE_AT_NUL_HELP):
    """--truncate-at-nul / --no-truncate-at-nul into `args.truncate_at_nul`
    (None when not given: the run's setting, else off)."""
    parser.add_argument("--truncate-at-nul", action=argparse.BooleanOptionalAction,
                        default=None, help=help)
    return parser


SPECIAL_TOKENS_HELP = (
    "Match special-token strings typed in the text ([CLS], [SEP], [MASK], <mask>, ...) as one "
    "id each, as the Hugging Face tokenizers library does (with the source's lstrip/rstrip "
    "flags). Default off: text is text, so a served model's client cannot inject control "
    "tokens ('[SEP]' becomes '[', 'sep', ']'). A run keeps the setting; its export uses it.")


def add_special_tokens_argument(parser, help=SPECIAL_TOKENS_HELP):
    """--special-tokens-in-strings / --no-special-tokens-in-strings into
    `args.special_tokens_in_strings` (None when not given: the run's or
    source's setting, else off)."""
    parser.add_argument("--special-tokens-in-strings", action=argparse.BooleanOptionalAction,
                        default=None, help=help)
    return parser


def add_backbone_arguments(parser, required=True):
    """--backbone PATH | --preset NAME_OR_HANDLE [--init-checkpoint PREFIX [--bert-config JSON]].

    `required` is checked when the backbone is loaded (`--init-checkpoint
    DIR` alone names a model too)."""
    del required  # load_backbone says what is missing
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--backbone", metavar="PATH",
                        help="A saved backbone (RUN/backbone.keras; a saved pretrainer or task "
                        "model works too: its .backbone is used).")
    source.add_argument("--preset", metavar="NAME|HANDLE",
                        help="A built-in architecture (`kerasbert info --presets`; random "
                        "weights unless --init-checkpoint), or published weights: "
                        "hf://OWNER/NAME[@REV], kaggle://OWNER/MODEL/keras/VARIANT[/VERSION], "
                        "or a local directory (Hugging Face layout, keras-hub preset, "
                        "google-research/bert checkpoint, TF Hub encoder, kerasbert run).")
    parser.add_argument("--init-checkpoint", metavar="TF1_PREFIX_OR_DIR",
                        help="Original google-research/bert checkpoint: a prefix "
                        ".../bert_model.ckpt with --preset NAME, or its directory alone "
                        "(bert_config.json beside; the same as --preset DIR).")
    parser.add_argument("--bert-config", metavar="JSON",
                        help="bert_config.json of --init-checkpoint (default: the preset's "
                        "architecture, or the file beside the checkpoint).")
    return parser


def load_backbone_from_args(args):
    """The backbone `add_backbone_arguments`' flags name."""
    from kerasbert.loading.backbones import load_backbone_from_flags  # lazy: tensorflow

    return load_backbone_from_flags(args.backbone, args.preset, args.init_checkpoint,
                                    args.bert_config)


def add_preset_arguments(parser, required=True, default=None, help="e.g. bert_base"):
    """--preset NAME and the repeatable --set KEY=VALUE overrides of its
    config (read them with `kerasbert.models.presets.parse_overrides`)."""
    parser.add_argument("--preset", required=required, default=default, help=help)
    parser.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="Override a config value (repeatable), e.g. --set num_layers=4")
    return parser


#: Sentence pooling modes (kerasbert.layers.sentence_pooling.POOLING_MODES;
#: spelled here so `--help` needs no Keras).
POOLING_CHOICES = ("mean", "cls", "max", "mean_sqrt_len")


def add_embedding_arguments(parser):
    """--model HANDLE's sentence-vector options: --pooling MODE[+MODE],
    --normalize / --no-normalize, --vocab, --no-lower-case (`embed`,
    `export --task embedding`). Unset, a sentence-transformers folder's own
    files decide (modules.json, 1_Pooling/config.json)."""
    group = parser.add_argument_group(
        "sentence vectors", "Unset: a sentence-transformers folder's own pooling and "
        "normalisation; any other model: mean pooling, not normalised.")
    group.add_argument("--pooling", default=None, metavar="MODE",
                       help=f"{', '.join(POOLING_CHOICES)}, or several joined with '+' "
                       "(concatenated).")
    group.add_argument("--normalize", action=argparse.BooleanOptionalAction, default=None,
                       help="L2-normalise the vectors.")
    group.add_argument("--vocab", default=None,
                       help="Tokenizer files (default: the --model handle's own). " + TOKENIZER_HELP)
    group.add_argument("--no-lower-case", dest="do_lower_case", action="store_false",
                       default=None, help="Keep case and accents (default: the model's setting).")
    return parser


def check_pooling_flag(value):
    """--pooling's value, checked without Keras (UsageError naming it)."""
    if value is None:
        return None
    modes = [mode.strip().lower() for mode in value.split("+")]
    unknown = [mode for mode in modes if mode not in POOLING_CHOICES]
    if unknown or not modes:
        raise UsageError(f"--pooling {value!r}: unknown mode(s) {', '.join(unknown)}; choose "
                         f"{', '.join(POOLING_CHOICES)} (several joined with '+').")
    return "+".join(modes)
