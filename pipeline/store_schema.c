/* store_schema.c — the database's schema: the SQL of version 1 and of each
 * migration after it, the step that brings a database forward to the
 * current version (store_migrate), and the Markdown that `se3screen schema`
 * prints from that same SQL. Opening, the read-only path and the lock are
 * in store.c, above this file; it stands on store_sql.c alone. */
#include "pipeline/store_internal.h"

#include <stdio.h>
#include <string.h>

/* Version 1. Later versions append migrations to `migrations` below; a
 * database is brought forward one step at a time inside one transaction. */
const char store_schema_sql[] =
    "CREATE TABLE meta(\n"
    "  key TEXT PRIMARY KEY,          -- workflow, sets, workdir, shard, stage; scores_kept (below)\n"
    "  value TEXT                     -- workflow: the workflow file; sets: the --set overrides, one a line; scores_kept: after a merge under stages.score.merge: hits, the rank settings whose hits the kept scores hold\n"
    ") STRICT;\n"
    "CREATE TABLE runs(\n"
    "  id INTEGER PRIMARY KEY,        -- one row per se3screen run on this database\n"
    "  started TEXT NOT NULL,          -- UTC, ISO 8601\n"
    "  finished TEXT,                 -- UTC; NULL while running (or killed)\n"
    "  host TEXT NOT NULL,            -- where it ran\n"
    "  pid INTEGER NOT NULL,          -- its process id\n"
    "  command TEXT NOT NULL,          -- the command line\n"
    "  workflow TEXT,                  -- the workflow file\n"
    "  shard TEXT,                     -- 'i/n' or NULL\n"
    "  status TEXT NOT NULL,           -- running | done | stopped | failed\n"
    "  exit_code INTEGER,             -- 0, 1 failed, 2 usage, 75 stopped by a signal\n"
    "  message TEXT,                   -- last error\n"
    "  version TEXT NOT NULL          -- se3screen's version\n"
    ") STRICT;\n"
    "CREATE TABLE stage_state(\n"
    "  stage TEXT PRIMARY KEY,        -- ingest, graph, basis, train, score, rank\n"
    "  config_hash TEXT NOT NULL,      -- hash of the stage's resolved config and its input files\n"
    "  settings_hash TEXT NOT NULL,    -- hash of the stage's resolved config alone\n"
    "  n_chunks INTEGER NOT NULL,      -- chunks in the plan\n"
    "  n_items INTEGER NOT NULL,       -- molecules (or records) in the plan\n"
    "  finalized INTEGER NOT NULL DEFAULT 0, -- 1 once the stage's closing step (ingest's dedupe, train's test) is done\n"
    "  updated TEXT NOT NULL          -- UTC\n"
    ") STRICT;\n"
    "CREATE TABLE stage_chunks(\n"
    "  stage TEXT NOT NULL,           -- a stage's name\n"
    "  chunk INTEGER NOT NULL,        -- 0-based; a chunk is run.chunk_size molecules (train: one epoch of one member)\n"
    "  shard INTEGER NOT NULL,        -- the shard (array task, or process) that did it\n"
    "  config_hash TEXT NOT NULL,     -- stage_state.config_hash it was done under\n"
    "  status TEXT NOT NULL,           -- done\n"
    "  host TEXT NOT NULL,            -- where it ran\n"
    "  pid INTEGER NOT NULL,          -- the process that ran it\n"
    "  started TEXT NOT NULL,         -- UTC\n"
    "  finished TEXT NOT NULL,        -- UTC, when it committed\n"
    "  n_ok INTEGER NOT NULL,         -- molecules (or records) stored\n"
    "  n_rejected INTEGER NOT NULL,   -- molecules (or records) rejected (in rejects)\n"
    "  PRIMARY KEY(stage, chunk)\n"
    ") STRICT;\n"
    "CREATE TABLE molecules(\n"
    "  id INTEGER PRIMARY KEY,         -- input key * 1e9 + record_no (the key: ingest_files.input since version 9, the input's place + 1 before): the same in every shard\n"
    "  set_name TEXT NOT NULL,        -- the workflow's set it came in\n"
    "  source_file TEXT NOT NULL,      -- relative to the workflow file when below it\n"
    "  record_no INTEGER NOT NULL,     -- 1-based record in the source file\n"
    "  name TEXT NOT NULL,            -- the record's title (or the name column)\n"
    "  smiles TEXT NOT NULL,           -- canonical SMILES (Open Babel)\n"
    "  inchikey TEXT NOT NULL,        -- standard InChIKey (Open Babel)\n"
    "  formula TEXT NOT NULL,         -- Hill formula, with hydrogens\n"
    "  n_atoms INTEGER NOT NULL,       -- with hydrogens\n"
    "  n_heavy INTEGER NOT NULL,      -- atoms other than hydrogen\n"
    "  charge INTEGER NOT NULL,        -- total formal charge\n"
    "  coords_from TEXT NOT NULL,      -- input | gen3d\n"
    "  chunk INTEGER NOT NULL,         -- ingest chunk that wrote it\n"
    "  mol BLOB NOT NULL               -- atoms, bonds, coordinates: see chem/mol.h\n"
    ") STRICT;\n"
    "CREATE INDEX molecules_set_inchikey ON molecules(set_name, inchikey);\n"
    "CREATE INDEX molecules_set_smiles ON molecules(set_name, smiles);\n"
    "CREATE INDEX molecules_chunk ON molecules(chunk);\n"
    "CREATE TABLE labels(\n"
    "  mol_id INTEGER NOT NULL REFERENCES molecules(id) ON DELETE CASCADE, -- molecules.id\n"
    "  name TEXT NOT NULL,            -- the SD tag or CSV column (or labels: name: value)\n"
    "  value REAL NOT NULL,           -- the label's number\n"
    "  PRIMARY KEY(mol_id, name)\n"
    ") STRICT, WITHOUT ROWID;\n"
    "CREATE TABLE rejects(\n"
    "  stage TEXT NOT NULL,           -- the stage that rejected it\n"
    "  set_name TEXT NOT NULL,        -- the set of its input\n"
    "  source_file TEXT NOT NULL,     -- the input file\n"
    "  record_no INTEGER NOT NULL,    -- 1-based record in the file; 0 = the whole file\n"
    "  line INTEGER,                   -- 1-based line where the record starts, when known\n"
    "  name TEXT,                     -- the record's title, when it has one\n"
    "  chunk INTEGER NOT NULL,        -- the stage's chunk that wrote it\n"
    "  reason TEXT NOT NULL,          -- why, in words; since version 7 one text per kind (\"atoms too close\"), the specifics in detail\n"
    "  PRIMARY KEY(stage, source_file, record_no)\n"
    ") STRICT;\n"
    "CREATE INDEX rejects_chunk ON rejects(stage, chunk);\n";

/* Version 2: the geometry stages' tables. mol_id is molecules.id; there is
 * no foreign key because a shard database holds graphs without the
 * molecules they came from (the runner deletes downstream rows itself). */
static const char schema_v2_sql[] =
    "CREATE TABLE graphs(\n"
    "  mol_id INTEGER PRIMARY KEY,     -- molecules.id\n"
    "  n_nodes INTEGER NOT NULL,      -- atoms\n"
    "  n_edges INTEGER NOT NULL,      -- directed edges\n"
    "  chunk INTEGER NOT NULL,         -- graph chunk that wrote it\n"
    "  graph BLOB NOT NULL             -- edges, features, relative positions: see chem/graph.h\n"
    ") STRICT;\n"
    "CREATE INDEX graphs_chunk ON graphs(chunk);\n"
    "CREATE TABLE bases(\n"
    "  mol_id INTEGER PRIMARY KEY,     -- molecules.id (= graphs.mol_id)\n"
    "  n_edges INTEGER NOT NULL,      -- edges (= graphs.n_edges)\n"
    "  max_degree INTEGER NOT NULL,   -- highest feature degree: bases for every pair k, l <= it\n"
    "  dtype TEXT NOT NULL,            -- fp32 | fp16 | bf16\n"
    "  chunk INTEGER NOT NULL,         -- basis chunk that wrote it\n"
    "  basis BLOB NOT NULL             -- every edge's basis, in the graph's edge order: see models/basis.h\n"
    ") STRICT;\n"
    "CREATE INDEX bases_chunk ON bases(chunk);\n"
    "ALTER TABLE stage_chunks ADD COLUMN n_bytes INTEGER NOT NULL DEFAULT 0; -- blob bytes the chunk stored\n";

/* Version 3: training, scoring and ranking. */
static const char schema_v3_sql[] =
    "CREATE TABLE splits(\n"
    "  mol_id INTEGER PRIMARY KEY,     -- molecules.id of a training-set molecule with the target label\n"
    "  split TEXT NOT NULL             -- train | valid | test\n"
    ") STRICT;\n"
    "CREATE TABLE metrics(\n"
    "  model TEXT NOT NULL,            -- models.id\n"
    "  epoch INTEGER NOT NULL,         -- 1-based (0-based before version 6); the test row has the best epoch\n"
    "  split TEXT NOT NULL,            -- train | valid | test\n"
    "  loss REAL,                      -- the training loss (on standardised targets for regression)\n"
    "  mae REAL,                       -- regression: mean absolute error, in the target's units\n"
    "  rmse REAL,                      -- regression: root mean square error, in the target's units\n"
    "  r2 REAL,                        -- regression: coefficient of determination\n"
    "  spearman REAL,                  -- regression: Spearman's rank correlation\n"
    "  roc_auc REAL,                   -- classification: area under the ROC curve\n"
    "  pr_auc REAL,                    -- classification: average precision\n"
    "  ef1 REAL,                       -- classification: enrichment factor at 1 %\n"
    "  lr REAL,                        -- learning rate at the end of the epoch\n"
    "  seconds REAL,                   -- wall time of the epoch\n"
    "  PRIMARY KEY(model, epoch, split)\n"
    ") STRICT;\n"
    "CREATE TABLE models(\n"
    "  id TEXT PRIMARY KEY,            -- train/<member>\n"
    "  target TEXT NOT NULL,           -- the label it learned\n"
    "  task TEXT NOT NULL,             -- regression | classification\n"
    "  checkpoint TEXT NOT NULL,       -- the best checkpoint, relative to the workdir\n"
    "  arch TEXT NOT NULL,             -- the architecture, as key=value words (se3_config_format)\n"
    "  mean REAL NOT NULL,             -- target standardisation (train split)\n"
    "  std REAL NOT NULL,              -- and its standard deviation: a prediction is mean + std * the net's output (+ atomref)\n"
    "  best_epoch INTEGER NOT NULL,   -- 1-based epoch of best.ckpt (lowest validation loss; 0-based before version 6)\n"
    "  best_valid_loss REAL,          -- its validation loss\n"
    "  n_train INTEGER NOT NULL,       -- molecules in the train split\n"
    "  n_valid INTEGER NOT NULL,       -- in the valid split\n"
    "  n_test INTEGER NOT NULL         -- in the test split\n"
    ") STRICT;\n"
    "CREATE TABLE scores(\n"
    "  mol_id INTEGER NOT NULL,        -- molecules.id\n"
    "  model TEXT NOT NULL,            -- models.id\n"
    "  target TEXT NOT NULL,           -- the label predicted (models.target)\n"
    "  value REAL NOT NULL,            -- the prediction in the target's units (classification: probability)\n"
    "  std REAL,                       -- spread of an ensemble's predictions; NULL for one model\n"
    "  chunk INTEGER NOT NULL,         -- score chunk that wrote it\n"
    "  PRIMARY KEY(mol_id, model)\n"
    ") STRICT;\n"
    "CREATE INDEX scores_chunk ON scores(chunk);\n"
    "CREATE TABLE ranks(\n"
    "  rank INTEGER PRIMARY KEY,       -- 1 = the best hit\n"
    "  mol_id INTEGER NOT NULL,        -- molecules.id\n"
    "  model TEXT NOT NULL,           -- scores.model\n"
    "  target TEXT NOT NULL,          -- scores.target\n"
    "  value REAL NOT NULL,           -- the score (scores.value)\n"
    "  std REAL                       -- scores.std\n"
    ") STRICT;\n"
    "CREATE VIEW ranked_hits AS\n"
    "  SELECT r.rank, m.name, m.smiles, m.inchikey, r.target, r.value AS score, r.std, m.set_name,\n"
    "         m.source_file, m.record_no, r.mol_id\n"
    "  FROM ranks r JOIN molecules m ON m.id = r.mol_id ORDER BY r.rank;\n";

/* Version 4: the batch scheduler's job of each run (Slurm's). */
static const char schema_v4_sql[] =
    "ALTER TABLE runs ADD COLUMN job TEXT; -- the Slurm job that ran it: JOBID, or ARRAYJOBID_TASKID for an array task\n";

/* Version 5: each model's predictions on its held-out molecules, which the
 * report's parity plot, residuals and ROC and enrichment curves draw. */
static const char schema_v5_sql[] =
    "CREATE TABLE predictions(\n"
    "  model TEXT NOT NULL,            -- models.id\n"
    "  mol_id INTEGER NOT NULL,        -- molecules.id of a molecule of the split\n"
    "  split TEXT NOT NULL,            -- test: the held-out molecules, predicted by the best checkpoint\n"
    "  label REAL NOT NULL,            -- the molecule's label (the model's target)\n"
    "  value REAL NOT NULL,            -- the prediction in the target's units (classification: probability)\n"
    "  PRIMARY KEY(model, mol_id)\n"
    ") STRICT;\n"
    "ALTER TABLE models ADD COLUMN device TEXT; -- what trained it: the backend, its device and the precision\n";

/* Version 6 (issue 31): one name for the score, scores.score as
 * ranked_hits.score (it was scores.value and ranks.value); the content hash
 * of the model that made each score; epochs counted from 1 everywhere, as
 * the log counts them (metrics.epoch and models.best_epoch were 0-based).
 * The epochs move through negative numbers: a row set to epoch + 1 at once
 * would meet the next row's key on the way. */
static const char schema_v6_sql[] =
    "ALTER TABLE scores RENAME COLUMN value TO score; -- the prediction in the target's units (classification: probability)\n"
    "ALTER TABLE ranks RENAME COLUMN value TO score; -- the hit's score (scores.score)\n"
    "ALTER TABLE scores ADD COLUMN model_hash TEXT; -- content hash of the model's checkpoint files (16 hex digits): the same hash, the same model\n"
    "DROP VIEW ranked_hits;\n"
    "CREATE VIEW ranked_hits AS\n"
    "  SELECT r.rank, m.name, m.smiles, m.inchikey, r.target, r.score, r.std, m.set_name,\n"
    "         m.source_file, m.record_no, r.mol_id\n"
    "  FROM ranks r JOIN molecules m ON m.id = r.mol_id ORDER BY r.rank;\n"
    "UPDATE metrics SET epoch = -(epoch + 1);\n"
    "UPDATE metrics SET epoch = -epoch; -- metrics.epoch: 1-based from here on\n"
    "UPDATE models SET best_epoch = best_epoch + 1; -- models.best_epoch: 1-based from here on\n";

/* Version 7 (issue 32): a reject's reason is one text per kind ("atoms too
 * close", "radical"), so that the rejects group by it; the atom it concerns
 * and the specifics (which atoms, how far apart) have their own columns.
 * Rows written before keep their reason as it was, the specifics in it, and
 * no atom or detail. */
static const char schema_v7_sql[] =
    "ALTER TABLE rejects ADD COLUMN atom INTEGER; -- the 1-based atom the reason concerns, numbered as in the molecule checked (the input's order, added hydrogens after it); NULL when none\n"
    "ALTER TABLE rejects ADD COLUMN detail TEXT; -- the specifics (\"atoms 3 and 7 are 0.42 Å apart (< 0.5)\"); NULL when the reason says all\n";

/* Version 8 (issue 35): work keyed by what it depends on. A molecule's
 * content hash, and beside every graph, basis and score the hash of the
 * molecule it was made from, so that a rerun keeps the rows whose molecule
 * is unchanged and redoes only the others; a reject of those stages names
 * its molecule the same way; a stage's settings chain (its settings and
 * those of the stages before it) decides when all of a stage's rows go.
 * The hashes come after the blobs in their rows: the (id, hash) indexes
 * let a rerun compare them without reading a blob. */
static const char schema_v8_sql[] =
    "ALTER TABLE molecules ADD COLUMN mol_hash INTEGER; -- 64-bit hash of mol (the blob); NULL in rows written before version 8\n"
    "ALTER TABLE graphs ADD COLUMN mol_hash INTEGER; -- molecules.mol_hash of the molecule it was built from: a rerun rebuilds the graph when they differ\n"
    "ALTER TABLE bases ADD COLUMN mol_hash INTEGER; -- graphs.mol_hash of the graph it was computed from\n"
    "ALTER TABLE scores ADD COLUMN mol_hash INTEGER; -- graphs.mol_hash of the graph scored: a rerun scores the molecule again when they differ\n"
    "ALTER TABLE rejects ADD COLUMN mol_id INTEGER; -- graph, basis, score: the molecule rejected (molecules.id); ingest (since version 9): the id its record would have had\n"
    "ALTER TABLE rejects ADD COLUMN mol_hash INTEGER; -- graph, basis, score: its molecules.mol_hash then: the reject stands while the molecule is unchanged\n"
    "CREATE INDEX rejects_mol ON rejects(stage, mol_id);\n"
    "CREATE INDEX molecules_hash ON molecules(id, mol_hash);\n"
    "CREATE INDEX graphs_hash ON graphs(mol_id, mol_hash);\n"
    "CREATE INDEX bases_hash ON bases(mol_id, mol_hash);\n"
    "ALTER TABLE stage_state ADD COLUMN chain_hash TEXT; -- hash of the stage's settings and those of the stages before it, without the inputs: a change discards the stage's rows\n";

/* Version 9 (issue 35): ingest keyed by input file. A molecule's id is its
 * input's key times 1e9 plus its record: the key comes from the input's set
 * and path (not its place in the workflow), so adding, removing or moving a
 * file leaves the other files' ids. ingest_files is the inputs as ingest
 * last planned them, and ingest_plan their parts (chunks of one file) with
 * each one's key (its records' contents and how they are read); ingest_parts
 * the parts it finished, each under its key then (mol_key) and what its
 * file's labels came from (label_key): a part is read again when its
 * mol_key changes, and only its labels when its label_key does.
 * Dedupe no longer deletes: a duplicate keeps its row, `duplicates` names
 * the molecule it repeats, and the stages after ingest leave it out; so a
 * new file that changes which copy comes first costs no stored work. */
static const char schema_v9_sql[] =
    "CREATE TABLE ingest_files(\n"
    "  input INTEGER PRIMARY KEY,      -- the input's key: molecules.id / 1e9 for its molecules\n"
    "  position INTEGER NOT NULL,     -- its place among the workflow's inputs (0 = first): dedupe keeps the first\n"
    "  set_name TEXT NOT NULL,         -- the set it is read into\n"
    "  source_file TEXT NOT NULL,     -- as in molecules.source_file\n"
    "  mol_key TEXT NOT NULL,          -- hash of its contents and how they are read (format, columns)\n"
    "  label_key TEXT NOT NULL,       -- hash of what its labels come from (labels:, a labels_csv and its contents)\n"
    "  n_records INTEGER NOT NULL,     -- records planned (empty ones not listed one by one count as one)\n"
    "  n_parts INTEGER NOT NULL       -- its chunks (run.chunk_size records each)\n"
    ") STRICT;\n"
    "CREATE TABLE ingest_parts(\n"
    "  input INTEGER NOT NULL,         -- ingest_files.input\n"
    "  part INTEGER NOT NULL,         -- 0-based chunk of the file\n"
    "  mol_key TEXT NOT NULL,          -- the part's key when it was read: its records' contents and how they are read\n"
    "  label_key TEXT NOT NULL,       -- the file's label_key when its labels were read\n"
    "  first_record INTEGER NOT NULL,  -- its first and last records (record_no; 0: the whole file)\n"
    "  last_record INTEGER NOT NULL,\n"
    "  n_ok INTEGER NOT NULL,          -- molecules stored\n"
    "  n_rejected INTEGER NOT NULL,   -- records rejected\n"
    "  PRIMARY KEY(input, part)\n"
    ") STRICT;\n"
    "CREATE TABLE ingest_plan(\n"
    "  input INTEGER NOT NULL,         -- ingest_files.input\n"
    "  part INTEGER NOT NULL,         -- 0-based part of the file\n"
    "  mol_key TEXT NOT NULL,          -- the part's key in the plan of ingest's last run (or shard): its records' contents and how they are read\n"
    "  PRIMARY KEY(input, part)\n"
    ") STRICT;\n"
    "CREATE TABLE duplicates(\n"
    "  mol_id INTEGER PRIMARY KEY,     -- a molecule that repeats another of its set (stages.ingest.dedupe): the stages after ingest leave it out\n"
    "  of_id INTEGER NOT NULL,        -- the molecule it repeats: the first in the workflow's order (its file's place, then its record)\n"
    "  by TEXT NOT NULL                -- inchikey or smiles\n"
    ") STRICT;\n";

/* Version 10 (issue 36): docking. Each molecule of the docked set with
 * its best AutoDock Vina affinity and its pose (the molecule as stored, at
 * the coordinates Vina gave it), keyed like a graph by the molecule it was
 * made from, and by the set-up it was docked under; or its score from a
 * table computed elsewhere, keyed by the SMILES as written in the input,
 * which molecules now keep. Active learning's decisions: each round
 * (rounds) and each molecule it acquired (acquisitions). */
static const char schema_v10_sql[] =
    "CREATE TABLE docking(\n"
    "  mol_id INTEGER PRIMARY KEY,     -- molecules.id\n"
    "  score REAL NOT NULL,            -- the best pose's affinity, kcal/mol (Vina's; lower is better)\n"
    "  pose BLOB NOT NULL,             -- the molecule at that pose: its atoms, bonds and atom order as stored, the hydrogens Vina does not place as counts (chem/mol.h)\n"
    "  seconds REAL NOT NULL,          -- wall time of its docking (ligand preparation and Vina)\n"
    "  chunk INTEGER NOT NULL,         -- dock chunk that wrote it\n"
    "  mol_hash INTEGER,               -- molecules.mol_hash of the molecule docked: a rerun docks it again when they differ\n"
    "  setup TEXT NOT NULL             -- hash of Vina's version, the receptor file, the box, exhaustiveness and seed (meta 'dock_setup': the set-up of the last run)\n"
    ") STRICT;\n"
    "CREATE INDEX docking_chunk ON docking(chunk);\n"
    "CREATE INDEX docking_hash ON docking(mol_id, mol_hash);\n"
    "CREATE TABLE acquisitions(\n"
    "  mol_id INTEGER PRIMARY KEY,     -- molecules.id: a molecule is acquired once\n"
    "  round INTEGER NOT NULL,         -- rounds.round it was picked in (0: the random start)\n"
    "  rule TEXT NOT NULL,             -- random | greedy | ucb: the rule that picked it\n"
    "  value REAL,                     -- the rule's value for it, in the score's direction (greedy: the prediction; ucb: the prediction with beta x uncertainty to the good side); NULL for random\n"
    "  prediction REAL,                -- the model's prediction of its score then (NULL: round 0, random)\n"
    "  uncertainty REAL,               -- the ensemble's spread then, calibrated (ucb: rounds.calibration x scores.std)\n"
    "  rank INTEGER NOT NULL           -- 1 = picked first in its round\n"
    ") STRICT;\n"
    "CREATE INDEX acquisitions_round ON acquisitions(round, rank);\n"
    "CREATE TABLE rounds(\n"
    "  round INTEGER PRIMARY KEY,      -- 0, 1, ...: one a decision of stages.acquire\n"
    "  rule TEXT NOT NULL,             -- the rule that decided it (round 0: random)\n"
    "  n_acquired INTEGER NOT NULL,    -- molecules it picked\n"
    "  n_candidates INTEGER NOT NULL,  -- molecules it chose among (not acquired before; with a score, for a model's rule)\n"
    "  n_labelled INTEGER NOT NULL,    -- molecules of the set with a docking score when it was decided: what the model had learned\n"
    "  model_hash TEXT,                -- scores.model_hash of the predictions it chose by; NULL for random\n"
    "  calibration REAL,               -- ucb: the factor c on the ensemble's spread (c^2: the test split's mean square error over its mean square spread); NULL otherwise\n"
    "  n_calibration INTEGER NOT NULL, -- held-out molecules the calibration used\n"
    "  decided TEXT NOT NULL           -- UTC\n"
    ") STRICT;\n"
    "ALTER TABLE scores ADD COLUMN members BLOB; -- an ensemble's members' own predictions, float64 little-endian in member order (the first 64); NULL for one model\n"
    "ALTER TABLE molecules ADD COLUMN input_smiles TEXT; -- a SMILES record's SMILES as written in its file (a table of scores is keyed by it: stages.dock.oracle); NULL for other formats and rows written before version 10\n";

/* Version 11 (issue 36): active learning's history, round by round. Each
 * round after the first is decided by the model trained on the labels of
 * the rounds before it; models, scores and the ledger hold only the newest
 * such work, so the decision keeps a copy of what it was decided by. */
static const char schema_v11_sql[] =
    "ALTER TABLE stage_chunks ADD COLUMN round INTEGER; -- active learning: the newest round decided (rounds.round) when the chunk committed; NULL without stages.acquire\n"
    "CREATE TABLE round_models(\n"
    "  round INTEGER NOT NULL,         -- rounds.round this model decided (it learned the labels of the rounds before)\n"
    "  model TEXT NOT NULL,            -- models.id then (train/<member>)\n"
    "  target TEXT NOT NULL,           -- models.target\n"
    "  checkpoint TEXT,                -- its best checkpoint as kept for the round, relative to the workdir: models/rounds/<round>/train-<member>.ckpt; NULL when it could not be kept\n"
    "  best_epoch INTEGER NOT NULL,    -- models.best_epoch\n"
    "  best_valid_loss REAL,           -- models.best_valid_loss\n"
    "  n_train INTEGER NOT NULL,       -- models.n_train: the labelled molecules it trained on\n"
    "  n_valid INTEGER NOT NULL,       -- models.n_valid\n"
    "  n_test INTEGER NOT NULL,        -- models.n_test\n"
    "  test_mae REAL,                  -- metrics on the test split (regression): mean absolute error\n"
    "  test_rmse REAL,                 -- root mean square error\n"
    "  test_spearman REAL,             -- Spearman's rank correlation\n"
    "  PRIMARY KEY(round, model)\n"
    ") STRICT;\n"
    "CREATE TABLE round_scores(\n"
    "  round INTEGER NOT NULL,         -- rounds.round these scores decided\n"
    "  mol_id INTEGER NOT NULL,        -- molecules.id: every molecule of the set scored then (stages.acquire.keep_scores)\n"
    "  score REAL NOT NULL,            -- scores.score: the prediction (an ensemble's mean)\n"
    "  std REAL,                       -- scores.std: the ensemble's spread, uncalibrated; NULL for one model\n"
    "  members BLOB,                   -- scores.members\n"
    "  PRIMARY KEY(round, mol_id)\n"
    ") STRICT;\n"
    "CREATE TABLE round_chunks(\n"
    "  round INTEGER NOT NULL,         -- rounds.round the work led to: the chunks committed after round - 1 was decided and before round was (docking round - 1's molecules, training, scoring)\n"
    "  stage TEXT NOT NULL,            -- stage_chunks.stage\n"
    "  chunk INTEGER NOT NULL,         -- stage_chunks.chunk\n"
    "  host TEXT NOT NULL,             -- stage_chunks.host\n"
    "  pid INTEGER NOT NULL,           -- stage_chunks.pid\n"
    "  started TEXT NOT NULL,          -- stage_chunks.started (UTC)\n"
    "  finished TEXT NOT NULL,         -- stage_chunks.finished (UTC)\n"
    "  n_ok INTEGER NOT NULL,          -- stage_chunks.n_ok\n"
    "  n_rejected INTEGER NOT NULL,    -- stage_chunks.n_rejected\n"
    "  PRIMARY KEY(round, stage, chunk)\n"
    ") STRICT;\n";

/* Version 12 (issue 55): every pose a docking keeps (stages.dock.modes),
 * with Vina's terms. The docking row keeps the best pose and its score, as
 * before; a docking made before this version has its one pose here as mode
 * 1, Vina's terms unknown. A docking's poses go with it (the trigger: a
 * docking pruned, cleared or redone takes its poses along). Each hit's
 * nearest training molecule and how similar it is, an applicability domain
 * in the hits' own files (ranked_hits' last two columns; hits ranked
 * before this version have none until rank runs again). And the time
 * each stage took in each run, stopped and failed runs included (a chunk
 * cut short leaves no ledger row, though a docking keeps what it docked),
 * so the report sums a stage's time over every run of the workdir. And
 * an evaluation that says how thin it is: each split's molecules,
 * compounds and actives as train drew them, and the bootstrap interval of
 * each classification metric on the test split. */
static const char schema_v12_sql[] =
    "CREATE TABLE poses(\n"
    "  mol_id INTEGER NOT NULL,        -- docking.mol_id\n"
    "  mode INTEGER NOT NULL,          -- 1 = the best pose (docking.pose), 2, ...: Vina's order, best first\n"
    "  score REAL NOT NULL,            -- its affinity, kcal/mol (Vina's; lower is better)\n"
    "  inter REAL,                     -- Vina's intermolecular term, kcal/mol; NULL where not known (a docking before version 12)\n"
    "  intra REAL,                     -- Vina's intramolecular term, kcal/mol; NULL where not known\n"
    "  rmsd_lb REAL NOT NULL,          -- RMSD from the best pose, lower bound, Å (Vina's; 0 for mode 1)\n"
    "  rmsd_ub REAL NOT NULL,          -- RMSD from the best pose, upper bound, Å\n"
    "  pose BLOB NOT NULL,             -- the molecule at this pose (as docking.pose)\n"
    "  PRIMARY KEY(mol_id, mode)\n"
    ") STRICT;\n"
    "INSERT INTO poses(mol_id, mode, score, inter, intra, rmsd_lb, rmsd_ub, pose) SELECT mol_id, 1, score, NULL, NULL, 0, 0, pose FROM docking WHERE length(pose) > 0;\n"
    "CREATE TRIGGER docking_poses AFTER DELETE ON docking BEGIN DELETE FROM poses WHERE mol_id = old.mol_id; END; -- a docking deleted takes its poses along\n"
    "ALTER TABLE ranks ADD COLUMN nearest_id INTEGER; -- molecules.id of the training molecule (splits: train) most similar to the hit; NULL when this database holds no training set (score-only, dock-only) or past rank 10000\n"
    "ALTER TABLE ranks ADD COLUMN similarity REAL; -- its Tanimoto similarity to the hit, 0 to 1 (Morgan fingerprints of radius 2, 2048 bits: chem/fingerprint.h): how near the hit is to what the model learned from\n"
    "DROP VIEW ranked_hits;\n"
    "CREATE VIEW ranked_hits AS\n"
    "  SELECT r.rank, m.name, m.smiles, m.inchikey, r.target, r.score, r.std, m.set_name,\n"
    "         m.source_file, m.record_no, r.mol_id, coalesce(nullif(n.name, ''), n.smiles) AS nearest_train, r.similarity\n"
    "  FROM ranks r JOIN molecules m ON m.id = r.mol_id LEFT JOIN molecules n ON n.id = r.nearest_id ORDER BY r.rank;\n"
    "CREATE TABLE stage_runs(\n"
    "  stage TEXT NOT NULL,            -- a stage's name\n"
    "  host TEXT NOT NULL,             -- where it ran (runs.host)\n"
    "  pid INTEGER NOT NULL,           -- the process (runs.pid)\n"
    "  started TEXT NOT NULL,          -- UTC, to the millisecond: when the stage began in that run\n"
    "  finished TEXT NOT NULL,         -- UTC: when it ended there\n"
    "  seconds REAL NOT NULL,          -- its wall time in that run\n"
    "  n_done INTEGER NOT NULL,        -- items (molecules, records) that run finished in it\n"
    "  status TEXT NOT NULL,           -- done | stopped | failed\n"
    "  shard TEXT,                     -- 'i/n' for a shard of an array, else NULL\n"
    "  PRIMARY KEY(stage, host, pid, started)\n"
    ") STRICT;\n"
    "CREATE TABLE split_counts(\n"
    "  split TEXT PRIMARY KEY,         -- train | valid | test\n"
    "  molecules INTEGER NOT NULL,     -- molecules of the split (those with the target label)\n"
    "  compounds INTEGER NOT NULL,     -- distinct compounds among them: the InChIKey's first block (the skeleton; stereo, charge and protonation left out), which random, scaffold and cluster splits never divide\n"
    "  actives INTEGER,                -- classification: molecules labelled 1; NULL for regression\n"
    "  active_compounds INTEGER        -- classification: distinct compounds among the actives; NULL for regression\n"
    ") STRICT;\n"
    "ALTER TABLE metrics ADD COLUMN roc_auc_lo REAL; -- classification, test split: the 95 % bootstrap interval of roc_auc (1000 stratified resamples, percentile), its lower end\n"
    "ALTER TABLE metrics ADD COLUMN roc_auc_hi REAL; -- and its upper end\n"
    "ALTER TABLE metrics ADD COLUMN pr_auc_lo REAL; -- the same of pr_auc\n"
    "ALTER TABLE metrics ADD COLUMN pr_auc_hi REAL; -- its upper end\n"
    "ALTER TABLE metrics ADD COLUMN ef1_lo REAL; -- the same of ef1\n"
    "ALTER TABLE metrics ADD COLUMN ef1_hi REAL; -- its upper end\n";

/* Version 13 (issue 54): a molecule of several conformers
 * (stages.ingest.conformers) is scored on each and its score aggregated
 * (stages.score.aggregate); the conformers' spread is kept beside the score
 * and goes with the hit. Scores and hits made before this version, and
 * those of one conformer, have none (NULL: no spread measured). */
static const char schema_v13_sql[] =
    "ALTER TABLE scores ADD COLUMN conformer_sd REAL; -- the sample standard deviation over the molecule's conformers of their predictions (an ensemble's mean each); NULL for one conformer\n"
    "ALTER TABLE ranks ADD COLUMN conformer_sd REAL; -- scores.conformer_sd\n"
    "DROP VIEW ranked_hits;\n"
    "CREATE VIEW ranked_hits AS\n"
    "  SELECT r.rank, m.name, m.smiles, m.inchikey, r.target, r.score, r.std, m.set_name,\n"
    "         m.source_file, m.record_no, r.mol_id, coalesce(nullif(n.name, ''), n.smiles) AS nearest_train, r.similarity,\n"
    "         r.conformer_sd\n"
    "  FROM ranks r JOIN molecules m ON m.id = r.mol_id LEFT JOIN molecules n ON n.id = r.nearest_id ORDER BY r.rank;\n";

/* Version 14 (issue 67): what became of each molecule's 3D shape when it
 * was held against the bounds of chem/shape.h (every bond, 1-3 distance and
 * aromatic ring): within them as made or read, fixed after a generated one
 * failed, or generated because its file's own failed
 * (stages.ingest.input_shape: regenerate), for the report's count. The
 * molecules stored before this version were never checked (NULL). */
static const char schema_v14_sql[] =
    "ALTER TABLE molecules ADD COLUMN shape TEXT; -- ok: within the bounds of chem/shape.h as generated or read (or no 3D coordinates) | fixed: the generated shape was out of bounds and a fix brought it within | regenerated: its file's coordinates were out of bounds and it got a generated shape (stages.ingest.input_shape: regenerate); NULL for rows written before version 14\n";

/* Version 15 (issue 70): a hit's
 * nearest training molecule where the model that scored it comes from
 * elsewhere (predict, stages.score.checkpoint): the model carries its
 * training set (stages/train_set.h) and the name is kept here, there being
 * no molecules row to point at. Hits ranked before this version have none
 * until rank runs again. */
static const char schema_v15_sql[] =
    "ALTER TABLE ranks ADD COLUMN nearest_name TEXT; -- the nearest training molecule's name (else its SMILES) as the "
    "model that scored the hit carries it, where that model comes from elsewhere (stages.score.checkpoint, predict) "
    "and nearest_id is NULL; NULL otherwise\n"
    "DROP VIEW ranked_hits;\n"
    "CREATE VIEW ranked_hits AS\n"
    "  SELECT r.rank, m.name, m.smiles, m.inchikey, r.target, r.score, r.std, m.set_name,\n"
    "         m.source_file, m.record_no, r.mol_id, coalesce(nullif(n.name, ''), n.smiles, r.nearest_name) AS "
    "nearest_train,\n"
    "         r.similarity, r.conformer_sd\n"
    "  FROM ranks r JOIN molecules m ON m.id = r.mol_id LEFT JOIN molecules n ON n.id = r.nearest_id ORDER BY "
    "r.rank;\n";

/* Version 16 (issue 70, stereo said): a molecule whose input left
 * stereocentres or stereo double bonds unspecified (CC(N)C(=O)O, CC=CC) is
 * scored and docked as the isomer its generated 3D shape has; that isomer
 * is named, with the count of what the input left free, and goes with the
 * hit (ranked_hits.isomer_smiles, last). Rows written before this version
 * were never looked at (NULL). */
static const char schema_v16_sql[] =
    "ALTER TABLE molecules ADD COLUMN stereo_free INTEGER; -- stereocentres and stereo double bonds whose "
    "configuration the input did not give and the generated 3D shape fixed (0: none, or the shape is the file's own); "
    "NULL for rows written before version 16\n"
    "ALTER TABLE molecules ADD COLUMN isomer_smiles TEXT; -- where stereo_free > 0: the isomer the molecule was scored "
    "and docked as, the canonical isomeric SMILES (Open Babel) of the configuration its 3D shape has (every conformer "
    "has the same); NULL otherwise\n"
    "DROP VIEW ranked_hits;\n"
    "CREATE VIEW ranked_hits AS\n"
    "  SELECT r.rank, m.name, m.smiles, m.inchikey, r.target, r.score, r.std, m.set_name,\n"
    "         m.source_file, m.record_no, r.mol_id, coalesce(nullif(n.name, ''), n.smiles, r.nearest_name) AS "
    "nearest_train, r.similarity,\n"
    "         r.conformer_sd, m.isomer_smiles\n"
    "  FROM ranks r JOIN molecules m ON m.id = r.mol_id LEFT JOIN molecules n ON n.id = r.nearest_id ORDER BY "
    "r.rank;\n";

static const char *const migrations[] = {
    /* to version 1 */ store_schema_sql,
    /* to version 2 */ schema_v2_sql,
    /* to version 3 */ schema_v3_sql,
    /* to version 4 */ schema_v4_sql,
    /* to version 5 */ schema_v5_sql,
    /* to version 6 */ schema_v6_sql,
    /* to version 7 */ schema_v7_sql,
    /* to version 8 */ schema_v8_sql,
    /* to version 9 */ schema_v9_sql,
    /* to version 10 */ schema_v10_sql,
    /* to version 11 */ schema_v11_sql,
    /* to version 12 */ schema_v12_sql,
    /* to version 13 */ schema_v13_sql,
    /* to version 14 */ schema_v14_sql,
    /* to version 15 */ schema_v15_sql,
    /* to version 16 */ schema_v16_sql,
};
_Static_assert(sizeof migrations / sizeof migrations[0] == STORE_SCHEMA_VERSION, "one migration per schema version");

/* keep_open: the migration's transaction is left open for the caller to
 * go on in and commit (`upgrade`: the schema and the stages' conversion
 * land together or not at all). */
int store_migrate(struct store *s, int keep_open, struct se3_error *err) {
  long long app = store_int(s->db, "PRAGMA application_id", 0);
  long long ver = store_int(s->db, "PRAGMA user_version", 0);
  long long n_tables = store_int(s->db, "SELECT count(*) FROM sqlite_schema", 0);
  if (app != STORE_APPLICATION_ID && !(app == 0 && ver == 0 && n_tables == 0)) {
    se3_error_set(err, SE3_ERR_DB, "not a se3screen database (application_id %lld)", app);
    se3_error_at(err, s->path, 0, 0);
    return -1;
  }
  const int n_mig = (int)(sizeof migrations / sizeof migrations[0]);
  if (ver > n_mig) {
    se3_error_set(err, SE3_ERR_DB, "schema version %lld is newer than this se3screen (%d); upgrade se3screen", ver,
                  n_mig);
    se3_error_at(err, s->path, 0, 0);
    return -1;
  }
  if (ver == n_mig) return 0;
  if (store_exec(s->db, "BEGIN IMMEDIATE", err)) return -1;
  /* Re-read under the write lock: another process may have migrated. */
  ver = store_int(s->db, "PRAGMA user_version", 0);
  for (long long v = ver; v < n_mig; v++) {
    if (store_exec(s->db, migrations[v], err)) goto fail;
  }
  char sql[128];
  snprintf(sql, sizeof sql, "PRAGMA application_id=%d; PRAGMA user_version=%d", STORE_APPLICATION_ID, n_mig);
  if (store_exec(s->db, sql, err)) goto fail;
  if (!keep_open && store_exec(s->db, "COMMIT", err)) goto fail;
  return 0;
fail:
  sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  return -1;
}

/* ---- the schema, documented from its own SQL ------------------------------ */

enum { DOC_MAX_TABLES = 32, DOC_MAX_COLS = 32, DOC_MAX_LINE = 512 };

struct doc_col {
  char name[64], def[160], note[DOC_MAX_LINE];
  int version;
};
struct doc_table {
  char name[64], kind[8]; /* "table" | "view" */
  int version, n_cols;
  struct doc_col col[DOC_MAX_COLS];
  char keys[DOC_MAX_LINE], indexes[DOC_MAX_LINE], triggers[DOC_MAX_LINE], view[1024];
};

static char *trim(char *s) {
  while (*s == ' ') s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == ',' || s[n - 1] == ';')) s[--n] = 0;
  return s;
}

static struct doc_table *doc_find(struct doc_table *t, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(t[i].name, name)) return &t[i];
  return NULL;
}

static void md(FILE *out, const char *s) { /* a table cell: | escaped */
  for (; *s; s++) {
    if (*s == '|') fputc('\\', out);
    fputc(*s, out);
  }
}

static void doc_append(char *dst, size_t n, const char *sep, const char *s) {
  size_t len = strlen(dst);
  snprintf(dst + len, n - len, "%s%s", len ? sep : "", s);
}

int store_schema_doc(FILE *out) {
  static struct doc_table t[DOC_MAX_TABLES];
  int nt = 0;
  memset(t, 0, sizeof t);
  for (size_t v = 0; v < sizeof migrations / sizeof *migrations; v++) {
    struct doc_table *cur = NULL;
    const char *p = migrations[v];
    while (*p) {
      char line[DOC_MAX_LINE * 2];
      size_t n = strcspn(p, "\n");
      snprintf(line, sizeof line, "%.*s", (int)n, p);
      p += n + (p[n] == '\n');
      char *note = strstr(line, "-- ");
      if (note) {
        *note = 0;
        note += 3;
      }
      int ends = strchr(line, ';') != NULL; /* the statement's end */
      char raw[sizeof line];
      snprintf(raw, sizeof raw, "%s", line + strspn(line, " "));
      raw[strcspn(raw, ";")] = 0;
      char *def = trim(line), name[64];
      if (!*def) continue;
      if (!strncmp(def, "UPDATE ", 7) || !strncmp(def, "INSERT ", 7)) { /* a data migration: nothing to document */
        cur = NULL;
        continue;
      }
      if (sscanf(def, "DROP VIEW %63s", name) == 1) { /* redefined below: it keeps its place and version */
        if (!doc_find(t, nt, name)) return -1;
        cur = NULL;
        continue;
      }
      if (sscanf(def, "CREATE VIEW %63s AS", name) == 1 && (cur = doc_find(t, nt, name))) {
        cur->view[0] = 0;
        continue;
      }
      if (sscanf(def, "CREATE TABLE %63[^( ](", name) == 1 || sscanf(def, "CREATE VIEW %63s AS", name) == 1) {
        if (nt == DOC_MAX_TABLES) return -1;
        cur = &t[nt++];
        snprintf(cur->name, sizeof cur->name, "%s", name);
        snprintf(cur->kind, sizeof cur->kind, "%s", def[7] == 'T' ? "table" : "view");
        cur->version = (int)v + 1;
        continue;
      }
      char on[64], cols[256];
      if (sscanf(def, "CREATE INDEX %63s ON %63[^(](%255[^)])", name, on, cols) == 3) {
        struct doc_table *x = doc_find(t, nt, on);
        if (!x) return -1;
        char one[DOC_MAX_LINE];
        snprintf(one, sizeof one, "`%s` (%s)", name, cols);
        doc_append(x->indexes, sizeof x->indexes, ", ", one);
        cur = NULL;
        continue;
      }
      char event[16];
      if (sscanf(def, "CREATE TRIGGER %63s AFTER %15s ON %63s", name, event, on) == 3) {
        struct doc_table *x = doc_find(t, nt, on);
        if (!x) return -1;
        char one[DOC_MAX_LINE];
        snprintf(one, sizeof one, "`%s` (after a %s: %.400s)", name, event, note ? trim(note) : "");
        doc_append(x->triggers, sizeof x->triggers, ", ", one);
        cur = NULL;
        continue;
      }
      char col[64], to[64];
      if (sscanf(def, "ALTER TABLE %63s RENAME COLUMN %63s TO %63s", on, col, to) == 3) {
        struct doc_table *x = doc_find(t, nt, on);
        struct doc_col *c = NULL;
        for (int k = 0; x && k < x->n_cols; k++)
          if (!strcmp(x->col[k].name, col)) c = &x->col[k];
        if (!c) return -1;
        char was[96];
        snprintf(was, sizeof was, " (`%s` before version %d)", col, (int)v + 1);
        if (note) snprintf(c->note, sizeof c->note, "%s", trim(note));
        doc_append(c->note, sizeof c->note, "", was);
        snprintf(c->name, sizeof c->name, "%s", to);
        cur = NULL;
        continue;
      }
      if (sscanf(def, "ALTER TABLE %63s ADD COLUMN %63s", on, col) == 2) {
        struct doc_table *x = doc_find(t, nt, on);
        if (!x || x->n_cols == DOC_MAX_COLS) return -1;
        struct doc_col *c = &x->col[x->n_cols++];
        snprintf(c->name, sizeof c->name, "%s", col);
        const char *rest = strstr(def, col) + strlen(col);
        snprintf(c->def, sizeof c->def, "%s", rest + (*rest == ' '));
        snprintf(c->note, sizeof c->note, "%s", note ? note : "");
        c->version = (int)v + 1;
        cur = NULL;
        continue;
      }
      if (!cur) return -1;
      if (cur->kind[0] == 'v') { /* the view's SELECT, line by line */
        doc_append(cur->view, sizeof cur->view, "\n", raw);
        if (ends) cur = NULL;
        continue;
      }
      if (def[0] == ')') { /* the table's end: ") STRICT;" */
        cur = NULL;
        continue;
      }
      if (!strncmp(def, "PRIMARY KEY(", 12) || !strncmp(def, "UNIQUE(", 7)) {
        doc_append(cur->keys, sizeof cur->keys, ", ", def);
        continue;
      }
      if (cur->n_cols == DOC_MAX_COLS || sscanf(def, "%63s", col) != 1) return -1;
      struct doc_col *c = &cur->col[cur->n_cols++];
      snprintf(c->name, sizeof c->name, "%s", col);
      const char *rest = def + strlen(col);
      snprintf(c->def, sizeof c->def, "%s", rest + (*rest == ' '));
      snprintf(c->note, sizeof c->note, "%s", note ? trim(note) : "");
      c->version = (int)v + 1;
    }
  }
  fprintf(out,
          "# The se3screen database (schema version %d)\n\n"
          "Generated by `se3screen schema` from the SQL of the schema and its migrations\n"
          "([`pipeline/store_schema.c`](../pipeline/store_schema.c)); `test_cli` fails when this file\n"
          "and that output differ. A workdir's `screen.db` and every shard database have\n"
          "these tables; `PRAGMA user_version` is the schema version. `run` and `merge`\n"
          "refuse an older database, and `se3screen upgrade` migrates it forward, keeping\n"
          "its work where it can. \"Since\" is the version that added a table\n"
          "or column. Blob layouts: [`chem/mol.h`](../chem/mol.h),\n"
          "[`chem/graph.h`](../chem/graph.h), [`models/basis.h`](../models/basis.h).\n",
          STORE_SCHEMA_VERSION);
  for (int i = 0; i < nt; i++) {
    struct doc_table *x = &t[i];
    fprintf(out, "\n## `%s` (%s, since %d)\n\n", x->name, x->kind, x->version);
    if (x->kind[0] == 'v') {
      fprintf(out, "```sql\n%s\n```\n", x->view);
      continue;
    }
    fprintf(out, "| column | type | meaning | since |\n|---|---|---|---|\n");
    for (int k = 0; k < x->n_cols; k++) {
      struct doc_col *c = &x->col[k];
      fprintf(out, "| `%s` | ", c->name);
      md(out, c->def);
      fprintf(out, " | ");
      md(out, c->note);
      fprintf(out, " | %d |\n", c->version);
    }
    if (x->keys[0]) fprintf(out, "\nKey: %s.\n", x->keys);
    if (x->indexes[0]) fprintf(out, "\nIndexes: %s.\n", x->indexes);
    if (x->triggers[0]) fprintf(out, "\nTriggers: %s.\n", x->triggers);
  }
  return ferror(out) ? -1 : 0;
}
