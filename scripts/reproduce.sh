#!/usr/bin/env bash
# Regenerates the evidence of results/h200/ on a GPU machine with one command, into the same topic folders: the GPU
# tests, devices, the RNG kernel, standalone dropout, the QKV GEMM, both attention kernels with the SDPA peers, the
# verdict (the Llama-3 presets at R 3/5/7 and the reduced paper sweep through `dropbench run`, with power passes and
# PyTorch's end-to-end blocks), Nsight Compute counters, and the plots. Each folder's README gives its commands.
# Usage: scripts/reproduce.sh [OUT_DIR]      (default results/h200-new; needs a GPU, PyTorch + Triton for the peers)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-results/h200-new}"
scripts/setup.sh
. scripts/env.sh
configure_and_build
B="$BUILD_DIR/dropbench"
mkdir -p "$OUT"/{tests,model/inputs,model/ncu,rng,dropout,gemm,attention,verdict/sweep,peers,plots}
have_torch() { python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; }
peer() { have_torch && python3 scripts/peers.py --dropbench "$B" "$@" || echo "reproduce: peers skipped ($*)" >&2; }

scripts/gpu_tests.sh "$BUILD_DIR" "$OUT/tests" | tee "$OUT/tests/gpu_tests.txt"
"$B" devices | tee "$OUT/model/inputs/devices.md"
"$B" devices --format json >"$OUT/model/inputs/devices.json"
"$B" rng --config configs/llama3-70b.json -q --set sweep.sq=[4096,8192] --set sweep.rounds=[3,5,7,10] \
  --set sweep.threshold_bits=[8,32] --set sweep.layout=[tile] --min-time 0.03 --max-noise 0.02 --set measure.timeout=1 \
  --set measure.power_time=0.3 -o "$OUT/rng/rng.json" | tee "$OUT/rng/rng.md"
"$B" rng -q --set sweep.sq=[8192] --set sweep.layout=[tile] --set sweep.threshold_bits=[8] --set sweep.rounds=[3,5,7,10] \
  -o "$OUT/rng/rng_2g.json" | tee "$OUT/rng/rng_2g.md"
"$B" dropout --config configs/quick.json -q --set workload.sq=8192 --set measure.min_time=0.2 --set measure.timeout=5 \
  --set sweep.elements=[536870912] -o "$OUT/dropout/dropout.json" | tee "$OUT/dropout/dropout.md"
peer --only dropout --config configs/quick.json --set sweep.elements=[536870912] --min-time 0.2 -q \
  -o "$OUT/dropout/peers_dropout.json" --md "$OUT/dropout/peers_dropout.md"
"$B" gemm --config configs/quick.json -q --top-k 8 --set sweep.sq=[4096,8192,16384] --set measure.min_time=0.5 \
  --set measure.max_samples=5000 -o "$OUT/gemm/gemm.json" | tee "$OUT/gemm/gemm.md"
have_torch && { python3 scripts/peer_gemm.py --min-time 0.5 --json "$OUT/gemm/peer_gemm.json" | tee "$OUT/gemm/peer_gemm.md" \
  || echo "reproduce: peer_gemm failed" >&2; }
ATT=(--sq 8192,16384 --causal false,true --head-dim 64,128)
"$B" attention --config configs/llama3-8b.json -q --set sweep.sq=[8192,16384] --set sweep.causal=[false,true] \
  --set sweep.head_dim=[64,128] --set sweep.rounds=[7] --set sweep.attention_kernel=[mma,wgmma] --min-time 0.03 \
  --max-noise 0.02 --set measure.timeout=1 --set measure.power_time=0.3 -o "$OUT/attention/attention.json" \
  | tee "$OUT/attention/attention.md"
peer --config configs/llama3-8b.json --only attention "${ATT[@]}" --min-time 0.1 -q -o "$OUT/attention/peers_attention.json"
have_torch && { python3 scripts/h2h_attention.py --sq 8192,16384 --head-dim 128,64 --causal false,true \
  -o "$OUT/attention/h2h.json" --md "$OUT/attention/h2h.md" || echo "reproduce: h2h failed" >&2; }
# The verdict: power-capped GEMMs run below the default 75 % clock threshold, so every sample counts (throttle 0).
for p in 8b 70b 405b; do
  "$B" run --config "configs/llama3-$p.json" -q --set sweep.sq=[8192] --top-k 1 --min-time 0.05 --max-noise 0.01 \
    --set measure.timeout=2 --set measure.throttle=0 --set sweep.rounds=[3,5,7] --set sweep.attention_kernel=[mma,wgmma] \
    --set measure.power_time=0.3 --no-explore -o "$OUT/verdict/run_llama3-$p.json" | tee "$OUT/verdict/run_llama3-$p.md"
  peer --config "configs/llama3-$p.json" --only e2e --sq 8192 --min-time 0.1 -q -o "$OUT/verdict/peers_e2e_llama3-$p.json"
done
"$B" run --config configs/paper-sweep.json -q --no-explore --set sweep.sq=[2048,8192,32768] --set sweep.embed=[4096,16384] \
  --set sweep.rounds=[7] --set sweep.attention_kernel=[mma,wgmma] --min-time 0.03 --max-noise 0.02 --set measure.timeout=1 \
  --set measure.power_time=0.3 -o "$OUT/verdict/sweep/run_paper_reduced.json" | tee "$OUT/verdict/sweep/run_paper_reduced.md"
peer --config configs/paper-sweep.json --only e2e --sq 2048,8192,32768 --embed 4096,16384 --min-time 0.1 -q \
  -o "$OUT/verdict/sweep/peers_e2e_paper_reduced.json"
args=()
for p in 8b 70b 405b; do
  r="$OUT/verdict/run_llama3-$p.json"; e="$OUT/verdict/peers_e2e_llama3-$p.json"
  [ -f "$e" ] && args+=("$r=$e") || args+=("$r")
done
python3 scripts/answer_table.py "${args[@]}" >"$OUT/verdict/answer.md"
for p in 8b 70b 405b; do "$B" model --report "$OUT/verdict/run_llama3-$p.json"; done >"$OUT/model/model_vs_verdict.md"
command -v ncu >/dev/null && scripts/profile_ncu.sh "$B" "$OUT/model/ncu" || echo "reproduce: no ncu, counters skipped" >&2
/usr/bin/python3 scripts/plot.py -o "$OUT/plots" "$OUT"/verdict/run_llama3-*.json "$OUT"/verdict/sweep/run_paper_reduced.json \
  "$OUT"/rng/rng_2g.json "$OUT"/dropout/dropout.json || true
