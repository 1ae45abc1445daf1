"""The default suite drops no coverage: every `slow` test names the tests of
the default suite that exercise the same path more cheaply.

A test is marked `@slow_covered_by("tests/x.py::test_y", ...)` (tests/
slow_marks.py; for one case, `pytest.param(..., marks=slow_covered_by(...))`),
which is `pytest.mark.slow(covered_by=(...))`, also accepted when written out.
This file reads every test file's source (no imports, so it takes well under
a second) and checks that each reference, a string literal or a module-level
name bound to one, names a test function that exists and is not itself
slow. A bare `@pytest.mark.slow`, or a marker naming no test, is refused.
"""

import ast
import pathlib

import pytest
from slow_marks import slow_covered_by

TESTS = pathlib.Path(__file__).resolve().parent
ROOT = TESTS.parent
HELPER = "slow_covered_by"


def is_slow_marker(node):
    """True for the expression `pytest.mark.slow`."""
    return (isinstance(node, ast.Attribute) and node.attr == "slow"
            and isinstance(node.value, ast.Attribute) and node.value.attr == "mark"
            and isinstance(node.value.value, ast.Name) and node.value.value.id == "pytest")


def is_helper(node):
    """True for the expression `slow_covered_by` (or `module.slow_covered_by`)."""
    return (isinstance(node, ast.Name) and node.id == HELPER
            or isinstance(node, ast.Attribute) and node.attr == HELPER)


def module_strings(tree):
    """{name: text} for each module-level `NAME = "text"`."""
    return {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            for target in node.targets if isinstance(target, ast.Name)}


def literal_references(items, strings):
    """The references `items` (expression nodes) spell, or None when one of
    them is not a string literal or a module-level name bound to one."""
    refs = []
    for item in items:
        if isinstance(item, ast.Constant) and isinstance(item.value, str):
            refs.append(item.value)
        elif isinstance(item, ast.Name) and item.id in strings:
            refs.append(strings[item.id])
        else:
            return None
    return tuple(refs) or None


def marker_references(call, strings):
    """covered_by of a `slow_covered_by(...)` or `pytest.mark.slow(...)` call
    (None for a call that names no literal test)."""
    if is_helper(call.func):
        return literal_references(call.args, strings) if not call.keywords else None
    for keyword in call.keywords:
        if keyword.arg == "covered_by":
            value = keyword.value
            items = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
            return literal_references(items, strings)
    return None


def slow_markers(tree):
    """(line, covered_by or None) for each `slow_covered_by(...)` and
    `pytest.mark.slow` in a module; covered_by is the tuple of references,
    None for a bare marker or one without literal references."""
    strings = module_strings(tree)
    called = {id(node.func): node for node in ast.walk(tree)
              if isinstance(node, ast.Call) and (is_slow_marker(node.func) or is_helper(node.func))}
    found = []
    for node in ast.walk(tree):
        if not (is_slow_marker(node) or is_helper(node)):
            continue
        call = called.get(id(node))
        if call is None and is_helper(node):
            continue  # the helper's import or a mention, not a marker
        found.append((node.lineno, marker_references(call, strings) if call else None))
    return found


def decorated_slow(function):
    return any(is_slow_marker(dec.func if isinstance(dec, ast.Call) else dec)
               or isinstance(dec, ast.Call) and is_helper(dec.func)
               for dec in function.decorator_list)


def module_is_slow(tree):
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == "pytestmark"
                for target in node.targets)):
            if any(is_slow_marker(sub) or is_helper(sub) for sub in ast.walk(node.value)):
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
                problems.append(f"{where}: mark it slow_covered_by(\"tests/...::test_...\", ...) "
                                "(tests/slow_marks.py), naming string literals")
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


def test_the_helper_form_is_checked_the_same_way():
    source = (
        "from slow_marks import slow_covered_by\n"
        "FAST = 'tests/m.py::test_fast'\n"
        "@slow_covered_by(FAST, 'tests/m.py::test_helped')\n"
        "def test_helped(): pass\n"
        "@slow_covered_by()\n"
        "def test_empty(): pass\n"
        "@slow_covered_by(*FAST)\n"
        "def test_starred(): pass\n"
        "@slow_covered_by(UNBOUND)\n"
        "def test_unbound(): pass\n"
        "PARAMS = [pytest.param(1, marks=slow_covered_by(FAST))]\n"
        "def test_fast(): pass\n"
    )
    tree = ast.parse(source)
    markers = [refs for _, refs in sorted(slow_markers(tree))]
    assert markers == [("tests/m.py::test_fast", "tests/m.py::test_helped"), None, None, None,
                       ("tests/m.py::test_fast",)]
    parsed = {"tests/m.py": tree}
    assert [reference_problem(ref, parsed) for ref in markers[0]] == [
        None, "tests/m.py::test_helped: is itself slow"]
    assert module_is_slow(ast.parse("pytestmark = slow_covered_by('tests/m.py::test_fast')\n"))


def test_the_helper_refuses_what_the_check_would():
    # Called under another name: the check above reads this file too, and
    # these made-up references are not markers of this suite.
    mark = slow_covered_by
    assert mark("tests/m.py::TestX::test_y").kwargs == {"covered_by": ("tests/m.py::TestX::test_y",)}
    assert mark("tests/m.py::test_y").name == "slow"
    for bad in [(), ("tests/m.py",), ("m.py::test_y",), ("tests/m.py::helper",), (3,)]:
        with pytest.raises(ValueError, match="slow_covered_by"):
            mark(*bad)
