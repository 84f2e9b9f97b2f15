#!/usr/bin/python3
"""What a report.html's plots say on their axes (issue 55).

    check_axes.py REPORT.html [--log-x TITLE] [--whole-y TITLE]
                  [--x-label TITLE TEXT] [--bars-at-least TITLE N]

Always: every plot has a title on both axes (the timeline, x only). Then,
for the plot whose <title> is TITLE:
  --log-x: its x axis is logarithmic: tick labels 1, 10 and 100 at equal
           pixel steps, and one below 1 (the first percent shown);
  --whole-y: every y tick label is a whole number (counts of molecules);
  --x-label: its x axis title holds TEXT (a unit);
  --bars-at-least: at least N bars are drawn (a skewed histogram spread).
--bond-px N: every hit's 2D structure draws its bonds at least N px long on
  screen (the longest line of each, through both <svg>s' scaling).
Prints what it checked; exits 1 on the first failure.
"""
import argparse
import html
import math
import re
import sys


def fail(msg):
    print(f"check_axes: FAIL: {msg}")
    sys.exit(1)


def ok(msg):
    print(f"check_axes: ok: {msg}")


def plots(text):
    """(title, svg body) of every plot drawn by common/svg.c"""
    return [(html.unescape(t), body) for t, body in re.findall(r'<title id="t\d+">([^<]*)</title>(.*?)</svg>', text, re.S)]


def plot(text, title):
    for t, body in plots(text):
        if t == title:
            return body
    fail(f"no plot titled '{title}' (plots: {[t for t, _ in plots(text)]})")


def ticks(body, axis):
    """(pixel, label) of each tick of the x or y axis of a plot's svg"""
    g = re.search(r'<g class="' + axis + r'ticks"[^>]*>(.*?)</g>', body, re.S)
    if not g:
        fail(f"a plot without {axis} ticks")
    if axis == "x":
        pat = r'<text x="([-\d.]+)" y="[-\d.]+" stroke="none" text-anchor="middle">([^<]+)</text>'
    else:
        pat = r'<text x="[-\d.]+" y="([-\d.]+)" stroke="none" text-anchor="end">([^<]+)</text>'
    return [(float(p), lab) for p, lab in re.findall(pat, g.group(1))]


def axis_title(body, which):
    m = re.search(r'<text class="' + which + r'label"[^>]*>([^<]*)</text>', body)
    return html.unescape(m.group(1)) if m else ""


def bond_px(svg):
    """On-screen length (px) of the longest line of an Open Babel depiction:
    the outer <svg> is width px over a 100-unit viewBox, the inner drawing's
    viewBox is fitted into it with its aspect kept."""
    outer = float(re.search(r'width="([\d.]+)(?:px)?"', svg).group(1))
    inner = svg[svg.index("<svg", 1):]
    w, h = map(float, re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+) ([\d.]+)"', inner).groups())
    longest = max((math.hypot(float(c) - float(a), float(d) - float(b)) for a, b, c, d in
                   re.findall(r'<line x1="([-\d.]+)" y1="([-\d.]+)" x2="([-\d.]+)" y2="([-\d.]+)"', inner)),
                  default=0)
    return longest * min(100 / w, 100 / h) * outer / 100


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("--log-x", action="append", default=[])
    ap.add_argument("--whole-y", action="append", default=[])
    ap.add_argument("--x-label", nargs=2, action="append", default=[])
    ap.add_argument("--bars-at-least", nargs=2, action="append", default=[])
    ap.add_argument("--bond-px", type=float)
    a = ap.parse_args()
    text = open(a.report, encoding="utf-8").read()
    all_plots = plots(text)
    if not all_plots:
        fail("no plots")
    for title, body in all_plots:
        if not axis_title(body, "x").strip() or not axis_title(body, "y").strip():
            fail(f"plot '{title}' has an axis without a title: x '{axis_title(body, 'x')}', "
                 f"y '{axis_title(body, 'y')}'")
    ok(f"{len(all_plots)} plots, each axis titled")
    for title in a.log_x:
        t = {lab: px for px, lab in ticks(plot(text, title), "x")}
        for need in ("1", "10", "100"):
            if need not in t:
                fail(f"'{title}': no x tick labelled {need} (ticks {sorted(t)})")
        d1, d2 = t["10"] - t["1"], t["100"] - t["10"]
        if not (d1 > 0 and abs(d1 - d2) < 0.05):
            fail(f"'{title}': 1 to 10 is {d1:.2f} px and 10 to 100 {d2:.2f} px: not a log axis")
        below = [lab for lab in t if float(lab) < 1]
        if not below:
            fail(f"'{title}': no tick below 1 %: the first percent is not shown (ticks {sorted(t)})")
        ok(f"'{title}': a log x axis, ticks {sorted(t, key=float)}")
    for title in a.whole_y:
        labs = [lab for _, lab in ticks(plot(text, title), "y")]
        if not labs:
            fail(f"'{title}': no y ticks")
        bad = [lab for lab in labs if float(lab) != int(float(lab))]
        if bad:
            fail(f"'{title}': y ticks that are not whole numbers: {bad}")
        ok(f"'{title}': whole-number y ticks {labs}")
    for title, want in a.x_label:
        got = axis_title(plot(text, title), "x")
        if want not in got:
            fail(f"'{title}': the x axis says '{got}', not '{want}'")
        ok(f"'{title}': x axis '{got}'")
    for title, n in a.bars_at_least:
        got = len(re.findall(r"<rect x=[^>]*><title>", plot(text, title)))
        if got < int(n):
            fail(f"'{title}': {got} bars drawn, fewer than {n}")
        ok(f"'{title}': {got} bars")
    if a.bond_px is not None:
        svgs = re.findall(r'<div class="depict">(.*?)</div>', text, re.S)
        if not svgs:
            fail("no 2D structures to measure")
        worst = min(bond_px(v) for v in svgs)
        if worst < a.bond_px:
            fail(f"a 2D structure with bonds {worst:.1f} px long, under {a.bond_px}")
        ok(f"{len(svgs)} 2D structures, bonds at least {worst:.1f} px")


if __name__ == "__main__":
    main()
