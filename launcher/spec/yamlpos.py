"""YAML loading that remembers where every value came from.

The loader composes the YAML node graph (safe tags only), refuses duplicate keys,
bounds alias expansion, and builds plain Python values together with a map from
each value's path (a tuple of keys and indexes) to its (line, column).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from launcher.errors import SpecError, SpecIssue
from launcher.inputs import InputFileError, read_input_file

Path_ = tuple[str | int, ...]

# Real run specs and training configs hold a few hundred values. Two bounds, each
# checked while the document is read, so a huge one is refused early: the values
# written in the file (counted as the parser composes them), and the values they
# expand to through aliases (a billion-laughs document expands a few aliases into
# billions).
MAX_VALUES = 20_000
MAX_NODES = 100_000
MAX_BYTES = 8 * 1024 * 1024


@dataclass
class Located:
    """A loaded document and the position of every value in it (1-based)."""

    data: Any
    positions: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    key_positions: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    file: str | None = None

    def where(self, path: Path_, *, key: bool = False) -> tuple[int | None, int | None]:
        """The position of `path`, or of its nearest ancestor that has one."""
        table = self.key_positions if key else self.positions
        p = tuple(path)
        while True:
            if p in table:
                return table[p]
            if key and p in self.positions:
                return self.positions[p]
            if not p:
                return (None, None)
            p = p[:-1]


class _Builder:
    def __init__(self, file: str | None):
        self.file = file
        self.count = 0
        self.located = Located(data=None, file=file)
        self._scalars = SpecLoader("")
        self._open: set[int] = set()
        """The collections being built, outermost first: an alias back to one is a cycle."""

    def fail(self, node: yaml.Node | None, message: str) -> SpecError:
        line = col = None
        if node is not None:
            line, col = node.start_mark.line + 1, node.start_mark.column + 1
        return SpecError([SpecIssue(message, file=self.file, line=line, column=col)])

    def counted(self, node: yaml.Node) -> None:
        """One more value built or merged: past MAX_NODES the document is refused, so aliases
        and merge keys (`<<: [*a, *a]` doubles at each level) do bounded work."""
        self.count += 1
        if self.count > MAX_NODES:
            raise self.fail(
                node,
                f"document expands through aliases (*name) or merge keys (<<) to more than {MAX_NODES} "
                "values (an alias bomb?); refusing it",
            )

    def build(self, node: yaml.Node, path: Path_, depth: int = 0) -> Any:
        self.counted(node)
        if depth > 200:
            raise self.fail(node, "document is nested too deeply")
        if id(node) in self._open:
            raise self.fail(node, "an alias (*name) refers to a value that holds it: the value would never end")
        self.located.positions.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
        if isinstance(node, yaml.ScalarNode):
            try:
                return self._scalars.construct_object(node, deep=True)
            except (ValueError, OverflowError) as e:  # e.g. a timestamp with month 13
                raise self.fail(node, f"cannot read the value {node.value[:40]!r}: {e}") from None
        if node.tag not in _COLLECTION_TAGS:
            raise self.fail(node, f"unsupported YAML tag {node.tag}")
        self._open.add(id(node))
        try:
            return self._collection(node, path, depth)
        finally:
            self._open.discard(id(node))

    def _collection(self, node: yaml.Node, path: Path_, depth: int) -> Any:
        if isinstance(node, yaml.SequenceNode):
            return [self.build(child, (*path, i), depth + 1) for i, child in enumerate(node.value)]
        if isinstance(node, yaml.MappingNode):
            out: dict[Any, Any] = {}
            for key_node, value_node in self._merged_pairs(node):
                key = self.build(key_node, (*path, "<key>"), depth + 1)
                if isinstance(key, list | dict):
                    raise self.fail(key_node, "a mapping key must be a plain value")
                if key in out:
                    first = self.located.key_positions.get((*path, key))
                    at = f" (first defined on line {first[0]})" if first else ""
                    raise self.fail(key_node, f"duplicate key {key!r}{at}")
                self.located.key_positions[(*path, key)] = (
                    key_node.start_mark.line + 1,
                    key_node.start_mark.column + 1,
                )
                out[key] = self.build(value_node, (*path, key), depth + 1)
            self.located.positions.pop((*path, "<key>"), None)
            return out
        raise self.fail(node, f"unsupported YAML node {type(node).__name__}")

    def _merged_pairs(self, node: yaml.MappingNode, merging: tuple = ()) -> list[tuple[yaml.Node, yaml.Node]]:
        """Mapping pairs with `<<: *anchor` merges applied (explicit keys win). Each pair
        merged counts as a value built (MAX_NODES)."""
        pairs: list[tuple[yaml.Node, yaml.Node]] = []
        merged: list[tuple[yaml.Node, yaml.Node]] = []
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for src in sources:
                    if not isinstance(src, yaml.MappingNode):
                        raise self.fail(src, "a merge key (<<) must refer to a mapping")
                    if any(src is m for m in (node, *merging)):
                        raise self.fail(src, "a merge key (<<) refers to the mapping that holds it")
                    for pair in self._merged_pairs(src, (node, *merging)):
                        self.counted(src)
                        merged.append(pair)
            else:
                pairs.append((key_node, value_node))
        explicit = {k.value for k, _ in pairs if isinstance(k, yaml.ScalarNode)}
        seen: set[Any] = set()
        out = list(pairs)
        for k, v in merged:
            if isinstance(k, yaml.ScalarNode) and (k.value in explicit or k.value in seen):
                continue
            seen.add(getattr(k, "value", None))
            out.append((k, v))
        return out


class SpecLoader(yaml.SafeLoader):
    """SafeLoader that also reads 1e-4 as a float (YAML 1.2), as users writing
    learning rates expect; PyYAML's YAML 1.1 rules would keep it a string."""


SpecLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
        |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


class _TooManyValues(Exception):
    def __init__(self, mark):
        self.mark = mark


class _CountingLoader(SpecLoader):
    """Counts nodes as they are composed and stops past MAX_VALUES, before the rest of
    a huge document is parsed."""

    def __init__(self, stream):
        super().__init__(stream)
        self._values = 0

    def compose_node(self, parent, index):
        self._values += 1
        if self._values > MAX_VALUES:
            raise _TooManyValues(self.peek_event().start_mark)
        return super().compose_node(parent, index)


def safe_load(text: str):
    """yaml.safe_load with SpecLoader's number rules."""
    return yaml.load(text, Loader=SpecLoader)


def load_value(text: str) -> Any:
    """One YAML value (a --set override's), built as a file's values are: bounded and
    without cycles (`&a [*a]`). Raises yaml.YAMLError for text that is not YAML, and
    ValueError with the reason for a value refused."""
    try:
        node = yaml.compose(text, Loader=_CountingLoader)
    except _TooManyValues:
        raise ValueError(f"the value has more than {MAX_VALUES} values") from None
    if node is None:
        return None
    try:
        return _Builder(None).build(node, ())
    except SpecError as e:
        raise ValueError(e.issues[0].message) from None


_COLLECTION_TAGS = {"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:omap"}


def read_file(path, what: str) -> bytes:
    """A spec or config file's bytes: a regular file of at most MAX_BYTES, else a
    SpecError naming it and why (missing, a FIFO or device, too large)."""
    try:
        return read_input_file(path, what=what, max_bytes=MAX_BYTES)
    except InputFileError as e:
        raise SpecError([SpecIssue(str(e), file=str(path))]) from None


def load_located(text: str | bytes, file: str | None = None) -> Located:
    """Parse one YAML document into plain values with positions. Raises SpecError."""

    def one_line(message: str) -> SpecError:
        return SpecError([SpecIssue(message, file=file)])

    if isinstance(text, bytes):
        if len(text) > MAX_BYTES:
            raise one_line(f"file is larger than {MAX_BYTES // (1024 * 1024)} MiB; a run spec is a few KiB")
        if b"\x00" in text:
            raise one_line("file is binary (it contains NUL bytes), not a YAML run spec")
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise one_line(f"file is not UTF-8 text (invalid byte at offset {e.start})") from None
    if len(text) > MAX_BYTES:
        raise one_line(f"file is larger than {MAX_BYTES // (1024 * 1024)} MiB; a run spec is a few KiB")
    if not text.strip() or all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines()):
        raise one_line("file is empty: a run spec needs at least `name`, `image` and `command`")

    builder = _Builder(file)
    try:
        nodes = list(yaml.compose_all(text, Loader=_CountingLoader))
    except _TooManyValues as e:
        raise SpecError(
            [
                SpecIssue(
                    f"document has more than {MAX_VALUES} values; a run spec or config has a few "
                    "hundred, so refusing it",
                    file=file,
                    line=e.mark.line + 1,
                    column=e.mark.column + 1,
                )
            ]
        ) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = e.problem or e.context or "invalid YAML"
        raise SpecError(
            [
                SpecIssue(
                    f"YAML syntax error: {problem}",
                    file=file,
                    line=mark.line + 1 if mark else None,
                    column=mark.column + 1 if mark else None,
                )
            ]
        ) from None
    except yaml.YAMLError as e:
        raise one_line(f"YAML error: {str(e).splitlines()[0]}") from None
    except RecursionError:
        raise one_line("document is nested too deeply") from None
    nodes = [n for n in nodes if n is not None]
    if not nodes:
        raise one_line("file is empty: a run spec needs at least `name`, `image` and `command`")
    if len(nodes) > 1:
        raise builder.fail(nodes[1], "file holds several YAML documents (---); a run spec is one document")
    root = nodes[0]
    try:
        data = builder.build(root, ())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise SpecError(
            [
                SpecIssue(
                    f"YAML error: {getattr(e, 'problem', None) or e}",
                    file=file,
                    line=mark.line + 1 if mark else None,
                    column=mark.column + 1 if mark else None,
                )
            ]
        ) from None
    except RecursionError:
        raise one_line("document is nested too deeply") from None
    builder.located.data = data
    return builder.located
