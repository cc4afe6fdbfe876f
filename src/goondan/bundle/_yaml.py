"""Multi-document YAML reading that remembers where every value came from.

PyYAML's constructors throw positions away, and a bundle error without ``file:line:column`` is much
harder to fix. So we only let the (libyaml) composer build the node graph and turn nodes into plain
Python values ourselves, recording the 1-based position of each field path on the way. Building the
values ourselves is also where alias expansion is metered (billion-laughs documents are rejected) and
where duplicate mapping keys are caught (PyYAML silently keeps the last one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

try:  # pragma: no branch - libyaml is present in every supported install, SafeLoader is a fallback
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader

MAX_FILE_BYTES = 1024 * 1024
MAX_DOCUMENTS = 100
_ALIAS_FACTOR = 10
_ALIAS_FLOOR = 200  # tiny documents may legitimately reuse an anchor more than 10 times
MAX_DEPTH = 100  # nesting levels of one document; real resources stay far below it

_STR = "tag:yaml.org,2002:str"
_NULL = "tag:yaml.org,2002:null"
_BOOL = "tag:yaml.org,2002:bool"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_MERGE = "tag:yaml.org,2002:merge"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
_AS_TEXT = {"tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:binary"}

Position = tuple[int, int]


class YamlProblem(Exception):
    """A file could not be turned into documents; carries the code, 1-based position and, when the
    problem is known exactly (a tab), its own suggestion."""

    def __init__(
        self,
        code: str,
        message: str,
        line: int | None = None,
        column: int | None = None,
        suggestion: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.line = line
        self.column = column
        self.suggestion = suggestion


def _tab_problem(text: str, line: int) -> YamlProblem | None:
    """The parse error of a tab in a line's indentation, said as such: PyYAML's wording ("found
    character that cannot start any token") does not name the tab, which an editor does not show."""
    lines = text.splitlines()
    if not 0 <= line < len(lines):
        return None
    row = lines[line]
    indent = row[: len(row) - len(row.lstrip(" \t-"))]
    if "\t" not in indent:
        return None
    column = indent.index("\t") + 1
    return YamlProblem(
        "E_CONFIG_PARSE_ERROR",
        f"YAML parse error: line {line + 1} is indented with a tab (column {column}); YAML indents with spaces only",
        line + 1,
        column,
        "replace the tabs at the start of that line with spaces (set your editor to indent YAML with spaces)",
    )


@dataclass
class YamlDocument:
    """One document of a file: its value and the position of each field path inside it."""

    index: int
    value: Any
    line: int
    column: int
    positions: dict[str, Position] = field(default_factory=dict)


def _pos(node: yaml.Node) -> Position:
    mark = node.start_mark
    return (mark.line + 1, mark.column + 1)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class _Builder:
    """Turns one composed document into Python values, metering alias expansion."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.positions: dict[str, Position] = {}
        self._constructor = yaml.constructor.SafeConstructor()

    def _spend(self, node: yaml.Node) -> None:
        self.budget -= 1
        if self.budget < 0:
            line, column = _pos(node)
            raise YamlProblem(
                "E_CONFIG_PARSE_ERROR",
                "YAML aliases expand to far more nodes than the file contains (alias bomb?)",
                line,
                column,
            )

    def build(self, node: yaml.Node, path: str, depth: int) -> Any:
        self._spend(node)
        if depth > MAX_DEPTH:
            line, column = _pos(node)
            raise YamlProblem("E_CONFIG_NESTING_TOO_DEEP", _too_deep(), line, column)
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node)
        if isinstance(node, yaml.SequenceNode):
            self._check_tag(node, _SEQ)
            items: list[Any] = []
            for i, child in enumerate(node.value):
                child_path = f"{path}[{i}]"
                self.positions.setdefault(child_path, _pos(child))
                items.append(self.build(child, child_path, depth + 1))
            return items
        if isinstance(node, yaml.MappingNode):
            self._check_tag(node, _MAP)
            return self._mapping(node, path, depth)
        raise YamlProblem("E_CONFIG_PARSE_ERROR", "unsupported YAML node", *_pos(node))  # pragma: no cover

    def _check_tag(self, node: yaml.Node, expected: str) -> None:
        if node.tag != expected:
            raise YamlProblem("E_CONFIG_PARSE_ERROR", f"unsupported YAML tag {node.tag!r}", *_pos(node))

    def _scalar(self, node: yaml.ScalarNode) -> Any:
        tag = node.tag
        if tag in (_STR, _NULL, _BOOL, _INT, _FLOAT):
            try:
                return self._constructor.construct_object(node, deep=True)
            except (yaml.YAMLError, ValueError, OverflowError) as exc:
                raise YamlProblem("E_CONFIG_PARSE_ERROR", f"invalid scalar: {exc}", *_pos(node)) from None
        if tag in _AS_TEXT:
            # timestamps and binary blobs are kept as written: resource data must stay JSON-compatible
            return str(node.value)
        raise YamlProblem("E_CONFIG_PARSE_ERROR", f"unsupported YAML tag {tag!r}", *_pos(node))

    def _key(self, node: yaml.Node) -> str:
        if not isinstance(node, yaml.ScalarNode):
            raise YamlProblem("E_CONFIG_PARSE_ERROR", "mapping keys must be plain scalars", *_pos(node))
        value = self._scalar(node)
        # JSON objects only have string keys; `1: x` or `true: x` keep their source spelling
        return value if isinstance(value, str) else str(node.value)

    def _mapping(self, node: yaml.MappingNode, path: str, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        merged: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                self._spend(key_node)
                self._merge(value_node, path, depth, merged)
                continue
            key = self._key(key_node)
            if key in out:
                line, column = _pos(key_node)
                raise YamlProblem("E_CONFIG_PARSE_ERROR", f"duplicate mapping key {key!r}", line, column)
            child_path = _join(path, key)
            self.positions[child_path] = _pos(key_node)
            out[key] = self.build(value_node, child_path, depth + 1)
        for key, value in merged.items():
            out.setdefault(key, value)
        return out

    def _merge(self, node: yaml.Node, path: str, depth: int, into: dict[str, Any]) -> None:
        sources = node.value if isinstance(node, yaml.SequenceNode) else [node]
        for source in sources:
            if not isinstance(source, yaml.MappingNode):
                raise YamlProblem("E_CONFIG_PARSE_ERROR", "'<<' merge needs a mapping", *_pos(source))
            # merged values are recorded at the position of the merged mapping's own fields
            value = self.build(source, path, depth + 1)
            for key, item in value.items():
                into.setdefault(key, item)


def _too_deep() -> str:
    return f"YAML nesting is deeper than {MAX_DEPTH} levels"


def _check_depth(text: str) -> None:
    """Reject documents nested deeper than :data:`MAX_DEPTH` before anything composes them.

    libyaml's parser keeps its own explicit stack, but the composer that turns events into nodes
    recurses on the C stack: a few kilobytes of ``[[[[...`` crash the whole process with a
    segmentation fault, which no ``except`` can catch. Walking the flat event stream first costs one
    extra parse of a file that is at most :data:`MAX_FILE_BYTES` long.
    """
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                mark = event.start_mark
                line, column = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
                raise YamlProblem("E_CONFIG_NESTING_TOO_DEEP", _too_deep(), line, column)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _parse_problem(exc: yaml.MarkedYAMLError) -> YamlProblem:
    """PyYAML's problem *and* its context line: "while parsing a block mapping" says where it began."""
    mark = exc.problem_mark or exc.context_mark
    problem = exc.problem or exc.context or "invalid YAML"
    if "maximum nesting depth" in problem and mark is not None:
        # libyaml 0.2.6 (PyYAML 6.0.4) bounds flow nesting itself, and its scanner runs ahead of the
        # events _check_depth counts: the same file, the same error as with earlier versions
        return YamlProblem("E_CONFIG_NESTING_TOO_DEEP", _too_deep(), mark.line + 1, mark.column + 1)
    message = f"YAML parse error: {problem}"
    context_mark = exc.context_mark
    if exc.context and exc.problem and context_mark is not None:
        message += f" ({exc.context} that starts at line {context_mark.line + 1}, column {context_mark.column + 1})"
    if mark is None:
        return YamlProblem("E_CONFIG_PARSE_ERROR", message)
    return YamlProblem("E_CONFIG_PARSE_ERROR", message, mark.line + 1, mark.column + 1)


def _count_unique(root: yaml.Node) -> int:
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.append(key)
                stack.append(value)
    return len(seen)


def parse_documents(data: bytes, name: str = "FILE") -> list[YamlDocument]:
    """Parse every document of one file (``name``, as suggestions show it); raise
    :class:`YamlProblem` for the first problem."""
    if len(data) > MAX_FILE_BYTES:
        raise YamlProblem("E_CONFIG_FILE_TOO_LARGE", f"file is {len(data)} bytes; the limit is {MAX_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # the byte's own line and column, and how to fix the encoding: the generic YAML suggestion
        # (indentation, brackets, tabs) sent the user looking for a syntax error
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        utf16 = data[:2] in (b"\xff\xfe", b"\xfe\xff")
        source = "utf-16" if utf16 else "latin1"
        raise YamlProblem(
            "E_CONFIG_PARSE_ERROR",
            f"file is not valid UTF-8 (byte 0x{data[exc.start]:02x}: {exc.reason})"
            + (", it looks like UTF-16" if utf16 else ""),
            line,
            column,
            suggestion="save the file as UTF-8 (an editor's 'Save with encoding', or "
            f"`iconv -f {source} -t utf-8 {name} > {name}.new`, then rename it over the original)",
        ) from None
    docs: list[YamlDocument] = []
    try:
        _check_depth(text)
        for index, node in enumerate(yaml.compose_all(text, Loader=_Loader)):
            if index >= MAX_DOCUMENTS:
                raise YamlProblem(
                    "E_CONFIG_TOO_MANY_DOCUMENTS",
                    f"file has more than {MAX_DOCUMENTS} YAML documents",
                    *_pos(node),
                )
            if node is None:  # pragma: no cover - compose_all yields a null scalar for empty docs
                continue
            budget = max(_count_unique(node) * _ALIAS_FACTOR, _ALIAS_FLOOR)
            builder = _Builder(budget)
            value = builder.build(node, "", 0)
            line, column = _pos(node)
            docs.append(YamlDocument(index, value, line, column, builder.positions))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise (mark is not None and _tab_problem(text, mark.line)) or _parse_problem(exc) from None
    except yaml.YAMLError as exc:
        raise YamlProblem("E_CONFIG_PARSE_ERROR", f"YAML parse error: {exc}") from None
    except RecursionError:  # pragma: no cover - _check_depth bounds the recursion first
        raise YamlProblem("E_CONFIG_NESTING_TOO_DEEP", _too_deep()) from None
    return docs
