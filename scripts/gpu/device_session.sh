#!/usr/bin/env bash
# One measuring session on a single GPU: what validate/data/h200_single_gpu_steps/ and
# validate/data/profiles/ were made from. Run from the repository root with the project built
# (build/cli/foresight-profile, build/profiler/libforesight_inject.so, build/profiler/foresight-devices)
# and PyTorch with torchvision and transformers importable by python3:
#
#   [STAGES=devices,steps,time,inject,profile,sweep,nccl] [INJECT_CONFIGS="A B"] scripts/gpu/device_session.sh OUTDIR [probe]
#
# Shared libraries the GPU machine lacks can be put in .devlib/ (ignored by git): a build made on
# Debian 12 and run elsewhere needs its libfmt.so.9 there. cuDNN and NCCL are also looked for in
# PyTorch's wheels (nvidia/*/lib).
#
# Stages, each bounded in time and each independent of the others' success (a failure is logged
# and the next stage runs): the device and software; PyTorch training steps with the PyTorch
# profiler (Kineto) traces; the same steps under libforesight_inject.so (CUPTI); foresight-profile on
# the step scenarios and the MoE/1.3B examples; the kernel sweep (scripts/gpu/kernel_sweep.py);
# a one-GPU NCCL sweep. Results go to OUTDIR/results, packed after every stage as
# OUTDIR/results.tgz.* pieces of at most 15 MiB. `probe` runs each stage on one small case.
set -u
OUTDIR=${1:?usage: device_session.sh OUTDIR [probe]}
PROBE=${2:-}
START=$(date +%s)
DEADLINE=${DEADLINE_S:-540}
RES=$(mktemp -d)/results
mkdir -p "$RES/profiles" "$RES/steps" "$RES/inject"
LOG="$OUTDIR/log.txt"
exec > >(tee -a "$LOG") 2>&1
STEPS=validate/data/h200_single_gpu_steps
STAGES=",${STAGES:-devices,steps,time,inject,profile,sweep,nccl},"
want() { [[ $STAGES == *",$1,"* ]]; }
PY=python3

elapsed() { echo $(( $(date +%s) - START )); }
left() { echo $(( DEADLINE - $(elapsed) )); }
pack() {
  local tmp; tmp=$(mktemp -d)
  (cd "$(dirname "$RES")" && tar czf - results) | split -b 15M - "$tmp/results.tgz."
  rm -f "$OUTDIR"/results.tgz.*
  mv "$tmp"/results.tgz.* "$OUTDIR"/
  echo "[$(elapsed) s] packed: $(du -sh "$RES" | cut -f1) -> $(ls "$OUTDIR" | tr '\n' ' ')"
}
# stage NAME SECONDS COMMAND...: runs COMMAND under a time limit (never past the deadline).
stage() {
  local name=$1 limit=$2; shift 2
  local l; l=$(left)
  if (( l < 10 )); then echo "[$(elapsed) s] SKIP $name: $l s left"; return; fi
  (( limit > l )) && limit=$l
  echo "[$(elapsed) s] BEGIN $name (limit $limit s)"
  timeout -k 5 "$limit" "$@"
  echo "[$(elapsed) s] END $name: exit $?"
}

# --- the machine -----------------------------------------------------------------------------
SITE=$($PY -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null)
PIPLIBS=$(find "$SITE/nvidia" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | tr '\n' ':')
# The project's tools find CUDA by their run path; cuDNN and NCCL may live only in PyTorch's wheels.
export TOOL_LD="$PWD/.devlib:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:${PIPLIBS}"
{
  echo "== date"; date -u
  echo "== nvidia-smi"; nvidia-smi
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit --format=csv
  echo "== python"; $PY -c 'import torch, torchvision, transformers; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), torchvision.__version__, transformers.__version__)'
  echo "== cuda"; ls -d /usr/local/cuda* ; ls /usr/local/cuda/lib64 | grep -E 'cupti|cublasLt|cudnn|nccl' | head
  echo "== pip nvidia libs"; echo "$PIPLIBS" | tr ':' '\n'
  for b in build/cli/foresight-profile build/profiler/foresight-devices build/profiler/libforesight_inject.so; do
    echo "== ldd $b"; LD_LIBRARY_PATH=$TOOL_LD ldd "$b" | grep -E 'not found|cuda|cupti|cudnn|nccl|fmt|cublas'
  done
} > "$RES/machine.txt" 2>&1
cat "$RES/machine.txt"
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU_NAME" in
  *H200*) CATALOG=H200-SXM-141GB ;;
  *) CATALOG=H100-SXM5-80GB ;;
esac
echo "GPU: $GPU_NAME -> catalog $CATALOG"
want devices && stage devices 20 env LD_LIBRARY_PATH=$TOOL_LD build/profiler/foresight-devices
pack

# --- training steps with the PyTorch profiler ------------------------------------------------
if [[ -n $PROBE ]]; then STEP_CONFIGS=gpt2-amp_bf16-b8; STEP_ARGS="--warmup 2 --steps 3"; else STEP_CONFIGS=all; STEP_ARGS=""; fi
want steps && stage steps-kineto 170 $PY scripts/gpu/train_steps.py --mode kineto --configs $STEP_CONFIGS $STEP_ARGS --out "$RES/steps"
gzip -f "$RES"/steps/kineto-*.json 2>/dev/null
# The same steps untraced once more, in a fresh process (their spread between processes).
want time && stage steps-time 120 $PY scripts/gpu/train_steps.py --mode time --configs $STEP_CONFIGS $STEP_ARGS --out "$RES/steps"
pack

# --- the same steps under libforesight_inject.so ---------------------------------------------
if [[ -n $PROBE ]]; then INJECT_CONFIGS="gpt2-amp_bf16-b8"; else
  INJECT_CONFIGS=${INJECT_CONFIGS:-gpt2-amp_bf16-b8 resnet50-amp_bf16-b128 llama-1b-amp_bf16-b4 bert-large-amp_fp16-b16}; fi
want inject || INJECT_CONFIGS=""
for c in $INJECT_CONFIGS; do
  stage "inject $c" 45 env CUDA_INJECTION64_PATH="$PWD/build/profiler/libforesight_inject.so" \
    FORESIGHT_TRACE_OUT="$RES/inject/inject-$c.json" \
    $PY scripts/gpu/train_steps.py --mode inject --configs "$c" --warmup 3 --steps 3 --out "$RES/inject"
  gzip -f "$RES/inject/inject-$c.json" 2>/dev/null
done
pack

# --- foresight-profile: the kernels of the step scenarios and two examples -------------------
if [[ -n $PROBE ]]; then PROFILE_SCEN="$STEPS/gpt2-amp_bf16-b8.json"; REPS="--warmup 2 --reps 5"; else
  PROFILE_SCEN="$STEPS/gpt2-amp_bf16-b8.json $STEPS/llama-1b-amp_bf16-b4.json $STEPS/resnet50-amp_bf16-b128.json
    $STEPS/resnet18-amp_fp16-b256.json $STEPS/bert-large-amp_fp16-b16.json $STEPS/resnet50-fp32-b64.json
    $STEPS/gpt2-fp32-b4.json examples/mixtral-8x7b-ep8-pp4-64xh100.json examples/gpt3-1.3b-ddp-8xh100.json"
  REPS="--warmup 3 --reps 10"; fi
want profile || PROFILE_SCEN=""
for s in $PROFILE_SCEN; do
  n=$(basename "$s" .json)
  stage "profile $n" 60 env LD_LIBRARY_PATH=$TOOL_LD build/cli/foresight-profile "$s" --gpu "$CATALOG" $REPS -o "$RES/profiles/$n.json"
done
pack

# --- kernel curves ---------------------------------------------------------------------------
if [[ -n $PROBE ]]; then SWEEP_BUDGET=8; else SWEEP_BUDGET=$(( $(left) - 40 )); (( SWEEP_BUDGET > 110 )) && SWEEP_BUDGET=110; fi
want sweep && stage kernel-sweep $(( SWEEP_BUDGET + 25 )) $PY scripts/gpu/kernel_sweep.py --out "$RES/kernels.json" --budget-s "$SWEEP_BUDGET"
pack

# --- NCCL on one GPU (checks the sweep's code path; one GPU moves no bytes between GPUs) -----
want nccl && stage nccl 20 env LD_LIBRARY_PATH=$TOOL_LD build/cli/foresight-profile --nccl-sweep "$RES/nccl-1gpu.json" --nccl-max-bytes 16777216 --nccl-step 16
pack
echo "[$(elapsed) s] done"
