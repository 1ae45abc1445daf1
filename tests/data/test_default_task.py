"""The built-in fine-tuning task: real standard-library sentences labelled
by the area of the module they document."""

import csv

from kerasbert.data import default_task


def read(path):
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def test_writes_a_deterministic_labelled_split(tmp_path):
    first = default_task.write_default_task(tmp_path / "a", max_per_label=60)
    second = default_task.write_default_task(tmp_path / "b", max_per_label=60)
    for split in ("train", "validation"):
        assert open(first[split], "rb").read() == open(second[split], "rb").read()
    train, valid = read(first["train"]), read(first["validation"])
    assert {r["label"] for r in train} == set(default_task.LABELS)
    assert {r["label"] for r in valid} <= set(default_task.LABELS)
    # Every label capped at 60 sentences, about 1 in 5 in validation, no overlap.
    for label in default_task.LABELS:
        assert sum(r["label"] == label for r in train + valid) == 60
    assert 0.1 < len(valid) / (len(train) + len(valid)) < 0.3
    assert not {r["sentence"] for r in train} & {r["sentence"] for r in valid}
    assert all(len(r["sentence"].split()) >= 4 for r in train)


def test_topics_map_real_modules():
    import sysconfig
    import os

    root = sysconfig.get_paths()["stdlib"]
    assert default_task.topic_of(os.path.join(root, "asyncio", "tasks.py")) == "concurrency"
    assert default_task.topic_of(os.path.join(root, "json", "decoder.py")) == "data formats"
    assert default_task.topic_of(os.path.join(root, "textwrap.py")) == "text"
    assert default_task.topic_of(os.path.join(root, "collections", "__init__.py")) is None
