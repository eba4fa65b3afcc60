#!/usr/bin/env bash
# Submits the sharded sweep (sweep-array.sbatch) and its merge (sweep-merge.sbatch), the merge to
# start when every array task has ended. Run from the repository root; extra arguments go to both
# sbatch calls (e.g. --partition=cpu --account=me).
set -euo pipefail
here="$(dirname "$0")"
mkdir -p shards
array=$(sbatch --parsable "$@" "$here/sweep-array.sbatch")
array=${array%%;*}  # "jobid;cluster" on multi-cluster sites
merge=$(sbatch --parsable "$@" --dependency="afterany:$array" "$here/sweep-merge.sbatch")
echo "sweep: array job ${array} (shards), merge job ${merge%%;*}: results in resnet50-sweep.csv"
