"""The contract package's layering: the loader and the spec load without the engine."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

CONTRACTS = Path(__file__).resolve().parents[2] / "thalweg_bytewax" / "contracts"
ENGINE = (
    "duckdb",
    "thalweg_bytewax.contracts.audit",
    "thalweg_bytewax.contracts.evaluate",
    "thalweg_bytewax.contracts.kernels",
    "thalweg_bytewax.contracts.ruleset",
)


def _loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout
    return set(out.split())


NO_SQL = (
    "apiVersion: v3.0.2\nkind: DataContract\nid: urn:t\nname: t\nversion: 1.0.0\n"
    "status: active\nschema:\n  - name: t\n    properties:\n"
    "      - {name: code, logicalType: string, required: true, logicalTypeOptions: "
    "{pattern: '^[A-Z]+$'}}\n"
)


@pytest.mark.slow
def test_the_odcs_loader_parses_a_contract_without_the_engine():
    loaded = _loaded_after(
        "from thalweg_bytewax.contracts import load_contract\n"
        "load_contract('thalweg_bytewax/flows/contracts/orders.odcs.yaml')"
    )
    assert "thalweg_bytewax.contracts.odcs" in loaded
    assert not loaded & set(ENGINE[1:])


@pytest.mark.slow
def test_a_contract_without_sql_loads_without_duckdb():
    loaded = _loaded_after(
        "from thalweg_bytewax.contracts import parse_contract\n"
        f"spec = parse_contract({NO_SQL!r})\n"
        "assert [r.kind for r in spec.rules()] == ['type', 'not_null', 'pattern'], spec.rules()"
    )
    assert not loaded & set(ENGINE)


@pytest.mark.slow
def test_the_package_loads_only_the_spec_until_the_engine_is_asked_for():
    assert not _loaded_after("import thalweg_bytewax.contracts") & {
        *ENGINE,
        "thalweg_bytewax.contracts.odcs",
        "yaml",
    }
    assert {"thalweg_bytewax.contracts.ruleset", "thalweg_bytewax.contracts.audit"} <= (
        _loaded_after("from thalweg_bytewax.contracts import RuleSet")
    )


def _contract_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m.rsplit(".", 1)[-1] for m in found if m.startswith("thalweg_bytewax.contracts.")}


def test_the_rule_constructors_sit_below_the_spec():
    # rule_spec mixes the named constructors in; rules must not import it back, even lazily.
    assert "rules" in _contract_imports(CONTRACTS / "rule_spec.py")
    assert _contract_imports(CONTRACTS / "rules.py") == set()


def test_contract_modules_import_each_other_without_a_cycle():
    graph = {p.stem: _contract_imports(p) for p in CONTRACTS.glob("*.py") if p.stem != "__init__"}

    def reaches(start: str, target: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == target or (nxt not in seen and reaches(nxt, target, seen | {nxt})):
                return True
        return False

    cyclic = sorted(m for m in graph if reaches(m, m, {m}))
    assert not cyclic, f"import cycle through {cyclic}"
