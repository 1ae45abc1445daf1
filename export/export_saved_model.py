"""Export a fine-tuned model for TF Serving: same flags as `kerasbert export`.

    python export/export_saved_model.py --model runs/sst2 --output export/sentiment

Exit codes: 0 success, 2 bad input (message names it), 1 unexpected failure.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kerasbert.cli import script_main  # noqa: E402


def main(argv=None):
    return script_main("export", "export_saved_model.py", __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
