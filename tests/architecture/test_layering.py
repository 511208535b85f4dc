"""Import hygiene: dashboard -> queries, engine; engine imports neither Streamlit nor DuckDB (nor queries);
queries never imports Streamlit and takes from engine only its budget model; the dashboard never holds SQL
text nor runs a statement of its own."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    mods = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            mods.add(node.module.split(".")[0])
    return mods


FORBIDDEN = {
    "engine": {"streamlit", "duckdb", "queries", "dashboard"},
    "queries": {"streamlit", "dashboard"},
}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_does_not_import_forbidden_layers(package):
    files = sorted((REPO / package).rglob("*.py"))
    assert files, f"{package}/ has no modules"
    offenders = {str(f.relative_to(REPO)): sorted(_imports(f) & FORBIDDEN[package]) for f in files}
    offenders = {k: v for k, v in offenders.items() if v}
    assert not offenders, f"layering broken: {offenders}"


def _sql_strings(source: str) -> list[str]:
    """String literals (f-string parts included) that read like a SQL statement: ``with NAME as (`` or
    ``select ... from`` with a clause or call prose does not have (where, join, group/order by, count(, $param)."""
    cte = re.compile(r"\s*with\s+(recursive\s+)?\w+(\s*\([^)]*\))?\s+as\s*\(", re.I)
    select = re.compile(r"\s*select\s+.+?\bfrom\b", re.I | re.S)
    clause = re.compile(r"\bwhere\b|\bjoin\b|\b(group|order)\s+by\b|\b\w+\(|\$\w+|\*|;", re.I)

    def is_sql(text: str) -> bool:
        return bool(cte.match(text) or (select.match(text) and clause.search(text)))

    return [node.value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and is_sql(node.value)]


def test_sql_detector_reads_literals_not_code():
    assert _sql_strings('q = "select a, b from jobs where x = 1"') == ["select a, b from jobs where x = 1"]
    assert _sql_strings('q = f"""\n  WITH t AS (select 1) select * from t"""')
    # a string ending a line followed by a `with` statement is code, not SQL (the old regex flagged it)
    assert not _sql_strings('x = "done"\nwith open("f") as fh:\n    pass\n')
    assert _sql_strings('q = "select user, sum(x) from t group by user"')
    assert not _sql_strings('label = "with the budget from the file"')  # prose
    assert not _sql_strings('label = "Select a team from the list"')


def test_dashboard_holds_no_sql():
    bad = [str(f.relative_to(REPO)) for f in (REPO / "dashboard").rglob("*.py") if _sql_strings(f.read_text())]
    assert not bad, f"SQL text in the dashboard (keep it in queries/analytics/sql/*.sql): {bad}"


_RUNS_SQL = re.compile(r"\bduckdb\.(connect|sql|query|execute)\(|\bcon\w*\.(sql|execute|query|register)\(")


def test_dashboard_runs_no_sql_itself():
    """Beyond SQL text: the dashboard opens no DuckDB connection and runs no statement of its own; every query
    goes through ``queries`` by name (``queries.run``, over ``queries.connect``'s connection)."""
    runs = {str(f.relative_to(REPO)): sorted({m.group(0) for m in _RUNS_SQL.finditer(f.read_text())})
            for f in (REPO / "dashboard").rglob("*.py")}
    bad = {k: v for k, v in runs.items() if v}
    assert not bad, f"the dashboard runs SQL itself (call a named query with queries.run): {bad}"


def test_sql_run_detector():
    assert _RUNS_SQL.search("con = duckdb.connect()") and _RUNS_SQL.search("self.con.execute(text)")
    assert _RUNS_SQL.search("df = duckdb.sql(q).pl()") and _RUNS_SQL.search("con.register('t', frame)")
    assert not _RUNS_SQL.search("queries.run('job_waste', con=con)") and not _RUNS_SQL.search("mod.register(sub)")


# What queries/ may import from engine: the budget model only, shared by the analytics (attainment from logs)
# and the engine (attainment of a run). engine.budgets is the package the budget model is becoming; until it
# lands, its three modules (budget_tree, budget_parse, budget_window) are accepted too. Drop them then.
QUERIES_MAY_IMPORT_FROM_ENGINE = {"engine.budgets", "engine.budget_tree", "engine.budget_parse",
                                  "engine.budget_window"}


def _engine_imports(path: Path) -> set[str]:
    """The engine modules ``path`` imports, at any depth of the file (``from engine import X`` names
    ``engine.X``: a module or a name of ``engine/__init__``, neither allowed in queries)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "engine")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "engine":
                found.update(f"engine.{a.name}" for a in node.names)
            elif node.module.split(".")[0] == "engine":
                found.add(node.module)
    return found


def _allowed_from_engine(module: str) -> bool:
    return any(module == ok or module.startswith(ok + ".") for ok in QUERIES_MAY_IMPORT_FROM_ENGINE)


def test_queries_imports_only_the_budget_model_from_engine():
    used = {str(f.relative_to(REPO)): _engine_imports(f) for f in sorted((REPO / "queries").rglob("*.py"))}
    bad = {k: sorted(m for m in v if not _allowed_from_engine(m)) for k, v in used.items()}
    assert not {k: v for k, v in bad.items() if v}, f"queries/ imports engine beyond its budget model: {bad}"
    assert any(used.values()), "queries/ imports nothing from engine: the check looks at the wrong files"


def test_engine_import_check_catches_a_violation(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("from engine.budgets import tree\nimport engine.core\nfrom engine import Simulator\n"
                   "def f():\n    from engine.budget_window import WindowTally\n")
    got = _engine_imports(bad)
    assert got == {"engine.budgets", "engine.core", "engine.Simulator", "engine.budget_window"}
    assert sorted(m for m in got if not _allowed_from_engine(m)) == ["engine.Simulator", "engine.core"]


def test_layering_check_catches_a_violation(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("import duckdb\nfrom streamlit import x\n")
    assert _imports(bad) & FORBIDDEN["engine"] == {"duckdb", "streamlit"}
