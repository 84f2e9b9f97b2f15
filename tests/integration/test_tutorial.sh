#!/usr/bin/env bash
# test_tutorial: the README's "Your own screen", run as a reader runs it.
# Every ```sh block of that section, in order, and every ```yaml block that
# starts with "# file: NAME" (written to NAME), go into one bash script, as
# they stand in the README; it runs in a checkout-like folder (build/se3screen
# is this build's binary, workflows/ the source's) with `set -euo pipefail`,
# so a command that fails fails the test. Then what the tutorial promises is
# checked in the files and databases it made: a model better than predicting
# the training mean, 50 hits in soluble.csv, nci-hits/screen.db and its report.
#   test_tutorial.sh SE3SCREEN SOURCE_DIR TMP
set -euo pipefail
bin=$1 src=$2 tmp=$3
rm -rf "$tmp" && mkdir -p "$tmp/checkout/build"
ln -s "$bin" "$tmp/checkout/build/se3screen"
ln -s "$src/workflows" "$tmp/checkout/workflows"

/usr/bin/python3 - "$src/README.md" "$tmp/tutorial.sh" <<'PY'
import re, sys
text = open(sys.argv[1], encoding='utf-8').read()
m = re.search(r'^## Your own screen\n(.*?)(?=^## )', text, re.S | re.M)
if not m:
    sys.exit('README.md has no "## Your own screen" section')
out, n_sh, n_yaml = ['set -euo pipefail', 'set -x'], 0, 0
for lang, body in re.findall(r'^```(\w*)\n(.*?)^```', m.group(1), re.S | re.M):
    if lang == 'sh':
        out.append(body.rstrip('\n'))
        n_sh += 1
    elif lang == 'yaml':
        first = body.split('\n', 1)[0]
        f = re.fullmatch(r'# file: (\S+)', first)
        if not f:
            sys.exit('a yaml block of "Your own screen" does not start with "# file: NAME": ' + first)
        out.append("cat > %s <<'SE3_TUTORIAL_EOF'\n%sSE3_TUTORIAL_EOF" % (f.group(1), body))
        n_yaml += 1
    else:
        sys.exit('a ```%s block in "Your own screen": the test runs only sh and yaml blocks' % lang)
# the section as written has 5 command blocks and one workflow: fewer means
# the extraction stopped matching, not that the tutorial got shorter
if n_sh < 5 or n_yaml < 1:
    sys.exit('only %d sh and %d yaml blocks found in "Your own screen"' % (n_sh, n_yaml))
open(sys.argv[2], 'w').write('\n'.join(out) + '\n')
print('tutorial: %d sh blocks, %d yaml blocks' % (n_sh, n_yaml))
PY

cd "$tmp/checkout"
start=$(date +%s)
# Debian's python3 (with python3-pandas from setup.sh), as on the fresh machine the README
# addresses, not a python3 some other installation put first on PATH
if ! env PATH=/usr/bin:/bin bash "$tmp/tutorial.sh" > "$tmp/tutorial.log" 2>&1; then
  echo "FAIL: the tutorial's commands failed; the last lines:"
  tail -40 "$tmp/tutorial.log"
  exit 1
fi
echo "tutorial: ran in $(( $(date +%s) - start )) s"

fail=0
check() { # check DESCRIPTION COMMAND...: one promise of the tutorial
  if "${@:2}"; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi
}
q() { "$bin" query "$1" "$2" --csv | tail -n +2; }
db=my-screen/runs/solubility/screen.db
hits=my-screen/nci-hits/screen.db
check "the workflow was written where the README says" test -s my-screen/solubility.yaml
check "check printed the resolved configuration" grep -q 'target: logS' my-screen/resolved.yaml
mae=$(q $db "SELECT mae FROM metrics WHERE split = 'test' AND model = 'ensemble'")
mean_mae=$(q $db "WITH y AS (SELECT l.value, s.split FROM labels l JOIN splits s USING (mol_id) WHERE l.name = 'logS'),
  mu AS (SELECT avg(value) AS m FROM y WHERE split = 'train') SELECT avg(abs(value - m)) FROM y, mu WHERE split = 'test'")
echo "tutorial: test MAE $mae logS, the training mean's $mean_mae"
check "an ensemble of three models of logS trained on ESOL (the default)" \
  test "$(q $db "SELECT count(*) FROM models WHERE target = 'logS'")" = 3
check "the query of step 3 printed the members' and the ensemble's test metrics" \
  test "$(grep -cE '^(train/[012]|ensemble) +[0-9.]+ +[0-9.]+ +-?[0-9.]+$' "$tmp/tutorial.log")" = 4
check "its test MAE ($mae) under half the training mean's ($mean_mae)" \
  /usr/bin/python3 -c "import sys; sys.exit(not float('$mae') < 0.5 * float('$mean_mae'))"
n_lib=$(wc -l < workflows/data/nci_1000.smi)
scored=$(q $hits "SELECT count(*) FROM scores")
echo "tutorial: $scored of $n_lib library molecules scored"
check "most of the library scored (rejects aside)" test "$scored" -gt $((n_lib * 9 / 10))
check "every library molecule scored or rejected" \
  test $((scored + $(q $hits "SELECT count(*) FROM rejects"))) -ge "$n_lib"
check "50 hits ranked" test "$(q $hits "SELECT count(*) FROM ranked_hits")" = 50
check "soluble.csv: a header and 50 hits" test "$(wc -l < my-screen/soluble.csv)" = 51
check "hits ranked highest logS first" test "$(q $hits "SELECT count(*) FROM ranked_hits a JOIN ranked_hits b ON b.rank = a.rank + 1 WHERE b.score > a.score")" = 0
check "pandas printed the top hits" grep -q '^ *rank  *name  *smiles  *score' "$tmp/tutorial.log"
check "report.html written" test -s my-screen/nci-hits/report.html
check "hits.sdf holds 50 records" test "$(grep -c '^\$\$\$\$' my-screen/nci-hits/hits.sdf)" = 50
exit $fail
