#!/usr/bin/env bash
# test_slurm.sh — `se3screen slurm` on a real Slurm: where it runs as root on
# Debian, installs Slurm and munge (apt), starts a single-node cluster of its
# own (its own ports, 16817 and 16818 or SE3_TEST_SLURM_PORT and the next, and
# state under WORK_DIR; ../shared/notes/slurm.md is the recipe), and:
#   1. submits the quickstart (chunks of 64, every chunked stage a 4-task
#      array) with `se3screen slurm --submit`, waits for the jobs, and
#      requires the molecules, graphs, scores and hits that a local run of the
#      same workflow makes;
#   2. submits the rest of a workflow whose stages up to the bases ran
#      locally with `se3screen slurm --resume` (which starts at train, and a
#      second --resume while those jobs are queued is refused), stops the
#      running train job with `scontrol requeue`: it runs again, goes on
#      from its mid-epoch checkpoint and ends byte-identical to an
#      uninterrupted local run, and --resume then has nothing to submit;
#   3. gives a train job a 1-minute limit and more epochs than fit: Slurm's
#      USR1 before the limit stops it at a step with its work kept, it
#      requeues itself and ends in a later run, every epoch trained once;
#   4. submits an active-learning campaign (a table for an oracle, three
#      rounds, each round's dock, graph and score as 2-task arrays), cancels
#      every job once round 1 is decided, resumes it with --resume (from a
#      step of round 1 or later), and requires the decisions, dockings,
#      scores and the history of each round of the same campaign run
#      locally in one process, bit for bit.
# Elsewhere it reports skipped (exit 77) with the reason.
#   usage: test_slurm.sh SE3SCREEN SOURCE_DIR WORK_DIR
set -uo pipefail
se3=$1 src=$2 work=$3
skip() {
  echo "SKIPPED: $*"
  exit 77
}
fail() {
  echo "FAILED: $*"
  exit 1
}
[ "$(id -u)" -eq 0 ] || skip "installing and starting Slurm needs root"
[ -f /etc/debian_version ] && command -v apt-get >/dev/null || skip "installs Slurm with Debian's apt-get"

need=()
for p in slurmctld slurmd slurm-client munge; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}"; } >/dev/null 2>&1 ||
    skip "apt-get could not install ${need[*]}"
fi

rm -rf "$work" && mkdir -p "$work/slurm/state" "$work/slurm/spool" || fail "cannot make $work"
D=$work/slurm
host=$(hostname -s)
port=${SE3_TEST_SLURM_PORT:-16817} # slurmctld's; slurmd's the next
mem=$(($(free -m | awk '/^Mem:/{print $2}') - 512))
# munge: Debian's package made the key; munged runs as munge (as root it refuses)
started_munge=0
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  mkdir -p /run/munge && chown munge:munge /run/munge
  runuser -u munge -- /usr/sbin/munged || skip "munged does not start"
  started_munge=1
fi
cat >"$D/slurm.conf" <<EOF
ClusterName=se3test
SlurmctldHost=$host
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=cred_expire=10
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,sched_interval=2,bf_interval=1
MessageTimeout=10
KillWait=5
NodeName=$host CPUs=$(nproc) RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$D/slurm.conf
slurmctld -D -c >"$D/slurmctld.out" 2>&1 &
ctld=$!
slurmd -D >"$D/slurmd.out" 2>&1 &
slurmd=$!
cleanup() {
  scancel --user=root >/dev/null 2>&1
  kill "$slurmd" "$ctld" 2>/dev/null
  wait "$slurmd" "$ctld" 2>/dev/null
  [ $started_munge -eq 1 ] && kill "$(cat /run/munge/munged.pid 2>/dev/null)" 2>/dev/null
}
trap cleanup EXIT
for _ in $(seq 240); do
  [ "$(sinfo -h -o %T 2>/dev/null)" = idle ] && break
  sleep 0.25
done
[ "$(sinfo -h -o %T 2>/dev/null)" = idle ] || {
  tail -5 "$D"/*.out
  skip "the Slurm daemons did not come up (logs above)"
}
echo "slurm: $(sinfo -h -o '%P %a %D %T %N')"

# Waits up to $1 s until Slurm holds none of our jobs.
drain() {
  local t0=$SECONDS
  while [ -n "$(squeue -h -o %i 2>/dev/null)" ]; do
    [ $((SECONDS - t0)) -gt "$1" ] && { squeue; return 1; }
    sleep 0.2
  done
}

# The quickstart in chunks of 64 (its 58 library molecules in one chunk
# would leave 3 of 4 score tasks idle: the library in chunks of 16)
cp -r "$src/workflows/data" "$work/" || fail "cannot copy the data"
sed -e "s|^workdir: .*|workdir: local|" "$src/workflows/quickstart.yaml" >"$work/wf.yaml"
printf 'run: {chunk_size: 16, progress: lines}\n' >>"$work/wf.yaml"
common=(--set stages.train.epochs=2 --set stages.train.ensemble=1)

"$se3" run "$work/wf.yaml" "${common[@]}" >"$work/local.log" 2>&1 || { cat "$work/local.log"; fail "the local run"; }

# 1. the whole workflow through Slurm
"$se3" slurm "$work/wf.yaml" "${common[@]}" --set workdir="$work/cluster" --array-size 4 --cpus-per-task 2 \
  --time 10:00 --submit >"$work/submit.log" 2>&1 || { cat "$work/submit.log"; fail "se3screen slurm --submit"; }
cat "$work/submit.log"
grep -q "submitted [0-9]*-rank.sbatch" "$work/submit.log" || fail "not every step was submitted"
drain 900 || fail "the jobs did not finish in 900 s"
for l in "$work"/cluster/slurm/logs/*.log; do
  grep -q "se3screen slurm: job .* failed" "$l" && { cat "$l"; fail "a job failed: $l"; }
done
"$se3" status "$work/cluster" >"$work/status.log" 2>&1
same() { # what, SQL: the same rows in both databases
  local a b
  a=$("$se3" query "$work/local/screen.db" "$2" --csv) || fail "query $2"
  b=$("$se3" query "$work/cluster/screen.db" "$2" --csv) || { cat "$work/status.log"; fail "query $2 on the Slurm run"; }
  [ "$a" = "$b" ] || {
    diff <(echo "$a") <(echo "$b") | head -20
    fail "$1 differ between the local and the Slurm run"
  }
  echo "ok: $1 ($(($(echo "$a" | wc -l) - 1)) rows)"
}
same "molecules" "SELECT id, set_name, name, inchikey FROM molecules ORDER BY id"
same "rejects" "SELECT stage, source_file, record_no, reason FROM rejects ORDER BY 1, 2, 3"
same "graphs" "SELECT mol_id, n_nodes, n_edges, hex(graph) FROM graphs ORDER BY mol_id"
same "scores" "SELECT mol_id, target, printf('%.5e', score) FROM scores ORDER BY mol_id, target"
same "hits" "SELECT rank, name FROM ranked_hits ORDER BY rank"
[ -s "$work/cluster/hits.csv" ] || fail "the Slurm run wrote no hits.csv"
grep -q "<h2>Top hits</h2>" "$work/cluster/report.html" || fail "the Slurm run's report job wrote no report.html"
# status names the job of every run: the array tasks' shards as JOB_TASK
score_job=$(awk -F'\t' '$2 == "07-score.sbatch" {id = $3} END {print id}' "$work/cluster/slurm/jobs.tsv")
for t in 0 1 2 3; do
  grep -q "Slurm job ${score_job}_$t\$" "$work/status.log" || { cat "$work/status.log"; fail "status lacks job ${score_job}_$t"; }
done
echo "ok: status names the Slurm job of each shard"

# 2. A job stopped by `scontrol requeue` mid-run runs again and goes on
# where it stopped: the train stage (10 epochs, a checkpoint every 10 steps;
# 20 under SE3_SOAK=1) on graphs and bases made locally, submitted by
# --resume from the first unfinished step. Its last checkpoint must be
# byte-identical to an uninterrupted local run's, and every epoch's metrics
# there once. (20 epochs trained twice, here and in Slurm, cost about 70 s
# of the test's 250; 10 leave the same window, 3 epochs seen before the
# requeue and 3 left after it, in half the time.)
soak=${SE3_SOAK:-0}
if [ "$soak" = 1 ]; then E=20 lo=5 hi=17; else E=10 lo=3 hi=7; fi
ep=(--set stages.train.epochs=$E --set stages.train.ensemble=1 --set stages.train.checkpoint_every=10)
"$se3" run "$work/wf.yaml" "${ep[@]}" --set workdir="$work/ref" --until train >"$work/ref.log" 2>&1 ||
  { cat "$work/ref.log"; fail "the local reference training"; }
"$se3" run "$work/wf.yaml" "${ep[@]}" --set workdir="$work/rq" --until basis >"$work/rq-local.log" 2>&1 ||
  { cat "$work/rq-local.log"; fail "the local run up to the bases"; }
"$se3" slurm "$work/wf.yaml" "${ep[@]}" --set workdir="$work/rq" --cpus-per-task 2 --time 10:00 --resume \
  >"$work/resume.log" 2>&1 || { cat "$work/resume.log"; fail "se3screen slurm --resume"; }
cat "$work/resume.log"
grep -q "resuming workflow quickstart from step 06-train.sbatch" "$work/resume.log" ||
  fail "--resume did not start from the train step"
if "$se3" slurm "$work/wf.yaml" "${ep[@]}" --set workdir="$work/rq" --resume >"$work/again.log" 2>&1 ||
  ! grep -q "still queued or running" "$work/again.log"; then
  cat "$work/again.log"
  fail "a second --resume while the jobs are queued was not refused"
fi
train_job=$(awk -F'\t' '$2 == "06-train.sbatch" {id = $3} END {print id}' "$work/rq/slurm/jobs.tsv")
[ -n "$train_job" ] || fail "jobs.tsv has no train job"
t0=$SECONDS
newest() { # the newest epoch checkpoint's epoch (counted from 1; training keeps the last two), -1 for none
  ls "$work/rq/models/train-0/" 2>/dev/null | sed -n 's/^epoch-\([0-9]*\)\.ckpt$/\1/p' | sort -n | tail -1 |
    grep . || echo -1
}
# freeze PID: SIGSTOP, then wait until each of its threads is stopped
# (status 1 when PID has ended: gone, or a zombie)
freeze() {
  local pid=$1 f s all
  kill -STOP "$pid" 2>/dev/null || return 1
  for _ in $(seq 100000); do
    [ -d "/proc/$pid/task" ] || return 1
    all=1
    for f in /proc/"$pid"/task/*/stat; do
      s=$(sed 's/.*) \(.\).*/\1/' "$f" 2>/dev/null) || continue
      case $s in
      T | t) ;;
      Z | X) return 1 ;;
      *) all=0 ;;
      esac
    done
    [ $all -eq 1 ] && return 0
    sleep 0.002
  done
  return 1
}
# The requeue is asked while the job's se3screen (the pid its lock file
# names) is frozen between epochs lo and hi of E (3 and 7 of 10; 5 and 17
# of 20 under SE3_SOAK=1), and it stays frozen until
# Slurm's own signals reach it (SIGCONT and SIGTERM, or SIGKILL after
# KillWait): it cannot finish the training in between, however fast the
# machine. (It used to be asked as soon as epoch lo was seen, and the job
# ran on meanwhile.)
at=-1
until [ "$at" -ge 0 ]; do
  [ $((SECONDS - t0)) -gt 300 ] && fail "the train job was not seen between epochs $lo and $hi in 300 s"
  sleep 0.1
  [ "$(newest)" -ge "$lo" ] || continue
  pid=$(sed -n 's/.*, pid \([0-9]*\),.*/\1/p' "$work/rq/screen.db.lock" 2>/dev/null)
  [ -n "$pid" ] && grep -q se3screen "/proc/$pid/cmdline" 2>/dev/null || continue
  freeze "$pid" || continue
  n=$(newest)
  if [ "$n" -ge "$lo" ] && [ "$n" -le "$hi" ]; then
    at=$n
  else
    kill -CONT "$pid"
    [ "$n" -gt "$hi" ] && fail "the training was first seen frozen after epoch $n: too late to requeue it"
  fi
done
scontrol requeue "$train_job" || { kill -CONT "$pid"; fail "scontrol requeue $train_job"; }
echo "requeued job $train_job after epoch $((at + 1)) of $E"
t1=$SECONDS
while [ -d "/proc/$pid" ] && grep -q '^State:.*stopped' "/proc/$pid/status" 2>/dev/null; do
  [ $((SECONDS - t1)) -gt 120 ] && { kill -CONT "$pid"; fail "Slurm did not signal the requeued job in 120 s"; }
  sleep 0.1
done
drain 900 || fail "the jobs did not finish in 900 s"
log=$(ls "$work"/rq/slurm/logs/06-train.sbatch-*.log)
[ "$(grep -c "train: the model runs on" "$log")" -ge 2 ] || {
  cat "$log"
  fail "the requeued train job did not run again"
}
cmp "$work/ref/models/train-0/epoch-$E.ckpt" "$work/rq/models/train-0/epoch-$E.ckpt" ||
  fail "the requeued training ended elsewhere than the uninterrupted one"
echo "ok: requeued training ends byte-identical to an uninterrupted run"
n=$("$se3" query "$work/rq/screen.db" "SELECT count(*) || ' ' || count(DISTINCT epoch) FROM metrics WHERE split = 'train'" --csv | tail -1)
[ "$n" = "$E $E" ] || fail "metrics: $n rows and distinct epochs, not $E $E"
[ -s "$work/rq/hits.csv" ] || fail "the resumed workflow wrote no hits.csv"
"$se3" slurm "$work/wf.yaml" "${ep[@]}" --set workdir="$work/rq" --resume >"$work/done.log" 2>&1 ||
  { cat "$work/done.log"; fail "--resume after the end"; }
grep -q "nothing to submit" "$work/done.log" || { cat "$work/done.log"; fail "--resume after the end submitted"; }
echo "ok: --resume after the end has nothing to submit"

# 3. Slurm's own warning: a train job with a 1-minute limit (Slurm's least:
# it counts limits in minutes) and signal_s 20 gets USR1 before its limit,
# stops at a step with its work kept (75), requeues itself and ends in a
# later run with every epoch trained once. Slurm looks at limits and
# warnings every 30 s (PERIODIC_TIMEOUT) and sends the warning at the first
# look from 30 s before its time: with signal_s 20, 10 to 40 s after the
# job starts (signal_s 10, as SE3_SOAK=1 keeps: 20 to 50 s). The job is
# about 55 s of epochs at the reference's fastest epoch (90 s under
# SE3_SOAK=1), so it is still training at 40 s. The fastest epoch, not the
# mean: a reference slowed by other work on the machine (the mean) once gave
# a job that ended, at full speed, before Slurm's signal. Up to 8 requeues
# (12 with signal_s 20, each run then at least 10 s long) leave room for a
# job slower than that.
if [ "$soak" = 1 ]; then sig=10 span=90 least=40 rq=8; else sig=20 span=55 least=20 rq=12; fi
secs=$("$se3" query "$work/ref/screen.db" "SELECT min(seconds) FROM metrics WHERE split = 'train'" --csv | tail -1)
long=$(/usr/bin/python3 -c "import math, sys; print(min(3000, max($least, math.ceil($span / float(sys.argv[1])))))" "$secs")
u=(--set stages.train.epochs="$long" --set stages.train.ensemble=1 --set stages.train.checkpoint_every=10)
"$se3" run "$work/wf.yaml" "${u[@]}" --set workdir="$work/usr1" --until basis >"$work/usr1-local.log" 2>&1 ||
  { cat "$work/usr1-local.log"; fail "the local run up to the bases"; }
"$se3" slurm "$work/wf.yaml" "${u[@]}" --set workdir="$work/usr1" --cpus-per-task 2 --time 1 --set slurm.signal_s=$sig \
  --set slurm.requeues=$rq --resume >"$work/usr1.log" 2>&1 || { cat "$work/usr1.log"; fail "se3screen slurm --resume"; }
drain 900 || fail "the jobs did not finish in 900 s"
log=$(ls "$work"/usr1/slurm/logs/06-train.sbatch-*.log)
grep -q "DUE TO TIME LIMIT" "$log" && { cat "$log"; fail "the train job ran into its time limit instead of stopping"; }
grep -q "se3screen slurm: stopped, its work kept; requeueing job" "$log" || {
  cat "$log"
  fail "the train job ($long epochs in a 1-minute limit) was not stopped by Slurm's USR1 and requeued"
}
# resumed, not started over: no epoch ends twice in the job's log. (The stop
# falls mid-epoch, when the next run says "resuming from its checkpoint", or
# between two epochs, when it just goes on with the next: which one is
# Slurm's timing, not the test's to assume.)
again=$(grep -o "train: epoch [0-9]*:" "$log" | sort | uniq -d | head -1)
[ -z "$again" ] || { cat "$log"; fail "the requeued train job did not resume: '$again' ran twice"; }
[ -f "$work/usr1/models/train-0/epoch-$long.ckpt" ] || { cat "$log"; fail "training did not finish"; }
n=$("$se3" query "$work/usr1/screen.db" "SELECT count(*) || ' ' || count(DISTINCT epoch) FROM metrics WHERE split = 'train'" --csv | tail -1)
[ "$n" = "$long $long" ] || fail "metrics: $n rows and distinct epochs, not $long $long"
# when the warning came: seconds from the job's first line to its first stop
first=$(grep -m1 -o '^\[[0-9: -]*\]' "$log" | tr -d '[]') stop=$(grep -m1 'stopped by a signal' "$log" | grep -o '^\[[0-9: -]*\]' | tr -d '[]')
echo "USR1 (signal_s $sig) $(($(date -d "$stop" +%s) - $(date -d "$first" +%s))) s after the job's first line; $long epochs of ${secs} s at the fastest"
echo "ok: USR1 before the limit: stopped, requeued $(grep -c "requeueing job" "$log") time(s), $long epochs done once each"

# 4. active learning through Slurm: the rounds chained, killed, resumed
mkdir -p "$work/al" && cp "$src/tests/data/active/library.csv" "$src/tests/data/active/scores.csv" "$work/al/"
cat >"$work/al/wf.yaml" <<EOF
workflow: al
workdir: local
run: {chunk_size: 32, progress: lines}
sets:
  library:
    - path: library.csv
stages:
  ingest: {}
  acquire: {initial: 12, batch: 8, rounds: 2, rule: greedy, seed: 3}
  dock: {oracle: table, table: scores.csv}
  graph: {cutoff: 5.0}
  train: {ensemble: 1, set: library, target: dock, epochs: 3, model: small, batch_size: 8}
  score: {set: library}
EOF
"$se3" run "$work/al/wf.yaml" >"$work/al/local.log" 2>&1 || { cat "$work/al/local.log"; fail "the local campaign"; }
"$se3" slurm "$work/al/wf.yaml" --set workdir="$work/al/cluster" --array-size 2 --cpus-per-task 2 --time 10:00 \
  --submit >"$work/al/submit.log" 2>&1 || { cat "$work/al/submit.log"; fail "se3screen slurm --submit (active learning)"; }
grep -q "submitted [0-9]*-acquire-r2.sbatch" "$work/al/submit.log" &&
  grep -q "submitted [0-9]*-r2-merge-score.sbatch" "$work/al/submit.log" ||
  { cat "$work/al/submit.log"; fail "the rounds' steps were not all submitted"; }
t0=$SECONDS
until [ "$(sqlite3 "$work/al/cluster/screen.db" "SELECT count(*) FROM rounds" 2>/dev/null || echo 0)" -ge 2 ]; do
  [ $((SECONDS - t0)) -gt 600 ] && { squeue; fail "round 1 was not decided through Slurm in 600 s"; }
  sleep 0.5
done
scancel --user=root
drain 120 || fail "the cancelled jobs did not end"
echo "cancelled the campaign with $(sqlite3 "$work/al/cluster/screen.db" "SELECT count(*) FROM rounds") rounds decided"
"$se3" slurm "$work/al/wf.yaml" --set workdir="$work/al/cluster" --array-size 2 --cpus-per-task 2 --time 10:00 \
  --resume >"$work/al/resume.log" 2>&1 || { cat "$work/al/resume.log"; fail "se3screen slurm --resume (active learning)"; }
cat "$work/al/resume.log"
grep -Eq "resuming workflow al from step [0-9]+-(r[12]-|acquire-r2)" "$work/al/resume.log" ||
  fail "--resume did not start from a step of round 1 or later"
drain 900 || fail "the resumed campaign did not finish in 900 s"
for l in "$work"/al/cluster/slurm/logs/*.log; do
  grep -q "se3screen slurm: job .* failed" "$l" && { cat "$l"; fail "a job of the campaign failed: $l"; }
done
for t in "SELECT round, mol_id, rule, quote(value), rank FROM acquisitions ORDER BY mol_id" \
         "SELECT round, rule, n_acquired, n_candidates, n_labelled, model_hash FROM rounds ORDER BY round" \
         "SELECT mol_id, quote(score) FROM docking ORDER BY mol_id" \
         "SELECT mol_id, model, quote(score) FROM scores ORDER BY mol_id, model" \
         "SELECT round, mol_id, quote(score) FROM round_scores ORDER BY round, mol_id" \
         "SELECT round, model, n_train, quote(best_valid_loss) FROM round_models ORDER BY round, model"; do
  a=$(sqlite3 "$work/al/local/screen.db" "$t") b=$(sqlite3 "$work/al/cluster/screen.db" "$t")
  [ -n "$a" ] && [ "$a" = "$b" ] || { diff <(echo "$a") <(echo "$b") | head; fail "the Slurm campaign differs: $t"; }
done
[ "$(sqlite3 "$work/al/cluster/screen.db" "SELECT count(*) FROM rounds")" = 3 ] || fail "3 rounds expected"
echo "ok: active learning through Slurm, cancelled and resumed, decides as one process does"
"$se3" slurm "$work/al/wf.yaml" --set workdir="$work/al/cluster" --resume >"$work/al/done.log" 2>&1 ||
  { cat "$work/al/done.log"; fail "--resume after the campaign"; }
grep -q "nothing to submit" "$work/al/done.log" || { cat "$work/al/done.log"; fail "--resume after the campaign submitted"; }

echo "ALL OK"
