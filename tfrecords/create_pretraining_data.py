"""Write pretraining TFRecords: same flags as `kerasbert create-pretraining-data`.

    python tfrecords/create_pretraining_data.py --input corpus.txt \
        --vocab vocab.txt --output-dir data/pretrain --workers 2

Exit codes: 0 success, 2 bad input (message names it), 1 unexpected failure.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kerasbert.cli import script_main  # noqa: E402


def main(argv=None):
    return script_main("create_pretraining_data", "create_pretraining_data.py", __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
