#!/usr/bin/env bash
# A 64-GPU scaling sweep: ResNet-50 DDP on 8 to 64 GPUs of a Selene-like cluster at three per-GPU
# batches, in parallel on all cores. Writes resnet50-sweep.csv and resnet50-sweep.svg in the current
# directory; if it is interrupted, run it again with --resume to keep the rows already done.
# Extra arguments go to `foresight sweep` (e.g. --jobs 4, --resume).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
exec "$repo/build/cli/foresight" sweep "$repo/examples/resnet50-ddp-selene.json" \
  --gpus 8,16,32,64 --micro-batch 64,128,256 \
  --csv resnet50-sweep.csv --plot resnet50-sweep.svg "$@"
