"""`kerasbert export`: a fine-tuned model -> a TF Serving SavedModel version."""

import os

from kerasbert.commands._args import positive_int
from kerasbert import runs
from kerasbert.commands._args import add_embedding_arguments
from kerasbert.commands._args import add_tokenizer_switches
from kerasbert.commands._args import tokenizer_switches
from kerasbert.commands._args import check_pooling_flag
from kerasbert.data.finetuning.padding import ROUNDING_WORDS
from kerasbert.errors import UsageError
from kerasbert.io_utils import output_lock

NAME = "export"
HELP = "Export a fine-tuned model as a TF Serving SavedModel with in-graph tokenization."
DESCRIPTION = (
    "Writes OUTPUT/<version>/ (saved_model.pb, variables/, assets/ with the "
    "tokenizer files (vocab.txt, sentencepiece.model or vocab.json + merges.txt), "
    "assets.extra/tf_serving_warmup_requests, assets.extra/ops.json). serving_default takes "
    "raw strings and returns decoded results; serve_token_ids takes the three int32 inputs. "
    "The export is written under a temporary name and renamed when complete. --task "
    "embedding exports a sentence encoder instead: text -> embedding [B, D].")


def add_arguments(parser):
    """Adds every export flag to an argparse parser; returns it."""
    parser.add_argument("--model", required=True, metavar="FT",
                        help="A `kerasbert finetune` output directory, or a GPT `kerasbert "
                        "pretrain` run (exported as a text-generation model); with --task "
                        "embedding, a sentence-transformers folder or any model handle.")
    parser.add_argument("--task", choices=("embedding",), default=None,
                        help="embedding: strings -> sentence vectors (`embedding` float32 "
                        "[B, D]) of --model (default: the fine-tuned run's own task).")
    parser.add_argument("--output", required=True, metavar="export/NAME",
                        help="The model's base directory; the version goes in OUTPUT/<version>/.")
    parser.add_argument("--version", type=int, default=None,
                        help="Version number (default: the next free integer).")
    parser.add_argument("--max-seq-length", dest="sequence_length", type=positive_int, default=None, metavar="L",
                        help="Packed sequence length in the graph (default: the fine-tuning one).")
    parser.add_argument("--max-target-length", dest="target_length", type=positive_int, default=None,
                        metavar="T", help="text2text: the longest generated text in pieces "
                        "with [end] (default: the fine-tuning run's --max-target-length, "
                        "else its --max-seq-length).")
    parser.add_argument("--model-name", default=None,
                        help="TF Serving model name in the warm-up requests (default: NAME).")
    parser.add_argument("--overwrite", action="store_true",
                        help="Replace an existing version directory.")
    graph = parser.add_argument_group("serving graph (fine-tuned tasks; see export/README.md)")
    graph.add_argument("--padding", choices=("longest", "max"), default="longest",
                       help=f"longest (default): run the model on each batch's longest row, "
                       f"{ROUNDING_WORDS} (same outputs, less work); max: on the full "
                       "--max-seq-length.")
    graph.add_argument("--jit-compile", action="store_true",
                       help="XLA-compile the model function behind the in-graph tokenizer "
                       "(compiled once per batch shape on first use).")
    graph.add_argument("--precision", choices=("float32", "bfloat16"), default="float32",
                       help="The served model's compute and weights: bfloat16 is about 2x "
                       "faster on CPUs with bfloat16 kernels (AVX512_BF16, AMX: see `kerasbert "
                       "hardware`) and on GPUs, slower on CPUs without them; outputs stay "
                       "float32 (default: float32).")
    add_tokenizer_switches(
        parser, special_tokens_help="Override the fine-tuned run's setting (kept in its "
        "config.json) for special-token strings in the served text: on, '[SEP]' typed by a "
        "client is the separator token, as the tokenizers library reads it; off, it is text. "
        "Default: the run's setting (--task embedding: the source's).",
        truncate_at_nul_help="Override the run's setting for a NUL character in the served "
        "text: on, the text after it is dropped (keras-hub's ids); off, it is kept. "
        "Default: the run's setting (--task embedding: off).")
    add_embedding_arguments(parser)
    return parser


def graph_options(args):
    """The `GraphOptions` the flags ask for."""
    # lazy: tensorflow
    from kerasbert.serving.graph_options import GraphOptions

    return GraphOptions(pad_to_longest=args.padding == "longest", jit_compile=args.jit_compile,
                        precision=args.precision)


def run(args):
    if args.task == "embedding":
        return _export_embedding(args)
    if args.pooling is not None or args.normalize is not None or args.vocab is not None:
        raise UsageError("--pooling, --normalize and --vocab apply to --task embedding.")
    if not os.path.isdir(args.model):
        raise UsageError(f"--model {args.model}: no such directory.")
    generation = runs.open_run(args.model).is_generation
    # lazy: tensorflow
    from kerasbert.serving.exporter import export_finetuned
    from kerasbert.serving.generation_serving import export_generation_run

    # A GPT pretraining run: prompt in, greedy completion out.
    if generation:
        if tokenizer_switches(args):
            raise UsageError("--special-tokens-in-strings and --truncate-at-nul apply to "
                             "fine-tuned task models; a generation export takes its pretraining "
                             "run's tokenizer as it is.")
        if args.jit_compile or args.padding != "longest" or args.precision != "float32":
            raise UsageError("--padding, --jit-compile and --precision apply to fine-tuned "
                             "task models, not to text generation.")
        if args.target_length is not None:
            raise UsageError("--max-target-length applies to text2text models.")
        export, extra = export_generation_run, {}
    else:
        export, extra = export_finetuned, {"graph": graph_options(args),
                                           "tokenizer_switches": tokenizer_switches(args),
                                           "target_length": args.target_length}
    # The lock serialises version numbering: two exports without --version
    # into the same OUTPUT get different versions, never the same one.
    with output_lock(args.output, kind="folder", flag="--output"):
        result = export(args.model, args.output, version=args.version,
                        sequence_length=args.sequence_length, overwrite=args.overwrite,
                        model_name=args.model_name, **extra)
    print(f"exported {result['task_type']} model to {result['path']} "
          f"(signatures: {', '.join(result['signatures'])}; "
          f"custom ops: {', '.join(result['custom_ops']) or 'none'})")
    if result.get("batching_file"):
        print(f"wrote TF Serving batching parameters to {result['batching_file']} "
              "(--enable_batching --batching_parameters_file; see export/README.md)")


def _export_embedding(args):
    pooling = check_pooling_flag(args.pooling)
    # lazy: tensorflow
    from kerasbert.serving.embedding_serving import export_embedding

    with output_lock(args.output, kind="folder", flag="--output"):
        result = export_embedding(args.model, args.output, version=args.version,
                                  sequence_length=args.sequence_length, overwrite=args.overwrite,
                                  model_name=args.model_name, graph=graph_options(args),
                                  pooling=pooling, normalize=args.normalize, vocab=args.vocab,
                                  lower_case=args.do_lower_case,
                                  tokenizer_switches=tokenizer_switches(args))
    print(f"exported {result['task_type']} model to {result['path']} "
          f"(signatures: {', '.join(result['signatures'])}; "
          f"custom ops: {', '.join(result['custom_ops']) or 'none'})")
