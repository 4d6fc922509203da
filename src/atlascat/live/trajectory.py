"""The run page's trajectory plot: an estimate after each item asked, with its band, as SVG."""
from __future__ import annotations

from html import escape, unescape

import numpy as np

__all__ = ["trajectory_svg", "text_width"]

#: the widest a character of the page's sans-serif type is, in em, on average over a label
_EM_PER_CHAR = 0.62


def text_width(text: str, font_size: float = 11.0) -> float:
    """The most a label of the plot takes in pixels (``font_size`` px type)."""
    return _EM_PER_CHAR * font_size * len(text)


def item_ticks(n: int, width: float) -> list[int]:
    """The item numbers labelled on an axis of ``n`` items ``width`` px wide: 1, ``n`` and
    every multiple of the smallest step of 1, 2, 5 x 10^k that makes at most 12 labels which
    stand apart (each label's width and a gap; a multiple too close to ``n`` left out)."""
    per = width / max(n - 1, 1)                    # pixels per item

    def room(a, b):                                # two labels' distance against their width
        return abs(b - a) * per >= (text_width(str(a)) + text_width(str(b))) / 2 + 8

    step = next(m * 10 ** e for e in range(0, 12) for m in (1, 2, 5)
                if room(m * 10 ** e, 2 * m * 10 ** e) and n <= 12 * m * 10 ** e)
    ticks = [1] + [k for k in range(step, n, step) if room(1, k) and room(k, n)]
    return ticks + ([n] if n > 1 else [])


def trajectory_svg(theta, se, width=760, height=260, *, label: str = "theta (EAP)",
                    axis: str = "ability theta", scale: float = 1.0, band=None,
                    limits=None, digits: int | None = None) -> str:
    """The estimate after each item with a +-SE band (theta for a bank; a suite's predicted
    average, ``scale`` 100 for percent), or with ``band`` = (lower, upper), its 95% interval
    (a benchmark predictor's score), against the step number; ``limits`` (low, high): the
    range the quantity lives in (a score's), beyond which the axis does not reach; ``digits``:
    the axis labels' decimals (default 1 in percent, else 2)."""
    n = len(theta)
    if n == 0:
        return "<p class='muted'>no answered item yet</p>"
    theta = scale * np.asarray(theta, float)
    if band is None:
        se = scale * np.asarray(se, float)
        low, up, band_text = theta - se, theta + se, " &#177; 1 SE"
    else:
        low, up = (scale * np.asarray(b, float) for b in band)
        band_text = " 95% interval"
    lo, hi = float(np.min(low)), float(np.max(up))
    pad = 0.1 * max(hi - lo, 0.5)
    lo, hi = lo - pad, hi + pad
    if limits is not None:
        lo, hi = max(lo, float(limits[0])), min(hi, float(limits[1]))
    left, right, top, bottom = 62, 15, 15, 30
    w, h = width - left - right, height - top - bottom
    xs = left + (np.arange(n) / max(n - 1, 1)) * w

    def y(v):
        return top + (hi - np.asarray(v)) / (hi - lo) * h

    band = " ".join(f"{x:.1f},{v:.1f}" for x, v in zip(xs, y(up)))
    band += " " + " ".join(f"{x:.1f},{v:.1f}" for x, v in zip(xs[::-1], y(low[::-1])))
    line = " ".join(f"{x:.1f},{v:.1f}" for x, v in zip(xs, y(theta)))
    ticks = np.linspace(lo, hi, 5)
    digits = (1 if scale != 1.0 else 2) if digits is None else digits
    grid = "".join(f"<line x1='{left}' x2='{left + w}' y1='{y(t):.1f}' y2='{y(t):.1f}' stroke='#eee'/>"
                   f"<text x='{left - 6}' y='{y(t) + 4:.1f}' font-size='11' text-anchor='end'>{t:.{digits}f}</text>"
                   for t in ticks)
    xt = "".join(f"<text x='{left + (k - 1) / max(n - 1, 1) * w:.1f}' y='{height - 8}' font-size='11' "
                 f"text-anchor='middle'>{k}</text>"
                 for k in item_ticks(n, w))
    short = label.split(" (")[0]
    # the legend from the right edge, each text as wide as its characters (11 px type: at
    # most 0.62 em a character), so that a long label ("predicted score") overlaps nothing
    line_text = left + w - text_width(label)
    band_text_x = line_text - 18 - 12 - text_width(short + unescape(band_text))
    legend = (f"<rect x='{band_text_x - 18:.0f}' y='{top + 4}' width='14' height='10' "
              f"fill='#c7d7f5'/><text x='{band_text_x:.0f}' y='{top + 13}' font-size='11'>"
              f"{escape(short)}{band_text}</text>"
              f"<line x1='{line_text - 18:.0f}' x2='{line_text - 4:.0f}' y1='{top + 9}' "
              f"y2='{top + 9}' stroke='#1f4fb5' stroke-width='2'/>"
              f"<text x='{line_text:.0f}' y='{top + 13}' font-size='11'>{escape(label)}</text>")
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height + 14}' "
            f"role='img' aria-label='trajectory: {escape(short)} and its{band_text} after each item'>"
            f"{grid}"
            f"<polygon points='{band}' fill='#c7d7f5' opacity='0.7'/>"
            f"<polyline points='{line}' fill='none' stroke='#1f4fb5' stroke-width='2'/>{xt}"
            f"{legend}"
            f"<text x='{left + w / 2:.0f}' y='{height + 10}' font-size='12' text-anchor='middle'>"
            "items asked</text>"
            f"<text x='14' y='{top + h / 2:.0f}' font-size='12' text-anchor='middle' "
            f"transform='rotate(-90 14 {top + h / 2:.0f})'>{escape(axis)}</text>"
            "</svg>")
