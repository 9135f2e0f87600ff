"""A small C++ lexer and top-level item splitter: enough structure to move whole declarations between files.

It does not parse C++. It knows comments, string and character literals (raw strings too), preprocessor lines,
brackets, and where a top-level declaration ends (a ``;``, or the ``}`` of a function body; a class, enum or
initialiser continues to its ``;``). Namespace and ``extern "C"`` blocks are split recursively. Anything it cannot
follow (unbalanced brackets, a literal that does not end) raises `LexError`, and callers fall back to compiling the
source as it is.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from cuda_agent.errors import BuildError


class LexError(BuildError):
    """The source's structure could not be followed (the split path is not taken; the source still builds)."""


@dataclass(frozen=True)
class Tok:
    kind: str  # ws, comment, pp, str, chr, id, num, punct
    text: str
    start: int
    end: int

    @property
    def significant(self) -> bool:
        return self.kind not in ("ws", "comment", "pp")


_ID = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_NUM = re.compile(r"\.?[0-9](?:[eEpP][+-]|[A-Za-z0-9_.']|)*")
_RAW_PREFIX = {"R", "u8R", "uR", "UR", "LR"}
_STR_PREFIX = {"u8", "u", "U", "L"}


def _skip_string(src: str, i: int, quote: str) -> int:
    j = i + 1
    while j < len(src):
        c = src[j]
        if c == "\\":
            j += 2
            continue
        if c == quote:
            return j + 1
        if c == "\n":
            break
        j += 1
    raise LexError(f"unterminated literal at offset {i}")


def _skip_raw(src: str, i: int) -> int:
    """``i`` points at the opening quote of R"delim( ... )delim"."""
    paren = src.find("(", i)
    if paren < 0 or paren - i > 17:
        raise LexError(f"malformed raw string at offset {i}")
    delim = src[i + 1:paren]
    close = src.find(")" + delim + '"', paren)
    if close < 0:
        raise LexError(f"unterminated raw string at offset {i}")
    return close + len(delim) + 2


def _skip_pp(src: str, i: int) -> int:
    j = i
    while j < len(src):
        c = src[j]
        if c == "\\" and src.startswith("\n", j + 1):
            j += 2
        elif c == "\\" and src.startswith("\r\n", j + 1):
            j += 3
        elif src.startswith("/*", j):
            end = src.find("*/", j + 2)
            if end < 0:
                raise LexError(f"unterminated comment at offset {j}")
            j = end + 2
        elif src.startswith("//", j):
            end = src.find("\n", j)
            return len(src) if end < 0 else end
        elif c in "\"'" and not src[i:j].lstrip("# \t").startswith(("error", "warning")):
            j = _skip_string(src, j, c)
        elif c == "\n":
            return j
        else:
            j += 1
    return j


def tokenize(src: str) -> list[Tok]:
    """Tokens covering ``src`` exactly (their texts concatenate back to it). Raises `LexError`."""
    toks: list[Tok] = []
    i, n = 0, len(src)
    line_start = True
    while i < n:
        c = src[i]
        if c in " \t\r\n\f\v":
            j = i
            while j < n and src[j] in " \t\r\n\f\v":
                if src[j] == "\n":
                    line_start = True
                j += 1
            toks.append(Tok("ws", src[i:j], i, j))
            i = j
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            kind, i_next = "comment", j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            if j < 0:
                raise LexError(f"unterminated comment at offset {i}")
            kind, i_next = "comment", j + 2
        elif c == "#" and line_start:
            kind, i_next = "pp", _skip_pp(src, i)
        elif c in "\"'":
            kind, i_next = ("str" if c == '"' else "chr"), _skip_string(src, i, c)
        elif (m := _ID.match(src, i)) is not None:
            word, j = m.group(), m.end()
            if j < n and src[j] == '"' and word in _RAW_PREFIX:
                kind, i_next = "str", _skip_raw(src, j)
            elif j < n and src[j] in "\"'" and word in _STR_PREFIX:
                kind, i_next = ("str" if src[j] == '"' else "chr"), _skip_string(src, j, src[j])
            else:
                kind, i_next = "id", j
        elif (m := _NUM.match(src, i)) is not None:
            kind, i_next = "num", m.end()
        else:
            kind, i_next = "punct", i + 1
        toks.append(Tok(kind, src[i:i_next], i, i_next))
        if kind != "comment":
            line_start = False
        i = i_next
    return toks


_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = {")", "]", "}"}


def match_close(toks: list[Tok], i: int) -> int:
    """Index of the bracket closing the one at ``i`` (round, square or curly). Raises `LexError`."""
    stack = [toks[i].text]
    j = i + 1
    while j < len(toks):
        t = toks[j].text if toks[j].kind == "punct" else ""
        if t in _OPEN:
            stack.append(t)
        elif t in _CLOSE:
            if _OPEN[stack.pop()] != t:
                raise LexError(f"mismatched {t!r} at offset {toks[j].start}")
            if not stack:
                return j
        j += 1
    raise LexError(f"unclosed {toks[i].text!r} at offset {toks[i].start}")


def match_angle(toks: list[Tok], i: int) -> int:
    """Index of the ``>`` closing the template bracket ``<`` at ``i`` (brackets inside are skipped)."""
    depth = 0
    j = i
    while j < len(toks):
        t = toks[j].text if toks[j].kind == "punct" else ""
        if t in _OPEN:
            j = match_close(toks, j) + 1
            continue
        if t == "<":
            depth += 1
        elif t == ">":
            depth -= 1
            if depth == 0:
                return j
        elif t in (";", "{", "}"):
            break
        j += 1
    raise LexError(f"unclosed template bracket at offset {toks[i].start}")


@dataclass
class Item:
    """A top-level piece of a file: a preprocessor line, a declaration, or a namespace/extern block."""

    kind: str  # pp, decl, block, trivia
    lo: int  # token index range [lo, hi)
    hi: int
    children: list["Item"] = field(default_factory=list)
    body: tuple[int, int] = (0, 0)  # for blocks: token range of the contents between the braces


_SCOPE_KEYWORDS = {"struct", "class", "union", "enum"}


def _is_block_head(sig: list[Tok]) -> bool:
    words = [t.text for t in sig]
    if words[:1] == ["inline"]:
        words = words[1:]
    if words[:1] == ["namespace"]:
        return all(w in ("::",) or re.fullmatch(r"[A-Za-z_]\w*|:", w) for w in words[1:])
    return len(sig) == 2 and words[0] == "extern" and sig[1].kind == "str"


def _continues_after_brace(sig: list[Tok]) -> bool:
    """A ``}`` ends the item unless the head opened a class/enum or an initialiser (``= {...};``)."""
    depth = 0
    start = 0
    if len(sig) > 1 and sig[0].text == "template" and sig[1].text == "<":
        angle = 0
        for start, t in enumerate(sig):
            angle += {"<": 1, ">": -1}.get(t.text, 0) if t.kind == "punct" else 0
            if angle == 0 and start > 0:
                break
        start += 1
    for k in range(start, len(sig)):
        t = sig[k]
        if t.text in ("(", "["):
            depth += 1
        elif t.text in (")", "]"):
            depth -= 1
        elif depth == 0 and t.text in _SCOPE_KEYWORDS:
            return True
        elif depth == 0 and t.text == "=":
            prev = sig[k - 1].text if k > 0 else ""
            nxt = sig[k + 1].text if k + 1 < len(sig) else ""
            if prev not in ("operator", "=", "!", "<", ">", "+", "-", "*", "/", "%", "&", "|", "^") and nxt != "=":
                return True
    return False


def split_items(toks: list[Tok], lo: int = 0, hi: int | None = None) -> list[Item]:
    """Top-level items of ``toks[lo:hi]``. Leading whitespace and comments belong to the item after them."""
    hi = len(toks) if hi is None else hi
    items: list[Item] = []
    i = lo
    while i < hi:
        start = i
        while i < hi and toks[i].kind in ("ws", "comment"):
            i += 1
        if i >= hi:
            items.append(Item("trivia", start, hi))
            break
        if toks[i].kind == "pp":
            items.append(Item("pp", start, i + 1))
            i += 1
            continue
        head: list[Tok] = []
        j = i
        while j < hi:
            t = toks[j]
            if t.kind == "punct" and t.text in ("(", "["):
                close = match_close(toks, j)
                head.extend(tt for tt in toks[j:close + 1] if tt.significant)
                j = close + 1
                continue
            if t.kind == "punct" and t.text in (")", "]", "}"):
                raise LexError(f"unexpected {t.text!r} at offset {t.start}")
            if t.kind == "punct" and t.text == ";":
                items.append(Item("decl", start, j + 1))
                break
            if t.kind == "punct" and t.text == "{":
                close = match_close(toks, j)
                if close >= hi:
                    raise LexError(f"block at offset {t.start} runs past its scope")
                if _is_block_head(head):
                    block = Item("block", start, close + 1, split_items(toks, j + 1, close), (j + 1, close))
                    items.append(block)
                    break
                head.append(t)
                j = close + 1
                if not _continues_after_brace(head):
                    items.append(Item("decl", start, j))
                    break
                continue
            if t.significant:
                head.append(t)
            j += 1
        else:
            raise LexError(f"declaration at offset {toks[i].start} does not end")
        i = items[-1].hi
    return items


def text_of(toks: list[Tok], lo: int, hi: int) -> str:
    return "".join(t.text for t in toks[lo:hi])


def significant(toks: list[Tok], lo: int, hi: int) -> list[Tok]:
    return [t for t in toks[lo:hi] if t.significant]


def split_commas(toks: list[Tok], angle: bool = True) -> list[list[Tok]]:
    """Split significant tokens at top-level commas; ``angle`` also treats < > as brackets (parameter lists)."""
    parts: list[list[Tok]] = [[]]
    depth = 0
    for t in toks:
        if t.kind == "punct" and (t.text in "([{" or (angle and t.text == "<")):
            depth += 1
        elif t.kind == "punct" and (t.text in ")]}" or (angle and t.text == ">")):
            depth -= 1
        if depth == 0 and t.kind == "punct" and t.text == ",":
            parts.append([])
        else:
            parts[-1].append(t)
    return [p for p in parts if p] if any(parts) else []
