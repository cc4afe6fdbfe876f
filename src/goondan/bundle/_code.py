"""Static checks of the Python files a bundle names (tool, extension, connector and model entries).

``gdn validate`` must catch a syntax error, a tool without ``handlers`` or an export without a
handler before a turn runs into it, but importing a user's module executes its top-level code (it
may open connections, read secrets or write files). So nothing here imports user code: files are
compiled to bytecode without running them, and what a module defines is read from its syntax tree.
Where the tree cannot tell (``handlers`` built in a loop, a star import, a ``CONFIG_SCHEMA`` that
is not a literal) the check stays silent and the runtime's import-time check remains the judge.
Built-in ``@goondan/base`` extensions and connectors are our own code: their ``CONFIG_SCHEMA`` may be
imported.
"""

from __future__ import annotations

import ast
import copy
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_SOURCE_BYTES = 4 * 1024 * 1024

#: the module attribute each kind of entry must define
REQUIRED_ATTRIBUTE = {"Tool": "handlers", "Extension": "register", "Connector": "run", "Model": "generate"}


@dataclass
class SourceProblem:
    """Why a file cannot be compiled, with its 1-based position when Python gives one."""

    message: str
    line: int | None = None
    column: int | None = None


@dataclass
class EntryModule:
    """What the syntax tree of one entry file tells, without running it."""

    path: Path
    problem: SourceProblem | None = None
    names: set[str] = field(default_factory=set)
    opaque: bool = False  # star imports, globals(), module __getattr__: names may come from anywhere
    handler_keys: list[str] | None = None  # keys of a literal, never-mutated `handlers = {...}`
    handlers_line: int | None = None
    config_schema: dict[str, Any] | None = None  # a literal CONFIG_SCHEMA
    #: export name -> the module-level function its `handlers` entry names (when the tree tells)
    handler_functions: dict[str, HandlerFunction] = field(default_factory=dict)
    #: what a single module-level ``register`` binding is, when the tree tells (an Extension's entry)
    register: RegisterBinding | None = None
    #: ``handlers`` bound once to a literal that is not a dict (``[add]``): (what it is, line)
    handlers_not_dict: tuple[str, int] | None = None
    #: export name -> (the literal, line) for entries of the literal ``handlers`` that are no function
    #: (``{"add": "add"}``)
    handler_literals: dict[str, tuple[str, int]] = field(default_factory=dict)


@dataclass
class HandlerFunction:
    """The parameters of a tool handler, read from its ``def`` (handlers are called ``f(ctx, args)``)."""

    name: str
    line: int
    positional: list[str]  # names of the positional parameters, in order
    required: int  # how many of them have no default
    star_args: bool  # ``*args``: takes any number of positional arguments


@dataclass
class RegisterBinding:
    """The module-level ``register`` of an extension entry, read from its one binding statement.

    ``function`` is None when ``register`` is bound to a literal that cannot be called
    (``register = None``, ``register = {...}``); ``literal`` then shows what it is."""

    line: int
    function: HandlerFunction | None = None
    required_keywords: list[str] = field(default_factory=list)  # keyword-only parameters without a default
    literal: str | None = None


def _bound_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple | ast.List):
        return [n for item in target.elts for n in _bound_names(item)]
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    return []


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements that run at module level, including those inside if/try/with/for blocks."""
    out: list[ast.stmt] = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list):
                out.extend(_top_level([s for s in inner if isinstance(s, ast.stmt)]))
        for handler in getattr(stmt, "handlers", None) or []:
            out.extend(_top_level(handler.body))
        for case in getattr(stmt, "cases", None) or []:
            out.extend(_top_level(case.body))
    return out


def _bindings(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [stmt.name]
    if isinstance(stmt, ast.Assign):
        return [n for t in stmt.targets for n in _bound_names(t)]
    if isinstance(stmt, ast.AnnAssign | ast.AugAssign):
        return _bound_names(stmt.target) if getattr(stmt, "value", True) is not None else []
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names]
    if isinstance(stmt, ast.For | ast.AsyncFor):
        return _bound_names(stmt.target)
    if isinstance(stmt, ast.With | ast.AsyncWith):
        return [n for item in stmt.items if item.optional_vars for n in _bound_names(item.optional_vars)]
    return []


def _is_opaque(tree: ast.Module, statements: list[ast.stmt]) -> bool:
    for stmt in statements:
        if isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names):
            return True
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__getattr__":
            return True
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("globals", "setattr"):
            return True
        if isinstance(node, ast.Global | ast.Nonlocal):
            return True
    return False


def _handler_keys(tree: ast.Module, statements: list[ast.stmt]) -> tuple[list[str] | None, int | None]:
    """Keys of ``handlers`` when it is one dict literal with string keys that nothing changes later."""
    assignments = [s for s in statements if "handlers" in _bindings(s)]
    if len(assignments) != 1:
        return None, None
    stmt = assignments[0]
    value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
    if isinstance(stmt, ast.Assign) and (len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name)):
        return None, None
    if not isinstance(value, ast.Dict):
        return None, None
    keys: list[str] = []
    for key in value.keys:
        if not isinstance(key, ast.Constant) or not isinstance(key.value, str):
            return None, None  # `**other` or a computed key
        keys.append(key.value)
    for node in ast.walk(tree):
        # handlers["x"] = f, handlers.update(...), del handlers["x"]: the literal is not the whole story
        named = isinstance(node, ast.Subscript | ast.Attribute) and isinstance(node.value, ast.Name)
        read_only = isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
        if named and getattr(node.value, "id", None) == "handlers" and not read_only:  # type: ignore[attr-defined]
            return None, None
    return keys, stmt.lineno


_LITERALS = {
    ast.List: "a list",
    ast.Tuple: "a tuple",
    ast.Set: "a set",
    ast.ListComp: "a list",
    ast.SetComp: "a set",
}


def _handlers_shape(statements: list[ast.stmt]) -> tuple[tuple[str, int] | None, dict[str, tuple[str, int]]]:
    """``handlers`` bound once to a literal that cannot be the dict the runtime reads (``[add]``,
    ``"add"``), and the entries of a dict literal whose value is a constant (``{"add": "add"}``): the
    runtime said only "must define handlers" or "no handler for export add", when the agent started."""
    assignments = [s for s in statements if "handlers" in _bindings(s)]
    if len(assignments) != 1 or not isinstance(assignments[0], ast.Assign | ast.AnnAssign):
        return None, {}
    value = assignments[0].value
    if value is None:
        return None, {}
    kind = _LITERALS.get(type(value))
    if kind is None and isinstance(value, ast.Constant):
        kind = f"the {type(value.value).__name__} {value.value!r}"
    if kind is not None:
        return (kind, assignments[0].lineno), {}
    literals: dict[str, tuple[str, int]] = {}
    if isinstance(value, ast.Dict):
        for key, target in zip(value.keys, value.values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and isinstance(target, ast.Constant):
                literals[key.value] = (repr(target.value), target.lineno)
    return None, literals


def _handler_functions(statements: list[ast.stmt]) -> dict[str, HandlerFunction]:
    """Export name -> handler ``def`` for entries of the literal ``handlers`` that name a function
    defined once at module level (and bound nowhere else); any other entry is left to the runtime."""
    assignments = [s for s in statements if "handlers" in _bindings(s)]
    if len(assignments) != 1 or not isinstance(assignments[0], ast.Assign | ast.AnnAssign):
        return {}
    value = assignments[0].value
    if not isinstance(value, ast.Dict):
        return {}
    out: dict[str, HandlerFunction] = {}
    for key, target in zip(value.keys, value.values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str) and isinstance(target, ast.Name)):
            continue
        bound = [s for s in statements if target.id in _bindings(s)]
        if len(bound) != 1 or not isinstance(bound[0], ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        fn = bound[0]
        if fn.decorator_list:
            continue  # a decorator may change the signature
        out[key.value] = _function(fn)
    return out


def _function(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> HandlerFunction:
    positional = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    required = len(positional) - len(fn.args.defaults)
    return HandlerFunction(fn.name, fn.lineno, positional, required, fn.args.vararg is not None)


def _register_binding(statements: list[ast.stmt]) -> RegisterBinding | None:
    """``register`` when one statement binds it, to an undecorated ``def`` or to a literal that is no
    callable; anything else (a class, ``functools.partial``, an import, a decorator that may change
    the signature, two bindings under ``if``) is left to the runtime's check when it loads the module."""
    bound = [s for s in statements if "register" in _bindings(s)]
    if len(bound) != 1:
        return None
    stmt = bound[0]
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
        if stmt.decorator_list:
            return None
        required_kw = [a.arg for a, d in zip(stmt.args.kwonlyargs, stmt.args.kw_defaults, strict=True) if d is None]
        return RegisterBinding(stmt.lineno, _function(stmt), required_kw)
    value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
    plain = isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
    plain = plain or (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name))
    literals = ast.Constant | ast.Dict | ast.List | ast.Tuple | ast.Set | ast.JoinedStr
    if plain and isinstance(value, literals | ast.DictComp | ast.ListComp | ast.SetComp):
        text = ast.unparse(value)
        return RegisterBinding(stmt.lineno, literal=text if len(text) <= 40 else text[:37] + "...")
    return None


class _Constants(ast.NodeTransformer):
    """Folds what a schema literal commonly refers to: module-level constants (``MODES = ("a", "b")``)
    and ``list(...)``/``tuple(...)`` of a literal sequence, so ``{"enum": list(MODES)}`` reads as a
    literal without importing the module (importing a connector pulls in the whole runtime)."""

    def __init__(self, constants: dict[str, ast.expr]) -> None:
        self.constants = constants

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return self.constants.get(node.id, node)

    def visit_Call(self, node: ast.Call) -> ast.expr:
        self.generic_visit(node)
        func, args = node.func, node.args
        call = isinstance(func, ast.Name) and func.id in ("list", "tuple") and len(args) == 1 and not node.keywords
        if call and isinstance(args[0], ast.List | ast.Tuple):
            kind = ast.List if getattr(func, "id", "") == "list" else ast.Tuple
            return kind(elts=args[0].elts, ctx=ast.Load())
        return node


def _literal_schema(statements: list[ast.stmt]) -> dict[str, Any] | None:
    bound = Counter(name for stmt in statements for name in _bindings(stmt))
    constants: dict[str, ast.expr] = {}
    for stmt in statements:
        value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
        names = _bindings(stmt)
        # bound once, to an immutable literal: a list or dict may be changed after the schema is built
        if isinstance(value, ast.Constant | ast.Tuple) and len(names) == 1 and bound[names[0]] == 1:
            try:
                ast.literal_eval(value)
                constants[names[0]] = value
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                pass
    for stmt in statements:
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and "CONFIG_SCHEMA" in _bindings(stmt):
            try:
                folded = _Constants(constants).visit(copy.deepcopy(stmt.value)) if stmt.value is not None else None
                result = ast.literal_eval(folded) if folded is not None else None
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                return None
            return result if isinstance(result, dict) else None
    return None


def _reexported_schema(statements: list[ast.stmt]) -> dict[str, Any] | None:
    """``CONFIG_SCHEMA`` of a module that re-exports a built-in's (``from goondan.base.extensions.mcp
    import CONFIG_SCHEMA, register``, the one-line entry of an MCP server's Extension): the built-in is
    our own code, so it is imported; the user's module is not. A name bound again is left alone."""
    if sum(_bindings(stmt).count("CONFIG_SCHEMA") for stmt in statements) != 1:
        return None
    for stmt in statements:
        if not (isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module):
            continue
        if stmt.module != "goondan.base" and not stmt.module.startswith("goondan.base."):
            continue
        if any(a.name == "CONFIG_SCHEMA" and a.asname in (None, "CONFIG_SCHEMA") for a in stmt.names):
            import importlib

            try:
                schema = getattr(importlib.import_module(stmt.module), "CONFIG_SCHEMA", None)
            except Exception:  # no such built-in (a typo the run reports), an optional dependency missing
                return None
            return copy.deepcopy(schema) if isinstance(schema, dict) else None
    return None


def inspect_entry(path: Path) -> EntryModule:
    """Compile ``path`` (never run it) and read what its module level defines."""
    module = EntryModule(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        module.problem = SourceProblem(f"cannot read it: {exc.strerror}")
        return module
    if len(data) > MAX_SOURCE_BYTES:
        module.opaque = True
        return module
    try:
        tree = ast.parse(data, str(path))
        # the second pass finds what the parser lets through (`return` outside a function, ...)
        compile(tree, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        detail = exc.msg or "invalid syntax"
        text = (exc.text or "").strip()
        module.problem = SourceProblem(
            f"{detail}" + (f": {text}" if text else ""),
            exc.lineno,
            exc.offset if exc.offset and exc.offset > 0 else None,
        )
        return module
    except (ValueError, RecursionError, MemoryError) as exc:
        module.problem = SourceProblem(f"cannot be compiled: {type(exc).__name__}: {exc}")
        return module
    statements = _top_level(tree.body)
    module.names = {name for stmt in statements for name in _bindings(stmt)}
    module.opaque = _is_opaque(tree, statements)
    module.handler_keys, module.handlers_line = _handler_keys(tree, statements)
    module.config_schema = _literal_schema(statements) or _reexported_schema(statements)
    if module.handler_keys is not None:
        module.handler_functions = _handler_functions(statements)
    module.register = _register_binding(statements)
    module.handlers_not_dict, module.handler_literals = _handlers_shape(statements)
    return module


__all__ = [
    "REQUIRED_ATTRIBUTE",
    "EntryModule",
    "HandlerFunction",
    "RegisterBinding",
    "SourceProblem",
    "inspect_entry",
]
