"""How the ``labkit`` commands print: the one home for tables, ``-o`` formats, colour and progress.

A command that prints objects takes ``-o`` (:func:`add_output_arg`). Without it, stdout decides
(:func:`resolve_format`): a terminal gets the human table, anything else (a pipe, a file, a test's
capture) gets the command's machine-readable form exactly as before, so scripts keep working.

- ``table``: what a person reads; fits the terminal (80 columns, or $COLUMNS, when stdout is not
  one) instead of letting it wrap the table: a message goes under its row, wrapped whole; names
  are cut with an ellipsis only when even that does not fit.
- ``wide``: more columns (namespace, devices, the scheduler's whole message), one line per row.
- ``json`` / ``yaml``: the machine-readable document; ``name``: ``kind/name`` per line, as kubectl.

Colour only on a terminal, never when ``NO_COLOR`` is set to anything non-empty (no-color.org) or
``TERM=dumb``. Text from a cluster, a dump or a manifest is escaped (:func:`escape_terminal`) in
every human form, on a terminal or not, as kubectl does; ``json``/``yaml``/``name`` stay exact.
Progress bars go to stderr, only when stderr is a terminal. This module is at the bottom of the
layers (beside labkit.errors): every command's module may use it.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import textwrap
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from tqdm import tqdm

__all__ = ["HUMAN", "OBJECT_FORMATS", "Table", "add_output_arg", "color_enabled", "dump_doc", "escape_terminal",
           "first_line", "fit_text", "on_terminal", "paint", "print_output", "print_table", "print_text", "progress_bar",
           "resolve_format", "terminal_width"]

#: the formats for people; everything else is for programs
HUMAN = ("table", "wide")
#: what every command that prints objects offers with -o, in this order (a command may add its own
#: after them, e.g. ``csv``): the human table, the wide table, the documents, kubectl's names
OBJECT_FORMATS = ("table", "wide", "json", "yaml", "name")
#: width assumed when stdout is not a terminal and $COLUMNS is not set (a table asked for with -o table)
DEFAULT_WIDTH = 80


def add_output_arg(parser: Any, machine: str = "json", *, extra: Sequence[str] = (), name: str = "") -> None:
    """``-o/--output`` with the choices every command has (:data:`OBJECT_FORMATS`, then ``extra``)
    and no fixed default: :func:`resolve_format` picks ``table`` on a terminal, else ``machine``
    (what the command printed before there were tables). ``name``: what ``-o name`` lists, for --help."""
    choices = [*OBJECT_FORMATS, *extra]
    default = "table" if machine == "table" else f"table on a terminal, else {machine}"
    parser.add_argument("-o", "--output", choices=choices, default=None,
                        help=f"{'|'.join(choices)} (default: {default})" + (f"; name: {name}" if name else ""))


def resolve_format(requested: str | None, machine: str, stream: TextIO | None = None) -> str:
    """The format to print: the one asked for, else ``table`` on a terminal, else ``machine``."""
    if requested:
        return requested
    return "table" if _isatty(stream or sys.stdout) else machine


def on_terminal(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (stdout by default) is a terminal: where a command prints for a person."""
    return _isatty(stream or sys.stdout)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or fake stream
        return False


def color_enabled(stream: TextIO | None = None) -> bool:
    """Colour for ``stream`` (stdout by default): a terminal, $NO_COLOR unset or empty, $TERM not dumb."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return _isatty(stream or sys.stdout)


def terminal_width(stream: TextIO | None = None) -> int:
    """Columns of the terminal behind ``stream``; $COLUMNS, else 80, when it is not one."""
    stream = stream or sys.stdout
    if _isatty(stream):
        try:
            return os.get_terminal_size(stream.fileno()).columns or DEFAULT_WIDTH
        except (OSError, ValueError):
            pass
    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns if os.environ.get("COLUMNS") else DEFAULT_WIDTH


#: the control characters a terminal acts on, as text that shows them. kubectl escapes ESC as ``^[``
#: and CR as ``\r`` in its tables and ``describe`` (cli-runtime's printers.EscapeTerminal, since
#: CVE-2021-25743); the kit escapes the other C0 controls, DEL and C1 (U+0080-U+009F: U+009B is a
#: CSI of its own) as well, and the bidi controls (a terminal that implements bidi, e.g. VTE, would
#: show text reordered), each in the form Go's %q writes it (``\a``, ``\x7f``, ``\u009b``, ``\u202e``).
_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_GO_NAMED = {0x07: "\\a", 0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0B: "\\v", 0x0C: "\\f", 0x0D: "\\r"}
_ESCAPES: dict[int, str] = {
    **{c: _GO_NAMED.get(c, f"\\x{c:02x}") for c in (*range(0x20), 0x7F)},
    0x1B: "^[",
    **{c: f"\\u{c:04x}" for c in (*range(0x80, 0xA0), *_BIDI)},
}
#: tab and newline are layout in prose (describe, explain); a table cell or an error line keeps neither
_ESCAPES_PROSE = {c: v for c, v in _ESCAPES.items() if c not in (0x09, 0x0A)}


def escape_terminal(text: str, *, layout: bool = True) -> str:
    """``text`` with every character a terminal would act on written out (``^[`` for ESC, ``\\r``,
    ``\\u009b`` ...): for data from a cluster, a dump or a manifest on its way to a human form. Only
    the kit's own styling (:func:`paint`, added after) reaches a terminal raw. ``layout=False``: tab
    and newline escaped too (one line). Applying it twice changes nothing."""
    return text.translate(_ESCAPES_PROSE if layout else _ESCAPES)


_SGR = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "blue": "34", "cyan": "36"}


def paint(text: str, style: str | None, on: bool) -> str:
    """``text`` in ANSI ``style`` (a key of _SGR, or several joined by '+') when ``on``."""
    if not on or not style or not text:
        return text
    codes = ";".join(_SGR[s] for s in style.split("+"))
    return f"\x1b[{codes}m{text}\x1b[0m"


def first_line(text: str | None) -> str:
    """The first non-blank line of a message (kube-scheduler's messages are one line; ours may not be)."""
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def _ellipsis(stream: Any) -> str:
    enc = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
    return "…" if enc == "utf8" else "..."


class Table:
    """Rows of strings under upper-case headers, two spaces apart, as kubectl prints them.

    To fit ``width``, the ``wrap`` columns (messages) give way first: their cells go on as many
    lines as they need, words kept whole where they can be; then the ``shrink`` columns (names) are
    cut with an ellipsis. Each keeps at least ``min_width`` characters (and its header).
    ``style(column, value)`` names a colour for a cell (applied after padding, so widths stay
    right). ``width=None``: one line per row, nothing cut (``-o wide``).

    ``detail``: a column printed under its row instead of beside it (when ``width`` is set): the
    message that would not fit beside the names, indented and wrapped to the width, never cut.
    """

    def __init__(self, headers: Sequence[str], rows: Iterable[Sequence[Any]] = (), *,
                 wrap: Sequence[int] = (), shrink: Sequence[int] = (), min_width: int = 12,
                 style: Callable[[int, str], str | None] | None = None, detail: int | None = None,
                 right: Sequence[int] = ()) -> None:
        self.detail = detail
        self.right = set(right)
        # a cell is one line of data: whitespace runs are one space, control characters escaped
        self.headers = [escape_terminal(h.upper(), layout=False) for h in headers]
        self.rows = [[escape_terminal(" ".join(("" if v is None else str(v)).split()), layout=False) for v in r]
                     for r in rows]
        self.wrap = list(wrap)
        self.shrink = list(shrink)
        self.min_width = min_width
        self.style = style

    def widths(self, width: int | None) -> list[int]:
        w = [max([len(h)] + [len(r[i]) for r in self.rows]) for i, h in enumerate(self.headers)]
        if width is None:
            return w
        over = sum(w) + 2 * (len(w) - 1) - width
        for i in [*self.wrap, *self.shrink]:
            if over <= 0:
                break
            floor = max(len(self.headers[i]), min(self.min_width, w[i]))
            cut = min(over, w[i] - floor)
            w[i] -= cut
            over -= cut
        return w

    def _cell_lines(self, i: int, value: str, w: int, dots: str) -> list[str]:
        if len(value) <= w:
            return [value]
        if i in self.wrap:
            return textwrap.wrap(value, w, break_on_hyphens=False) or [""]
        return [value[: max(w - len(dots), 0)] + dots]

    def render(self, width: int | None = DEFAULT_WIDTH, color: bool = False, stream: Any = None) -> str:
        if width is not None and self.detail is not None:
            return self._render_detail(width, color, stream)
        w = self.widths(width)
        dots = _ellipsis(stream or sys.stdout)
        out = []
        last = len(self.headers) - 1
        for n, row in enumerate([self.headers, *self.rows]):
            cells = [self._cell_lines(i, v, w[i], dots) for i, v in enumerate(row)]
            for k in range(max(len(c) for c in cells)):
                parts = []
                for i, lines in enumerate(cells):
                    value = lines[k] if k < len(lines) else ""
                    padded = (value.rjust(w[i]) if i in self.right else
                              value if i == last else value.ljust(w[i]))
                    style = "bold" if n == 0 else (self.style(i, row[i]) if self.style else None)
                    if style and value:
                        pad = len(padded) - len(value)
                        padded = (padded[:pad] + paint(value, style, color) if i in self.right
                                  else paint(value, style, color) + padded[len(value):])
                    parts.append(padded)
                out.append("  ".join(parts).rstrip())
        return "\n".join(out)

    def fold(self, width: int, keep: int = 1, color: bool = False, stream: Any = None) -> str:
        """Too many columns for ``width``: several tables one under the other, each with the first
        ``keep`` columns (what names a row) and as many of the others as fit, nothing cut."""
        w = self.widths(None)
        groups: list[list[int]] = []
        used = sum(w[:keep]) + 2 * keep
        for i in range(keep, len(w)):
            if not groups or used + w[i] > width:
                groups.append([])
                used = sum(w[:keep]) + 2 * keep
            groups[-1].append(i)
            used += w[i] + 2
        parts = []
        for g in groups or [[]]:
            cols = list(range(keep)) + g
            t = Table([self.headers[i] for i in cols], [[r[i] for i in cols] for r in self.rows],
                      right=[n for n, i in enumerate(cols) if i in self.right],
                      style=(lambda n, v, cols=cols: self.style(cols[n], v)) if self.style else None)
            parts.append(t.render(None, color, stream))
        return "\n\n".join(parts)

    def _render_detail(self, width: int, color: bool, stream: Any) -> str:
        d = self.detail
        assert d is not None
        keep = [i for i in range(len(self.headers)) if i != d]
        main = Table([self.headers[i] for i in keep], [[r[i] for i in keep] for r in self.rows],
                     wrap=[keep.index(i) for i in self.wrap if i != d],
                     shrink=[keep.index(i) for i in self.shrink if i != d], min_width=self.min_width,
                     style=(lambda i, v: self.style(keep[i], v)) if self.style else None)
        lines = main.render(width, color, stream).split("\n")
        out = [lines[0]]
        rows = iter(lines[1:])
        for r in self.rows:
            out.append(next(rows))
            # a wrapped cell of the main table spans several lines: they belong to this row too
            extra = max(len(main._cell_lines(j, v, w, "")) for j, (v, w)
                        in enumerate(zip([r[i] for i in keep], main.widths(width)))) - 1
            out += [next(rows) for _ in range(extra)]
            if r[d]:
                out += [paint(line, "dim", color) for line in
                        textwrap.wrap(r[d], width - 4, initial_indent="    ", subsequent_indent="    ",
                                      break_on_hyphens=False)]
        return "\n".join(out)

    def __str__(self) -> str:
        return self.render(None)


def print_table(table: Table, fmt: str, stream: TextIO | None = None, *, fit_pipe: bool = True) -> None:
    """``table`` on ``stream`` (stdout): fitted to the terminal's width for ``table``, whole for
    ``wide``. ``fit_pipe=False``: off a terminal, one line per row as for ``wide`` (a command whose
    table is also what scripts read keeps that form)."""
    stream = stream or sys.stdout
    fit = fmt != "wide" and (fit_pipe or _isatty(stream))
    text = table.render(terminal_width(stream) if fit else None, color_enabled(stream), stream)
    print(text, file=stream)


def fit_text(text: str, width: int | None) -> str:
    """Each line longer than ``width`` on several, indented like it and 4 more after the first
    (explanations, notes); ``width=None``: unchanged."""
    if width is None:
        return text
    out = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip())]
        out += textwrap.wrap(line.strip(), width, initial_indent=lead, subsequent_indent=lead + "    ",
                             break_on_hyphens=False) or [line]
    return "\n".join(out)


def print_text(text: str, stream: TextIO | None = None) -> None:
    """Prose (notes, explanations) on ``stream`` (stdout): escaped (:func:`escape_terminal`), and
    fitted to a terminal, unchanged elsewhere."""
    stream = stream or sys.stdout
    print(fit_text(escape_terminal(text), terminal_width(stream) if _isatty(stream) else None), file=stream)


def dump_doc(doc: Any, fmt: str) -> str:
    """The machine-readable forms: ``json`` (indented, as the commands always printed) or ``yaml``;
    NaN is written as null in both."""
    doc = _no_nan(doc)
    if fmt == "yaml":
        # yaml loads only here: labkit.cli imports this module (its error lines), and shell completion
        # runs labkit.cli on every TAB
        import yaml

        return yaml.safe_dump(doc, sort_keys=False)
    return json.dumps(doc, indent=2, default=str) + "\n"


def _no_nan(doc: Any) -> Any:
    """NaN (a metric with nothing to average) as null: JSON has no NaN, and YAML readers differ on .nan."""
    if isinstance(doc, float) and math.isnan(doc):
        return None
    if isinstance(doc, dict):
        return {k: _no_nan(v) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [_no_nan(v) for v in doc]
    return doc


def print_output(fmt: str, doc: Any, *, human: Callable[[str], None], names: Callable[[], Iterable[str]],
                 stream: TextIO | None = None) -> None:
    """Print in ``fmt`` (from :func:`resolve_format`) what a command has to say: ``human(fmt)``
    prints the ``table``/``wide`` form, ``doc`` is the ``json``/``yaml`` document, ``names()``
    the ``kind/name`` lines of ``-o name`` (as kubectl prints them: one per object, nothing else)."""
    stream = stream or sys.stdout
    if fmt in HUMAN:
        human(fmt)
    elif fmt == "name":
        for n in names():
            print(n, file=stream)
    else:
        stream.write(dump_doc(doc, fmt))


def progress_bar(desc: str, total: int | None = None, unit: str = "it",
                 enabled: bool | None = None) -> tqdm | None:
    """A tqdm bar on stderr (``bar.update(n)``, ``bar.close()``), or None when there is no one to
    see it: only when stderr is a terminal (``enabled=None``); it leaves no line behind."""
    if enabled is None:
        enabled = _isatty(sys.stderr)
    if not enabled:
        return None
    # tqdm loads only for a bar someone sees (every command imports this module)
    from tqdm import tqdm

    return tqdm(desc=desc, total=total, unit=unit, leave=False, file=sys.stderr)
