"""The package's layers (docs/architecture.md): imports point down, never up, never in a circle.

Every ``import`` in every module is read with :mod:`ast`, including those inside functions (a
lazy import is still a dependency). A module may import its own package, or a package of a
lower layer; packages on one layer are peers and do not import each other. Only the CLI, the
composition root, imports ``lab/``. Inside the CLI package, the modules holding commands are
peers: only its ``__init__`` (the app) imports them, and they share ``output`` and ``options``.

The GX seam: only ``gx/``, ``expectations/`` and ``report/`` import GX; below them (the project,
the records database and everything lower) nothing reaches GX, even through another module,
and in ``run/`` only the check run does. No two modules share a file name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "plugins" / "kandev_dq"

#: Low to high. A unit is a subpackage, or a top-level module.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "text"),
    ("contract",),
    ("sql",),
    ("store",),
    ("migration", "facts"),
    ("verdicts",),
    ("project",),
    ("records",),
    ("expectations",),
    ("gx",),
    ("run",),
    ("report",),
    ("lab",),
    ("api",),
    ("exporter",),
    ("cli",),
    ("",),  # the package itself: it re-exports the API
)
RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}
#: The CLI's modules every other module of the CLI may import: what commands print, and the
#: options they share.
CLI_SHARED = ("kandev_dq.cli.output", "kandev_dq.cli.options")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit_of(module: str) -> str:
    return module.split(".")[1] if module.count(".") >= 1 else ""


def imports_of(path: Path) -> set[str]:
    """Every kandev_dq module ``path`` imports (``from kandev_dq.x import y`` counts y when y
    is itself a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = module_name(path)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("kandev_dq"))
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{here}: relative import; kandev_dq imports absolutely"
            target = node.module or ""
            if not target.startswith("kandev_dq"):
                continue
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                found.add(candidate if _is_module(candidate) else target)
    return {m for m in found if m != "kandev_dq"}


def _is_module(name: str) -> bool:
    rel = Path(*name.split(".")[1:])
    return (PACKAGE / rel).with_suffix(".py").is_file() or (PACKAGE / rel / "__init__.py").is_file()


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in sorted(PACKAGE.rglob("*.py"))}


def upward_imports(edges: dict[str, set[str]]) -> list[str]:
    problems = []
    for source, targets in edges.items():
        mine = unit_of(source)
        assert mine in RANK, f"{source}: its package is on no layer of docs/architecture.md"
        for target in targets:
            theirs = unit_of(target)
            if theirs == mine:
                continue
            assert theirs in RANK, f"{target}: its package is on no layer"
            if RANK[theirs] >= RANK[mine]:
                problems.append(f"{source} -> {target} ({mine} may not import {theirs})")
    return problems


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges.get(node, ()):
            if nxt not in edges:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1 or node in edges.get(node, ()):
                found.append(sorted(component))

    for node in edges:
        if node not in index:
            visit(node)
    return found


def test_imports_point_down_the_layers():
    assert upward_imports(graph()) == []


def test_no_import_circles():
    assert circles(graph()) == []


def test_only_the_cli_imports_the_lab():
    edges = graph()
    users = sorted(
        s
        for s, ts in edges.items()
        if unit_of(s) not in ("lab", "cli") and any(unit_of(t) == "lab" for t in ts)
    )
    assert users == []


def cli_sideways_imports(edges: dict[str, set[str]]) -> list[str]:
    """A CLI module other than the package's ``__init__`` importing a CLI module other than the
    shared ones: a command module reaching into another's role."""
    return sorted(
        f"{source} -> {target}"
        for source, targets in edges.items()
        if unit_of(source) == "cli" and source != "kandev_dq.cli"
        for target in targets
        if unit_of(target) == "cli" and target not in CLI_SHARED
    )


def test_the_cli_modules_keep_to_their_roles():
    edges = graph()
    assert "kandev_dq.cli" in edges and set(CLI_SHARED) <= set(edges)
    assert cli_sideways_imports(edges) == []


@pytest.mark.parametrize(
    "edges, expected",
    [
        ({"kandev_dq.cli.checking": {"kandev_dq.cli.records"}}, 1),
        ({"kandev_dq.cli.output": {"kandev_dq.cli"}}, 1),
        ({"kandev_dq.cli.checking": {"kandev_dq.cli.output", "kandev_dq.cli.options"}}, 0),
        ({"kandev_dq.cli": {"kandev_dq.cli.checking"}}, 0),
    ],
)
def test_the_cli_role_check_catches_a_sideways_import(edges, expected):
    assert len(cli_sideways_imports(edges)) == expected


@pytest.mark.parametrize(
    "edges, expected",
    [
        ({"kandev_dq.facts.x": {"kandev_dq.run.check"}, "kandev_dq.run.check": set()}, 1),
        (
            {
                "kandev_dq.facts.x": {"kandev_dq.migration.runner"},
                "kandev_dq.migration.runner": set(),
            },
            1,
        ),
        ({"kandev_dq.run.check": {"kandev_dq.facts.x"}, "kandev_dq.facts.x": set()}, 0),
    ],
)
def test_the_layer_check_catches_an_upward_or_sideways_import(edges, expected):
    assert len(upward_imports(edges)) == expected


def test_the_circle_check_catches_a_circle():
    edges = {"kandev_dq.run.a": {"kandev_dq.run.b"}, "kandev_dq.run.b": {"kandev_dq.run.a"}}
    assert circles(edges) == [["kandev_dq.run.a", "kandev_dq.run.b"]]


# --- the dialect's name ------------------------------------------------------------------------

#: The units that may ask which dialect a store speaks: ``sql/`` spells each dialect's SQL,
#: ``store/`` and ``migration/`` set up connections and DDL, ``lab/`` builds stores to test.
DIALECT_UNITS = ("sql", "store", "migration", "lab")
#: Modules elsewhere that may, each with its reason.
DIALECT_ALLOWED = {
    # The column type of a stored timestamp binds and reads per dialect: type set-up, on the
    # contract's layer below sql/ (the tables are declared with it).
    "kandev_dq.contract.tables",
}
DIALECT_NAMES = frozenset({"sqlite", "postgresql", "postgres"})


def _names_a_dialect(node: ast.AST) -> bool:
    """``node`` is a dialect's name as a literal, or a tuple, list or set of them."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value in DIALECT_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_dialect(e) for e in node.elts)
    return False


def _reads_dialect_name(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "name"
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "dialect"
    )


def _calls_get_backend_name(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Attribute) and func.attr == "get_backend_name") or (
        isinstance(func, ast.Name) and func.id == "get_backend_name"
    )


def _compares_with_a_dialect(node: ast.AST) -> bool:
    return isinstance(node, ast.Compare) and any(
        _names_a_dialect(operand) for operand in (node.left, *node.comparators)
    )


def dialect_tests(source: str) -> list[int]:
    """The lines of ``source`` that test the dialect's name: ``.dialect.name``, a call of
    ``get_backend_name()``, or a comparison with ``"sqlite"``/``"postgresql"``/``"postgres"``."""
    tests = (_reads_dialect_name, _calls_get_backend_name, _compares_with_a_dialect)
    return sorted(
        {node.lineno for node in ast.walk(ast.parse(source)) if any(t(node) for t in tests)}
    )


def test_only_sql_store_migration_and_lab_test_the_dialects_name():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        if unit_of(module) in DIALECT_UNITS or module in DIALECT_ALLOWED:
            continue
        found += [f"{module}:{n}" for n in dialect_tests(path.read_text(encoding="utf-8"))]
    assert found == []


@pytest.mark.parametrize(
    "source, expected",
    [
        ("sqlite = conn.dialect.name == 'sqlite'", [1]),
        ("kind = engine.dialect.name", [1]),
        ("if url.get_backend_name() != x:\n    pass", [1]),
        ("if dialect in ('postgresql', 'postgres'):\n    pass", [1]),
        ("if 'postgresql' == name:\n    pass", [1]),
        ("traits = store_traits(conn)\nname = traits.name\nflag = name == 'sqlite3'", []),
    ],
)
def test_the_dialect_check_catches_a_test_of_the_name(source, expected):
    assert dialect_tests(source) == expected


# --- the GX seam -------------------------------------------------------------------------------

#: The units whose modules import GX itself.
GX_UNITS = ("gx", "expectations", "report")
#: The units that may reach GX through the modules they import: the seam's users above it, each
#: importing the GX-loading modules inside the functions that need them.
GX_USERS = ("lab", "api", "exporter", "cli", "")
#: The one module of ``run/`` that reaches GX: one check run drives a GX checkpoint. The rest of
#: ``run/`` (explain, the inputs checked before GX loads, progress) runs without it.
GX_RUN = ("kandev_dq.run.check",)


def imports_gx(path: Path) -> bool:
    """``path`` imports ``great_expectations`` itself (lazily too)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        if any(name.split(".")[0] == "great_expectations" for name in names):
            return True
    return False


def reaching_gx(edges: dict[str, set[str]], direct: set[str]) -> set[str]:
    """Every module importing GX, itself or through the kandev-dq modules it imports."""
    reached = set(direct)
    changed = True
    while changed:
        changed = False
        for source, targets in edges.items():
            if source not in reached and targets & reached:
                reached.add(source)
                changed = True
    return reached


def outside_the_gx_seam(edges: dict[str, set[str]], direct: set[str]) -> list[str]:
    """Modules that import GX outside its units, or reach it from a unit that must not."""
    own = [m for m in direct if unit_of(m) not in GX_UNITS]
    reached = [
        m
        for m in reaching_gx(edges, direct)
        if unit_of(m) not in (*GX_UNITS, *GX_USERS) and m not in GX_RUN
    ]
    return sorted({*own, *reached})


def gx_importers() -> set[str]:
    return {module_name(p) for p in sorted(PACKAGE.rglob("*.py")) if imports_gx(p)}


def test_only_the_gx_seam_imports_gx():
    direct = gx_importers()
    assert {unit_of(m) for m in direct} == set(GX_UNITS)
    assert outside_the_gx_seam(graph(), direct) == []


@pytest.mark.parametrize(
    "edges, direct, expected",
    [
        # A records module importing GX itself.
        ({"kandev_dq.records.x": set()}, {"kandev_dq.records.x"}, 1),
        # A project module reaching GX through an expectation class.
        (
            {"kandev_dq.project.x": {"kandev_dq.expectations.base"}},
            {"kandev_dq.expectations.base"},
            1,
        ),
        # A GX-free module of run/ reaching it through the records, which reach the seam.
        (
            {
                "kandev_dq.run.explain": {"kandev_dq.records.x"},
                "kandev_dq.records.x": {"kandev_dq.gx.adapter"},
            },
            {"kandev_dq.gx.adapter"},
            2,
        ),
        ({"kandev_dq.run.check": {"kandev_dq.gx.adapter"}}, {"kandev_dq.gx.adapter"}, 0),
        ({"kandev_dq.cli.checking": {"kandev_dq.run.check"}}, {"kandev_dq.gx.adapter"}, 0),
    ],
)
def test_the_gx_seam_check_catches_a_module_reaching_gx(edges, direct, expected):
    assert len(outside_the_gx_seam(edges, direct)) == expected


#: The packages of a run's roles, one module per role: no module name repeats across them (a
#: register or a ledger is one module, found by its name). The rule families' modules of
#: ``facts/``, ``verdicts/`` and ``expectations/`` share names on purpose, one per family.
ROLE_UNITS = ("project", "records", "gx", "run")


def repeated_names(modules: list[str]) -> dict[str, list[str]]:
    names: dict[str, list[str]] = {}
    for module in modules:
        if unit_of(module) in ROLE_UNITS and module.count(".") > 1:
            names.setdefault(module.rsplit(".", 1)[1], []).append(module)
    return {name: found for name, found in names.items() if len(found) > 1}


def test_no_two_role_modules_share_a_name():
    assert repeated_names(sorted(graph())) == {}


def test_the_name_check_catches_a_repeated_name():
    modules = ["kandev_dq.run.register", "kandev_dq.records.register", "kandev_dq.records"]
    assert repeated_names(modules) == {"register": modules[:2]}
    assert repeated_names(["kandev_dq.facts.rows", "kandev_dq.verdicts.rows"]) == {}


def test_run_keeps_the_orchestration_only():
    """``run/`` is orchestration: at most 12 modules, no subpackage."""
    run = PACKAGE / "run"
    assert [p for p in run.iterdir() if p.is_dir() and (p / "__init__.py").is_file()] == []
    assert len([p for p in run.glob("*.py") if p.name != "__init__.py"]) <= 12


def test_each_package_says_what_it_owns_and_may_import():
    """Each package's ``__init__`` docstring names what it owns and what it may import."""
    silent = []
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        if "may import" not in doc.lower():
            silent.append(module_name(init))
    assert silent == []
