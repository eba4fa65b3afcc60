#!/usr/bin/env bash
# Installs, builds and runs the default scenario. Until the end-to-end ResNet-18 scenario lands,
# the default is NCCL's all-reduce on the 8 A100s of one ThetaGPU node, as nccl-tests measures it.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec ./build/cli/foresight collective --cluster thetagpu --gpus 8 --op all_reduce --sizes 1K:8G
