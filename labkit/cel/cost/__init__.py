"""Kubernetes' *estimated* worst-case cost of a DRA CEL selector (``CompilationResult.MaxCost``).

The API server refuses a new selector whose estimate is above 1,000,000 ("too complex, exceeds
cost limit"). This module reproduces that number for ``k8s.io/dynamic-resource-allocation/cel``
v0.37.2: cel-go's static cost estimation over the type-checked AST, with the Kubernetes CEL
library's call estimator, the estimators of the cel-go extensions Kubernetes enables (lists v3,
sets) and the DRA environment's declared sizes.

The model, in short:

* Every node has a cost range ``[min, max]``; only ``max`` is reported. Identifiers and field
  selections on maps/objects cost 1, literals 0, list/map creation 10/30 plus their elements,
  an ordinary function call 1 plus its arguments. ``has()`` costs only its operand.
* Sizes (string length, list/map entries) are tracked where CEL can know them: literals,
  concatenations, results of size-aware functions, and paths into ``device``: the driver
  name is at most 63 characters, attribute/capacity maps have at most 32 entries,
  domains 63 and names 32 characters, an attribute value at most 64 (characters or items).
  Anything else has an unknown size (up to 2^64-1), which makes size-dependent costs huge.
* Size-dependent costs: string equality and ordering (0.1 per character of the shorter
  operand), ``in`` on a list (1 per item), regexes ((length+1) * 0.1 * pattern length * 0.25),
  string functions (0.1 or 0.2 per character), list functions (per item, or per item squared
  for ``sort``/``distinct``/``sets.*``), IP/CIDR parsing, ``lists.range(n)`` (n + 11).
* A comprehension costs its range, its accumulator init and its result once, plus
  ``size(range) * (loop condition + loop step)``; ``cel.bind`` costs its (empty) range (10),
  its value and its body.

Where labkit's AST (cel-expr-python, i.e. cel-cpp) differs from cel-go's, it is mapped back:
``device.x`` is one qualified identifier in cel-cpp (counted as identifier + field selection);
``has(device.x)``, which labkit's engine compiles as ``true``, is compiled for the estimate as a
marked stand-in and counted as 1; overloads are chosen by Kubernetes' declarations, not
labkit's; and node types are repaired where labkit declares a function over ``list(dyn)``
(``sort``, ``sum``, ``reverse``...) and Kubernetes' checker knows more, or less (see
:class:`TypeInference`, which also models cel-go's free type parameters, e.g. ``sort()`` of
``dyn_list.reverse()`` is priced as a sort of ints).

Kubernetes' own quirks are reproduced: field paths are Go slices sharing their backing arrays
(so the keys of a two-variable comprehension over an attribute map are sized like its values,
and a field of a ``cel.bind`` variable used as a range can be sized like another's keys);
``url == url`` takes both sizes from the right operand; ``sort``/``distinct`` results are
sized n^2.

Approximate (checked against the Go oracle on the conformance table and a few thousand
generated selectors, which all agree, see tests/cel/test_cel_cost.py for the known exceptions):

* Expressions cel-cpp cannot type-check (int/uint/double literals compared with each other,
  which Kubernetes' cross-type numeric comparisons accept) are costed on the parsed AST with
  :class:`TypeInference` alone; types it cannot infer count as ``dyn`` (more overloads, unknown
  sizes), which tends to make a cost larger than Kubernetes'.
* A free type parameter is bound by operators, ``in``, ``size()``, string methods and the list
  functions; others that would bind one (conversions such as ``string()``...) are not modelled.
* Should the stand-in compile for ``has(device.x)`` fail, each one counts 0 instead of 1.
"""

from __future__ import annotations

from labkit.cel.cost.estimator import estimate_ast, mark_presence

__all__ = ["COST_LIMIT", "estimate_ast", "mark_presence"]

#: Kubernetes refuses a new selector whose estimated cost is above this, and stops an evaluation
#: whose actual cost passes it
COST_LIMIT = 1_000_000
