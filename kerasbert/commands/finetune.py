"""`kerasbert finetune`: fine-tune a backbone on a task (the CLI over
kerasbert.training.finetune). The task/column and model-source flags are
shared with other commands (commands/_args.py)."""

import contextlib

from kerasbert.commands._args import positive_int
from kerasbert.commands._args import add_backbone_arguments
from kerasbert.commands._args import add_task_arguments
from kerasbert.commands._args import add_tokenizer_arguments
from kerasbert.commands._args import columns_from_args
from kerasbert.commands._args import TOKENIZER_HELP
from kerasbert.commands._report import print_metrics
from kerasbert.commands._report import print_outputs
from kerasbert.data.finetuning.task_formats import task_format
from kerasbert.data.finetuning.padding import ROUNDING_WORDS
from kerasbert.errors import UsageError
from kerasbert.io_utils import output_lock
from kerasbert.optimizers.recipes import RECIPES

NAME = "finetune"
HELP = "Fine-tune a backbone on a task (GLUE, SQuAD, CoNLL-2003, SWAG, local CSV/TSV/JSONL)."
SHOW_DEFAULTS = True  # --help shows each flag's default


def run(args):
    if args.search:  # a bad grid is refused at once, before TensorFlow loads
        from kerasbert.training.search import parse_grid  # lazy: light

        parse_grid(args.search)
    from kerasbert.training.configs import FinetuneConfig  # lazy: numpy (--help stays light)

    fields = {k: v for k, v in vars(args).items() if k in FinetuneConfig.__dataclass_fields__}
    fields["columns"] = columns_from_args(args)
    config = FinetuneConfig(**fields)
    config.validate()  # flags are checked before TensorFlow loads
    from kerasbert.training.finetune import run_finetuning  # lazy: tensorflow
    from kerasbert.training.strategies import check_devices  # lazy: tensorflow
    from kerasbert.training.strategies import chief_from_environment

    check_devices(config.strategy, config.logical_cpus)  # mirrored without GPUs: before the lock
    if (args.search is not None or args.resume) and config.vocab is None:
        raise UsageError("--search and --resume run models with a tokenizer (--vocab); an ELMo "
                         "model trains in one run.")
    if args.search is not None or args.resume:
        return _search(args, config)

    # Only the chief writes the run directory, so only it holds the lock
    # (the other workers of a --strategy multi_worker cluster share it).
    lock = (output_lock(args.output_dir, kind="folder", flag="--output-dir")
            if chief_from_environment() else contextlib.nullcontext())
    with lock:
        result = run_finetuning(config)
    if not result.get("is_chief", True):
        return
    print(f"fine-tuned a {result['task_type']} model on {args.task}")
    if result["metrics"]:
        print("validation metrics:")
        print_metrics(result["metrics"])
    print_outputs(result["outputs"])


def _search(args, config):
    from kerasbert.training.search import run_search  # lazy: keras_tuner

    with output_lock(args.output_dir, kind="folder", flag="--output-dir"):
        result = run_search(config, args.search or [], restarts=args.restarts,
                            parallel=args.parallel_trials, resume=args.resume,
                            extend=args.extend)
    best = result["best"]
    print(f"searched {len(result['trials'])} trial(s); kept trial {best['trial']} "
          f"({best['values']}, seed {best['seed']}): dev {result['metric']} {best['score']}")
    print(f"best learning rate: {result['optimum']['summary']}")
    print_outputs(result["outputs"])


def add_arguments(parser):
    add_task_arguments(parser, require_task=False)
    add_backbone_arguments(parser, required=False)  # checked in FinetuneConfig.validate
    add = parser.add_argument
    add_tokenizer_arguments(parser, dest="lower_case", required=False,
                            help="The backbone's tokenizer (default: the --preset handle's or "
                            "--backbone run's own files). " + TOKENIZER_HELP)
    add("--output-dir", required=True,
        help="Fine-tuning directory (model.keras, config.json, tokenizer files, metrics).")
    add("--overwrite", action="store_true",
        help="Replace a model already fine-tuned into --output-dir (refused without it).")
    add("--validation", help="Validation file (same format as the task) or TFDS split name.")
    add("--freeze-backbone", action="store_true",
        help="Keep the backbone's weights as loaded and train only the task head (the "
        "feature-based use; ELMo: its scalar mix of layers trains too).")
    add("--features", help="Train from create-finetuning-data output instead of raw text.")
    by_model = "default: --recipe's, else by the model's family and size (kerasbert info)"
    add("--epochs", type=positive_int, default=None, help=by_model)
    add("--batch-size", type=positive_int, default=None, help=by_model)
    add("--learning-rate", type=float, default=None, help=by_model)
    add("--warmup-ratio", type=float, default=None, help=by_model)
    add("--weight-decay", type=float, default=None, help=by_model)
    add("--layerwise-lr-decay", type=float, nargs="?", const=0.8, default=None,
        help="Layer-wise learning-rate decay (0.8 when given without a value; default: "
        "the recipe's, e.g. ELECTRA's 0.8).")
    add("--recipe", default=None, choices=tuple(RECIPES),
        help="A paper's fine-tuning values (printed in full before training): " + "; ".join(
            f"{name}: {recipe.source.split(',')[0]}" for name, recipe in RECIPES.items())
        + ". Flags given on the command line win.")
    add("--search", nargs="*", default=None, metavar="KEY=V1,V2",
        help="Run the paper's dev-set search (KerasTuner grid) and keep the best trial: "
        "alone, the recipe's grid; or e.g. lr=1e-4,3e-4 batch=16,32 epochs=3,5. Needs "
        "validation data. Writes search.json and search.png.")
    add("--restarts", type=positive_int, default=None,
        help="--search: random seeds per setting (the paper restarts small datasets; "
        "default 1, or with --resume the search's own).")
    add("--parallel-trials", type=positive_int, default=1,
        help="--search: trials run at once, in separate processes (one GPU each, or none).")
    add("--resume", action="store_true",
        help="--search: continue the search in --output-dir exactly: its grid, seeds and "
        "trial list (search.json); finished trials are kept. A different --search grid is "
        "refused.")
    add("--no-extend", dest="extend", action="store_false",
        help="--search: the grid only. By default, when the best learning rate is the "
        "grid's highest or lowest, one more trial runs one step past that edge (the grid's "
        "own spacing) and search.json says where the optimum lies.")
    add("--early-stopping", type=positive_int, default=None, metavar="PATIENCE",
        help="Stop after PATIENCE epochs without a better dev metric (the best epoch's "
        "weights are kept either way).")
    add("--max-seq-length", dest="sequence_length", type=positive_int, default=None, help=f"Default {task_format('classification').sequence_length} "
        f"({task_format('qa').sequence_length} for QA).")
    add("--max-target-length", dest="target_length", type=positive_int, default=None, metavar="T",
        help="text2text: the target's length in pieces with [start] / [end], and the longest "
        "text the model generates (kept in config.json: evaluate and export use it). "
        "Default: --max-seq-length.")
    add("--doc-stride", type=positive_int, default=128, help="QA: tokens between window starts.")
    add("--max-query-length", type=positive_int, default=64, help="QA: longest question in tokens.")
    add("--max-answer-length", type=positive_int, default=30, help="QA: longest answer in tokens.")
    add("--null-score-diff-threshold", type=float, default=0.0, help="SQuAD v2 no-answer threshold.")
    add("--dropout", type=float, default=0.1)
    add("--precision", choices=("float32", "mixed_bfloat16", "mixed_float16"), default="float32",
        help="mixed_bfloat16: matrix products in bfloat16 (float32 weights, optimizer state, "
        "softmax, LayerNorm and loss); about 1.5-2x faster on CPUs with bfloat16 kernels "
        "(AVX512_BF16, AMX: `kerasbert hardware`) and on GPUs, slower without them.")
    add("--padding", choices=("longest", "max_length"), default="longest",
        help=f"longest (default): each batch padded to its longest row, {ROUNDING_WORDS} "
        "(same losses and metrics, less work); max_length: every batch at --max-seq-length.")
    add("--bucket-by-length", action="store_true",
        help="Batch examples of similar length together (seeded pools of 50 batches, "
        "reshuffled every epoch): less padding still, on text of mixed lengths.")
    add("--lm-weight", type=float, default=0.5,
        help="GPT backbones: weight of the auxiliary language-model loss (GPT-1: 0.5; "
        "0 for the classification loss alone).")
    add("--strategy", default="auto", choices=("auto", "cpu", "mirrored", "multi_worker", "tpu"),
        help="multi_worker: MultiWorkerMirroredStrategy over the cluster in TF_CONFIG (one "
        "process per worker, same flags); the chief writes --output-dir.")
    add("--logical-cpus", type=int, default=0)
    add("--seed", type=int, default=12345)
    add("--no-progress", dest="progress", action="store_false")
    return parser
