"""`slow_covered_by`: how a test of this suite is marked slow.

    @slow_covered_by("tests/x.py::test_cheap_path",
                     "tests/y.py::TestZ::test_other_part")
    def test_the_expensive_path(...): ...

or, for one case of a parametrized test,
`pytest.param("big", marks=slow_covered_by("tests/x.py::test_small"))`.

It is `pytest.mark.slow(covered_by=tests)`: the default run (`-m "not
slow"`, pytest.ini) skips the test and `make test-slow` runs it. The names
are the default-suite tests that exercise the same path more cheaply, so
that skipping the slow test drops no coverage; tests/test_slow_markers.py
reads them from every test file's source (string literals, or module-level
names bound to one) and checks that each names a test that exists and is not
itself slow. Module-level names let a file say a long reference once when
several cases share it.
"""

import pytest


def slow_covered_by(*tests):
    """The `slow` marker naming `tests` ("tests/x.py::[Class::]test_name",
    at least one) as the default-suite tests that cover the same path."""
    if not tests:
        raise ValueError("slow_covered_by needs at least one default-suite test "
                         "(\"tests/x.py::test_name\") that covers the same path")
    for test in tests:
        if not _is_reference(test):
            raise ValueError("slow_covered_by takes \"tests/x.py::[Class::]test_name\" "
                             f"references, got {test!r}")
    return pytest.mark.slow(covered_by=tests)


def _is_reference(test):
    if not isinstance(test, str):
        return False
    path, _, names = test.partition("::")
    return (path.startswith("tests/") and path.endswith(".py")
            and names.split("::")[-1].startswith("test"))
