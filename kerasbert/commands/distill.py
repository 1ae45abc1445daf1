"""`kerasbert distill`: the CLI over kerasbert.training.distill.

Every flag maps to one DistillConfig field of the same name. The data,
strategy and precision flags mean what they mean for `kerasbert pretrain`.
TensorFlow is imported only when the command runs.
"""

import argparse

from kerasbert.commands import pretrain
from kerasbert.commands._report import print_outputs
from kerasbert.errors import UsageError
from kerasbert.io_utils import output_lock


NAME = "distill"
HELP = "Distil a pretrained teacher into a smaller student (DistilBERT)."
DESCRIPTION = (
    "Knowledge distillation on pretraining TFRecords: the student "
    "(--preset, default distilbert_base) starts from the teacher's embeddings and "
    "every other layer and learns from the frozen teacher's soft targets at "
    "temperature T, its own masked-LM loss and a cosine loss on the hidden "
    "states (weights 5 / 2 / 1).")
SHOW_DEFAULTS = True  # --help shows each flag's default


def _teacher_layers(text):
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of layer indices, e.g. 0,2,4,7,9,11."
        ) from None


def config_from_args(args):
    # lazy: numpy (--help stays light)
    from kerasbert.models.config_checks import check_overrides
    from kerasbert.models.presets import parse_overrides
    from kerasbert.training.configs import DistillConfig

    fields = {k: v for k, v in vars(args).items() if k in DistillConfig.__dataclass_fields__}
    fields["overrides"] = parse_overrides(args.set)
    config = DistillConfig(**fields)
    config.validate()  # flags are checked before TensorFlow loads
    check_overrides(config.preset, config.overrides)  # every --set value, any family
    return config


def run(args):
    config = config_from_args(args)
    from kerasbert.training.distill import run_distillation  # lazy: tensorflow
    from kerasbert.training.strategies import check_devices

    check_devices(config.strategy, config.logical_cpus)  # mirrored without GPUs: before the lock
    try:
        with output_lock(args.output_dir, kind="folder", flag="--output-dir"):
            result = run_distillation(config)
    except FloatingPointError as err:
        raise UsageError(str(err)) from None
    metrics = result["metrics"]
    summary = ", ".join(f"{k} {metrics[k]:.4f}" for k in
                        ("loss", "ce_loss", "mlm_loss", "cos_loss", "teacher_agreement")
                        if k in metrics)
    print(f"finished at step {result['step']} (student layers from teacher layers "
          f"{result['teacher_layers']}): {summary}")
    print_outputs(result["outputs"], width=15)


def add_arguments(parser):
    add = parser.add_argument
    add("--teacher", required=True, metavar="RUN/backbone.keras|HANDLE",
        help="The teacher: a pretraining run's backbone.keras (or pretrainer.keras), or a "
        "published masked-LM checkpoint (hf://..., a Hugging Face directory) or run directory "
        "with its own masked-LM head.")
    add("--teacher-pretrainer", default=None, metavar="RUN/pretrainer.keras",
        help="Where the teacher's masked-LM head comes from (default: pretrainer.keras "
        "beside --teacher).")
    add("--teacher-layers", type=_teacher_layers, default=None, metavar="I,J,...",
        help="Teacher layer copied into each student layer (default every other one: "
        "0,2,4,...; Hugging Face's DistilBERT used 0,2,4,7,9,11).")
    add("--temperature", type=float, default=2.0, help="Soft-target temperature T.")
    add("--alpha-ce", type=float, default=5.0, help="Weight of the soft-target loss.")
    add("--alpha-mlm", type=float, default=2.0, help="Weight of the student's masked-LM loss.")
    add("--alpha-cos", type=float, default=1.0,
        help="Weight of the hidden-state cosine loss.")
    # The data, optimizer, strategy and precision flags are pretrain's.
    pretrain_flags = pretrain.add_arguments(argparse.ArgumentParser(add_help=False))
    shared = ("--vocab", "--data", "--output-dir", "--steps", "--batch-size",
              "--warmup-steps", "--end-learning-rate", "--power", "--optimizer",
              "--weight-decay", "--clipnorm", "--strategy", "--tpu", "--logical-cpus",
              "--precision", "--log-every", "--seed", "--deterministic",
              "--dynamic-masking", "--max-seq-length", "--max-predictions-per-seq",
              "--set", "--no-progress")
    for action in pretrain_flags._actions:
        if action.option_strings and action.option_strings[0] in shared:
            parser._add_action(action)
    add("--preset", default="distilbert_base",
        help="The student's architecture preset (default distilbert_base).")
    add("--learning-rate", type=float, default=5e-4,
        help="Peak learning rate (default 5e-4, DistilBERT's).")
    return parser
