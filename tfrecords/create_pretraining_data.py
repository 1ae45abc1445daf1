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
from kerasbert.errors import UsageError  # noqa: E402


def main(argv=None):
    parser = add_arguments(argparse.ArgumentParser(
        prog="create_pretraining_data.py", description=__doc__.splitlines()[0]))
    args = parser.parse_args(argv)
    try:
        run(args)
    except (UsageError, FileNotFoundError) as err:
        print(f"create_pretraining_data.py: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
