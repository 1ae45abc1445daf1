"""`kerasbert <command>`: the command-line entry point.

Exit codes: 0 success, 2 bad usage or bad input (unknown preset, bad
override, ...), 1 unexpected failure.
"""

import argparse
import errno
import os
import sys

from kerasbert import commands
from kerasbert.errors import UsageError
from kerasbert.fast_start import skip_unused_optional_imports

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


class OneLineParser(argparse.ArgumentParser):
    """An argparse parser whose usage errors are one line and exit 2, like
    every other refused input (`--help` still shows the whole usage)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def make_parser():
    parser = OneLineParser(
        prog="kerasbert",
        description="BERT and its family for Keras 3: presets, conversion, "
        "pretraining, fine-tuning, export.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in commands.COMMANDS:
        commands.register(sub, name)
    return parser


# OS errors a user causes (a path that is missing, of the wrong kind or not
# theirs; a full or read-only disk): reported like a UsageError. Any other
# exception is a bug: it keeps its traceback and exits 1.
USER_ERRNOS = frozenset({errno.ENOENT, errno.EEXIST, errno.EISDIR, errno.ENOTDIR, errno.EACCES,
                         errno.EPERM, errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.ENAMETOOLONG,
                         errno.ENOTEMPTY})


#: What a user's OS error means, in the words of the path it names.
OS_ERROR_WORDS = {
    errno.ENOENT: "no such file or folder", errno.EEXIST: "exists already (a file where a "
    "folder must be, or a folder in the way)", errno.EISDIR: "is a folder, not a file",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EACCES: "permission denied", errno.EPERM: "operation not permitted",
    errno.ENOSPC: "the disk is full", errno.EROFS: "the file system is read-only",
    errno.EDQUOT: "the disk quota is used up", errno.ENAMETOOLONG: "the name is too long",
    errno.ENOTEMPTY: "the folder is not empty",
}


def os_error_message(err):
    """A user's OS error as "PATH: what it means" (not Python's "[Errno 17]
    File exists: 'PATH'")."""
    words = OS_ERROR_WORDS.get(err.errno, (err.strerror or "").lower())
    paths = [p for p in (err.filename, err.filename2) if p is not None]
    return f"{' -> '.join(map(os.fsdecode, paths))}: {words}" if paths else words


def report_error(prog, err):
    """`prog: error: MESSAGE` on one line of stderr."""
    text = (os_error_message(err) if isinstance(err, OSError) and err.errno in USER_ERRNOS
            else str(err))
    message = " ".join(text.split()) or type(err).__name__
    print(f"{prog}: error: {message}", file=sys.stderr)


def run_reporting_errors(func, args, prog):
    """Runs a command and returns its exit code: 0 on success; 2 with one
    line `prog: error: ...` (no traceback) for the package's own errors and
    the OS errors a user causes; 130 on Ctrl-C. Other exceptions propagate
    (traceback, exit 1), so bugs stay visible."""
    try:
        func(args)
    except UsageError as err:
        report_error(prog, err)
        return 2
    except OSError as err:
        if err.errno not in USER_ERRNOS:
            raise
        report_error(prog, err)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    return 0


def check_arguments_are_text(argv, prog):
    """Python turns undecodable bytes of the command line into lone
    surrogates, which fail much later (in a tokenizer, in a JSON file).
    Refuses them up front: returns an error message or None."""
    for position, arg in enumerate(argv, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            raw = os.fsencode(arg)
            return (f"{prog}: error: argument {position} ({raw!r}) is not valid UTF-8 text; "
                    "pass file names and text in UTF-8.")
    return None


def script_main(command, prog, description, argv=None):
    """`main` of a thin script (tfrecords/*.py, export/*.py) that runs one
    verb (`command`: its module name in kerasbert.commands): same flags,
    same errors as `kerasbert VERB`."""
    skip_unused_optional_imports()
    parser = commands.standalone_parser(command, prog, description)
    module = commands.command_module(command)
    argv = sys.argv[1:] if argv is None else argv
    problem = check_arguments_are_text(argv, prog)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    return run_reporting_errors(module.run, parser.parse_args(argv), prog)


def main(argv=None):
    skip_unused_optional_imports()
    argv = sys.argv[1:] if argv is None else argv
    problem = check_arguments_are_text(argv, "kerasbert")
    if problem:
        print(problem, file=sys.stderr)
        return 2
    parser = make_parser()
    args = parser.parse_args(argv)
    return run_reporting_errors(args.func, args, f"kerasbert {args.command}")


if __name__ == "__main__":
    sys.exit(main())
