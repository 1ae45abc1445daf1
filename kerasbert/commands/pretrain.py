"""`kerasbert pretrain`: the CLI over kerasbert.training.pretrain.

Every flag maps to one PretrainConfig field of the same name. TensorFlow is
imported only when the command runs.
"""


from kerasbert.commands._args import positive_int
from kerasbert.commands._args import add_preset_arguments
from kerasbert.commands._report import print_outputs
from kerasbert.errors import UsageError
from kerasbert.io_utils import check_output_kind
from kerasbert.io_utils import output_lock


NAME = "pretrain"
HELP = "Pretrain a backbone (masked LM + NSP/SOP) on pretraining TFRecords."
DESCRIPTION = (
    "Masked-LM (+ next-sentence or sentence-order) pretraining with "
    "tf.distribute, mixed precision, XLA, gradient accumulation and step-exact "
    "resume. The objective follows the data's metadata.json. An ELMo preset "
    "(elmo_small, ...) trains its forward and backward language models on the same "
    "token-id records (written with --objective none): each token's characters come "
    "from its vocabulary string; the full softmax up to 8192 words, a log-uniform "
    "sampled one (8192 draws) above.")
SHOW_DEFAULTS = True  # --help shows each flag's default


def _config_from_args(args):
    """The run's PretrainConfig, checked (before TensorFlow loads)."""
    from kerasbert.models.presets import parse_overrides  # lazy: numpy (--help stays light)
    from kerasbert.training.configs import PretrainConfig
    from kerasbert.models.config_checks import check_overrides

    fields = {k: v for k, v in vars(args).items() if k in PretrainConfig.__dataclass_fields__}
    fields["overrides"] = parse_overrides(args.set)
    config = PretrainConfig(**fields)
    config.validate()
    # Every --set value, for every family, before the run folder exists.
    check_overrides(config.preset, config.overrides)
    return config


def run(args):
    import contextlib

    check_output_kind(args.output_dir, "folder", "--output-dir")
    config = _config_from_args(args)
    # lazy: tensorflow
    from kerasbert.training.pretrain import run_pretraining
    from kerasbert.training.strategies import check_devices
    from kerasbert.training.strategies import chief_from_environment

    check_devices(config.strategy, config.logical_cpus)  # mirrored without GPUs: before the lock
    # Only the chief writes the run directory, so only it holds the lock
    # (the other workers of a cluster share --output-dir).
    lock = (output_lock(args.output_dir, kind="folder", flag="--output-dir")
            if chief_from_environment() else contextlib.nullcontext())
    try:
        with lock:
            result = run_pretraining(config)
    except FloatingPointError as err:
        raise UsageError(str(err)) from None
    if not result["is_chief"]:
        return
    metrics = result["metrics"]
    summary = ", ".join(f"{k} {metrics[k]:.4f}" for k in
                        ("loss", "mlm_loss", "mlm_accuracy", "sentence_accuracy",
                         "lm_accuracy", "perplexity") if k in metrics)
    print(f"finished at step {result['step']}: {summary}")
    print_outputs(result["outputs"], width=15)


def add_arguments(parser):
    add = parser.add_argument
    add_preset_arguments(parser, help="Backbone preset, e.g. bert_tiny (kerasbert presets), "
                         "or a handle to published weights to continue pretraining "
                         "(hf://OWNER/NAME, kaggle://..., a model directory).")
    add("--vocab", required=True,
        help="The tokenizer files the data was written with: a WordPiece vocab.txt, "
        "a SentencePiece .model (ALBERT), or a directory with vocab.json + merges.txt "
        "(byte-level BPE, RoBERTa).")
    add("--data", required=True, help="Pretraining TFRecords: glob, file or shard folder.")
    add("--output-dir", required=True, help="Run directory (created).")
    add("--steps", type=positive_int, required=True, help="Optimizer steps in all.")
    add("--batch-size", type=positive_int, default=32, help="Global batch per micro-step (default 32).")
    add("--learning-rate", type=float, default=1e-4, help="Peak learning rate (default 1e-4).")
    add("--warmup-steps", type=int, default=None, help="Linear warm-up steps (default 10%% of --steps).")
    add("--end-learning-rate", type=float, default=0.0)
    add("--power", type=float, default=1.0, help="Decay power (1 = linear).")
    add("--optimizer", choices=("adamw", "lamb"), default="adamw")
    add("--weight-decay", type=float, default=0.01,
        help="Decoupled weight decay; never on LayerNorm or bias (default 0.01).")
    add("--clipnorm", type=float, default=1.0, help="Global-norm gradient clip (0: off).")
    add("--accumulation-steps", type=positive_int, default=1,
        help="Micro-batches per optimizer step (effective batch = K * --batch-size).")
    add("--strategy", default="auto", choices=("auto", "cpu", "mirrored", "multi_worker", "tpu"))
    add("--tpu", default=None, help="TPU address or name for --strategy tpu (or auto).")
    add("--logical-cpus", type=int, default=0,
        help="Split the CPU into N logical devices (to run --strategy mirrored without GPUs).")
    add("--precision", choices=("float32", "mixed_bfloat16", "mixed_float16"), default="float32")
    add("--jit-compile", action="store_true", help="XLA-compile the forward/backward pass.")
    add("--checkpoint-every", type=positive_int, default=1000, help="Steps between checkpoints.")
    add("--keep-checkpoints", type=int, default=3)
    add("--log-every", type=positive_int, default=10, help="Steps between history/TensorBoard rows.")
    add("--resume", action="store_true", help="Continue from the newest checkpoint in --output-dir.")
    add("--init-from", default=None, metavar="RUN_OR_HANDLE",
        help="Start from other weights: a run dir, .keras file or checkpoint (the whole "
        "pretrainer when it matches), or published weights (hf://..., kaggle://..., a model "
        "directory) for the backbone of --preset. `--preset HANDLE` builds the architecture "
        "from the handle too.")
    add("--seed", type=int, default=12345)
    add("--deterministic", action="store_true",
        help="Deterministic ops and input order (bit-exact resume on CPU; slower).")
    add("--dynamic-masking", action="store_true",
        help="Draw new masks in tf.data (automatic for --no-masking data).")
    add("--whole-word-mask", action="store_true", help="Whole-word dynamic masking.")
    add("--masked-lm-prob", type=float, default=None,
        help="Share of tokens dynamic masking chooses (default: the family's, "
        "kerasbert.optimizers.recipes.PRETRAINING_MASKED_LM_PROB: 0.3 for ModernBERT, "
        "else BERT's 0.15). Stored masks keep the data's rate.")
    add("--max-seq-length", dest="sequence_length", type=positive_int, default=None,
        help="Only for files without metadata.json (e.g. from the original script).")
    add("--max-predictions-per-seq", type=positive_int, default=None, help="Same.")
    add("--no-progress", dest="progress", action="store_false", help="No progress bar.")
    return parser
