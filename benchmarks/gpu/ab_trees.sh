#!/bin/bash
# Two engines on one host, in turn: another commit's tree (.base/, made here with
#   mkdir -p .base && git archive REV engine benchmarks | tar -x -C .base
# and carried with .gpu-kit/) and this tree, `measure.py ours` for each, ROUNDS times (3 by default).
# From the project root on the GPU machine: bash benchmarks/gpu/ab_trees.sh. Results in $OUT:
# setup.log (the floor), baseN.md and newN.md (each round's tables), errors.log.
R=${OUT:-/tmp/gpu-out}; mkdir -p "$R"
ln -sfn "$PWD/.gpu-kit" .base/.gpu-kit
export PYTHONUNBUFFERED=1 OURS_ARGS=${OURS_ARGS:-"--modes on --repeats 5"}
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
OUT=/tmp/o0 DEADLINE=120 bash benchmarks/gpu/run.sh build,models,rows > "$R/setup.log" 2>&1
for i in $(seq "${ROUNDS:-3}"); do
  (cd .base && OUT=/tmp/b$i DEADLINE=150 bash benchmarks/gpu/run.sh build,ours > /tmp/b$i.log 2>&1)
  OUT=/tmp/n$i DEADLINE=150 bash benchmarks/gpu/run.sh build,ours > /tmp/n$i.log 2>&1
  cp /tmp/b$i/ours.md "$R/base$i.md"; cp /tmp/n$i/ours.md "$R/new$i.md"
  echo "after round $i: $(el) s" >> "$R/setup.log"
done
cat /tmp/*/ours.err > "$R/errors.log" 2>/dev/null
echo "total $(el) s"
