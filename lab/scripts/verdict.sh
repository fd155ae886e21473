#!/usr/bin/env bash
# Issue 11's verdict in one device call: the three Llama-3 presets (SQ 8192, Philox-7) through `dropbench run` with
# both attention kernels, the attention command with both kernels, and the PyTorch peers (end-to-end blocks and
# SDPA) in the same session; clocks and power before and after. Reports under $OUT (or results-verdict/).
#   scripts/verdict.sh [BUILD=build-verdict]
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build-verdict}
O=${OUT:-results-verdict}
mkdir -p "$O"
. scripts/env.sh
smi() { smi_log "$O/smi.csv"; }
if [ ! -x "$B/dropbench" ]; then
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDROPBENCH_TESTS=OFF -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" > "$O/configure.log" 2>&1
  cmake --build "$B" -j "$(nproc)" --target dropbench > "$O/build.log" 2>&1 || { tail -20 "$O/build.log"; exit 1; }
fi
M=(--min-time 0.03 --max-noise 0.02 --set measure.timeout=1)
smi
for p in 8b 70b 405b; do
  timeout 120 "$B/dropbench" run --config configs/llama3-$p.json -q --no-explore --set 'sweep.sq=[8192]' --set 'sweep.rounds=[7]' \
    --set 'sweep.attention_kernel=[mma,wgmma]' "${M[@]}" -o "$O/run_llama3-$p.json" > "$O/run_llama3-$p.md" 2>> "$O/err.log"
  echo "run $p: exit $?"; smi
done
timeout 90 "$B/dropbench" attention --config configs/llama3-8b.json -q --set 'sweep.sq=[8192,16384]' --set 'sweep.causal=[false,true]' \
  --set 'sweep.attention_kernel=[mma,wgmma]' "${M[@]}" -o "$O/attention.json" > "$O/attention.md" 2>> "$O/err.log"
echo "attention: exit $?"; smi
export PYTHONUNBUFFERED=1
timeout 100 python3 scripts/peers.py --dropbench "$B/dropbench" --config configs/llama3-8b.json --only attention \
  --sq 8192,16384 --causal false,true --min-time 0.1 -q -o "$O/peers_attention.json" >> "$O/peers.log" 2>&1; echo "peers attention: exit $?"
for p in 8b 70b 405b; do
  timeout 60 python3 scripts/peers.py --dropbench "$B/dropbench" --config configs/llama3-$p.json --only e2e --sq 8192 \
    --min-time 0.1 -q -o "$O/peers_e2e_llama3-$p.json" >> "$O/peers.log" 2>&1; echo "peers e2e $p: exit $?"
done
smi
