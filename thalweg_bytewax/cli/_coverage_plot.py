"""``thalweg coverage --plot FILE.svg``: each sink's covered offsets as a picture.

One block per source partition, one bar per sink (the raw lane first, when its id is
given), all on the partition's own offset axis. Covered ranges are green; what a sink
lacks is red: against the raw lane when one is given (head, holes and tail), else the
holes between its own ranges. Plain SVG written here, no plotting library.

Every rectangle carries ``class`` (``covered``, ``gap`` or ``raw``) and ``data-sink``,
``data-topic``, ``data-partition``, ``data-first``, ``data-last`` (inclusive offsets), so
the picture can be checked, and a ``<title>`` tooltip.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from thalweg_bytewax.coverage.spans import OffsetCoverage, Span
from thalweg_bytewax.coverage.store import CoverageEntry, CoverageStore

__all__ = ["coverage_svg", "write_coverage_plot"]

_LABEL_W = 260
_BAR_W = 640
_ROW_H = 16
_ROW_GAP = 6
_HEAD_H = 22
_MARGIN = 12
_COLOURS = {"covered": "#2e7d32", "raw": "#1565c0", "gap": "#d32f2f"}
_EMPTY = "#eeeeee"


def _bars(
    entries: list[CoverageEntry], raw_lane: str | None
) -> dict[tuple[str, int], list[tuple[str, OffsetCoverage]]]:
    """Per (topic, partition), ``(sink, coverage)`` with the raw lane first."""
    parts: dict[tuple[str, int], list[tuple[str, OffsetCoverage]]] = {}
    for e in sorted(entries, key=lambda e: (e.topic, e.partition, e.sink != raw_lane, e.sink)):
        parts.setdefault((e.topic, e.partition), []).append((e.sink, e.coverage))
    if raw_lane is not None:  # a sink that never recorded a partition lacks all of it
        sinks = sorted({e.sink for e in entries} - {raw_lane})
        for bars in parts.values():
            held = {name for name, _ in bars}
            if raw_lane in held:
                bars += [(s, OffsetCoverage()) for s in sinks if s not in held]
    return parts


def _missing(cov: OffsetCoverage, reference: OffsetCoverage | None) -> list[Span]:
    if reference is None:
        return cov.gaps()
    return [gap for lo, hi in reference.spans for gap in cov.uncovered(lo, hi)]


def coverage_svg(
    entries: Iterable[CoverageEntry], *, raw_lane: str | None = None, title: str = "coverage"
) -> str:
    """An SVG of each sink's covered ranges and gaps per source partition.

    Args:
        entries: The coverage store's entries (``store.entries()``, or one sink's).
        raw_lane: The raw lane's sink id: its bar comes first, and each other sink's
            gaps are what the raw lane holds and it does not.
        title: The picture's heading.

    Returns:
        The SVG document.
    """
    parts = _bars(list(entries), raw_lane)
    rows = sum(len(b) for b in parts.values())
    height = 2 * _MARGIN + _HEAD_H * (len(parts) + 2) + (_ROW_H + _ROW_GAP) * rows
    width = 2 * _MARGIN + _LABEL_W + _BAR_W
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f"<title>{escape(title)}</title>",
        f'<text x="{_MARGIN}" y="{_MARGIN + 14}" font-weight="bold">{escape(title)}</text>',
    ]
    legend_x = _MARGIN + _LABEL_W
    for i, (kind, text) in enumerate(
        (("covered", "covered"), ("gap", "missing"), ("raw", "raw lane"))
    ):
        legend = legend_x + i * 110
        out.append(
            f'<rect class="legend" x="{legend}" y="{_MARGIN + 4}" width="12" height="12" '
            f'fill="{_COLOURS[kind]}"/><text x="{legend + 16}" y="{_MARGIN + 14}">{text}</text>'
        )
    y = _MARGIN + 2 * _HEAD_H
    if not parts:
        out.append(f'<text x="{_MARGIN}" y="{y}">no coverage recorded</text>')
    for (topic, partition), bars in parts.items():
        reference = dict(bars).get(raw_lane) if raw_lane is not None else None
        firsts = [c.first for _, c in bars if c.first is not None]
        lasts = [c.last for _, c in bars if c.last is not None]
        lo, hi = (min(firsts), max(lasts)) if firsts else (0, 0)
        scale = _BAR_W / (hi - lo + 1)
        out.append(
            f'<text x="{_MARGIN}" y="{y + 14}" font-weight="bold">'
            f"{escape(topic)}:{partition}</text>"
            f'<text x="{_MARGIN + _LABEL_W}" y="{y + 14}">{lo}</text>'
            f'<text x="{_MARGIN + _LABEL_W + _BAR_W}" y="{y + 14}" text-anchor="end">{hi}</text>'
        )
        y += _HEAD_H
        for sink, cov in bars:
            is_raw = sink == raw_lane
            out.append(
                f'<text x="{_MARGIN}" y="{y + _ROW_H - 4}">{escape(sink)}</text>'
                f'<rect x="{_MARGIN + _LABEL_W}" y="{y}" width="{_BAR_W}" height="{_ROW_H}" '
                f'fill="{_EMPTY}"/>'
            )
            spans = [("raw" if is_raw else "covered", s) for s in cov.spans]
            if not is_raw:
                spans += [("gap", s) for s in _missing(cov, reference)]
            for kind, (first, last) in spans:
                x = _MARGIN + _LABEL_W + (first - lo) * scale
                w = max((last - first + 1) * scale, 1.0)  # one offset stays visible
                attrs = (
                    f"data-sink={quoteattr(sink)} data-topic={quoteattr(topic)} "
                    f'data-partition="{partition}" data-first="{first}" data-last="{last}"'
                )
                tip = f"{sink} {topic}:{partition} {kind} {first}..{last} ({last - first + 1:,})"
                out.append(
                    f'<rect class="{kind}" {attrs} x="{x:.2f}" y="{y}" width="{w:.2f}" '
                    f'height="{_ROW_H}" fill="{_COLOURS[kind]}"><title>{escape(tip)}</title></rect>'
                )
            y += _ROW_H + _ROW_GAP
        y += _ROW_GAP
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_coverage_plot(
    path: Path, store: CoverageStore, *, sink: str | None = None, raw_lane: str | None = None
) -> None:
    """Write :func:`coverage_svg` of ``store`` (one sink and the raw lane, or all) to ``path``.

    The line saying where it went goes to stderr, so ``--json`` output stays parseable.
    """
    entries = [e for e in store.entries() if sink is None or e.sink in (sink, raw_lane)]
    path.write_text(
        coverage_svg(entries, raw_lane=raw_lane, title=f"coverage of {store.describe()}"),
        encoding="utf-8",
    )
    parts = len({(e.topic, e.partition) for e in entries})
    print(f"coverage: drew {parts} partitions to `{path}`", file=sys.stderr)
