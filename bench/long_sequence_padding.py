"""`long_sequence_bench.py --padding-check`: is padding computed?

ModernBERT (the bench's width, heads and depth) trains one epoch over the
same texts of mixed lengths (24, log-uniform from 256 tokens to the run's
longest length, which one text has; batch 4) three ways,
through the fine-tuning data path (`kerasbert.data.finetuning.make_dataset`):

    max_length   every batch padded to the longest text of the set
    longest      each batch cut to its own longest row (the default)
    bucketed     `bucket_by_length=True`: batches of similar lengths, each
                 cut to its longest row

Each way first runs an untimed epoch (every batch shape traced), then a
timed one. Reported per way: epoch seconds, the tokens computed (batch x
padded length, summed) and the share of them that is padding; the ratios
are against max_length, measured in the same process.
"""

import time

MIN_LENGTH = {"default": 256, "quick": 8}
NUM_TEXTS = {"default": 24, "quick": 8}
BATCH = 4


def text_lengths(num_texts, shortest, longest, seed=0):
    """Log-uniform lengths in [shortest, longest], the longest included."""
    import numpy as np

    rng = np.random.default_rng(seed)
    lengths = np.exp(rng.uniform(np.log(shortest), np.log(longest), num_texts)).astype(int)
    lengths[0] = longest
    return lengths


def features(lengths, vocabulary_size):
    """`TaskFeatures` of one label per text, packed to the longest."""
    import numpy as np

    from kerasbert.data.finetuning.features import TaskFeatures

    width = int(max(lengths))
    mask = (np.arange(width)[None, :] < np.asarray(lengths)[:, None]).astype("int32")
    ids = np.random.default_rng(1).integers(1, vocabulary_size, mask.shape).astype("int32")
    x = {"input_word_ids": ids * mask, "input_mask": mask,
         "input_type_ids": np.zeros_like(mask)}
    return TaskFeatures(task_type="regression", x=x, y=np.zeros((len(lengths), 1), "float32"),
                        sequence_length=width)


def padding_check(args, backbone, config_name):
    """{"rows": [{"way", "epoch_s", "tokens", "padding_share"}...],
    "real_tokens", "lengths", and each way's time and tokens / max_length's}."""
    import keras

    from kerasbert.data.finetuning import make_dataset

    longest = backbone.max_sequence_length
    lengths = text_lengths(NUM_TEXTS[config_name], MIN_LENGTH[config_name], longest)
    data = features(lengths, args.vocabulary_size)
    inputs = {k: keras.Input((None,), dtype="int32", name=k) for k in backbone.input}
    model = keras.Model(inputs, keras.layers.Dense(1)(backbone(inputs)["pooled_output"]))
    model.compile(optimizer=keras.optimizers.SGD(1e-3), loss="mse")
    ways = {"max_length": dict(padding="max_length"), "longest": dict(padding="longest"),
            "bucketed": dict(padding="longest", bucket_by_length=True)}
    rows = []
    for way, options in ways.items():
        dataset = make_dataset(data, BATCH, shuffle=True, seed=0, **options)
        for x, y in dataset:  # untimed: traces every shape
            model.train_on_batch(x, y)
        tokens, start = 0, time.perf_counter()
        for x, y in dataset:
            model.train_on_batch(x, y)
            tokens += int(x["input_mask"].shape[0] * x["input_mask"].shape[1])
        rows.append({"way": way, "epoch_s": time.perf_counter() - start, "tokens": tokens})
    real = int(sum(lengths))
    base = rows[0]
    for row in rows:
        row.update(padding_share=1 - real / row["tokens"],
                   time_vs_max_length=row["epoch_s"] / base["epoch_s"],
                   tokens_vs_max_length=row["tokens"] / base["tokens"])
    return {"rows": rows, "real_tokens": real, "lengths": [int(n) for n in lengths],
            "batch_size": BATCH}


def format_padding(result):
    lines = [f"Padding check: ModernBERT, {len(result['lengths'])} texts of "
             f"{min(result['lengths'])}-{max(result['lengths'])} tokens "
             f"({result['real_tokens']} real), batch {result['batch_size']}, one epoch",
             f"{'way':>12}{'epoch s':>10}{'tokens':>10}{'padding':>9}{'time/max':>10}"]
    for r in result["rows"]:
        lines.append(f"{r['way']:>12}{r['epoch_s']:>10.2f}{r['tokens']:>10}"
                     f"{r['padding_share']:>9.0%}{r['time_vs_max_length']:>10.3f}")
    return "\n".join(lines)
