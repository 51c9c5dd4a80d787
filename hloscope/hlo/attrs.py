"""Small scanners for the parts of an HLO instruction line that are parsed on demand: operand lists, attribute lists,
quoted strings and metadata. They raise ValueError; the model turns that into a ParseError with the line and column."""

from __future__ import annotations

import re
import warnings

_PARENS = re.compile(r"[()]")
_INTERESTING = re.compile(r'["{}()\[\],]')
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_KEY = re.compile(r"\s*,\s*([A-Za-z_][\w.\-]*)\s*=\s*")
_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_NAME = re.compile(r"%?([A-Za-z_\-.$][\w.\-$]*)\Z")
_METADATA_ITEM = re.compile(r'\s*([A-Za-z_]\w*)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s"}]+)')
_OPENERS = "{(["


def _nested(depth: int) -> str:
    """Text inside brackets nested at most `depth` deep, brackets of any kind closing any other (as _value_end
    counts them), quoted strings skipped."""
    inner = r'(?:[^"{}()\[\]]++|"(?:[^"\\]|\\.)*+")*+'
    for _ in range(depth):
        inner = r'(?:[^"{}()\[\]]++|"(?:[^"\\]|\\.)*+"|[{(\[]' + inner + r"[})\]])*+"
    return inner


# A whole attribute list as split_attributes reads it, in one match for the common case (values nested at most 5
# brackets deep): `, key=value` repeated, each value non-empty and ending at a top-level comma, or a comment alone.
_TOP_VALUE = r'(?:[^"{}()\[\],]++|"(?:[^"\\]|\\.)*+"|[{(\[]' + _nested(4) + r"[})\]])*+"


def attribute_pattern(excluded_keys: tuple[str, ...] = ()) -> str:
    """Regular expression of one `, key=value` of an attribute list as split_attributes reads it (the value non-empty,
    ending at a top-level comma or the end of the text); with `excluded_keys`, of any other key."""
    key = r"[A-Za-z_][\w.\-]*"
    if excluded_keys:
        key = r"(?!(?:" + "|".join(re.escape(k) for k in excluded_keys) + r")\s*=)" + key
    return r"\s*,\s*" + key + r"\s*=\s*(?=[^\s,])" + _TOP_VALUE


def attribute_list_pattern(excluded_keys: tuple[str, ...] = ()) -> str:
    """Regular expression (re.S) of an attribute list that split_attributes accepts, to the end of the text; with
    `excluded_keys`, only lists without those keys."""
    return r"(?:\s*//.*|(?:" + attribute_pattern(excluded_keys) + r")*+\s*)\Z"


_PLAIN_ATTRIBUTES = re.compile(attribute_list_pattern(), re.S)
_VALUE = re.compile(_TOP_VALUE, re.S)
OPERAND_NAMES_PATTERN = r"%?[A-Za-z_\-.$][\w.\-$]*(?:, %?[A-Za-z_\-.$][\w.\-$]*)*"


def plain_attributes(text: str, start: int) -> bool:
    """Is `text[start:]` an attribute list split_attributes accepts? True is certain; False means "ask
    split_attributes" (it may still accept it, or it gives the error)."""
    return _PLAIN_ATTRIBUTES.match(text, start) is not None
_CLOSERS = {"}": "{", ")": "(", "]": "["}


def find_closing(text: str, pos: int) -> int:
    """Index of the ')' that closes a '(' just before `pos`, or -1."""
    end = text.find(")", pos)
    if end < 0:
        return -1
    if "(" not in text[pos:end]:
        return end
    depth = 1
    for match in _PARENS.finditer(text, pos):
        depth += 1 if match.group() == "(" else -1
        if depth == 0:
            return match.start()
    return -1


def _split_top_level(segment: str) -> list[str]:
    """`a, f32[2,3]{1,0} b, (f32[], s32[]) c` -> its comma-separated pieces, commas inside brackets kept."""
    pieces, pos = [], 0
    while True:
        end = _value_end(segment, pos)
        pieces.append(segment[pos:end])
        if end == len(segment):
            return pieces
        pos = end + 1


_PLAIN_OPERANDS = re.compile(OPERAND_NAMES_PATTERN + r"\Z")


def split_operands(segment: str) -> list[str]:
    """Operand names of `a, b` (new format) or `f32[2]{0} %a, (f32[], s32[]) %b` (older format with shapes)."""
    if _PLAIN_OPERANDS.match(segment) is not None:  # `%a, %b` as XLA prints it: no name holds '%' or ', '
        return segment.replace("%", "").split(", ")
    if "/*" in segment:
        segment = _COMMENT.sub("", segment)
    if not segment.strip():
        return []
    pieces = _split_top_level(segment) if "[" in segment or "(" in segment or "{" in segment else segment.split(",")
    names = []
    for piece in pieces:
        words = piece.split()
        match = _NAME.match(words[-1]) if words else None
        if match is None:
            raise ValueError(f"expected an operand name, got '{piece.strip()}'")
        names.append(match.group(1))
    return names


def _value_end(text: str, pos: int) -> int:
    """Index of the ',' ending the value that starts at `pos` (brackets of any kind balanced, strings skipped), or
    the end of `text`."""
    match = _VALUE.match(text, pos)  # C speed when the value is nested at most 5 deep (it always matches, maybe empty)
    end = match.end() if match is not None else pos
    if end == len(text) or text[end] == ",":
        return end
    return _value_end_scan(text, pos)  # deeper, or malformed: the scan finds the end or says what is wrong


def _value_end_scan(text: str, pos: int) -> int:
    depth = 0
    search = _INTERESTING.search
    while True:
        match = search(text, pos)
        if match is None:
            if depth:
                raise ValueError("unclosed bracket at end of line")
            return len(text)
        char = match.group()
        if char == '"':
            string = _STRING.match(text, match.start())
            if string is None:
                raise ValueError("unterminated string")
            pos = string.end()
            continue
        pos = match.end()
        if char in _OPENERS:
            depth += 1
        elif char in _CLOSERS:
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced '{char}'")
        elif depth == 0:  # a top-level ','
            return match.start()


# One `, key=value` with the key and the value as groups (values as _VALUE reads them), for split_attributes.
_ATTRIBUTE = re.compile(r"\s*,\s*([A-Za-z_][\w.\-]*)\s*=\s*(?=[^\s,])(" + _TOP_VALUE + ")", re.S)


def split_attributes(text: str, start: int) -> dict[str, str]:
    """`, key=value, key={...}, key="..."` from `start` to the end of `text` -> {key: raw value}."""
    if "//" not in text[start:] and _PLAIN_ATTRIBUTES.match(text, start) is not None:
        # The common case in two C-speed matches: a well-formed list (no comment, where `, k=v` might hide) holds
        # exactly the `, key=value` that findall finds, one after the other from `start`.
        return {key: value.strip() for key, value in _ATTRIBUTE.findall(text, start)}
    out: dict[str, str] = {}
    end = len(text.rstrip())
    pos = start
    while pos < end:
        match = _KEY.match(text, pos)
        if match is None:
            rest = text[pos:end].lstrip()
            if rest.startswith("//"):  # a trailing comment
                break
            if rest.startswith("/*"):  # a /* */ comment, which XLA's lexer skips; one left open goes on past the text
                close = text.find("*/", text.find("/*", pos) + 2)
                if close < 0:
                    break
                pos = close + 2
                continue
            raise ValueError(f"expected ', name=value', got '{rest[:30]}'")
        value_start = match.end()
        value_end = _value_end(text, value_start)
        value = text[value_start:value_end].strip()
        if not value:
            raise ValueError(f"expected a value after '{match.group(1)}='")
        out[match.group(1)] = value
        pos = value_end
    return out


def unquote(value: str) -> str:
    """The contents of a C-escaped "quoted" attribute value."""
    if len(value) < 2 or value[0] != '"' or value[-1] != '"':
        return value
    body = value[1:-1]
    if "\\" not in body:
        return body
    try:
        with warnings.catch_warnings():  # an unknown escape (`\,`) stays as written; Python would also warn of it
            warnings.simplefilter("ignore", DeprecationWarning)
            return body.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError:
        return body


def name_list(value: str) -> list[str]:
    """`%a`, `a` or `{a, %b}` -> ['a', 'b']."""
    value = value.strip()
    if value.startswith("{") and value.endswith("}"):
        value = value[1:-1]
    return [v.strip().lstrip("%") for v in value.split(",") if v.strip()]


def parse_metadata(value: str) -> dict[str, str]:
    """`{op_name="a/b" source_file="x.py" source_line=8}` -> {'op_name': 'a/b', ...}."""
    value = value.strip()
    if not (value.startswith("{") and value.endswith("}")):
        raise ValueError("expected '{...}'")
    out = {}
    for match in _METADATA_ITEM.finditer(value, 1, len(value) - 1):
        raw = match.group(2)
        out[match.group(1)] = unquote(raw) if raw.startswith('"') else raw
    return out
