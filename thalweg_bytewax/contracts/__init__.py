"""Data contracts: ODCS v3 loading, rules, tightest-wins merge and vectorised evaluation.

``load_contract(source)`` reads an ODCS v3 YAML contract (local path, http(s) URL or a
pyarrow / fsspec filesystem URL) and resolves it to a :class:`ContractSpec`: per schema
object an Arrow schema, column descriptions, the natural key and the rules.
:func:`thalweg_bytewax.operators.validate` enforces it in a flow.

The package is layered; each module has one job:

* :mod:`.spec`: what must hold (``ContractSpec``, ``Rule``, ``ContractMode`` ...), with
  the named rule constructors of :mod:`.rules` mixed into ``Rule``;
* :mod:`.merge`: the tightest-wins merge of contract and manual rules;
* :mod:`.odcs`: ODCS v3 documents to a spec (no evaluation engine);
* :mod:`.checks`: static checks of patterns and SQL (on :mod:`thalweg_bytewax.sql`);
* :mod:`.ruleset`: ``RuleSet``, the merged, checked, versioned rules of one step;
* :mod:`.kernels` and :mod:`.evaluate`: columnar evaluation of a batch;
* :mod:`.audit`: the audit and rule-registry schemas, builders and readers.

Importing the package loads only the spec; the loader and the engine load on first use
of their names, so neither PyYAML nor DuckDB is imported until they are needed.
``evaluate`` is the module :mod:`.evaluate`; its function is imported from there
(``from thalweg_bytewax.contracts.evaluate import evaluate``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thalweg_bytewax._lazy import lazy_package
from thalweg_bytewax.contracts.merge import merge_rules
from thalweg_bytewax.contracts.spec import (
    ColumnSpec,
    ContractError,
    ContractMode,
    ContractSpec,
    ContractViolationError,
    DropRule,
    MetricOp,
    ObjectSpec,
    Rule,
    RuleKind,
    RuleOrigin,
    Severity,
)

if TYPE_CHECKING:
    # Resolved lazily at runtime by __getattr__ below; imported here for type checkers.
    from thalweg_bytewax.contracts.audit import (
        audit_schema,
        explode_audit,
        read_audit,
        read_rule_registry,
        rules_schema,
    )
    from thalweg_bytewax.contracts.evaluate import Evaluation
    from thalweg_bytewax.contracts.odcs import load_contract, parse_contract
    from thalweg_bytewax.contracts.ruleset import (
        DEFAULT_SQL_TIMEOUT,
        DEFAULT_SQL_TIMEOUT_SECONDS,
        RuleSet,
    )

__all__ = [
    "DEFAULT_SQL_TIMEOUT",
    "DEFAULT_SQL_TIMEOUT_SECONDS",
    "ColumnSpec",
    "ContractError",
    "ContractMode",
    "ContractSpec",
    "ContractViolationError",
    "DropRule",
    "Evaluation",
    "MetricOp",
    "ObjectSpec",
    "Rule",
    "RuleKind",
    "RuleOrigin",
    "Severity",
    "RuleSet",
    "audit_schema",
    "explode_audit",
    "load_contract",
    "merge_rules",
    "parse_contract",
    "read_audit",
    "read_rule_registry",
    "rules_schema",
]

_LAZY = {
    "load_contract": "odcs",
    "parse_contract": "odcs",
    "DEFAULT_SQL_TIMEOUT": "ruleset",
    "DEFAULT_SQL_TIMEOUT_SECONDS": "ruleset",
    "RuleSet": "ruleset",
    "Evaluation": "evaluate",
    "audit_schema": "audit",
    "explode_audit": "audit",
    "read_audit": "audit",
    "read_rule_registry": "audit",
    "rules_schema": "audit",
}

# The ODCS loader needs the `contracts` extra and the engine pulls in numpy and the SQL
# engine; each is imported only when one of its names is asked for.
__getattr__, __dir__ = lazy_package(__name__, {n: f".{m}" for n, m in _LAZY.items()}, globals())
