"""The package's import layers, read from the source with `ast` (nothing is
imported, so this runs in a second): a module may import its own layer and
the layers below it, never one above, not even inside a function, and no
chain of imports may come back to where it started. The same holds for
folders: each folder of kerasbert/ and each top-level module is one node of
the folder picture, ranked by `LAYERS`, which names folders only (no package
sits on two layers); no arrow between nodes goes up and no nodes reach each
other (`structure.py` in the shared tools draws the same picture).

    errors, io_utils, kernels, metrics, version, plotting, export_door,
    fast_start, hardware
      < sources (handles, `Source`, layout detection: files only)
      < layers, text, optimizers, decoding (greedy, sampling and beam search)
      < models, data
      < convert, preprocessing
      < tasks
      < saving, runs
      < loading (backbones, heads and generators built from a `Source`)
      < training, serving
      < commands, cli, demo, testing, keras_lookup, the package itself

An import is any way one module reaches another: `import` statements, and
also `importlib.import_module("kerasbert...")`, a string that names a
kerasbert module ("kerasbert.x.y" or "kerasbert.x.y:Name"), the submodules a
package's `lazy_exports` names, an entry point of setup.py that a module
of the package looks up by its group, and a door. None of them may go up a
layer or close a cycle.

A door (`DOORS`) is a slot in a low module that the package root fills at
import time, so that a method of a low class reaches a function above it:
`Backbone.from_preset` (models) builds published checkpoints with
`kerasbert.loading.backbones.load_backbone`, `Task.export` (tasks) writes
through `kerasbert.serving.exporter.export_task`. Each one counts as the
edges it really adds: the caller imports the slot's module (below it) and
the package root imports the function it installs (below the root). Every
`install_*` function of the package must be declared in `DOORS` and be
called by the package root only, so a new one cannot hide.

`saving` registers every Keras class the package defines (layers to tasks)
with static imports, so it sits above `tasks`, as does `runs` (the run
directory); `testing` holds helpers for test suites and may use anything.
"""
import ast
import os
import re

import pytest

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kerasbert")
SETUP = os.path.join(os.path.dirname(PACKAGE), "setup.py")

LAYERS = (
    ("errors", "io_utils", "kernels", "metrics", "version", "plotting", "export_door",
     "fast_start", "hardware"),
    ("sources",),
    ("layers", "text", "optimizers", "decoding"),
    ("models", "data"),
    ("convert", "preprocessing"),
    ("tasks",),
    ("saving", "runs"),
    ("loading",),
    ("training", "serving"),
    ("commands", "cli", "demo", "testing", "keras_lookup", "__main__", ""),
)
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def module_name(path):
    parts = os.path.relpath(path, os.path.dirname(PACKAGE))[:-3].split(os.sep)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_key(module):
    """The node of `kerasbert.X...` in the folder picture: "X", the folder
    or top-level module ("" for the package itself)."""
    parts = module.split(".")[1:]
    return parts[0] if parts else ""


def rank(module):
    """Layer of `kerasbert.X...` (the package itself: the top)."""
    return RANK[layer_key(module)]


def resolve(module, node, is_package):
    """Absolute kerasbert module names an import statement names (a
    `from package import submodule` counts as the submodule)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".")
        base = base[: len(base) - node.level + (1 if is_package else 0)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    names = []
    for alias in node.names:
        candidate = f"{target}.{alias.name}"
        path = os.path.join(os.path.dirname(PACKAGE), *candidate.split("."))
        names.append(candidate if os.path.isdir(path) or os.path.isfile(path + ".py") else target)
    return names


def walk(tree):
    """(import node, inside a function?) for every import in the module."""
    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, nested
            yield from visit(child, nested)
    yield from visit(tree, False)


MODULE_STRING = re.compile(r"kerasbert(\.[A-Za-z_]\w*)+(:[A-Za-z_]\w*)?")


def existing_module(dotted):
    """The longest prefix of `dotted` that is a kerasbert module or
    package ("kerasbert.x.Name" -> "kerasbert.x"), or None."""
    parts = dotted.split(".")
    while len(parts) > 1:
        path = os.path.join(os.path.dirname(PACKAGE), *parts)
        if os.path.isdir(path) or os.path.isfile(path + ".py"):
            return ".".join(parts)
        parts.pop()
    return None


def _docstrings(tree):
    nodes = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                nodes.add(id(body[0].value))
    return nodes


def _nested(tree):
    """ids of the nodes inside a function body."""
    return {id(inner) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            for inner in ast.walk(node) if inner is not node}


def string_imports(module, tree, is_package):
    """(target, line, in function) for every module the source reaches by
    a string: `import_module("kerasbert...")`, any "kerasbert.x[:Name]"
    string, and the submodules a `lazy_exports(__name__, {...})` call names."""
    found = []
    docstrings, nested = _docstrings(tree), _nested(tree)
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in docstrings and MODULE_STRING.fullmatch(node.value)):
            target = existing_module(node.value.split(":")[0])
            if target:
                found.append((target, node.lineno, id(node) in nested))
        if (isinstance(node, ast.Call) and ast.unparse(node.func).endswith("lazy_exports")
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Dict)):
            for key in node.args[1].keys:
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    target = existing_module(f"{package}.{key.value}")
                    if target:
                        found.append((target, node.lineno, id(node) in nested))
    return found


def setup_entry_points():
    """{group: [modules its entry points name]} from setup.py."""
    with open(SETUP, encoding="utf-8") as f:
        tree = ast.parse(f.read(), SETUP)
    groups = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "entry_points":
            for group, entries in ast.literal_eval(node.value).items():
                groups[group] = [entry.split("=", 1)[1].strip().split(":")[0]
                                 for entry in entries]
    return groups


ENTRY_POINTS = setup_entry_points()


def entry_point_lookups(tree):
    """(group, line, in function) of every `entry_points(group=...)` call
    whose group is a string, or a module-level name bound to one."""
    constants = {target.id: node.value.value for node in tree.body
                 if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                 for target in node.targets if isinstance(target, ast.Name)}
    nested, found = _nested(tree), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("entry_points"):
            for keyword in node.keywords:
                if keyword.arg == "group":
                    value = keyword.value
                    group = (value.value if isinstance(value, ast.Constant)
                             else constants.get(getattr(value, "id", None)))
                    found.append((group, node.lineno, id(node) in nested))
    return found


def package_imports(statements):
    """[(module, imported kerasbert module, line, in function)] of the
    import statements, or else of the strings and entry points."""
    found = []
    for folder, _, files in os.walk(PACKAGE):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            module = module_name(path)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            for node, in_function in walk(tree if statements else ast.Module([], [])):
                for target in resolve(module, node, name == "__init__.py"):
                    if target.split(".")[0] == "kerasbert":
                        found.append((module, target, node.lineno, in_function))
            if not statements:
                found += [(module, target, line, in_function) for target, line, in_function
                          in string_imports(module, tree, name == "__init__.py")
                          if target != module]
                found += [(module, target, line, in_function)
                          for group, line, in_function in entry_point_lookups(tree)
                          for target in ENTRY_POINTS.get(group, ())]
    return found


STATEMENTS = package_imports(statements=True)
#: every edge: import statements, strings and entry points
IMPORTS = STATEMENTS + package_imports(statements=False)


def test_the_walk_sees_the_package():
    modules = {module for module, *_ in IMPORTS}
    assert len(IMPORTS) > 300 and "kerasbert.models.bert.bert_backbone" in modules


def test_every_module_has_a_layer():
    unplaced = sorted({m for edge in IMPORTS for m in edge[:2] if layer_key(m) not in RANK})
    assert not unplaced, f"give these a layer in tests/test_layering.py: {unplaced}"


def test_no_import_goes_up_a_layer():
    upward = [f"{module}:{line} imports {target}" + (" (in a function)" if nested else "")
              for module, target, line, nested in IMPORTS if rank(target) > rank(module)]
    assert not upward, "imports against the layers:\n" + "\n".join(upward)


def test_no_import_cycles():
    """No module reaches itself through imports (top-level or in functions)."""
    graph = {}
    for module, target, *_ in IMPORTS:
        if module != target:
            graph.setdefault(module, set()).add(target)
    cycles = _strongly_connected(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(sorted(c)) for c in cycles)


@pytest.mark.parametrize("module", ["kerasbert.cli"])
def test_library_code_does_not_import_the_command_line(module):
    users = sorted({f"{m}:{line}" for m, target, line, _ in IMPORTS
                    if target == module and rank(m) < RANK["cli"]})
    assert not users, f"{module} is imported by library code: {users}"


def test_layers_name_folders_only():
    """A folder is one node: no package may be split across two layers."""
    split = [name for name in RANK if "." in name]
    assert not split, f"LAYERS ranks parts of a package separately: {split}"


def folder_arrows(edges):
    """The upward arrows between nodes of the folder picture."""
    return sorted({f"{layer_key(module)} -> {layer_key(target)} ({module}:{line})"
                   for module, target, line, _ in edges if rank(target) > rank(module)})


def folder_cycles(edges):
    """The groups of nodes of the folder picture that reach each other."""
    graph = {}
    for module, target, *_ in edges:
        if layer_key(module) != layer_key(target):
            graph.setdefault(layer_key(module), set()).add(layer_key(target))
    return [sorted(c) for c in _strongly_connected(graph)]


def test_no_folder_arrow_goes_up():
    arrows = folder_arrows(IMPORTS)
    assert not arrows, "upward arrows between folders:\n" + "\n".join(arrows)


def test_no_folder_cycles():
    """No two folders (or top-level modules) reach each other, even on one
    layer."""
    cycles = folder_cycles(IMPORTS)
    assert not cycles, "folder cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_folder_checks_see_an_arrow_and_a_cycle():
    """Two modules of one layer (models, data) that import each other, in
    functions, and a layer that imports one above it."""
    edges = [("kerasbert.models.presets", "kerasbert.data.schema", 3, True),
             ("kerasbert.data.schema", "kerasbert.models.bert", 9, True),
             ("kerasbert.layers.pooler", "kerasbert.tasks.task", 5, False)]
    assert folder_cycles(edges) == [["data", "models"]]
    assert folder_arrows(edges) == ["layers -> tasks (kerasbert.layers.pooler:5)"]


#: {door: (module that holds the slot, module of the function the package
#: root installs)}; see the module docstring.
DOORS = {
    "install_backbone_loader": ("kerasbert.sources.source", "kerasbert.loading.backbones"),
    "install_exporter": ("kerasbert.export_door", "kerasbert.serving.exporter"),
}


def _module_trees():
    for folder, _, files in os.walk(PACKAGE):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    yield module_name(path), ast.parse(f.read(), path)


def test_every_door_is_declared_and_opened_by_the_package_root():
    defined, opened = {}, []
    for module, tree in _module_trees():
        functions = {node.name: node for node in ast.walk(tree)
                     if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
        defined.update({name: module for name in functions if name.startswith("install_")})
        for node in ast.walk(tree):
            called = isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1]
            if called and called.startswith("install_"):
                installed = functions.get(getattr(node.args[0], "id", None)) if node.args else None
                reached = ({target for inner, _ in walk(installed)
                            for target in resolve(module, inner, False)} if installed else set())
                opened.append((called, module, reached))
    assert {name: module for name, module in defined.items()} == {
        name: slot for name, (slot, _) in DOORS.items()}, "declare every door in DOORS"
    for door, module, reached in opened:
        assert module == "kerasbert", f"{door} is opened by {module}, not the package root"
        assert DOORS[door][1] in reached, (
            f"{door}: the root installs a function that does not import {DOORS[door][1]}")
    assert sorted(door for door, *_ in opened) == sorted(DOORS)


def _strongly_connected(graph):
    """Tarjan's algorithm, iterative: the components with more than one
    module."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []
    counter = 0
    for root in list(graph):
        if root in index:
            continue
        work = [(root, iter(graph.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
    return components


def test_argparse_only_in_the_command_line():
    users = []
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            path = os.path.join(folder, name)
            if not name.endswith(".py"):
                continue
            module = module_name(path)
            if module == "kerasbert.cli" or module.startswith("kerasbert.commands"):
                continue
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            for node, _ in walk(tree):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""])
                if "argparse" in names:
                    users.append(f"{module}:{node.lineno}")
    assert not users, f"argparse outside kerasbert/commands and cli.py: {users}"


def test_only_the_command_line_imports_commands():
    users = sorted({f"{m}:{line}" for m, target, line, _ in IMPORTS
                    if target.startswith("kerasbert.commands")
                    and not (m == "kerasbert.cli" or m.startswith("kerasbert.commands"))})
    assert not users, f"kerasbert.commands is imported outside the command line: {users}"


# Issue 19: importing kerasbert modules inside a function is the exception,
# kept only where laziness is the point (`kerasbert --help` without
# TensorFlow, plain-Python paths, optional dependencies), and each one says
# why with a `# lazy: REASON` comment.
MAX_LAZY_IMPORTS = 100



def _lazy_reason_given(lines, spans, lineno):
    """Whether the import statement starting at `lineno` carries `# lazy:`
    on one of its lines or on the comment lines right above it, or the
    first statement of the contiguous block of imports it belongs to does.
    `spans`: {first line: last line} of every import statement of the file."""
    starts_by_end = {end: start for start, end in spans.items()}
    first = lineno
    while first - 1 in starts_by_end:
        first = starts_by_end[first - 1]
    for start in {lineno, first}:
        if any("# lazy:" in lines[i - 1] for i in range(start, spans[start] + 1)):
            return True
        above = start - 1
        while above >= 1 and lines[above - 1].lstrip().startswith("#"):
            if "# lazy:" in lines[above - 1]:
                return True
            above -= 1
    return False


def test_lazy_imports_are_few_and_explained():
    lazy = sorted({(module, line) for module, _, line, in_function in STATEMENTS
                   if in_function})
    assert len(lazy) <= MAX_LAZY_IMPORTS, (
        f"{len(lazy)} in-function kerasbert imports (at most {MAX_LAZY_IMPORTS}): hoist "
        "those that do not need to be lazy to the top of their module")
    paths = {}
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                paths[module_name(os.path.join(folder, name))] = os.path.join(folder, name)
    unexplained = []
    for module in sorted({module for module, _ in lazy}):
        with open(paths[module], encoding="utf-8") as f:
            source = f.read()
        lines = source.splitlines()
        spans = {node.lineno: node.end_lineno for node, _ in walk(ast.parse(source))}
        unexplained += [f"{module}:{line}" for m, line in lazy
                        if m == module and not _lazy_reason_given(lines, spans, line)]
    assert not unexplained, (
        "in-function kerasbert imports without a `# lazy: REASON` comment (on the "
        "line, right above it, or on the first line of its block):\n" + "\n".join(unexplained))
