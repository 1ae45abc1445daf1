"""kerasbert.load_model: every saved artefact loads in a fresh process after
only `import kerasbert`, and files it cannot load are one clear error."""

import ast
import os
import pathlib
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

import kerasbert
from kerasbert import saving
from kerasbert.cli import main
from kerasbert.errors import UsageError

PACKAGE = pathlib.Path(kerasbert.__file__).parent
sys.path.insert(0, str(pathlib.Path(__file__).parent / "serving"))
sys.path.insert(0, str(pathlib.Path(__file__).parent / "training"))
import pretrain_data  # noqa: E402
from serving_fixtures import make_finetuned_dir  # noqa: E402


def _registering_modules():
    """Modules whose source decorates a class or function with
    `register_keras_serializable` (found with `ast`, nothing imported)."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                for decorator in node.decorator_list:
                    if "register_keras_serializable" in ast.unparse(decorator):
                        relative = path.relative_to(PACKAGE.parent).with_suffix("")
                        found.add(".".join(relative.parts))
    return found


def test_every_registering_module_is_listed():
    assert {m.__name__ for m in saving.SERIALIZABLE_MODULES} == _registering_modules()


def _save_artefacts(directory):
    """A compiled task model (AdamW + schedule), a pretrainer and a backbone."""
    from kerasbert.preprocessing import TextClassifierPreprocessor
    from kerasbert.tasks import BertPretrainer, TextClassifier
    from kerasbert.text import load_tokenizer

    ft = make_finetuned_dir(str(directory / "ft"), "classification", sequence_length=16)
    model = kerasbert.load_model(os.path.join(ft, "model.keras"))
    # with its preprocessor, so the loaded model takes raw text
    model.preprocessor = TextClassifierPreprocessor(load_tokenizer(ft), 16)
    model.compile(learning_rate=1e-3, num_train_steps=10, warmup_ratio=0.1)
    assert isinstance(model, TextClassifier)
    model.save(directory / "model.keras")
    model.backbone.save(directory / "backbone.keras")
    BertPretrainer(model.backbone).save(directory / "pretrainer.keras")
    inputs = {"input_word_ids": np.array([[2, 7, 9, 3]], "int32"),
              "input_mask": np.ones((1, 4), "int32"), "input_type_ids": np.zeros((1, 4), "int32")}
    np.save(directory / "logits.npy", np.asarray(model(inputs)))
    return inputs


FRESH = """
import json, sys
import numpy as np
directory, order = sys.argv[1], sys.argv[3]
if order == "keras first":
    import keras, kerasbert
else:
    import kerasbert, keras
inputs = {k: np.array(v, "int32") for k, v in json.loads(sys.argv[2]).items()}
# The Keras call alone: every class is found after `import kerasbert`.
model = keras.saving.load_model(directory + "/model.keras")
assert type(model).__name__ == "TextClassifier", type(model)
assert type(model.optimizer).__name__ == "AdamW", type(model.optimizer)
assert type(model.optimizer._learning_rate).__module__.startswith("kerasbert."), model.optimizer._learning_rate
np.testing.assert_allclose(np.asarray(model(inputs)), np.load(directory + "/logits.npy"),
                           atol=1e-6)
assert type(model.preprocessor).__name__ == "TextClassifierPreprocessor"
assert np.asarray(model.predict(["a raw text"], verbose=0)).shape[0] == 1
assert type(keras.saving.load_model(directory + "/backbone.keras")).__name__ == "BertBackbone"
assert type(keras.saving.load_model(directory + "/pretrainer.keras")).__name__ == "BertPretrainer"
# kerasbert.load_model: the same objects, with its own errors for files that are not ours.
assert type(kerasbert.load_model(directory + "/model.keras")).__name__ == "TextClassifier"
print("ok")
"""


@pytest.mark.parametrize("order", ["kerasbert first", "keras first"])
def test_saved_artefacts_load_in_a_fresh_process_after_import_kerasbert(tmp_path_factory, order):
    import json

    directory = tmp_path_factory.mktemp("saved")
    inputs = _save_artefacts(directory)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(FRESH), str(directory),
         json.dumps({k: v.tolist() for k, v in inputs.items()}), order],
        capture_output=True, text=True, env=env, cwd="/", timeout=600)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]


def test_keras_finds_every_registered_class_from_the_source():
    """The names `keras_lookup` reads from the files are the classes
    `saving` registers, each in its module."""
    from kerasbert.keras_lookup import registered_classes

    kerasbert.register_all()
    table = keras.saving.get_custom_objects()
    found = registered_classes()
    assert len(found) >= 50
    for name, module in found.items():
        assert table[name].__module__ == module, name
    assert {m.__name__ for m in saving.SERIALIZABLE_MODULES} == set(found.values())


def _lambda_model(path):
    """A model that safe mode refuses: a Lambda layer with a Python lambda."""
    inputs = keras.Input((4,))
    outputs = keras.layers.Lambda(lambda x: x * 2)(inputs)
    keras.Model(inputs, outputs).save(path)


def test_unloadable_files_are_usage_errors_naming_the_file(tmp_path):
    _lambda_model(tmp_path / "lambda.keras")
    with pytest.raises(UsageError, match="lambda.keras.*safe_mode"):
        kerasbert.load_model(tmp_path / "lambda.keras")
    (tmp_path / "cut.keras").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(UsageError, match="cut.keras: not a readable .keras file"):
        kerasbert.load_model(tmp_path / "cut.keras")
    with pytest.raises(UsageError, match="no such file"):
        kerasbert.load_model(tmp_path / "missing.keras")
    with pytest.raises(UsageError, match="is a directory"):
        kerasbert.load_model(tmp_path)


@pytest.mark.parametrize("command", ["export", "evaluate", "pretrain --init-from",
                                     "finetune --backbone"])
def test_commands_report_a_refused_model_in_one_line(tmp_path, capsys, command):
    ft = make_finetuned_dir(str(tmp_path / "ft"), "classification", sequence_length=16)
    os.remove(os.path.join(ft, "model.keras"))
    _lambda_model(os.path.join(ft, "model.keras"))
    vocab = os.path.join(ft, "vocab.txt")
    train = tmp_path / "train.csv"
    train.write_text("sentence,label\nthe cat runs,a\nthe dog runs,b\n", encoding="utf-8")
    argv = {
        "export": ["export", "--model", ft, "--output", str(tmp_path / "export")],
        "evaluate": ["evaluate", "--model", ft, "--task", f"csv:{train}", "--split", str(train)],
        "pretrain --init-from": pretrain_data.pretrain_args(
            *pretrain_data.make_data(str(tmp_path / "data")), str(tmp_path / "run"),
            "--init-from", os.path.join(ft, "model.keras"), steps=1),
        "finetune --backbone": [
            "finetune", "--task", f"csv:{train}", "--backbone", os.path.join(ft, "model.keras"),
            "--vocab", vocab, "--output-dir", str(tmp_path / "ft2")],
    }[command]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "Traceback" not in err, err
    assert "model.keras" in err, err
    assert not (tmp_path / "export").exists() and not (tmp_path / "ft2" / "model.keras").exists()


def test_undecodable_command_line_text_is_refused(capsys):
    bad = os.fsdecode(b"caf\xe9.txt")  # Latin-1 bytes: a lone surrogate in Python
    assert main(["vocab", "--input", bad, "--vocab-size", "10", "--output", "v.txt"]) == 2
    err = capsys.readouterr().err
    assert "argument 3" in err and "not valid UTF-8" in err and r"caf\xe9" in err, err
