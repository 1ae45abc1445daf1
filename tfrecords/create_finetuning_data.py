"""Write fine-tuning TFRecords: same flags as `kerasbert create-finetuning-data`.

    python tfrecords/create_finetuning_data.py --task glue/mrpc \
        --vocab vocab.txt --max-seq-length 128 --splits train,validation \
        --output-dir data/mrpc

Exit codes: 0 success, 2 bad input (message names it), 1 unexpected failure.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kerasbert.cli import script_main  # noqa: E402


def main(argv=None):
    return script_main("create_finetuning_data", "create_finetuning_data.py", __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
