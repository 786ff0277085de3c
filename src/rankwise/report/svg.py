"""Small self-contained SVG charts for the HTML report: lines (metric vs K), sorted delta bars, box
plots.

No dependency: each function returns an ``<svg>`` string with ``<title>`` tooltips, ready to inline.

Example:
    >>> svg = line_chart({"bm25": [0.2, 0.3, 0.35]}, [1, 2, 3], title="ndcg vs K", y_label="ndcg")
    >>> svg.startswith("<svg") and "bm25" in svg
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

import numpy as np

from rankwise.report.labels import signed

__all__ = ["PALETTE", "color_of", "nice_ticks", "line_chart", "delta_bars", "box_plot", "title_lines", "heat_color"]

PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac"]
GAIN, LOSS = "#2e7d32", "#c62828"
_FONT = 'font-family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif"'


def color_of(i: int) -> str:
    """The i-th palette colour (cycling)."""
    return PALETTE[i % len(PALETTE)]


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering ``[lo, hi]``.

    Example:
        >>> nice_ticks(0.0, 1.0)
        [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
        >>> nice_ticks(0.0, 0.39)
        [0.0, 0.1, 0.2, 0.3, 0.4]
    """
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(s * mag for s in (1, 2, 2.5, 5, 10) if s * mag >= raw)
    first = math.floor(lo / step + 1e-9)
    last = math.ceil(hi / step - 1e-9)
    ticks = []
    for i in range(first, last + 1):
        v = i * step
        ticks.append(0.0 if abs(v) < step * 1e-9 else round(v, 12))
    return ticks


def _fmt_tick(v: float) -> str:
    return f"{v:.3g}" if v != 0 else "0"


_TITLE_CHAR = 9.0  # a generous width of one 14px semi-bold character, in px


def title_lines(title: str, width: int, font_size: float = 14.0) -> list[str]:
    """``title`` broken at spaces into lines that fit ``width`` pixels (a word longer than a line
    stays whole; :func:`_frame` squeezes that line to the width).

    Example:
        >>> title_lines(
        ...     "dense recursive 400/50 − bm25 recursive 400/0: mrr per query (mean +0.0123 *)", 320
        ... )
        ['dense recursive 400/50 − bm25', 'recursive 400/0: mrr per query', '(mean +0.0123 *)']
    """
    room = max(8, int((width - 16) / (_TITLE_CHAR * font_size / 14.0)))
    lines: list[str] = []
    for word in title.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= room:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def _frame(width: int, height: int, title: str, body: list[str], *, label: str) -> str:
    """The chart in its frame with the title on top: wrapped onto as many lines as it needs, the
    chart moved down by the extra lines, so no title is ever cut at the edges."""
    lines = title_lines(title, width)
    extra = 18 * (len(lines) - 1)
    texts = []
    for i, line in enumerate(lines):
        fit = (f' textLength="{width - 16}" lengthAdjust="spacingAndGlyphs"'
               if len(line) * _TITLE_CHAR > width - 16 else "")
        texts.append(f'<tspan x="{width / 2:.1f}" y="{18 + 18 * i}"{fit}>{escape(line)}</tspan>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" aria-label="{escape(label)}" '
            f'viewBox="0 0 {width} {height + extra}" width="{width}" height="{height + extra}" {_FONT} '
            f'font-size="12"><text class="title" text-anchor="middle" font-size="14" font-weight="600">'
            + "".join(texts) + f'</text><g transform="translate(0,{extra})">' + "".join(body) + "</g></svg>")


def _y_axis(ticks: list[float], y_of, left: float, right: float, label: str, top: float,
            bottom: float) -> list[str]:
    out = []
    for t in ticks:
        y = y_of(t)
        out.append(f'<line x1="{left:.1f}" x2="{right:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{left - 6:.1f}" y="{y + 4:.1f}" text-anchor="end" fill="#555">'
                   f'{_fmt_tick(t)}</text>')
    mid = (top + bottom) / 2
    out.append(f'<text x="14" y="{mid:.1f}" transform="rotate(-90 14 {mid:.1f})" text-anchor="middle" '
               f'fill="#333">{escape(label)}</text>')
    return out


def line_chart(series: Mapping[str, Sequence[float]], xs: Sequence[int], *, title: str, y_label: str,
               x_label: str = "K", width: int = 640, height: int = 340,
               colors: Mapping[str, str] | None = None) -> str:
    """One line per series over ``xs`` (a metric against the cutoff K), with a legend."""
    left, right, top, bottom = 58, width - 150, 34, height - 44
    values = [float(v) for s in series.values() for v in s if v is not None and math.isfinite(v)]
    lo = min([0.0, *values])
    hi = max(values) if values else 1.0
    ticks = nice_ticks(lo, hi if hi > lo else lo + 1.0)
    y_lo, y_hi = ticks[0], ticks[-1]

    def y_of(v: float) -> float:
        return bottom - (v - y_lo) / (y_hi - y_lo) * (bottom - top)

    x_lo, x_hi = min(xs), max(xs)

    def x_of(x: float) -> float:
        return left + (0.5 if x_hi == x_lo else (x - x_lo) / (x_hi - x_lo)) * (right - left)

    body = _y_axis(ticks, y_of, left, right, y_label, top, bottom)
    step = max(1, math.ceil(len(xs) / 12))
    for x in xs[::step]:
        body.append(f'<text x="{x_of(x):.1f}" y="{bottom + 16:.1f}" text-anchor="middle" fill="#555">{x}</text>')
    body.append(f'<text x="{(left + right) / 2:.1f}" y="{height - 8}" text-anchor="middle" fill="#333">'
                f'{escape(x_label)}</text>')
    body.append(f'<line x1="{left}" x2="{right}" y1="{bottom}" y2="{bottom}" stroke="#888"/>')
    for i, (name, ys) in enumerate(series.items()):
        color = (colors or {}).get(name, color_of(i))
        pts = [(x_of(x), y_of(float(y)), x, float(y)) for x, y in zip(xs, ys, strict=True)]
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py, _, _ in pts)
        body.append(f'<polyline class="series" data-series="{escape(name)}" fill="none" stroke="{color}" '
                    f'stroke-width="2.2" points="{path}"/>')
        for px, py, x, y in pts:
            body.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{color}"><title>{escape(name)} '
                        f'@{x}: {y:.4f}</title></circle>')
        ly = top + 8 + i * 20
        body.append(f'<rect x="{right + 16}" y="{ly - 9}" width="14" height="4" fill="{color}"/>'
                    f'<text x="{right + 36}" y="{ly - 3}" fill="#222">{escape(name)}</text>')
    return _frame(width, height, title, body, label=title)


def delta_bars(labels: Sequence[str], deltas: Sequence[float], *, title: str, y_label: str = "delta",
               width: int = 640, height: int = 300) -> str:
    """Per-query differences as bars sorted from largest gain to largest loss (green gains, red
    losses)."""
    left, right, top, bottom = 58, width - 16, 34, height - 36
    pairs = sorted(((float(d), str(q)) for q, d in zip(labels, deltas, strict=True) if math.isfinite(d)),
                   key=lambda p: -p[0])
    peak = max([abs(d) for d, _ in pairs] + [1e-9])
    ticks = nice_ticks(-peak, peak, 6)
    y_lo, y_hi = ticks[0], ticks[-1]

    def y_of(v: float) -> float:
        return bottom - (v - y_lo) / (y_hi - y_lo) * (bottom - top)

    body = _y_axis(ticks, y_of, left, right, y_label, top, bottom)
    zero = y_of(0.0)
    n = max(len(pairs), 1)
    bw = (right - left) / n
    for i, (d, q) in enumerate(pairs):
        y = min(zero, y_of(d))
        h = max(abs(y_of(d) - zero), 0.0 if d == 0 else 0.8)
        color = GAIN if d > 0 else LOSS
        body.append(f'<rect class="bar" x="{left + i * bw:.2f}" y="{y:.2f}" width="{max(bw * 0.86, 0.6):.2f}" '
                    f'height="{h:.2f}" fill="{color}"><title>{escape(q)}: {signed(d)}</title></rect>')
    body.append(f'<line x1="{left}" x2="{right}" y1="{zero:.1f}" y2="{zero:.1f}" stroke="#333"/>')
    gains = sum(1 for d, _ in pairs if d > 1e-12)
    losses = sum(1 for d, _ in pairs if d < -1e-12)
    body.append(f'<text x="{(left + right) / 2:.1f}" y="{height - 10}" text-anchor="middle" fill="#333">'
                f'{len(pairs)} queries, sorted: {gains} better, {len(pairs) - gains - losses} equal, '
                f'{losses} worse</text>')
    return _frame(width, height, title, body, label=title)


def _quantiles(v: np.ndarray) -> tuple[float, float, float]:
    q1, med, q3 = np.quantile(v, [0.25, 0.5, 0.75])
    return float(q1), float(med), float(q3)


def box_plot(groups: Mapping[str, Sequence[float]], *, title: str, y_label: str, width: int = 640,
             height: int = 320, colors: Mapping[str, str] | None = None, seed: int = 0) -> str:
    """One box (quartiles, whiskers to 1.5 IQR, mean diamond) with jittered points per group."""
    left, right, top, bottom = 58, width - 16, 34, height - 40
    arrays = {k: np.asarray([x for x in v if x is not None and math.isfinite(x)], dtype=float)
              for k, v in groups.items()}
    everything = np.concatenate([a for a in arrays.values() if len(a)] or [np.zeros(1)])
    lo, hi = min(0.0, float(everything.min())), float(everything.max())
    ticks = nice_ticks(lo, hi if hi > lo else lo + 1.0)
    y_lo, y_hi = ticks[0], ticks[-1]

    def y_of(v: float) -> float:
        return bottom - (v - y_lo) / (y_hi - y_lo) * (bottom - top)

    body = _y_axis(ticks, y_of, left, right, y_label, top, bottom)
    rng = np.random.default_rng(seed)
    slot = (right - left) / max(len(arrays), 1)
    longest = max([len(name) for name in arrays] + [0]) * 7.2  # px at 12px
    upright = longest > slot * 0.95  # names that do not fit side by side are set vertically, below the boxes
    for i, (name, a) in enumerate(arrays.items()):
        color = (colors or {}).get(name, color_of(i))
        cx = left + slot * (i + 0.5)
        bw = min(slot * 0.45, 90)
        turn = f' transform="rotate(-90 {cx + 4:.1f} {bottom + 8:.1f})"' if upright else ""
        body.append(f'<text x="{cx + 4 if upright else cx:.1f}" y="{bottom + (8 if upright else 18):.1f}" '
                    f'text-anchor="{"end" if upright else "middle"}" fill="#222"{turn}>{escape(name)}</text>')
        if not len(a):
            continue
        q1, med, q3 = _quantiles(a)
        iqr = q3 - q1
        w_lo = float(a[a >= q1 - 1.5 * iqr].min())
        w_hi = float(a[a <= q3 + 1.5 * iqr].max())
        jitter = rng.uniform(-bw * 0.45, bw * 0.45, size=len(a))
        for x, v in zip(jitter.tolist(), a.tolist(), strict=True):
            body.append(f'<circle cx="{cx + x:.1f}" cy="{y_of(v):.1f}" r="2" fill="{color}" '
                        f'fill-opacity="0.35"/>')
        body.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y_of(w_lo):.1f}" y2="{y_of(w_hi):.1f}" '
                    f'stroke="#333"/>')
        body.append(f'<rect x="{cx - bw / 2:.1f}" y="{y_of(q3):.1f}" width="{bw:.1f}" '
                    f'height="{max(y_of(q1) - y_of(q3), 0.8):.1f}" fill="{color}" fill-opacity="0.25" '
                    f'stroke="{color}" stroke-width="1.5"><title>{escape(name)}: median {med:.4f}, '
                    f'quartiles {q1:.4f}\u2013{q3:.4f}, n={len(a)}</title></rect>')
        body.append(f'<line x1="{cx - bw / 2:.1f}" x2="{cx + bw / 2:.1f}" y1="{y_of(med):.1f}" '
                    f'y2="{y_of(med):.1f}" stroke="#222" stroke-width="2"/>')
        mean = float(a.mean())
        my = y_of(mean)
        body.append(f'<path d="M{cx:.1f},{my - 5:.1f} L{cx + 5:.1f},{my:.1f} L{cx:.1f},{my + 5:.1f} '
                    f'L{cx - 5:.1f},{my:.1f} Z" fill="#fff" stroke="#222"><title>mean {mean:.4f}</title></path>')
    return _frame(width, height + (int(longest) - 20 if upright else 0), title, body, label=title)


def heat_color(t: float) -> tuple[str, str]:
    """Background and text colour of a heat-map cell at ``t`` in [0, 1] (light to dark blue; white
    text on the dark half). NaN gives grey.

    Example:
        >>> heat_color(0.0), heat_color(1.0)
        (('#f2f6fb', '#1d2330'), ('#1f4e89', '#ffffff'))
    """
    if not math.isfinite(t):
        return "#e9e9e9", "#5b6474"
    t = min(1.0, max(0.0, t))
    lo, hi = (0xF2, 0xF6, 0xFB), (0x1F, 0x4E, 0x89)
    rgb = [round(a + (b - a) * t) for a, b in zip(lo, hi, strict=True)]
    return "#" + "".join(f"{c:02x}" for c in rgb), ("#ffffff" if t > 0.55 else "#1d2330")
