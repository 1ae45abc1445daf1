"""The default suite drops no coverage: every `slow` test names the tests of
the default suite that exercise the same path more cheaply.

A test is marked `@pytest.mark.slow(covered_by=("tests/x.py::test_y", ...))`
(or `pytest.param(..., marks=pytest.mark.slow(covered_by=...))`); this file
reads every test file's source (no imports, so it takes well under a second)
and checks that each reference names a test function that exists and is not
itself slow. A bare `@pytest.mark.slow` is refused.
"""

import ast
import pathlib

TESTS = pathlib.Path(__file__).resolve().parent
ROOT = TESTS.parent


def is_slow_marker(node):
    """True for the expression `pytest.mark.slow`."""
    return (isinstance(node, ast.Attribute) and node.attr == "slow"
            and isinstance(node.value, ast.Attribute) and node.value.attr == "mark"
            and isinstance(node.value.value, ast.Name) and node.value.value.id == "pytest")


def slow_markers(tree):
    """(line, covered_by or None) for each `pytest.mark.slow` in a module;
    covered_by is the tuple of references, None for a bare marker or one
    without a literal `covered_by`."""
    called = {id(node.func): node for node in ast.walk(tree)
              if isinstance(node, ast.Call) and is_slow_marker(node.func)}
    found = []
    for node in ast.walk(tree):
        if not is_slow_marker(node):
            continue
        call = called.get(id(node))
        refs = None
        for keyword in call.keywords if call else ():
            if keyword.arg == "covered_by":
                value = keyword.value
                items = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
                if items and all(isinstance(item, ast.Constant) and isinstance(item.value, str)
                                 for item in items):
                    refs = tuple(item.value for item in items)
        found.append((node.lineno, refs))
    return found


def decorated_slow(function):
    return any(is_slow_marker(dec.func if isinstance(dec, ast.Call) else dec)
               for dec in function.decorator_list)


def module_is_slow(tree):
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == "pytestmark"
                for target in node.targets)):
            if any(is_slow_marker(sub) for sub in ast.walk(node.value)):
                return True
    return False


def find_test(tree, names):
    """The function node for `name` or `Class::name`, else None."""
    scope = tree.body
    for name in names[:-1]:
        classes = [node for node in scope if isinstance(node, ast.ClassDef) and node.name == name]
        if not classes:
            return None
        scope = classes[0].body
    for node in scope:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == names[-1]:
            return node
    return None


def reference_problem(ref, parsed):
    """Why `ref` ("tests/x.py::[Class::]test_name") is not a default-suite
    test, or None when it is."""
    path, _, rest = ref.partition("::")
    names = [name.split("[")[0] for name in rest.split("::")] if rest else []
    tree = parsed.get(path)
    if tree is None:
        return f"{ref}: no test file {path}"
    if not names or not names[-1].startswith("test"):
        return f"{ref}: name a test function (FILE::test_name)"
    function = find_test(tree, names)
    if function is None:
        return f"{ref}: {path} has no test {'::'.join(names)}"
    if decorated_slow(function) or module_is_slow(tree):
        return f"{ref}: is itself slow"
    return None


def parse_tests():
    return {path.relative_to(ROOT).as_posix(): ast.parse(path.read_text(), str(path))
            for path in sorted(TESTS.rglob("test_*.py"))}


def test_every_slow_test_names_default_tests_that_cover_its_path():
    parsed = parse_tests()
    problems = []
    count = 0
    for path, tree in parsed.items():
        for line, refs in slow_markers(tree):
            count += 1
            where = f"{path}:{line}"
            if refs is None:
                problems.append(f"{where}: pytest.mark.slow needs covered_by=(\"tests/...::test_...\",)")
                continue
            problems += [f"{where}: {problem}" for problem in
                         (reference_problem(ref, parsed) for ref in refs) if problem]
    assert count > 0
    assert not problems, "\n".join(problems)


def test_the_check_catches_what_it_should():
    source = (
        "import pytest\n"
        "@pytest.mark.slow\n"
        "def test_bare(): pass\n"
        "@pytest.mark.slow(covered_by=('tests/m.py::test_fast', 'tests/m.py::test_bare',\n"
        "                              'tests/m.py::test_gone', 'tests/none.py::test_x'))\n"
        "def test_named(): pass\n"
        "def test_fast(): pass\n"
    )
    tree = ast.parse(source)
    markers = slow_markers(tree)
    assert [refs for _, refs in markers][0] is None
    refs = markers[1][1]
    problems = [reference_problem(ref, {"tests/m.py": tree}) for ref in refs]
    assert problems[0] is None
    assert problems[1] == "tests/m.py::test_bare: is itself slow"
    assert problems[2] == "tests/m.py::test_gone: tests/m.py has no test test_gone"
    assert problems[3] == "tests/none.py::test_x: no test file tests/none.py"
