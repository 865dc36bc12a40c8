"""Reading a user's YAML file strictly: one-line errors, bounded work.

PyYAML's safe loader takes the last of duplicate keys silently, turns `on:`/`yes:` keys into
booleans, and expands aliases by reference, so a few lines of anchors (the "billion laughs") make
a tree whose walk never ends. Here duplicate keys and non-string keys are errors, the expanded
size is bounded, and unreadable, non-UTF-8, too deep or empty files each get a one-line reason.
The file is read through loadgen.input.files (a regular file of at most MAX_BYTES: never a FIFO,
a device or a directory). YAML 1.1's number surprises are refused rather than read: `1:30` is 90
there (base 60), `010` is 8 (octal), and an integer of thousands of digits is no count at all.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from loadgen.input import files

MAX_BYTES = 4 * 1024 * 1024          # a scenario or profile is a few KiB; a trace goes through --trace
MAX_NODES = 200_000                  # scalars + collections after alias expansion
MAX_INT_DIGITS = files.MAX_INT_DIGITS
OCTAL = re.compile(r"^[-+]?0[0-7]+$")


class YamlFileError(ValueError):
    """(where, expectation): the caller names the file and turns it into its own error type."""

    def __init__(self, where: str, expected: str):
        self.where, self.expected = where, expected
        super().__init__(f"{where}: {expected}" if where else expected)


class _StrictLoader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if not isinstance(key, str):
                raise YamlFileError(f"line {line}", f"expected a string key, got {type(key).__name__} "
                                    f"{key!r} (quote it to mean the text)")
            if key in seen:
                raise YamlFileError(f"line {line}", f"duplicate key {key!r} (first on line {seen[key]})")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node):
        text = str(self.construct_scalar(node)).replace("_", "")
        where = f"line {node.start_mark.line + 1}"
        if ":" in text:
            raise YamlFileError(where,
                                f"{text!r} is a base-60 number in YAML 1.1 ({super().construct_yaml_int(node)}); "
                                "expected the number itself (quote it to mean the text)")
        if OCTAL.match(text):
            raise YamlFileError(where, f"{text!r} is an octal number in YAML 1.1 ({super().construct_yaml_int(node)}); "
                                "expected the number without its leading zero (quote it to mean the text)")
        digits = len(text.lstrip("+-"))
        if digits > MAX_INT_DIGITS:
            raise YamlFileError(where, f"expected an integer of at most {MAX_INT_DIGITS} digits, got one of {digits:,}")
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node):
        text = str(self.construct_scalar(node))
        if ":" in text:
            raise YamlFileError(f"line {node.start_mark.line + 1}", f"{text!r} is a base-60 number in YAML 1.1 "
                                f"({super().construct_yaml_float(node)}); expected the number itself (quote it to "
                                "mean the text)")
        return super().construct_yaml_float(node)


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)
_StrictLoader.add_constructor("tag:yaml.org,2002:float", _StrictLoader.construct_yaml_float)


def _expanded_size(node, memo: dict[int, int | None]) -> int:
    """Nodes of the document with every alias expanded, computed once per distinct node."""
    if id(node) in memo:
        if memo[id(node)] is None:
            raise YamlFileError(f"line {node.start_mark.line + 1}", "expected no recursive alias (an "
                                "anchor used inside itself)")
        return memo[id(node)]
    memo[id(node)] = None                        # in progress
    if isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(v, memo) for v in node.value)
    else:
        size = 1
    memo[id(node)] = min(size, MAX_NODES + 1)
    return memo[id(node)]


def read(path: str | Path, what: str = "YAML file") -> Any:
    """The YAML document at `path` (None for an empty or comment-only file)."""
    try:
        data = files.read_bytes(path, MAX_BYTES, what)
    except files.FileError as e:
        raise YamlFileError("", e.expected) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise YamlFileError(f"byte {e.start}", "expected UTF-8 text (is this a binary file?)") from None
    if "\x00" in text:
        raise YamlFileError(f"byte {text.index(chr(0))}", "expected text, found a NUL byte (is this a binary file?)")
    try:
        loader = _StrictLoader(text)
    except yaml.reader.ReaderError as e:
        raise YamlFileError(f"character {e.position}", f"expected printable text, found {e.character:#04x} "
                            "(is this a binary file?)") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node, {}) > MAX_NODES:
            raise YamlFileError("", f"expected at most {MAX_NODES:,} values once aliases are expanded "
                                "(an alias bomb?)")
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else ""
        raise YamlFileError(where, f"not valid YAML ({getattr(e, 'problem', None) or e})") from None
    except RecursionError:
        raise YamlFileError("", "expected YAML nested at most a few hundred levels deep") from None
    finally:
        loader.dispose()
