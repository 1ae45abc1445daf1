import pytest
from reliability.console import kerasbert
from reliability.console import ok
from reliability.console import one_line_error

from kerasbert.cli import main
from kerasbert.models.presets import parse_overrides

from slow_marks import slow_covered_by


def test_help_lists_commands(tmp_path):
    printed = ok(kerasbert("--help", cwd=tmp_path))
    for command in ("info", "presets", "demo"):
        assert command in printed


def test_info_prints_architecture_and_count(capsys):
    assert main(["info", "--preset", "bert_base"]) == 0
    out = capsys.readouterr().out
    assert "109,482,240" in out
    assert "num_layers             12" in out


@pytest.mark.parametrize("preset, count", [
    ("albert_base", "11,683,584"), ("distilbert_base", "66,362,880"),
    ("roberta_base", "124,052,736"), ("modernbert_base", "149,014,272"),
])
def test_info_for_every_family(capsys, preset, count):
    assert main(["info", "--preset", preset]) == 0
    out = capsys.readouterr().out
    assert "total" in out and count in out


# Every preset builds (about 40 of them, some at full size); the default
# suite prints one preset of each family.
@slow_covered_by("tests/test_cli.py::test_info_for_every_family")
def test_info_for_every_preset(capsys):
    from kerasbert.models import list_presets

    for preset in list_presets():
        assert main(["info", "--preset", preset]) == 0, preset
    out = capsys.readouterr().out
    assert out.count("total") == len(list_presets())


def test_info_applies_overrides(capsys):
    assert main(["info", "--preset", "bert_tiny", "--set", "num_layers=1",
                 "--set", "activation=gelu_approximate"]) == 0
    out = capsys.readouterr().out
    assert "num_layers             1" in out
    assert "gelu_approximate" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--preset", "bert_bse"], "Did you mean bert_base"),
        (["--preset", "bert_tiny", "--set", "hidden_size=3"], "valid: vocabulary_size"),
        (["--preset", "bert_tiny", "--set", "num_layers=x"], "must be a number"),
        (["--preset", "bert_tiny", "--set", "num_heads=3"], "not divisible"),
        (["--preset", "bert_tiny", "--set", "activation=swishy"], "Unknown activation"),
        (["--preset", "bert_tiny", "--set", "novalue"], "not KEY=VALUE"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(capsys, argv, message):
    assert main(["info", *argv]) == 2
    assert message in capsys.readouterr().err


def test_unknown_preset_lists_every_valid_name(capsys):
    assert main(["info", "--preset", "nope"]) == 2
    err = capsys.readouterr().err
    assert "bert_L12_H768" in err and "bert_large" in err


def test_missing_preset_argument_is_usage_error():
    with pytest.raises(SystemExit) as exit_info:
        main(["info"])
    assert exit_info.value.code == 2


def test_presets_command(tmp_path):
    """`kerasbert presets` as the installed console script: every preset,
    grouped by family."""
    from kerasbert.models import list_presets

    lines = ok(kerasbert("presets", cwd=tmp_path)).splitlines()
    assert lines[0] == "bert:" and lines[1].split()[0] == "bert_L10_H128"
    assert sum(1 for line in lines if line.startswith("  ")) == len(list_presets())
    for family in ("bert:", "albert:", "roberta:", "distil_bert:", "modern_bert:"):
        assert family in lines


def test_parse_overrides_types():
    assert parse_overrides(["a=1", "b=0.5", "c=relu", "d=None"]) == {
        "a": 1, "b": 0.5, "c": "relu", "d": None,
    }


def test_demo_runs_and_checks_everything(tmp_path):
    """`kerasbert demo --quick` as the installed console script (`make demo`
    runs it without --quick), writing into a folder given relative to the
    working directory."""
    out = ok(kerasbert("demo", "--output-dir", "demo", "--quick", cwd=tmp_path,
                       timeout=900))
    root = tmp_path / "demo"
    assert "every check passed" in out
    assert "bert_base: 109,482,240 parameters" in out
    assert "bert_large: 335,141,888 parameters" in out
    assert (root / "bert_tiny.keras").exists()
    for name in ("corpus.txt", "vocab.txt", "data/metadata.json", "pretrain/backbone.keras",
                 "pretrain/training_curve.png"):
        assert (root / name).exists(), name
    assert "step 20: loss" in out and "fill in the blank" in out
    assert "majority-class baseline" in out
    assert (root / "finetune" / "model.keras").exists()
    assert (root / "export" / "stdlib_area" / "1" / "saved_model.pb").exists()
    served = out.split("export for TF Serving")[1]
    assert served.count("    -> ") == 3  # labels from the SavedModel in a fresh process


@pytest.mark.parametrize("error,message", [
    (FileExistsError(17, "File exists", "/tmp/out"), "/tmp/out: exists already"),
    (IsADirectoryError(21, "Is a directory", "vectors"), "vectors: is a folder, not a file"),
    (PermissionError(13, "Permission denied", "ro/x"), "ro/x: permission denied"),
    (OSError(28, "No space left on device"), "the disk is full"),
])
def test_os_errors_name_the_path_in_words(capsys, error, message):
    """Issue 51: no raw "[Errno 17] File exists: '...'" on the command line."""
    from kerasbert.cli import run_reporting_errors

    def fail(args):
        raise error

    assert run_reporting_errors(fail, None, "kerasbert convert") == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith(f"kerasbert convert: error: {message}") and "Errno" not in line


def test_convert_into_a_path_under_a_file_is_one_line(tmp_path):
    (tmp_path / "afile").write_text("")
    (tmp_path / "v.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"]))
    result = kerasbert("convert", "--model", "bert_tiny", "--to", "tf1", "--output", "afile/x",
                       "--vocab", "v.txt", cwd=tmp_path)
    line = one_line_error(result, "afile")
    assert "Errno" not in line
