"""Write pretraining TFRecords: same flags as `kerasbert create-pretraining-data`.

    python tfrecords/create_pretraining_data.py --input corpus.txt \
        --vocab vocab.txt --output-dir data/pretrain --workers 2

Exit codes: 0 success, 2 bad input (message names it), 1 unexpected failure.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kerasbert.data.create_command import add_arguments  # noqa: E402
from kerasbert.data.create_command import run  # noqa: E402
from kerasbert.cli import run_reporting_errors  # noqa: E402


def main(argv=None):
    parser = add_arguments(argparse.ArgumentParser(
        prog="create_pretraining_data.py", description=__doc__.splitlines()[0]))
    args = parser.parse_args(argv)
    return run_reporting_errors(run, args, "create_pretraining_data.py")


if __name__ == "__main__":
    sys.exit(main())
