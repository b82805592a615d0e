#!/usr/bin/env bash
# The GPU checks of kappa-DQN's CUDA-graph learner step, as one script for a machine with a CUDA GPU
# and Python 3.12 + torch but no package index (how docs/measured.md's "Atari on a GPU with CUDA graphs" figures were made):
#   1. the CUDA-graph tests (graph-replayed updates equal eager ones; restore captures again) and the frame
#      replay's tests (the ring on the GPU draws what the LZ4 store draws);
#   2. the learner alone, eager and graphed: gradient steps/s and kernel launches per step;
#   3. a chunk's replay draw, LZ4 frames in host memory (decoded, pinned, copied) against the ring on the GPU
#      (gathered there), on 30k Breakout transitions (benchmarks/replay_draw.py; the 100k ring's memory shows
#      in step 4's GPU memory peaks);
#   4. Atari Breakout beside the minimal loops, with `learner_thread` (the gradient steps on a thread of their
#      own): kappa = 1 with 4 and 8 remote EnvRunners, the replay's frames in host memory and on the GPU
#      (`replay_frames_on_device`), its learner alone; kappa-PI-DQN with 8, the frames on the GPU (one round:
#      the loan's time; each row prints the GPU's memory peak);
#   5. four kappa-PI-DQN trials sharing the GPU (tune --gpus-per-trial 0.25).
# Build the dependency bundle first, where pip works (in the checkout):
#   bash path/to/site-bundle.sh .devrun/site312.tar.xz
# then run this from the checkout on the GPU machine; logs go to $OUT (default /tmp/gpu_check).
# Steps: `STEPS=5000` env steps after learning starts per Atari row.
# Each step's wall time goes to $OUT/times.txt. The whole script is meant to fit one 9-minute loan (expected, from
# the rates measured on an H100 in 2026-11: tests ~1 min, graphs ~0.5, replay draw ~0.7, Atari rows ~4, packing
# ~1.5; limits 8.7 min in all, the bundle's unpacking and nvidia-smi besides); a step that overruns its limit is cut (`timeout`), what it measured so far kept,
# and the steps after it still run.
set -uo pipefail
OUT=${OUT:-/tmp/gpu_check}
STEPS=${STEPS:-5000}
mkdir -p "$OUT" /tmp/site
step() {  # step NAME SECONDS COMMAND...: run it under a time limit, note its wall time
  local name=$1 limit=$2 start=$SECONDS; shift 2
  timeout -k 15 "$limit" "$@"; local rc=$?  # (-k: a process that ignores TERM is killed)
  echo "$name: $((SECONDS - start)) s (limit $limit s, exit $rc)" | tee -a "$OUT/times.txt"
}
[[ -f .devrun/site312.tar.xz ]] && tar -xJf .devrun/site312.tar.xz -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__)" | tee -a "$OUT/gpu.txt"
step tests 70 python3 -m pytest tests/test_cuda_graphs.py tests/test_frame_replay.py -v -o addopts="" \
  -p no:cacheprovider > "$OUT/tests.txt" 2>&1
step graphs 50 python3 benchmarks/throughput.py --workload graphs --device cuda --torch-threads 4 > "$OUT/graphs.txt" 2>&1
step replay_draw 50 python3 benchmarks/replay_draw.py --device cuda --transitions 30000 --rounds 5 \
  > "$OUT/replay_draw.txt" 2>&1
step atari_dqn 160 python3 benchmarks/throughput.py --workload atari --atari-algos dqn --steps "$STEPS" \
  --env-runners 4,8 --device cuda --torch-threads 4 --learner-thread on --replay-frames both --rounds 1 \
  > "$OUT/atari_dqn.txt" 2>&1
step atari_pi 80 python3 benchmarks/throughput.py --workload atari --atari-algos kappa-pi --steps "$STEPS" \
  --env-runners 8 --device cuda --torch-threads 4 --learner-thread on --replay-frames device --rounds 1 \
  > "$OUT/atari_pi.txt" 2>&1
step packing 110 python3 benchmarks/throughput.py --workload packing --steps "$STEPS" --env-runners 2 \
  --trials-per-gpu 4 --device cuda --torch-threads 4 --rounds 1 > "$OUT/packing.txt" 2>&1
grep -h "^measured\|passed\|failed\|storage\|faster" "$OUT"/*.txt | grep -v "WARNING\|USDT"
cat "$OUT/times.txt"
