"""Every `kerasbert` command runs at least once, in the default suite, as a
user runs it: the installed console script in a fresh process.

In-process tests (`kerasbert.cli.main`) are cheaper and check most of a
command, but they share this interpreter's imports, working directory and
environment; what crosses processes (relative paths, files another process
wrote, environment variables, the console-script entry point itself) is
only seen from a fresh one. CONSOLE_TESTS names, for each command, a
default-suite test that does it. This file checks the table against the
CLI and the test sources (no imports of the tests, well under a second):
every command is listed, each test exists and is not slow, and the test,
the fixtures it takes and the helpers they call use the console-script
runner of tests/reliability/console.py and name the command.
"""

import ast

from test_slow_markers import find_test
from test_slow_markers import parse_tests
from test_slow_markers import reference_problem

from kerasbert import commands

CONSOLE_TESTS = {
    "info": "tests/models/transformer/test_transformer_backbone.py::TestTransformerBackbone::"
            "test_info_prints_the_count_through_the_console_script",
    "presets": "tests/test_cli.py::test_presets_command",
    "demo": "tests/test_cli.py::test_demo_runs_and_checks_everything",
    "vocab": "tests/text/test_vocabulary.py::test_cli",
    "create-pretraining-data": "tests/reliability/test_kills.py::test_kill_create_pretraining_data",
    # A refusal; test_kills.py's test_kill_pretrain_then_resume also runs the console
    # script to the end, its arguments from pretrain_data.pretrain_args.
    "pretrain": "tests/reliability/test_resume_faults.py::test_data_without_records_exits_2_at_once",
    "create-finetuning-data": "tests/text/test_features_tokenizer_settings.py::"
                              "test_features_record_the_tokenizer_settings",
    "extract-features": "tests/convert/test_handles.py::"
                        "test_export_hub_and_extract_features_take_a_handle",
    "embed": "tests/tasks/test_sentence_encoder.py::test_embed_cli_writes_jsonl_and_npy",
    "fill-mask": "tests/convert/test_hf_heads.py::test_fill_mask_cli",
    "generate": "tests/training/test_gpt_pretrain.py::test_generate_regenerates_the_memorised_text",
    "finetune": "tests/training/test_finetune_cli.py::"
                "test_multi_worker_strategy_two_console_script_processes",
    "evaluate": "tests/training/test_finetune_cli.py::test_a_run_made_from_relative_paths_travels",
    "distill": "tests/training/test_distill_cli.py::test_teacher_given_as_a_handle",
    "export": "tests/training/test_finetune_cli.py::test_a_run_made_from_relative_paths_travels",
    "export-hub": "tests/convert/test_handles.py::"
                  "test_export_hub_and_extract_features_take_a_handle",
    "convert": "tests/serving/test_model_conversion.py::test_cli_converts",
    "predict": "tests/serving/test_export.py::test_predict_cli",
}

# What tests/reliability/console.py offers for a fresh console-script process.
RUNNERS = {"kerasbert", "start", "KERASBERT"}


def runner_names(tree):
    """Local names bound to the console-script runners by `from
    reliability.console import ...` (aliases included; `from .console` and
    `from console` inside tests/reliability/ and beside a sys.path entry)."""
    return {alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module in ("reliability.console",
                                                                     "console")
            for alias in node.names if alias.name in RUNNERS}


def reached_functions(tree, test):
    """The test function, the module-level functions it names (fixtures it
    takes, helpers it calls), and theirs, transitively."""
    functions = {node.name: node for node in tree.body
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    reached, todo = [], [test]
    while todo:
        function = todo.pop()
        if any(function is seen for seen in reached):
            continue
        reached.append(function)
        names = {arg.arg for arg in function.args.args}
        names |= {node.id for node in ast.walk(function) if isinstance(node, ast.Name)}
        todo += [functions[name] for name in names if name in functions]
    return reached


def console_problem(command, ref, parsed):
    """Why `ref` does not run `command` as a console script, or None."""
    problem = reference_problem(ref, parsed)
    if problem:
        return problem
    path, _, rest = ref.partition("::")
    tree = parsed[path]
    reached = reached_functions(tree, find_test(tree, rest.split("::")))
    runners = runner_names(tree)
    names = {node.id for function in reached for node in ast.walk(function)
             if isinstance(node, ast.Name)}
    if not names & runners:
        return f"{ref}: uses no console-script runner of reliability.console ({sorted(RUNNERS)})"
    constants = {node.value for function in reached for node in ast.walk(function)
                 if isinstance(node, ast.Constant)}
    if command not in constants:
        return f"{ref}: never names the command {command!r}"
    return None


def test_every_command_runs_as_a_console_script_in_the_default_suite():
    verbs = [module.NAME for module in commands.MODULES]
    assert sorted(CONSOLE_TESTS) == sorted(verbs), (
        "CONSOLE_TESTS must list exactly the CLI's commands: "
        f"missing {sorted(set(verbs) - set(CONSOLE_TESTS))}, "
        f"unknown {sorted(set(CONSOLE_TESTS) - set(verbs))}")
    parsed = parse_tests()
    problems = [problem for command, ref in CONSOLE_TESTS.items()
                for problem in [console_problem(command, ref, parsed)] if problem]
    assert not problems, "\n".join(problems)


def test_the_check_catches_what_it_should():
    source = (
        "import pytest\n"
        "from reliability.console import kerasbert as console\n"
        "def _args(): return ['vocab', '--input', 'x']\n"
        "@pytest.fixture\n"
        "def made(): return console(*_args(), cwd='.')\n"
        "def test_through_a_fixture(made): pass\n"
        "def test_in_process(): main(['vocab'])\n"
        "def test_other_command(): console('presets', cwd='.')\n"
        "@pytest.mark.slow(covered_by=('tests/m.py::test_in_process',))\n"
        "def test_slow(): console('vocab', cwd='.')\n"
    )
    parsed = {"tests/m.py": ast.parse(source)}
    assert console_problem("vocab", "tests/m.py::test_through_a_fixture", parsed) is None
    assert "no console-script runner" in console_problem(
        "vocab", "tests/m.py::test_in_process", parsed)
    assert "never names the command 'vocab'" in console_problem(
        "vocab", "tests/m.py::test_other_command", parsed)
    assert console_problem("vocab", "tests/m.py::test_slow", parsed) == (
        "tests/m.py::test_slow: is itself slow")
