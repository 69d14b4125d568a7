"""The layer rules of the package, checked on the source (docs/architecture.md).

* Each package of ``openmsmq`` imports only the packages :data:`MAY_IMPORT` lists for it:
  layers depend downward (wire < protocol, store < qm < transfer < remote, net < server <
  client < spark, console < cli; ``protocol`` is below ``transfer`` only, ``qm`` never sees
  it). A new package needs a row here; a new dependency needs a reason.
* No module imports an underscore name from another module, imports a private module, or
  reads an underscore attribute of a module it imported (``ops._apply_removes``).
* No object reads an underscore attribute that another module defines (``qm._clock()``
  from the transfer): the classes of one module may share private names, nobody else.
* No two modules import each other, directly or through others, at module level (under
  ``TYPE_CHECKING`` too): a value type both need lives in a module of its own.
* No class declares private state it does not own (:func:`private_stubs`): no underscore
  name inside ``if TYPE_CHECKING:`` in a class body, and no bare class-level annotation of
  an underscore name that none of the class's own methods assigns (outside dataclasses,
  named tuples, typed dicts and protocols). Such declarations are how a mixin reads the
  private state of the class it is mixed into.
* No class in ``transfer/`` or ``qm/`` inherits from a project class that carries state
  (:func:`stateful_bases`): one that sets ``self.<name>``, annotates class-level names,
  has ``__slots__`` or is a dataclass, or inherits from one. The parts are objects composed
  through constructors; exceptions, enums and protocols stay inheritable.

The checks read the files with :mod:`ast` (nothing is imported), so they also cover code
behind ``TYPE_CHECKING`` and imports inside functions.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import openmsmq

SRC = Path(openmsmq.__file__).parent

#: Modules every layer may use: errors, configuration values, paths and the root package
#: (its ``__version__``).
BASE = frozenset({"openmsmq", "errors", "lazy", "datadir", "redact", "config", "runtime", "retry_policy"})

#: Package (or top-level module) of openmsmq -> the packages it may import, besides itself.
MAY_IMPORT: dict[str, frozenset[str]] = {
    "errors": frozenset(),
    "lazy": frozenset(),
    "datadir": frozenset(),
    "redact": frozenset(),
    # The config package (keys, values, loading, rendering); redact: the DSN (store.dsn) is
    # shown without its password wherever config is rendered.
    "config": frozenset({"errors", "redact"}),
    "runtime": frozenset({"datadir"}),
    "retry_policy": frozenset({"errors"}),
    "openmsmq": frozenset({"client"}),  # the root package: ``openmsmq.connect``, imported lazily
    "wire": frozenset({"errors", "lazy"}),
    "protocol": frozenset({"errors", "wire"}),
    # The lease of a highly available QM: a sans-I/O core and its asyncio driver, which
    # reaches the store's lease statements through a protocol it is given.
    "ha": frozenset({"errors"}),
    "observability": BASE | {"wire"},
    "store": BASE | {"wire", "observability"},
    "qm": BASE | {"wire", "observability", "store"},
    "transfer": BASE | {"wire", "observability", "store", "protocol", "qm"},
    "remote": BASE | {"wire", "observability", "store", "qm", "transfer"},
    # net/ holds the asyncio socket drivers only: it drives a transfer, it builds nothing.
    "net": BASE | {"observability", "protocol", "transfer"},
    # The composition root: everything a serving process assembles.
    "server": BASE
    | {"wire", "observability", "protocol", "store", "qm", "transfer", "remote", "net", "console", "ha"},
    "client": BASE | {"wire", "qm", "remote", "server"},
    "spark": BASE | {"client", "remote"},
    "console": BASE | {"wire", "observability", "store", "qm", "transfer", "remote", "client"},
    "cli": BASE | {"wire", "observability", "store", "qm", "remote", "client", "server"},
    "__main__": frozenset({"cli"}),
}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the module imported (or imported from)
    names: tuple[str, ...]  # the names imported from it (empty for ``import x``)
    line: int


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def imports(path: Path, root: Path = SRC) -> Iterator[Import]:
    """The imports of ``path`` with relative ones resolved to absolute module names."""
    module = module_name(path, root)
    package = module if is_package(path) else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, (), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, target] if target else base)
            yield Import(module, target, tuple(a.name for a in node.names), node.lineno)


def layer(module: str) -> str:
    """``openmsmq.qm.manager`` -> ``qm``; ``openmsmq`` -> ``openmsmq``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def source_files(root: Path = SRC) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if not p.name.endswith(("_pb2.py", "_pb2_grpc.py")))


def layer_violations(root: Path = SRC, table: dict[str, frozenset[str]] = MAY_IMPORT) -> list[str]:
    found = []
    for path in source_files(root):
        for imp in imports(path, root):
            if imp.target != root.name and not imp.target.startswith(root.name + "."):
                continue
            own, other = layer(imp.module), layer(imp.target)
            if own == other:
                continue
            if own not in table:
                found.append(f"{imp.module}: package {own!r} has no row in MAY_IMPORT")
            elif other not in table[own]:
                found.append(f"{imp.module}:{imp.line}: {own} may not import {imp.target}")
    return found


def module_file(module: str, root: Path) -> Path | None:
    rel = Path(*module.split(".")[1:]) if "." in module else Path()
    for candidate in (root / rel.with_suffix(".py"), root / rel / "__init__.py"):
        if rel.parts and candidate.exists():
            return candidate
    return None


def private_violations(root: Path = SRC) -> list[str]:
    found = []
    for path in source_files(root):
        module = module_name(path, root)
        tree = ast.parse(path.read_text(), filename=str(path))
        modules_bound: set[str] = set()  # local names bound to an openmsmq module
        for imp in imports(path, root):
            if not imp.target.startswith(root.name):
                continue
            if any(is_private(p) for p in imp.target.split(".")):
                found.append(f"{module}:{imp.line}: imports the private module {imp.target}")
            if imp.target == module:
                continue
            for name in imp.names:
                if is_private(name):
                    found.append(f"{module}:{imp.line}: imports {name} from {imp.target}")
                elif module_file(f"{imp.target}.{name}", root) is not None:
                    modules_bound.add(name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname and alias.name.startswith(root.name):
                        modules_bound.add(alias.asname)
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.asname and alias.name in modules_bound:
                        modules_bound.add(alias.asname)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in modules_bound
                and is_private(node.attr)
            ):
                found.append(f"{module}:{node.lineno}: reads {node.value.id}.{node.attr}")
    return found


def module_imports(path: Path, root: Path, modules: set[str]) -> set[str]:
    """The openmsmq modules ``path`` imports at module level (in ``if`` / ``try`` blocks
    too, not inside functions); ``from package import module`` imports the module."""
    package = module_name(path, root) if is_package(path) else module_name(path, root).rpartition(".")[0]
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom):
                target = node.module or ""
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    target = ".".join([*base, target] if target else base)
                subs = {f"{target}.{a.name}" for a in node.names} & modules
                found.update(subs)
                if len(subs) < len(node.names) and target in modules:
                    found.add(target)

    visit(ast.parse(path.read_text(), filename=str(path)).body)
    return found


def import_cycles(root: Path = SRC) -> list[list[str]]:
    """The sets of modules that import each other (strongly connected, more than one)."""
    files = {module_name(p, root): p for p in source_files(root)}
    graph = {m: module_imports(p, root, set(files)) - {m} for m, p in files.items()}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's strongly connected components
        order[v] = low[v] = len(order)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in order:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in order:
            connect(v)
    return cycles


def test_every_package_has_a_row_and_imports_only_lower_layers() -> None:
    packages = {layer(module_name(p, SRC)) for p in source_files()}
    assert packages - set(MAY_IMPORT) == set(), "add the new package to MAY_IMPORT"
    assert layer_violations() == []


def test_no_private_name_crosses_a_module_boundary() -> None:
    assert private_violations() == []


def private_names_defined(tree: ast.Module) -> set[str]:
    """The underscore names a module defines itself: functions, methods, class attributes,
    ``__slots__`` entries and attributes it assigns (``x._name = ...``)."""
    defined: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            defined.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defined.add(node.target.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            defined.add(node.value)  # ``__slots__`` entries
    return {n for n in defined if is_private(n)}


#: Standard-library functions that are public although their names start with "_".
_STDLIB_PUBLIC = frozenset({"os._exit"})


def private_access(root: Path = SRC) -> list[str]:
    """Reads of ``x._name`` where ``x`` is not ``self`` / ``cls`` and ``_name`` is not
    defined in the same module: an object reaching into the private state of a class that
    another module owns (the classes of one module may share their private names)."""
    found = []
    for path in source_files(root):
        module = module_name(path, root)
        tree = ast.parse(path.read_text(), filename=str(path))
        own = private_names_defined(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and is_private(node.attr)
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                and node.attr not in own
                and ast.unparse(node) not in _STDLIB_PUBLIC
            ):
                found.append(f"{module}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_private_attribute_of_another_object() -> None:
    assert private_access() == []


def test_a_planted_private_call_fails(tree: Path) -> None:
    write(tree, "transfer/planted.py", "def f(qm):\n    return qm._clock()\n")
    write(tree, "net/planted.py", "class A:\n    _x = 1\n\n\ndef f(a: A) -> int:\n    return a._x\n")
    assert private_access(tree) == ["openmsmq.transfer.planted:2: qm._clock"]


def _is_type_checking(test: ast.expr) -> bool:
    return ast.unparse(test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _declared(stmt: ast.stmt) -> list[str]:
    """The names a class-body statement declares (annotations, assignments, defs)."""
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    return []


#: Classes whose bare class-level annotations are fields, not stubs.
_FIELD_BASES = ("Protocol", "NamedTuple", "TypedDict")


def private_stubs(root: Path = SRC) -> list[str]:
    """Class bodies that declare private state they do not own: an underscore name inside
    ``if TYPE_CHECKING:``, or a bare class-level annotation of an underscore name that
    none of the class's own methods assigns (a dataclass's, named tuple's, typed dict's or
    protocol's annotations are its fields)."""
    found = []
    for path in source_files(root):
        module = module_name(path, root)
        for cls in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(cls, ast.ClassDef):
                continue
            for stmt in cls.body:
                if isinstance(stmt, ast.If) and _is_type_checking(stmt.test):
                    for inner in ast.walk(stmt):
                        if isinstance(inner, ast.stmt) and inner is not stmt:
                            found += [
                                f"{module}:{inner.lineno}: {cls.name} declares {name} under TYPE_CHECKING"
                                for name in _declared(inner)
                                if is_private(name)
                            ]
            fields = any("dataclass" in ast.unparse(d) for d in cls.decorator_list) or any(
                ast.unparse(b).endswith(_FIELD_BASES) for b in cls.bases
            )
            if fields:
                continue
            assigned = {
                n.attr
                for n in ast.walk(cls)
                if isinstance(n, ast.Attribute)
                and isinstance(n.ctx, ast.Store)
                and isinstance(n.value, ast.Name)
                and n.value.id == "self"
            }
            found += [
                f"{module}:{stmt.lineno}: {cls.name} annotates {stmt.target.id}, which no method of it sets"
                for stmt in cls.body
                if isinstance(stmt, ast.AnnAssign)
                and stmt.value is None
                and isinstance(stmt.target, ast.Name)
                and is_private(stmt.target.id)
                and stmt.target.id not in assigned
            ]
    return found


def test_no_class_declares_private_state_it_does_not_own() -> None:
    assert private_stubs() == []


def _classes(root: Path) -> dict[tuple[str, str], ast.ClassDef]:
    """(module, class name) -> its definition, for every top-level class of the package."""
    out = {}
    for path in source_files(root):
        module = module_name(path, root)
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            if isinstance(node, ast.ClassDef):
                out[(module, node.name)] = node
    return out


def _bound_names(path: Path, root: Path) -> dict[str, str]:
    """Local name -> the dotted name it is bound to by the module's imports."""
    bound = {}
    for imp in imports(path, root):
        if imp.names:
            bound.update({n: f"{imp.target}.{n}" for n in imp.names})
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.asname and alias.name in bound:
                    bound[alias.asname] = bound[alias.name]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                bound[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
    return bound


def _base_of(
    module: str, base: ast.expr, bound: dict[str, str], classes: dict[tuple[str, str], ast.ClassDef]
) -> tuple[str, str] | None:
    """The project class ``base`` (a base-class expression in ``module``) names, or None."""
    text = ast.unparse(base)
    head, _, rest = text.partition(".")
    if not rest and (module, text) in classes:
        return (module, text)
    dotted = bound.get(head)
    if dotted is None:
        return None
    full = f"{dotted}.{rest}" if rest else dotted
    owner, _, name = full.rpartition(".")
    return (owner, name) if (owner, name) in classes else None


def _carries_state(cls: ast.ClassDef) -> bool:
    """Sets ``self.<name>``, annotates class-level names (outside ClassVar), has
    ``__slots__`` or is a dataclass."""
    if any("dataclass" in ast.unparse(d) for d in cls.decorator_list):
        return True
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and "ClassVar" not in ast.unparse(stmt.annotation):
            return True
        if "__slots__" in _declared(stmt):
            return True
    return any(
        isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and ast.unparse(n.value) == "self"
        for n in ast.walk(cls)
    )


def stateful_bases(root: Path = SRC, packages: tuple[str, ...] = ("transfer", "qm")) -> list[str]:
    """Classes of ``packages`` that inherit from a project class carrying state (itself or
    through its own project bases): mixins sharing state, where objects composed through
    constructors belong. Exception classes may be inherited."""
    classes = _classes(root)
    bound_of = {module_name(p, root): _bound_names(p, root) for p in source_files(root)}

    def stateful(key: tuple[str, str], seen: frozenset[tuple[str, str]] = frozenset()) -> bool:
        cls = classes[key]
        if any(ast.unparse(b).endswith(("Error", "Exception")) for b in cls.bases):
            return False
        if _carries_state(cls):
            return True
        bases = [_base_of(key[0], b, bound_of[key[0]], classes) for b in cls.bases]
        return any(b is not None and b not in seen and stateful(b, seen | {key}) for b in bases)

    found = []
    for (module, name), cls in sorted(classes.items()):
        if layer(module) not in packages:
            continue
        for base in cls.bases:
            key = _base_of(module, base, bound_of[module], classes)
            if key is not None and stateful(key):
                found.append(f"{module}:{cls.lineno}: {name} inherits state from {key[0]}.{key[1]}")
    return found


def test_no_class_of_transfer_or_qm_inherits_state() -> None:
    assert stateful_bases() == []


def test_no_import_cycles() -> None:
    assert import_cycles() == []


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the package's layout, to plant bad imports in."""
    root = tmp_path / "openmsmq"
    for path in source_files():
        write(root, str(path.relative_to(SRC)), path.read_text())
    return root


def test_the_checks_pass_on_the_copy(tree: Path) -> None:
    assert layer_violations(tree) == []
    assert private_violations(tree) == []
    assert import_cycles(tree) == []
    assert private_stubs(tree) == []
    assert stateful_bases(tree) == []


def test_planted_stubs_of_private_state_fail(tree: Path) -> None:
    write(
        tree,
        "net/planted.py",
        "from typing import TYPE_CHECKING\n\n\nclass Half:\n    _peers: dict[str, int]\n    shown: int\n\n"
        "    if TYPE_CHECKING:\n\n        def _drain(self) -> None: ...\n\n"
        "    def __init__(self) -> None:\n        self.shown = 1\n",
    )
    write(
        tree, "qm/planted.py", "from dataclasses import dataclass\n\n\n@dataclass\nclass Row:\n    _n: int\n"
    )
    assert private_stubs(tree) == [
        "openmsmq.net.planted:10: Half declares _drain under TYPE_CHECKING",
        "openmsmq.net.planted:5: Half annotates _peers, which no method of it sets",
    ]


def test_planted_mixins_fail(tree: Path) -> None:
    write(tree, "transfer/planted_a.py", "class Part:\n    def __init__(self) -> None:\n        self.n = 0\n")
    write(
        tree,
        "transfer/planted_b.py",
        "from openmsmq.transfer import planted_a as a\nfrom openmsmq.transfer.planted_a import Part as P\n"
        "from openmsmq.errors import MQError\n\n\nclass Whole(P):\n    pass\n\n\n"
        "class Other(a.Part):\n    pass\n\n\n"
        "class Fine:\n    pass\n\n\nclass AlsoFine(Fine):\n    pass\n\n\nclass Failure(MQError):\n    pass\n",
    )
    write(
        tree,
        "qm/planted.py",
        "from openmsmq.transfer.planted_b import Whole\n\n\nclass Deeper(Whole):\n    pass\n",
    )
    assert stateful_bases(tree) == [
        "openmsmq.qm.planted:4: Deeper inherits state from openmsmq.transfer.planted_b.Whole",
        "openmsmq.transfer.planted_b:10: Other inherits state from openmsmq.transfer.planted_a.Part",
        "openmsmq.transfer.planted_b:6: Whole inherits state from openmsmq.transfer.planted_a.Part",
    ]


def test_a_planted_cycle_fails(tree: Path) -> None:
    sends = tree / "store/sends.py"
    write(tree, "store/sends.py", sends.read_text() + "\nfrom openmsmq.store import ops\n")
    arrow = tree / "spark/arrow.py"
    write(tree, "spark/arrow.py", arrow.read_text() + "\nif TYPE_CHECKING:\n    from . import source\n")
    cycles = import_cycles(tree)
    assert len(cycles) == 2
    assert any({"openmsmq.store.ops", "openmsmq.store.sends"} <= set(c) for c in cycles)
    assert any({"openmsmq.spark.arrow", "openmsmq.spark.source"} <= set(c) for c in cycles)


def test_a_planted_upward_import_fails(tree: Path) -> None:
    write(tree, "store/planted.py", "from openmsmq.qm.manager import QueueManager\n")
    write(tree, "wire/planted.py", "from ..protocol import session\n")
    assert layer_violations(tree) == [
        "openmsmq.store.planted:1: store may not import openmsmq.qm.manager",
        "openmsmq.wire.planted:1: wire may not import openmsmq.protocol",
    ]


def test_a_planted_private_import_fails(tree: Path) -> None:
    write(tree, "qm/planted.py", "from openmsmq.store.ops import _CHUNK\n")
    write(tree, "remote/planted.py", "from openmsmq.store import ops\n\nops._secret()\n")
    write(tree, "spark/planted.py", "import openmsmq.wire._private as f\n")
    assert private_violations(tree) == [
        "openmsmq.qm.planted:1: imports _CHUNK from openmsmq.store.ops",
        "openmsmq.remote.planted:3: reads ops._secret",
        "openmsmq.spark.planted:1: imports the private module openmsmq.wire._private",
    ]
