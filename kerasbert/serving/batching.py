"""TF Serving's request batching, configured from measured throughput.

TF Serving merges concurrent requests into one model call when started with
`--enable_batching` (server-wide parameters from
`--batching_parameters_file`) or, per model, with
`--enable_per_model_batching_parameters` (`batching_params.pbtxt` in the
version directory). `export` writes both files (the server-wide one beside
an existing `models.config`) with values derived here
from `bench/serving_bench.py`'s throughput curve of the nearest measured
model (`MEASURED`), by these rules:

    max_batch_size        the smallest batch that reaches 90% of the
                          curve's peak examples/s (larger batches add
                          latency, not throughput)
    allowed_batch_sizes   powers of two up to it (batches are padded up to
                          one of them: few shapes, so an XLA-compiled model
                          compiles a handful of times)
    batch_timeout_micros  a tenth of a full batch's latency: the wait to
                          fill a batch stays small beside running it
    num_batch_threads     the client-thread count with the best measured
                          throughput (concurrent model calls that still help)
    max_enqueued_batches  about one second of queued work; a burst beyond
                          it is refused at once (UNAVAILABLE), not left to
                          time out
"""

import math
import os

from kerasbert.io_utils import atomic_write_text

#: From `bench/serving_bench.py` (2-core machine, 2026-11-26, see
#: bench/README.md): per model, `serving_default`'s examples/s by batch size
#: with the export's default graph (`--padding longest`, no XLA), the client-
#: thread count with the best throughput, and the model's size.
MEASURED = {
    "bert_tiny": {"name": "bert_tiny", "num_layers": 2, "hidden_dim": 128,
                  "sequence_length": 128, "best_threads": 4,
                  "throughput": {1: 564.5, 2: 851.2, 4: 1238.8, 8: 1416.5, 16: 1818.4,
                                 32: 2126.5, 64: 1815.0}},
    "bert_base": {"name": "bert_base", "num_layers": 12, "hidden_dim": 768,
                  "sequence_length": 128, "best_threads": 4,
                  "throughput": {1: 19.6, 2: 26.0, 4: 28.4, 8: 22.7, 16: 23.4, 32: 18.4,
                                 64: 14.2}},
    # At 512 the bench measured batches 1 and 32, and not `longest` alone: its
    # requests (corpus paragraphs) fill 93% of the length, so the plain
    # graph's curve stands in for it.
    "bert_base_512": {"name": "bert_base_512", "num_layers": 12, "hidden_dim": 768,
                      "sequence_length": 512, "best_threads": 4,
                      "throughput": {1: 1.73, 32: 1.86}},
}

FILENAME = "batching_parameters.txt"   # server-wide, beside models.config
MODELS_CONFIG = "models.config"
PER_MODEL_FILENAME = "batching_params.pbtxt"  # in the version directory


def batching_parameters(throughput, best_threads=1):
    """BatchingParameters fields from a throughput curve.

    Args:
        throughput: {batch size: examples per second}, at least one entry.
        best_threads: concurrent calls with the best throughput.

    Returns:
        dict: max_batch_size, batch_timeout_micros, max_enqueued_batches,
        num_batch_threads, allowed_batch_sizes.
    """
    curve = sorted((int(b), float(r)) for b, r in throughput.items())
    if not curve or min(r for _, r in curve) <= 0:
        raise ValueError(f"A throughput curve needs positive rates, got {throughput!r}.")
    peak = max(r for _, r in curve)
    size, rate = next((b, r) for b, r in curve if r >= 0.9 * peak)
    batch_seconds = size / rate
    allowed = [b for b in (2 ** i for i in range(size.bit_length())) if b < size] + [size]
    return {
        "max_batch_size": size,
        "batch_timeout_micros": max(100, int(round(batch_seconds * 1e6 / 10))),
        "max_enqueued_batches": max(1, math.ceil(1.0 / batch_seconds)),
        "num_batch_threads": int(best_threads),
        "allowed_batch_sizes": allowed,
    }


def to_text_proto(params):
    """A `BatchingParameters` text proto (the format of both files)."""
    lines = [f"{name} {{ value: {params[name]} }}" for name in
             ("max_batch_size", "batch_timeout_micros", "max_enqueued_batches",
              "num_batch_threads")]
    lines += [f"allowed_batch_sizes: {size}" for size in params["allowed_batch_sizes"]]
    return "\n".join(lines) + "\n"


def nearest_measured(backbone, sequence_length, measured=None):
    """The `MEASURED` entry closest to the model: by the work per example
    (layers * hidden^2 * sequence length, on a log scale). None when
    nothing is measured."""
    measured = MEASURED if measured is None else measured
    if not measured:
        return None
    config = backbone.get_config()
    work = config["num_layers"] * config["hidden_dim"] ** 2 * sequence_length

    def distance(entry):
        return abs(math.log(work / (entry["num_layers"] * entry["hidden_dim"] ** 2
                                    * entry["sequence_length"])))

    return min(measured.values(), key=distance)


def batching_file_text(backbone, sequence_length, measured=None):
    """(text of the BatchingParameters file for this model, the measured
    model it comes from); (None, None) when nothing is measured."""
    entry = nearest_measured(backbone, sequence_length, measured)
    if entry is None:
        return None, None
    params = batching_parameters(entry["throughput"], entry.get("best_threads", 1))
    text = (f"# From bench/serving_bench.py: {entry['name']} at length "
            f"{entry['sequence_length']}, the measured model nearest this one.\n"
            + to_text_proto(params))
    return text, entry["name"]


def write_server_file(output, text):
    """`batching_parameters.txt` beside `models.config`, when the folder
    above the model's base directory `output` has one (the layout TF
    Serving's `--model_config_file` serves) and no batching file yet: an
    existing one is the operator's and is never replaced. Returns its path,
    or None."""
    folder = os.path.dirname(os.path.abspath(output))
    path = os.path.join(folder, FILENAME)
    if not os.path.isfile(os.path.join(folder, MODELS_CONFIG)) or os.path.exists(path):
        return None
    atomic_write_text(path, text)
    return path
