#!/usr/bin/env bash
# CI: ltr_bench as an installed package, as README "Install" and "Using a trained model" use it.
# Builds the wheel from the checkout's files, installs it into a fresh venv outside the repository
# (PyTorch's CPU build via constraints-cpu.txt; pip's cache is reused) and, from a temporary
# directory, runs `ltr-bench --cfg job`, a default run and `ltr-bench-predict` on that run's model.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PYTHON=${PYTHON:-python3.11}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ltr_bench_wheel.XXXXXX")
trap 'rm -rf "$WORK" >/dev/null 2>&1 &' EXIT   # removing a venv takes a while: not waited for
START=$(date +%s)
say() { echo "wheel-check [$(( $(date +%s) - START )) s]: $*"; }
fail() { echo "wheel-check: FAILED: $*" >&2; exit 1; }

# 1. The wheel, built from a copy of the tracked files (nothing of the checkout's state leaks in).
mkdir -p "$WORK/src" "$WORK/dist" "$WORK/run"
git ls-files -z | xargs -0 cp -P --parents -t "$WORK/src"  # -P: ltr_bench/conf stays a symlink
"$PYTHON" -m pip wheel -q --no-deps -w "$WORK/dist" "$WORK/src" 2>"$WORK/build.log" \
  || { cat "$WORK/build.log" >&2; fail "pip wheel"; }
WHEEL=$(ls "$WORK"/dist/ltr_bench-*.whl)
"$PYTHON" - "$WHEEL" <<'EOF' || fail "the wheel lacks files"
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
need = {"ltr_bench/conf/config.yaml", "ltr_bench/conf/model/direct_ranker.yaml",
        "hydra_plugins/ltr_bench_sweeper/__init__.py", "ltr_bench/saved_model.py"}
missing = need - names
assert not missing, missing
EOF
say "built $(basename "$WHEEL")"

# 2. A fresh venv outside the repository.
"$PYTHON" -m venv "$WORK/venv"
VBIN="$WORK/venv/bin"
"$VBIN/pip" install -q --no-compile -c "$REPO/constraints-cpu.txt" "$WHEEL" >"$WORK/install.log" 2>&1 \
  || { tail -20 "$WORK/install.log" >&2; fail "pip install of the wheel"; }
say "installed into a fresh venv"

# 3. From a temporary directory, with no checkout in sight.
cd "$WORK/run"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
unset MLFLOW_TRACKING_URI HYDRA_FULL_ERROR
where=$("$VBIN/python" -c "import ltr_bench, pathlib; print(pathlib.Path(ltr_bench.__file__).parent)")
case "$where" in "$WORK/venv/"*) ;; *) fail "ltr_bench imported from $where, not the venv";; esac
"$VBIN/ltr-bench" --cfg job >cfg.txt || fail "ltr-bench --cfg job"
grep -q "_target_: ltr_bench.models.DirectRanker" cfg.txt || fail "--cfg job shows no model"
set +e
msg=$(env -u LTR_DATA "$VBIN/ltr-bench" dataset=mq2008 2>&1 >/dev/null); code=$?
set -e
[ "$code" = 2 ] && echo "$msg" | grep -q "LTR_DATA" || fail "a missing data root: exit $code, '$msg'"
say "ltr-bench --cfg job; missing data root is one sentence (exit 2)"

"$VBIN/ltr-bench" threads=1 trainer.enable_progress_bar=false >run.txt 2>run.err \
  || { tail -20 run.err >&2; fail "the default run"; }
RUN_ID=$("$VBIN/python" - <<'EOF'
import json, pathlib, mlflow
(res,) = pathlib.Path("outputs").glob("*/*/results.json")
run_id = json.loads(res.read_text())["folds"][0]["mlflow_run_id"]
tags = mlflow.MlflowClient("sqlite:///mlflow.db").get_run(run_id).data.tags
assert "ltr.git_commit" not in tags, "git commit tagged outside a checkout: " + tags["ltr.git_commit"]
print(run_id)
EOF
) || fail "reading the run back"
MODEL_URI=$(sed -n 's/^model of .*: \(runs:\/[0-9a-f]*\/model\)$/\1/p' run.txt | head -1)
[ "$MODEL_URI" = "runs:/$RUN_ID/model" ] || fail "the run printed model '$MODEL_URI', not runs:/$RUN_ID/model"
say "default run done (printed $MODEL_URI, no git commit tagged)"

# 4. The run's model ranks a LETOR file (new documents with the default dataset's 70 features).
"$VBIN/python" - <<'EOF'
import numpy as np
rng = np.random.default_rng(7)
with open("new.txt", "w") as fh:
    for i in range(200):
        feats = " ".join(f"{j}:{v:.6g}" for j, v in enumerate(rng.normal(50, 60, 70), 1))
        fh.write(f"{rng.integers(0, 5)} qid:{i // 20 + 1} {feats} #docid = doc{i}\n")
EOF
"$VBIN/ltr-bench-predict" "$MODEL_URI" new.txt --out pred >predict.txt 2>predict.err \
  || { cat predict.err >&2; fail "ltr-bench-predict"; }
[ "$(wc -l <pred/new.run)" = 200 ] && [ -s pred/new.scores.tsv ] && [ -s pred/metrics.csv ] \
  || fail "ltr-bench-predict outputs"
set +e
"$VBIN/ltr-bench-predict" "$MODEL_URI" missing.txt >/dev/null 2>&1; code=$?
set -e
[ "$code" = 2 ] || fail "ltr-bench-predict on a missing file: exit $code, not 2"
say "ltr-bench-predict: scores, TREC run and metrics; bad input exits 2"
say "passed"
