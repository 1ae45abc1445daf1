"""The `kerasbert` verbs, one module each.

A command module defines `NAME` (the verb), `HELP` (one line for
`kerasbert --help`), optionally `DESCRIPTION` and `SHOW_DEFAULTS`,
`add_arguments(parser)` and `run(args)`. Its top level imports nothing
heavy, so `kerasbert --help` stays instant; `run` imports what it needs.
Flag groups that several verbs share live in `_args.py`.

Adding a verb: write `commands/<verb>.py` and add it to `COMMANDS`.
"""

import argparse
import importlib

#: Modules of the verbs, in the order `kerasbert --help` lists them.
COMMANDS = (
    "info", "presets", "demo", "vocab", "create_pretraining_data", "pretrain",
    "create_finetuning_data", "extract_features", "fill_mask", "generate", "finetune", "evaluate",
    "distill", "export", "export_hub", "convert", "predict",
)


def command_module(name):
    """The module of a verb, by module name ("create_pretraining_data")."""
    return importlib.import_module(f"kerasbert.commands.{name}")


def register(subparsers, name):
    """Adds the verb of module `name` to an argparse sub-parser set; its
    `func` default is the module's `run`. Returns the verb's parser."""
    module = command_module(name)
    formatter = (argparse.ArgumentDefaultsHelpFormatter if getattr(module, "SHOW_DEFAULTS", False)
                 else argparse.HelpFormatter)
    parser = subparsers.add_parser(module.NAME, help=module.HELP,
                                   description=getattr(module, "DESCRIPTION", None),
                                   formatter_class=formatter)
    module.add_arguments(parser)
    parser.set_defaults(func=module.run)
    return parser


def standalone_parser(name, prog, description):
    """A parser for one verb run as its own script (tfrecords/*.py,
    export/export_saved_model.py): the verb's flags, the script's name."""
    module = command_module(name)
    return module.add_arguments(argparse.ArgumentParser(prog=prog, description=description))
