#!/usr/bin/env bash
# The two reports test_report wrote, rendered by a real headless browser
# (Debian's chromium): the page loads with no console message, the DOM the
# browser built has every plot's points and bars as the database gives them
# (check_report.py --dom) and a screenshot of it is not blank. Without
# chromium (the setup script installs it) it reports skipped, exit 77.
#
#   test_report_browser.sh SE3SCREEN SOURCE_DIR WORK
set -uo pipefail
se3=$1 src=$2 work=$3
py=/usr/bin/python3
check="$src/tests/report/check_report.py"
fail() {
  echo "test_report_browser: FAIL: $*"
  exit 1
}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
  echo "test_report_browser: SKIPPED: no chromium here (scripts/setup.sh installs Debian's chromium)"
  exit 77
fi
for w in quickstart classify; do
  [ -s "$work/$w/report.html" ] || fail "$work/$w/report.html is missing: test_report makes it"
done
"$browser" --version || true
# chromium wants a writable home for its profile
export HOME="$work/home"
mkdir -p "$HOME"
flags=(--headless --no-sandbox --disable-gpu --no-first-run --disable-extensions --user-data-dir="$HOME/profile")
for w in quickstart classify; do
  page="file://$work/$w/report.html"
  top=$("$se3" check "$src/workflows/$w.yaml" | awk '/^  report:/{r=1} r && /^    top:/{print $2; exit}')
  timeout 180 "$browser" "${flags[@]}" --enable-logging=stderr --v=0 --dump-dom "$page" >"$work/$w.dom.html" \
    2>"$work/$w.console.log" || { tail -20 "$work/$w.console.log"; fail "chromium --dump-dom $w"; }
  timeout 180 "$browser" "${flags[@]}" --hide-scrollbars --window-size=1200,2400 --screenshot="$work/$w.png" "$page" \
    >/dev/null 2>&1 || fail "chromium --screenshot $w"
  $py "$check" "$work/$w/report.html" "$work/$w/screen.db" --top "$top" --dom "$work/$w.dom.html" \
    --png "$work/$w.png" --console "$work/$w.console.log" || fail "the rendered report of $w"
done
echo "ok: both reports rendered by $("$browser" --version 2>/dev/null | head -1)"
