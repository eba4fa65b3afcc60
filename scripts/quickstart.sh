#!/usr/bin/env bash
# Installs, builds and runs the default scenario: ResNet-18 on CIFAR-100 trained with PyTorch DDP on
# the 8 A100s of one ThetaGPU node, 10 epochs (measured runs: validate/data/thetagpu_resnet18_cifar100.json).
set -euo pipefail
cd "$(dirname "$0")/.."
# Only the foresight binary: tests, benchmarks and the profiler build in ./scripts/test.sh.
./scripts/setup.sh cli/foresight
exec ./build/cli/foresight simulate examples/thetagpu-resnet18-ddp.json
