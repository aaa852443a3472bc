"""Tiny, safe arithmetic for YAML-given launch rules and models ("cdiv(n, BN)", "BM*BN/(2*(BM+BN))").

Only numbers, quoted strings (``fp8_scaling == 'block'``), names from the given environment,
+ - * / // % **, comparisons, and/or/not, conditional expressions and the functions below are
allowed; anything else is an error that names the expression.
"""
from __future__ import annotations

import ast
import functools
import math
import operator
from typing import Any, Callable, Dict, MutableMapping, Mapping, Optional

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_CMPOPS = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
}
FUNCTIONS = {
    "cdiv": lambda a, b: -(-int(a) // int(b)),
    "min": min, "max": max, "int": int, "float": float, "abs": abs,
    "log2": math.log2, "sqrt": math.sqrt,
}


class ExprError(ValueError):
    pass


def evaluate(expr: Any, env: Mapping[str, Any]) -> Any:
    """Evaluate ``expr`` (a number or a string) with names from ``env``."""
    if isinstance(expr, (int, float)) and not isinstance(expr, bool):
        return expr
    if not isinstance(expr, str):
        raise ExprError(f"expected a number or an expression string, got {expr!r}")
    try:
        tree = _parse(expr)
    except SyntaxError as e:
        raise ExprError(f"cannot parse expression {expr!r}: {e.msg}") from None
    return _eval(tree.body, env, expr)


@functools.lru_cache(maxsize=None)
def _parse(expr: str) -> ast.Expression:
    """``expr`` parsed once a process: the rules are a few hundred strings, evaluated for every point and
    every composed job (the session plan's test parses them ~10^5 times). The tree is only read."""
    return ast.parse(expr, mode="eval")


def _eval(node: ast.AST, env: Mapping[str, Any], src: str) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool, str)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise ExprError(f"unknown name {node.id!r} in {src!r}; known: {sorted(env)}")
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval(node.left, env, src), _eval(node.right, env, src))
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env, src)
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.Not):
            return not v
    if isinstance(node, ast.BoolOp):
        vals = [_eval(v, env, src) for v in node.values]
        return all(vals) if isinstance(node.op, ast.And) else any(vals)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env, src)
        for op, comp in zip(node.ops, node.comparators):
            right = _eval(comp, env, src)
            if type(op) not in _CMPOPS or not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _eval(node.body if _eval(node.test, env, src) else node.orelse, env, src)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS:
        if node.keywords:
            raise ExprError(f"keyword arguments are not allowed in {src!r}")
        return FUNCTIONS[node.func.id](*[_eval(a, env, src) for a in node.args])
    raise ExprError(f"unsupported syntax {ast.dump(node)[:60]} in {src!r}")


def evaluate_rules(rules: Mapping[str, Any], env: MutableMapping[str, Any],
                   check: Optional[Callable[[str, Any, Mapping[str, Any]], None]] = None) -> Dict[str, Any]:
    """A variant's ``cuda.point_defines`` evaluated in order, each over ``env`` and the rules before it
    (a bool as 0 or 1), each value added to ``env``; ``check(name, rule, env)`` first, where given. The
    build (:meth:`gemmlab.points.Point.point_defines`) and the analysis that judges a row's configuration
    (``analysis.ladder``) both evaluate them here."""
    out: Dict[str, Any] = {}
    for name, rule in rules.items():
        name = str(name)
        if check is not None:
            check(name, rule, env)
        value = evaluate(rule, env)
        out[name] = env[name] = int(value) if isinstance(value, bool) else value
    return out


def names(expr: Any) -> frozenset:
    """The names ``expr`` reads (not the functions it calls); none for a number or a string that
    does not parse (evaluate reports that)."""
    return _names(expr) if isinstance(expr, str) else frozenset()


@functools.lru_cache(maxsize=None)
def _names(expr: str) -> frozenset:
    try:
        tree = _parse(expr)
    except SyntaxError:
        return frozenset()
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called)
