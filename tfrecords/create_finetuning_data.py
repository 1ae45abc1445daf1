"""Write fine-tuning TFRecords: same flags as `kerasbert create-finetuning-data`.

    python tfrecords/create_finetuning_data.py --task glue/mrpc \
        --vocab vocab.txt --max-seq-length 128 --splits train,validation \
        --output-dir data/mrpc

Exit codes: 0 success, 2 bad input (message names it), 1 unexpected failure.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kerasbert.data.finetuning.create_command import add_arguments  # noqa: E402
from kerasbert.data.finetuning.create_command import run  # noqa: E402
from kerasbert.cli import run_reporting_errors  # noqa: E402


def main(argv=None):
    parser = add_arguments(argparse.ArgumentParser(
        prog="create_finetuning_data.py", description=__doc__.splitlines()[0]))
    args = parser.parse_args(argv)
    return run_reporting_errors(run, args, "create_finetuning_data.py")


if __name__ == "__main__":
    sys.exit(main())
