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

from thalweg_bytewax._lazy import lazy_reexports

from .merge import merge_rules as merge_rules
from .spec import ColumnSpec as ColumnSpec
from .spec import ContractError as ContractError
from .spec import ContractMode as ContractMode
from .spec import ContractSpec as ContractSpec
from .spec import ContractViolationError as ContractViolationError
from .spec import DropRule as DropRule
from .spec import MetricOp as MetricOp
from .spec import ObjectSpec as ObjectSpec
from .spec import Rule as Rule
from .spec import RuleKind as RuleKind
from .spec import RuleOrigin as RuleOrigin
from .spec import Severity as Severity

# The ODCS loader needs the `contracts` extra and the engine pulls in numpy and the SQL
# engine; each is imported only when one of its names is asked for.
if TYPE_CHECKING:
    from .audit import audit_schema as audit_schema
    from .audit import explode_audit as explode_audit
    from .audit import read_audit as read_audit
    from .audit import read_rule_registry as read_rule_registry
    from .audit import rules_schema as rules_schema
    from .evaluate import Evaluation as Evaluation
    from .odcs import load_contract as load_contract
    from .odcs import parse_contract as parse_contract
    from .ruleset import DEFAULT_SQL_TIMEOUT as DEFAULT_SQL_TIMEOUT
    from .ruleset import DEFAULT_SQL_TIMEOUT_SECONDS as DEFAULT_SQL_TIMEOUT_SECONDS
    from .ruleset import RuleSet as RuleSet

__getattr__, __dir__ = lazy_reexports(globals())
