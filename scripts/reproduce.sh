#!/usr/bin/env bash
# Regenerates results/h200/ on a GPU machine with one command: devices, RNG and dropout microbenchmarks,
# GEMM and attention against PyTorch, the four pipelines on the Llama-3 presets and a reduced paper sweep,
# Nsight Compute counters, the model against the run reports, and the plots.
# Usage: scripts/reproduce.sh [OUT_DIR]      (default results/h200; needs a GPU, PyTorch for the peers)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-results/h200}"
scripts/setup.sh
. scripts/env.sh
configure_and_build
B="$BUILD_DIR/dropbench"
mkdir -p "$OUT"/{foundation,kernels,run,model,ncu,final}
scripts/gpu_tests.sh "$BUILD_DIR" "$OUT/final/gpulogs" | tee "$OUT/gpu_tests.txt"
scripts/bench_foundation.sh "$B" "$OUT/foundation"
scripts/bench_kernels.sh "$B" "$OUT/kernels"
# Power-capped GEMMs run below the default 75 % clock threshold: keep every sample (measure.throttle=0).
RUN=(-q --set sweep.sq=[8192] --set sweep.rounds=[3,5,7] --set measure.throttle=0 --min-time 0.03 --max-noise 0.02
     --set measure.timeout=1)
for p in 8b 70b 405b; do
  "$B" run --config "configs/llama3-$p.json" "${RUN[@]}" -o "$OUT/run/llama3-$p.json" | tee "$OUT/run/llama3-$p.md"
  "$B" model --report "$OUT/run/llama3-$p.json" >"$OUT/model/model-vs-run-llama3-$p.md"
done
"$B" run --config configs/paper-sweep.json -q --set sweep.sq=[2048,8192,32768] --set sweep.embed=[4096,16384] \
  --set sweep.rounds=[3,7] --set measure.throttle=0 --min-samples 3 --min-time 0.03 --max-noise 0.02 \
  --set measure.timeout=1 --no-explore --overlap-rng plain -o "$OUT/run/paper_reduced.json" | tee "$OUT/run/paper_reduced.md"
command -v ncu >/dev/null && scripts/profile_ncu.sh "$B" "$OUT/ncu" || echo "reproduce: no ncu, counters skipped" >&2
for s in "b=1,sq=8192,e=4096,hq=32,hkv=8,dh=128" "b=1,sq=8192,e=8192,hq=64,hkv=8,dh=128" \
         "b=1,sq=8192,e=16384,hq=128,hkv=8,dh=128"; do
  for m in h200 blackwell-projection; do
    echo "### recommend --shape $s --machine configs/machines/$m.json"
    "$B" recommend --shape "$s" --machine "configs/machines/$m.json"
    echo
  done
done >"$OUT/model/recommend.md"
mkdir -p "$OUT/peers"; for p in 8b 70b 405b; do python3 scripts/peers.py --dropbench "$B" --config "configs/llama3-$p.json" --sq 8192 -q -o "$OUT/peers/llama3-$p.json" --md "$OUT/peers/llama3-$p.md" >/dev/null || echo "reproduce: peers for llama3-$p skipped (needs a GPU with PyTorch + Triton)" >&2; done
# Plots last: the peers block plot pairs run/llama3-*.json with peers/llama3-*.json.
/usr/bin/python3 scripts/plot.py -o "$OUT/plots" "$OUT"/foundation/*.json "$OUT"/kernels/*.json "$OUT"/run/llama3-*.json \
  "$OUT"/run/paper_reduced.json "$OUT"/peers/llama3-*.json || true
