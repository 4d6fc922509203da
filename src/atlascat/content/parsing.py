"""Reading the cells of item files and banks: option letters, stored literals, option lists.

Cells come as JSON, as the ``repr`` of Python/numpy literals, or (from Parquet) as numpy
arrays; these parse every form without ``eval``.
"""
from __future__ import annotations

import ast
import json
from typing import Any, Mapping

import numpy as np

from ..errors import BankError

__all__ = ["letters", "parse_literal", "parse_choices", "to_list"]

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def letters(n: int) -> list[str]:
    """The first ``n`` option letters (A, B, ...)."""
    if n > len(_LETTERS):
        raise BankError(f"an item has {n} options; at most {len(_LETTERS)} are supported")
    return list(_LETTERS[:n])


def _literal(node: ast.AST) -> Any:
    """Evaluate a literal expression that may contain ``array([...], dtype=...)`` calls."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "array":
        if len(node.args) != 1:
            raise ValueError("array(...) with more than one positional argument")
        return _literal(node.args[0])
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_literal(node.operand)
    raise ValueError(f"unsupported syntax {type(node).__name__}")


def parse_literal(text: str, what: str = "a value"):
    """A stored cell written as JSON or as the ``repr`` of Python/numpy literals
    (``"{'label': array(['A', 'B'], dtype=object)}"``), parsed without ``eval``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        try:
            return _literal(ast.parse(text, mode="eval").body)
        except (SyntaxError, ValueError) as exc:
            raise BankError(f"cannot read {what} from {text[:80]!r}: {exc}") from None


def to_list(value) -> list:
    """A list from a list, tuple or NumPy array (a stored option list); else ValueError."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return list(value)
    raise ValueError(f"expected a list, got {type(value).__name__}")


def parse_choices(value) -> tuple[list[str], list[str]]:
    """Options of an item as ``(labels, texts)`` from any of the forms found in item files.

    Accepted: a dict ``{'label': [...], 'text': [...]}`` (values lists or numpy arrays), a dict
    ``{'choices': [...]}`` (TruthfulQA targets), a plain list/array of texts, or any of these
    as a string: JSON, or the ``repr`` of a dict of numpy arrays
    (``"{'label': array(['A', 'B'], dtype=object), ...}"``), parsed without ``eval``.
    Labels default to A, B, ... when the source has none.
    """
    if isinstance(value, str):
        value = parse_literal(value.strip(), "choices")
    if isinstance(value, Mapping):
        if "text" in value:
            texts = to_list(value["text"])
            labels = to_list(value["label"]) if "label" in value else letters(len(texts))
        elif "choices" in value:
            texts = to_list(value["choices"])
            labels = letters(len(texts))
        else:
            raise BankError(f"choices dict has keys {list(value)}; expected 'text' (+ 'label')")
    else:
        try:
            texts = to_list(value)
        except ValueError as exc:
            raise BankError(f"cannot read choices from {value!r:.80}: {exc}") from exc
        labels = letters(len(texts))
    if len(labels) != len(texts):
        raise BankError(f"choices have {len(labels)} labels but {len(texts)} texts")
    return [str(x) for x in labels], [str(x) for x in texts]


_to_list = to_list  # the name used before
