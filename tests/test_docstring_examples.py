"""The suite's doctest pass: every public class shows a runnable `Example:`.

A public class is one a package exports: a name of a package's
`lazy_exports` table (its `__all__`), or a public name a package imports
eagerly (`kerasbert.layers`, `kerasbert.models`, `kerasbert.tasks`, ...),
that is a class defined in kerasbert. Each one's class docstring runs as a
doctest (one case per class), and so does every module docstring with a
`>>>` example (e.g. `kerasbert.sources`). A public class without an
`Example:` section holding at least one `>>>` line fails
`test_every_public_class_has_an_example`.

The examples build the tiniest objects that show the use, so the whole pass
stays well under two minutes on one core. Files they write go under
`tempfile` (pointed at the test's `tmp_path` here), so a run leaves nothing
behind.
"""

import ast
import doctest
import importlib
import inspect
import pathlib
import pkgutil
import tempfile

import pytest

import kerasbert

PACKAGE = pathlib.Path(kerasbert.__file__).resolve().parent
# Shapes and reprs are printed; ELLIPSIS lets an example elide what varies
# (an address, a path under the temp folder), NORMALIZE_WHITESPACE lets a
# long line wrap.
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def package_names():
    """kerasbert and each of its sub-packages, by dotted name."""
    found = [kerasbert.__name__]
    found += [info.name for info in pkgutil.walk_packages(kerasbert.__path__, "kerasbert.")
              if info.ispkg]
    return sorted(found)


def public_classes():
    """{"module.QualName": class} of every class a kerasbert package exports."""
    classes = {}
    for name in package_names():
        package = importlib.import_module(name)
        exported = getattr(package, "__all__", None)
        if exported is None:
            exported = [n for n in vars(package) if not n.startswith("_")]
        for attribute in exported:
            value = getattr(package, attribute)
            if inspect.isclass(value) and value.__module__.startswith("kerasbert."):
                classes[f"{value.__module__}.{value.__qualname__}"] = value
    return dict(sorted(classes.items()))


def modules_with_examples():
    """Dotted names of the kerasbert modules whose module docstring holds a
    doctest example, read with `ast` (nothing imported)."""
    parser = doctest.DocTestParser()
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
        if docstring and parser.get_examples(docstring):
            parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


PUBLIC_CLASSES = public_classes()


def has_example(docstring):
    """True when a docstring has an `Example:` (or `Examples:`) section with
    at least one `>>>` line after it."""
    lines = (docstring or "").splitlines()
    for index, line in enumerate(lines):
        if line.strip() in ("Example:", "Examples:"):
            return any(later.lstrip().startswith(">>>") for later in lines[index + 1:])
    return False


def run_doctests(tests):
    """Runs doctest.DocTest objects; returns (examples tried, failures,
    the runner's report of the failures)."""
    report = []
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    for test in tests:
        runner.run(test, out=report.append)
    return runner.tries, runner.failures, "".join(report)


@pytest.fixture
def examples_folder(tmp_path, monkeypatch):
    """The examples' temporary files (tempfile.mkdtemp, ...) and relative
    paths land in the test's tmp_path."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_collection_sees_the_public_classes():
    """The collector finds the classes of every floor, so an empty pass
    cannot look like a passing one."""
    for expected in ("kerasbert.sources.source.Source",
                     "kerasbert.models.bert.bert_backbone.BertBackbone",
                     "kerasbert.tasks.seq2seq_lm.Seq2SeqLM",
                     "kerasbert.layers.transformer_block.TransformerEncoderBlock",
                     "kerasbert.text.tokenizer.WordPieceTokenizer",
                     "kerasbert.optimizers.bert_optimizers.AdamW",
                     "kerasbert.preprocessing.text_classifier_preprocessor."
                     "TextClassifierPreprocessor"):
        assert expected in PUBLIC_CLASSES
    assert "kerasbert.sources" in modules_with_examples()


def test_has_example_reads_the_section():
    assert has_example("Builds x.\n\n    Example:\n\n    >>> 1 + 1\n    2\n")
    assert not has_example("Builds x.\n\n    >>> 1 + 1\n    2\n")
    assert not has_example("Builds x.\n\n    Example:\n\n        x = 1\n")
    assert not has_example(None)


def test_every_public_class_has_an_example():
    missing = [name for name, cls in PUBLIC_CLASSES.items() if not has_example(cls.__doc__)]
    assert not missing, (
        "public classes without an `Example:` section with a `>>>` line in their "
        "docstring:\n  " + "\n  ".join(missing))


@pytest.mark.parametrize("name", list(PUBLIC_CLASSES))
def test_class_example_runs(name, examples_folder):
    cls = PUBLIC_CLASSES[name]
    module = importlib.import_module(cls.__module__)
    # The class docstring only (its methods' docstrings are not examples of
    # the class), with the module's globals as doctest gives them.
    finder = doctest.DocTestFinder(recurse=False)
    tests = finder.find(cls, name, module=module, globs=dict(vars(module)))
    attempted, failed, report = run_doctests(tests)
    assert attempted, f"{name}: no doctest example in the class docstring"
    assert not failed, report


@pytest.mark.parametrize("name", modules_with_examples())
def test_module_example_runs(name, examples_folder):
    module = importlib.import_module(name)
    tests = doctest.DocTestFinder(recurse=False).find(module, name, globs=dict(vars(module)))
    attempted, failed, report = run_doctests(tests)
    assert attempted, f"{name}: no doctest example in the module docstring"
    assert not failed, report
