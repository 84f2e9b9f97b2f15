#!/usr/bin/python3
"""Checks a report.html against the database it was written from.

    check_report.py REPORT.html SCREEN.db [--dom DOM.html] [--png SHOT.png]
                    [--console LOG] [--top N] [--bins N]

REPORT.html is the file se3screen wrote; with --dom, the same counts are
read from the DOM a browser built from it (chromium --dump-dom), so what is
counted is what the browser drew. Each check recomputes from SCREEN.db what
the page must hold:

- self-contained: no script, stylesheet link, image, frame, import or
  url() that is not a fragment (#...), and no link that leaves the page;
- the timeline has one bar per stage in stage_chunks;
- every link to a part of the page (#id) finds it;
- the learning curves have one point per metrics row of each split, each
  at its epoch on the x axis (read back through the axis's tick labels),
  and the models and test tables show the best epoch: epochs are shown as
  schema version 6 stores them, from 1 (an older database, read as it is,
  stored them from 0);
- the parity plot has one point per held-out prediction, each at the pixel
  the axes give it (the plot's geometry and its 5 % padding, as report.c
  lays them out); the residual histogram has a bar per non-empty bin;
- the ROC curve has a point per distinct held-out score, plus (0, 0);
- each score histogram has a bar per non-empty bin of that set's scores
  (over the middle 98 % where the scores are skewed, as report_page.c's
  hist_range chooses),
  and an ensemble's spread plot a point per scored molecule;
- the docking histogram has a bar per non-empty bin of the docking scores,
  and active learning's plot a point per round whose picks were docked;
- the hits table has min(top, ranks) rows, each with its 2D structure;
- the rejects table has a row per reason (at most 30), and (schema version
  7 on) each example shows its file, record, name and specifics (or atom).
--png: the screenshot is a PNG that is not blank. --console: the browser's
log holds no console message (every one is an error or a warning here).
Prints what it checked; exits 1 on the first failure.
"""
import argparse
import html
import math
import re
import sqlite3
import struct
import sys
import zlib
from html.parser import HTMLParser

VOID = {"meta", "br", "img", "input", "link", "hr", "wbr", "source", "area", "base", "col", "embed", "param", "track"}


class Page(HTMLParser):
    """Counts the drawn elements of each class of <g>, the table rows and
    the outside references."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = []  # (tag, classes)
        self.drawn = {}  # class of the nearest <g> -> [(tag, attrs)]
        self.outside = []
        self.hit_rows = 0
        self.hit_depictions = 0
        self.reject_rows = 0
        self.tags = {}

    def _classes(self, attrs):
        return (dict(attrs).get("class") or "").split()

    def _inside(self, pred):
        return any(pred(t, c) for t, c in self.stack)

    def _note(self, tag, attrs, closes):
        a = dict(attrs)
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if tag in ("script", "link", "img", "iframe", "object", "embed", "frame", "audio", "video"):
            self.outside.append(tag)
        for k in ("src", "srcset", "data", "action"):
            if k in a:
                self.outside.append(f"{tag} {k}={a[k]}")
        for k in ("href", "xlink:href"):
            if k in a and not (a[k] or "").startswith("#"):
                self.outside.append(f"{tag} {k}={a[k]}")
        for v in a.values():
            for u in re.findall(r"url\(([^)]*)\)", v or ""):
                if not u.strip("'\" ").startswith("#"):
                    self.outside.append(f"{tag} url({u})")
        if tag in ("circle", "rect", "path", "polyline"):
            for t, c in reversed(self.stack):
                if t == "g":
                    for k in c:
                        self.drawn.setdefault(k, []).append((tag, a))
                    break
        if tag == "tr" and self._inside(lambda t, c: t == "table" and "hits" in c) and \
                self._inside(lambda t, c: t == "tbody"):
            self.hit_rows += 1
        if tag == "tr" and self._inside(lambda t, c: t == "section" and c == ["rejects"]) and \
                self._inside(lambda t, c: t == "tbody"):
            self.reject_rows += 1
        if tag == "svg" and self.stack and self.stack[-1][0] in ("td", "div") and "depict" in self.stack[-1][1]:
            self.hit_depictions += 1
        if not closes and tag not in VOID:
            self.stack.append((tag, self._classes(attrs) + (["rejects"] if a.get("id") == "rejects" else [])))

    def handle_starttag(self, tag, attrs):
        self._note(tag, attrs, False)

    def handle_startendtag(self, tag, attrs):
        self._note(tag, attrs, True)

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        if self.stack and self.stack[-1][0] == "style" and "@import" in data:
            self.outside.append("@import")


def fail(msg):
    print(f"check_report: FAIL: {msg}")
    sys.exit(1)


def ok(msg):
    print(f"check_report: ok: {msg}")


def count(page, cls):
    return len(page.drawn.get(cls, []))


def bins_of(values, n):
    """Non-empty bins of values as report.c bins them."""
    lo, hi = min(values), max(values)
    if not hi > lo:
        lo, hi = lo - 0.5, hi + 0.5
    got = set()
    for v in values:
        b = int((v - lo) / (hi - lo) * n)
        got.add(min(max(b, 0), n - 1))
    return len(got)


def score_column(db):
    """scores.score (schema version 6 on), scores.value before."""
    have = {r[1] for r in db.execute("PRAGMA table_info(scores)")}
    return "score" if "score" in have else "value"


def value_bars(db, val, from_, args, n):
    """Non-empty bars of the values `val` of the rows `from_` (a WHERE with
    its args) as report_page.c draws them: over [min, max], or, where the
    middle 98 % of at least 100 values (1 % cut from each end, counted in
    1000 fine bins) lie within a quarter of that range, over those fine bins
    with the values beyond in the end bars (hist_range)."""
    lo, hi, count = db.execute(f"SELECT min({val}), max({val}), count(*) FROM {from_}", args).fetchone()
    if not hi > lo:
        lo, hi = lo - 0.5, hi + 0.5

    def bars(lo, hi, k):
        return dict(db.execute(f"SELECT min(max(CAST(({val} - ?) / ? AS INTEGER), 0), ?), count(*) FROM {from_} "
                               "GROUP BY 1", (lo, (hi - lo) / k, k - 1) + tuple(args)).fetchall())

    cut = count // 100
    if cut > 0:
        fine = bars(lo, hi, 1000)
        a, b, low, high = 0, 999, 0, 0
        while a < b and low + fine.get(a, 0) <= cut:
            low += fine.get(a, 0)
            a += 1
        while b > a and high + fine.get(b, 0) <= cut:
            high += fine.get(b, 0)
            b -= 1
        if (b - a + 1) * 4 <= 1000:
            w = (hi - lo) / 1000
            lo, hi = lo + a * w, lo + (b + 1) * w
    return len(bars(lo, hi, n))


def sql_bins(db, set_name, target, n):
    col = score_column(db)
    return value_bars(db, f"s.{col}", "scores s JOIN molecules m ON m.id = s.mol_id WHERE m.set_name = ? "
                      "AND s.target = ?", (set_name, target), n)


def plot_svg(text, title):
    """The <svg> of the plot titled `title`, or None."""
    m = re.search(r'<title id="t\d+">' + re.escape(title) + r"</title>(.*?)</svg>", text, re.S)
    return m.group(1) if m else None


def x_values(svg, cls, shape):
    """The x data values of the markers of <g class="... cls"> in a plot's
    svg, read back through its x axis: the tick labels at their pixels."""
    ticks = re.search(r'<g class="xticks"[^>]*>(.*?)</g>', svg, re.S)
    pairs = [(float(x), float(v)) for x, v in
             re.findall(r'<text x="([-\d.]+)" y="[-\d.]+" stroke="none" text-anchor="middle">([^<]+)</text>',
                        ticks.group(1) if ticks else "")]
    if len(pairs) < 2:
        fail(f"a plot with {len(pairs)} x tick labels: its x values cannot be read back")
    (x0, v0), (x1, v1) = pairs[0], pairs[-1]
    g = re.search(r'<g class="[^"]*\b' + re.escape(cls) + r'">(.*?)</g>', svg, re.S)
    if not g:
        return []
    if shape == "circle":
        px = [float(x) for x in re.findall(r'<circle cx="([-\d.]+)"', g.group(1))]
    else:  # a square marker: its x is the centre less 3 px
        px = [float(x) + 3 for x in re.findall(r'<rect x="([-\d.]+)"', g.group(1))]
    return [v0 + (x - x0) * (v1 - v0) / (x1 - x0) for x in px]


def check_epochs(text, db):
    """Epochs on the page as the database stores them: from 1 in schema
    version 6 on; an older database (read as it is) stored them from 0."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    shift = 1 if version < 6 else 0
    want = {m: e + shift for m, e in db.execute("SELECT id, best_epoch FROM models")}
    got = dict(re.findall(r'<tr><td>([^<]*)</td><td>[^<]*</td><td>[^<]*</td><td class="n">\d+ / \d+ / \d+</td>'
                          r'<td class="n">(-?\d+)</td>', text))
    got = {m: int(e) for m, e in got.items()}
    if got != want:
        fail(f"the models table's best epochs {got}, the database gives {want} (schema version {version})")
    ok(f"best epochs in the models table: {sorted(got.values())}")
    section = re.search(r'<section id="training">(.*?)</section>', text, re.S)
    want = {m: e + shift for m, e in db.execute("SELECT model, epoch FROM metrics WHERE split = 'test' "
                                                "AND model <> 'ensemble'")}
    got = {m: int(e) for m, e in re.findall(r'<tr><td>([^<]*)</td><td class="n">(-?\d+)</td>',
                                             section.group(1) if section else "")}
    if got != want:
        fail(f"the test table's best epochs {got}, the database gives {want} (schema version {version})")
    ok(f"best epochs in the test table: {sorted(got.values())}")
    # an ensemble's own row (its members' mean): no epoch of its own
    ens = db.execute("SELECT count(*) FROM metrics WHERE split = 'test' AND model = 'ensemble'").fetchone()[0]
    shown = len(re.findall(r'<tr><td>ensemble</td><td class="n">&mdash;</td>', section.group(1) if section else ""))
    if shown != ens:
        fail(f"the test table shows the ensemble's row {shown} times, the database has {ens}")
    if ens:
        ok("the ensemble's own test row, without an epoch")
    svg = plot_svg(text, "Loss per epoch")
    for split, cls, shape in (("train", "pts-train-loss", "circle"), ("valid", "pts-valid-loss", "square")):
        want = sorted(e + shift for (e,) in db.execute(
            "SELECT epoch FROM metrics WHERE split = ? AND loss IS NOT NULL", (split,)))
        got = sorted(round(v, 2) for v in x_values(svg, cls, shape)) if svg else []
        if got != want:
            fail(f"learning curve {split} loss at epochs {got}, the database gives {want} (schema version {version})")
        ok(f"learning curve {split} loss at epochs {got[:3]}...{got[-1:]}" if got else f"no {split} loss curve")


def check_fragments(text):
    """Every href="#x" of the page has an element with id="x"."""
    ids = set(re.findall(r'\bid="([^"]+)"', text))
    missing = sorted({h for h in re.findall(r'href="#([^"]+)"', text) if h not in ids})
    if missing:
        fail(f"links to parts the page does not have: {missing}")
    ok("every #link finds its part of the page")


def png_pixels(path):
    """(width, height, channels, rows of bytes) of an 8-bit RGB or RGBA PNG,
    unfiltered (PNG's five row filters undone)."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path} is not a PNG")
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    width, height, depth, color, _, _, interlace = hdr
    if depth != 8 or color not in (2, 6) or interlace:
        fail(f"{path}: a PNG of depth {depth}, colour type {color}, interlace {interlace} is not read here")
    bpp = 3 if color == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, bpp, rows


def check_png(path):
    width, height, bpp, rows = png_pixels(path)
    ink = total = 0
    for line in rows[::4]:
        for i in range(0, len(line), 4 * bpp):
            total += 1
            ink += min(line[i:i + 3]) < 200  # not white or near-white
    share = ink / max(1, total)
    if share < 0.01:
        fail(f"{path} ({width}x{height}) looks blank: {100 * share:.2f} % of the sampled pixels are not white")
    ok(f"screenshot {width}x{height} is not blank ({100 * share:.1f} % of the sampled pixels drawn)")


def esc(t):
    """Text as report.c escapes it (common/svg.c, svg_escaped)."""
    return "".join({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}.get(c, c) for c in t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("db")
    ap.add_argument("--dom")
    ap.add_argument("--png")
    ap.add_argument("--console")
    ap.add_argument("--top", type=int, default=50)
    ap.add_argument("--bins", type=int, default=40)
    a = ap.parse_args()
    text = open(a.report, encoding="utf-8").read()
    src = Page()
    src.feed(text)
    if src.outside:
        fail(f"the page reaches outside itself: {src.outside[:5]}")
    if "@import" in text:
        fail("the page imports a stylesheet")
    ok(f"self-contained ({len(text)} bytes, no script, link, image or outside url)")
    page = src
    if a.dom:
        page = Page()
        page.feed(open(a.dom, encoding="utf-8", errors="replace").read())
        if page.outside:
            fail(f"the browser's DOM reaches outside: {page.outside[:5]}")
        if page.tags.get("svg", 0) != src.tags.get("svg", 0):
            fail(f"the browser built {page.tags.get('svg', 0)} svg elements of the file's {src.tags.get('svg', 0)}")
        ok(f"the browser's DOM has the file's {page.tags.get('svg', 0)} svg elements")
    db = sqlite3.connect(f"file:{a.db}?mode=ro", uri=True)

    def expect(what, got, want):
        if got != want:
            fail(f"{what}: {got} drawn, the database gives {want}")
        ok(f"{what}: {got}")

    check_fragments(text)
    if "NaN" in text or re.search(r"\bnan\b", text):
        fail("the page shows a NaN")
    stages = db.execute("SELECT count(DISTINCT stage) FROM stage_chunks").fetchone()[0]
    # the report stage's own chunk commits after it wrote the page
    has_report = db.execute("SELECT count(*) FROM stage_chunks WHERE stage = 'report'").fetchone()[0]
    tl = count(page, "tl")
    if tl not in (stages, stages - has_report):
        fail(f"timeline: {tl} bars, {stages} stages in the ledger")
    ok(f"timeline: {tl} bars")
    classify = db.execute("SELECT count(*) FROM models WHERE task = 'classification'").fetchone()[0] > 0
    for col in ("loss", "roc_auc" if classify else "mae"):
        for split in ("train", "valid"):
            n = db.execute(f"SELECT count(*) FROM metrics WHERE split = ? AND {col} IS NOT NULL", (split,)).fetchone()[0]
            expect(f"learning curve {split} {col}", count(page, f"pts-{split}-{col}"), n)
    check_epochs(text, db)
    members = db.execute("SELECT p.model, m.task FROM predictions p JOIN models m ON m.id = p.model "
                         "WHERE p.split = 'test' GROUP BY p.model ORDER BY p.model").fetchall()
    if members:
        model, task = members[0]
        rows = db.execute("SELECT label, value FROM predictions WHERE model = ? AND split = 'test' ORDER BY rowid",
                          (model,)).fetchall()
        if len(members) > 1:
            # an ensemble: each molecule's mean over the members (scores are
            # the mean), for the molecules every member predicted, in the
            # first member's order
            preds = {}
            for mol, label, value in db.execute("SELECT mol_id, label, value FROM predictions WHERE split = 'test'"):
                preds.setdefault(mol, [label, []])[1].append(value)
            order = [m for (m,) in db.execute("SELECT mol_id FROM predictions WHERE model = ? AND split = 'test' "
                                              "ORDER BY rowid", (model,))]
            rows = [(preds[m][0], sum(preds[m][1]) / len(preds[m][1])) for m in order
                    if len(preds[m][1]) == len(members)]
            if f"of the ensemble: {len(rows)}</h3>" not in text:
                fail(f"no heading for the ensemble's {len(rows)} held-out molecules")
            ok(f"held-out plots of the mean of {len(members)} members")
        if task == "regression":
            pts = page.drawn.get("pts-parity", [])
            stride = -(-len(rows) // 4000) if len(rows) > 4000 else 1  # an evenly spaced sample beyond 4000
            drawn_rows = rows[::stride]
            expect("parity points", len(pts), len(drawn_rows))
            # where each must be: report.c's plot of PH + 60 = 380 by 320 px,
            # margins 66/16/30/44, both axes the labels' and predictions'
            # range padded by 5 %
            lo = min(min(r) for r in rows)
            hi = max(max(r) for r in rows)
            if not hi > lo:
                d = abs(lo) * 0.1 if lo else 1
                lo, hi = lo - d, hi + d
            pad = (hi - lo) * 0.05
            lo, hi = lo - pad, hi + pad
            w, h, left, right, top, bottom = 380, 320, 66, 16, 30, 44

            def px(v):
                return left + (v - lo) / (hi - lo) * (w - left - right)

            def py(v):
                return h - bottom - (v - lo) / (hi - lo) * (h - top - bottom)

            want = sorted((round(px(y), 2), round(py(p), 2)) for y, p in drawn_rows)
            got = sorted((round(float(t[1]["cx"]), 2), round(float(t[1]["cy"]), 2)) for t in pts)
            worst = max(max(abs(g[0] - w_[0]), abs(g[1] - w_[1])) for g, w_ in zip(got, want))
            if worst > 0.011:
                fail(f"parity points are off their pixels by up to {worst:.3f} px")
            ok(f"parity points at their pixels (within {worst:.3f} px)")
            expect("residual bars", count(page, "bars-residual"), bins_of([p - y for y, p in rows], a.bins))
        else:
            if len({y > 0.5 for y, _ in rows}) == 2:
                expect("ROC points", count(page, "pts-roc"), len({p for _, p in rows}) + 1)
            else:
                expect("ROC points", count(page, "pts-roc"), 0)
    elif count(page, "pts-parity") or count(page, "pts-roc"):
        fail("held-out plots drawn without predictions")
    sets = db.execute("SELECT m.set_name, s.target FROM scores s JOIN molecules m ON m.id = s.mol_id "
                      "GROUP BY 1, 2 ORDER BY 1, 2").fetchall()
    want = sum(sql_bins(db, s, t, a.bins) for s, t in sets)
    expect(f"score bars ({len(sets)} histograms)", count(page, "bars-score"), want)
    # an ensemble's spread against the score: a point a scored molecule with a
    # std (an evenly spaced sample beyond 4000), per set and target
    want = 0
    for s_, t in sets:
        n = db.execute("SELECT count(s.std) FROM scores s JOIN molecules m ON m.id = s.mol_id "
                       "WHERE m.set_name = ? AND s.target = ?", (s_, t)).fetchone()[0]
        stride = -(-n // 4000) if n > 4000 else 1
        want += len(range(0, n, stride))
    expect("ensemble spread points", count(page, "pts-std"), want)
    # docking (schema version 10 on): a bar per non-empty bin of the docking
    # scores, and with active learning a point per round whose picks docked
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
    if "docking" in tables:
        n_dock = db.execute("SELECT count(*) FROM docking").fetchone()[0]
        want = 0
        if n_dock > 1:
            want = value_bars(db, "score", "docking WHERE 1", (), a.bins)
        expect("docking score bars", count(page, "bars-dock"), want)
        rounds = db.execute("SELECT count(DISTINCT q.round) FROM acquisitions q JOIN docking k "
                            "ON k.mol_id = q.mol_id").fetchone()[0]
        expect("points of the rounds' picks", count(page, "pts-round"), rounds if rounds > 1 else 0)
    ranks = db.execute("SELECT count(*) FROM ranks").fetchone()[0]
    expect("hits rows", page.hit_rows, min(a.top, ranks))
    if page.hit_depictions != page.hit_rows:
        fail(f"{page.hit_depictions} 2D structures for {page.hit_rows} hits")
    ok(f"a 2D structure for each of the {page.hit_rows} hits")
    # each hit's nearest training molecule and its similarity (schema 12 on)
    if "nearest_train" in {c[1] for c in db.execute("PRAGMA table_info(ranked_hits)")}:
        near = db.execute("SELECT nearest_train, similarity FROM ranked_hits WHERE similarity IS NOT NULL "
                          "ORDER BY rank LIMIT ?", (a.top,)).fetchall()
        for name, sim in near:
            cell = f"<td>{html.escape(name, quote=False)} ({sim:.2f})</td>"
            if cell not in text:
                fail(f"the hits table lacks {cell}")
        ok(f"the nearest training molecule of {len(near)} hits")
    reasons = db.execute("SELECT count(*) FROM (SELECT 1 FROM rejects GROUP BY stage, reason)").fetchone()[0]
    expect("reject reasons", page.reject_rows, min(30, reasons))
    if "detail" in {c[1] for c in db.execute("PRAGMA table_info(rejects)")}:
        shown = 0
        groups = db.execute("SELECT stage, reason FROM rejects GROUP BY stage, reason "
                            "ORDER BY count(*) DESC, stage, reason LIMIT 30").fetchall()
        for stage, reason in groups:
            for f, rec, name, atom, detail in db.execute(
                    "SELECT source_file, record_no, coalesce(name, ''), atom, detail FROM rejects "
                    "WHERE stage = ? AND reason = ? ORDER BY source_file, record_no LIMIT 3", (stage, reason)):
                want = f"{esc(f)} #{rec}" + (f" {esc(name)}" if name else "")
                if detail:
                    want += " &mdash; " + esc(detail)
                elif atom is not None:
                    want += f" &mdash; atom {atom}"
                if want not in text:
                    fail(f"the rejects table does not show '{want}' ({stage}: {reason})")
                shown += 1
        ok(f"{shown} reject examples with their atom and specifics")
    if a.png:
        check_png(a.png)
    if a.console:
        lines = [l for l in open(a.console, errors="replace") if ":CONSOLE" in l]
        if lines:
            fail(f"the browser's console says: {lines[:3]}")
        ok("no console messages")


if __name__ == "__main__":
    main()
