#!/usr/bin/env bash
# A device call in stages, run in the order given while the wall-clock budget lasts (a stage that would not fit
# in what is left is skipped and says so). Every stage builds on the same build dir, so consecutive calls on a
# warm machine skip the build.
#   build    configure + build everything (tests on) into $B ($BUILD_TARGETS: only those)
#   gpu      every GPU test but ProfileGpu (ctest -L gpu; only those matching the regex $GPU_R if set, none matching
#            $GPU_E; $GPU_TEST_TIMEOUT s per test, default 120; from a package: per binary, below), log gpu_tests.log
#   profile  ProfileGpu: `dropbench profile` of every kernel under ncu, kept in profile/ (profile_ncu.json, ncu CSV);
#            scripts/refit_profile.py then fits the kernel efficiencies on it (no GPU)
#   rngrep   `dropbench rng`, 70B preset heads, SQ 4K/8K, causal, R 3/5/7/10, TW 8/32, tile layout, for the model
#   sigterm  a `run` sweep under `timeout --preserve-status -s TERM`: exit 143 and an incomplete report saying so
#   dropout  `dropbench dropout` (2^29 elements, the default seeded kind) and the Triton peer in the same call
#   casts    the fp8 step's cast / transpose kernels as isolated launches: `dropbench dropout` (the device-to-device
#            copy: this GPU's DRAM rate, dropout.json), then per preset $CAST_PRESETS (default "8b 70b 405b") one
#            fp8 training step (`run --pipelines stored`, one sample) under Nsight Compute, the first $CAST_LAUNCHES
#            (default 25) cast_transpose launches (duration, DRAM bytes read / written, L2 bytes, SM clock, achieved
#            occupancy: ncu_casts_<p>.csv), and scripts/cast_ncu.py's table of them against the model
#            (cast_ncu.json / .md, machine $CAST_MACHINE, default configs/machines/h100-sxm.json)
#   gemms    the training step's GEMM shapes alone, through `dropbench gemm` (cuBLASLt, Y = X W^T, bf16 and fp8,
#            --top-k $GEMM_TOPK, default 1 as the step runs them): per preset $GEMM_PRESETS (default "8b 70b 405b",
#            tokens = SQ 8192) the QKV GEMM (M tokens, N (Hq + 2 Hkv) dH, K E), the output projection and its dX
#            (M tokens, N E, K E), its dW (M E, N E, K tokens), the QKV GEMM's dX (M tokens, N E, K (Hq + 2 Hkv) dH)
#            and dW (M (Hq + 2 Hkv) dH, N E, K tokens), one report each (gemm_<preset>_<gemm>.json): the model's
#            GEMM time against every shape the step runs (`dropbench model --report`), and the passes a machine
#            file's GEMM power is fitted on. No sample is discarded as throttled (the GEMMs run power-capped), and
#            each power pass lasts $GEMM_POWER_TIME s (default 1: an H100's energy counter moves every 100 ms). In
#            the step the fp8 GEMMs are the same TN layout after explicit transposes; the bf16 dX / dW GEMMs use
#            other layouts there
#   settle   the 70B preset's wgmma point with measure.power_settle 0.5 s (the pieces' own power state)
#   attnrep  `dropbench attention`, 70B preset heads, SQ 4K/8K, causal, R 3/7, both kernels, for the same
#   presets  the Llama-3 presets $PRESETS (default all three; SQ 8192) through `dropbench run`, both attention kernels, rounds $PRESET_ROUNDS
#            (default [7]), power pass $POWER_TIME s per variant (default 0.3; 0 = none), $PRESET_ARGS added to
#            each run (e.g. --no-explore), then the PyTorch end-to-end peer blocks at the same points
#   attn     `dropbench attention`, both kernel families, dH 64 and 128, SQ 8192/16384, causal and not,
#            Philox-7, and the PyTorch SDPA peers at the same points in the same call
#   shard    on one GPU: a 4-point rng slice of the 70B preset as two shards one after another, merged,
#            and compared with the same slice unsharded (dropbench compare)
#   h2h      ours and PyTorch's SDPA (cuDNN, FA2) in one process, interleaved, with power and clocks
#            (scripts/h2h_attention.py; $H2H_ARGS replaces its shape arguments, $H2H_TAG suffixes its file names)
#   bwdrec   the attention backward's files of record (results/<gpu>/attention/backward/ and its modes/): the head to
#            head with PyTorch's SDPA on its default grid (h2h_bwd.json / .md, six rounds), the modes alone in 20 rounds
#            (h2h_bwd_modes.json / .md), both backward families through `dropbench attention` (cli_wgmma.json) and the
#            pass axis (cli_pass.json), and context.log; on an H100 the two head-to-head runs took about a minute each
#   sanitize compute-sanitizer memcheck + racecheck of the wgmma attention tests on short / ragged shapes
#   ncu      Nsight Compute of our wgmma attention (none, mask) beside cuDNN's SDPA kernel, one launch each
#   sweep    a reduced paper sweep through `dropbench run` (SQ 2K/8K/32K x E 4K/16K, R 7) with both
#            kernels, and the PyTorch end-to-end peer blocks at its points
#   trainpeer  the PyTorch op's GPU test (tests/torch_op_gpu.py), then the training-loop peer (scripts/train_peer.py:
#            a small causal LM with our attention op and with SDPA cuDNN / FA2, dropout on, in one process;
#            $TRAIN_ARGS added to its arguments, e.g. "--seq 4096 --steps 400")
#   train    the training step (`dropbench run`, workload.pass = train; stage_train): its GPU tests
#            (test_train_step_gpu, test_cast_transpose_gpu, GemmTrainOperands.*), memcheck of one small step, then
#            the Llama-3 presets $TRAIN_PRESETS (default "8b 70b") at SQ 8192, R $TRAIN_ROUNDS (default [3,5,7]),
#            GEMMs $TRAIN_DTYPES (default "bf16 fp8"), with power passes
#            (TRAIN_TESTS=0: no tests and no memcheck, when the gpu and trainmc stages ran them), then the PyTorch
#            training-step peers at the same points (scripts/peers.py --only train, the same dtypes) and the
#            `peers.py --versus` table of each preset's step against them. On an H100 a point (one R) takes about
#            30 s at 8B and 40 s at 70B, a quarter of it the attention kernels timed alone: 8B and 70B at three R
#            in both precisions take about 420 s before their peers, so 405B goes in a call of its own
#   trainmc  the training step's memcheck alone
#   bwdprof  `dropbench profile --kernels attention_bwd`: the wgmma backward's ncu blocks alone (8 ncu runs, about a
#            minute), into profile_bwd.json (the committed profile with those blocks replaced) and its CSV; the model's
#            backward demand is refitted from it off the device (scripts/refit_profile.py --kernels-only)
#   bwdncu   Nsight Compute of the wgmma attention backward at 32 / 8 heads, SQ 8192: dH 128 and 64, causal and not,
#            mode none (the first launch of the mask and fused kernels is the deterministic bitwise check's, not the
#            fast mode's: their measured launches are the bwdprof stage's): one launch each, the raw page of the
#            speed-of-light, compute (pipe utilisation), memory (shared-memory wavefronts, bank conflicts), warp-state
#            (stall reasons), scheduler, instruction and occupancy sections (ncu_bwd_<dH>_<causal|full>_none.csv;
#            scripts/ncu_bwd_table.py tabulates them), and `ncu --query-metrics` of the tensor / shared pipes
#   bwdgqa   the wgmma attention backward at GQA groups of 4 / 8 / 16 query heads per KV head (Hq 32 / 64 / 128,
#            Hkv 8: the Llama-3 8B / 70B / 405B attention), SQ 8192, causal, dH 128, through `dropbench attention`
#            (attn_bwd_hq*.json / .md), and one launch of each (mode none) under Nsight Compute (speed of light,
#            memory workload, warp states, scheduler, compute workload, occupancy: ncu_bwd_hq*.csv)
# nvidia-smi clocks / power before and after each stage (smi.csv). Everything lands in $OUT (or results-stages/);
# more than 8 files are packed into $OUT/stages.tgz at exit (PACK=0: not).
# Provenance: the device's copy of the working tree may carry an older .git than its files (then the build stage's
# reports say "<old sha>-dirty"). Run it from a `git archive HEAD` export, or pass a BUILD_DIR holding binaries
# built from the clean tree elsewhere and skip the build stage.
# BUILD_DIR may instead be a package of scripts/device_pack.sh (a .txz built from the clean tree on another machine; a
# relative path is the caller's, where a relative BUILD_DIR is the tree root's): it is unpacked into .pb/ and its
# binaries run from there with $DROPBENCH_TEST_SOURCE_DIR / $DROPBENCH_TEST_BINARY naming this tree and its dropbench
# (no build stage; the gpu stage runs each test binary, scripts/gpu_tests.sh, $GPU_TEST_TIMEOUT s per binary (default
# 300), ignoring $GPU_R / $GPU_E, and without ctest's Python GPU tests such as TorchOpGpu; no profile stage). Exit 3
# if its dropbench does not start here (then build instead).
#   scripts/device_stages.sh BUILD_DIR BUDGET_S [STAGES...]    e.g. scripts/device_stages.sh /tmp/b 540 build gpu attn
#   scripts/device_stages.sh pb.txz 540 gpu train
set -uo pipefail
B=$1; BUDGET=$2; shift 2
PKG=; [[ $B == *.txz ]] && { PKG=$(realpath "$B") || exit 1; }
cd "$(dirname "$0")/.." || exit 1
. scripts/env.sh
if [ -n "$PKG" ]; then
  B=$PWD/.pb; rm -rf "$B"; mkdir -p "$B"
  tar xJf "$PKG" -C "$B" || { echo "package $PKG: cannot unpack"; exit 1; }
  N=$(dirname "$(dirname "$(command -v nvcc)")")
  export LD_LIBRARY_PATH=$B:$B/lib:$N/lib64:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  export DROPBENCH_TEST_SOURCE_DIR=$PWD DROPBENCH_TEST_BINARY=$B/dropbench
  v=$("$B/dropbench" --version 2>&1) || { echo "package $PKG: its dropbench does not start here: ${v%%$'\n'*}"; exit 3; }
  echo "package $PKG: ${v%%$'\n'*}"
fi
STAGES=("$@"); [ ${#STAGES[@]} -eq 0 ] && STAGES=(build gpu attn shard sweep)
O=${OUT:-results-stages}
mkdir -p "$O"
T0=$(date +%s)
# The device machine hands back at most 8 files from $OUT (16 MiB each) and drops the rest (a report
# can be lost that way): with more, everything is packed into one stages.tgz on the way out, unless the tarball would be over
# 15 MiB (then the files stay). PACK=0: never. A SIGKILL at the device's time limit runs no trap: keep the budget
# under the call's limit.
pack() { [ "${PACK:-1}" = 1 ] || return 0; local n t; n=$(find "$O" -type f | wc -l)
         [ "$n" -gt 8 ] || return 0
         t=$(mktemp /tmp/stages.XXXXXX.tgz) && tar czf "$t" -C "$O" . || return 0
         if [ "$(stat -c %s "$t")" -gt $(( 15 * 1024 * 1024 )) ]; then
           echo "not packed: $n files make a $(( $(stat -c %s "$t") >> 20 )) MiB tarball"; rm -f "$t"; return 0; fi
         find "$O" -mindepth 1 -delete && chmod 644 "$t" && mv "$t" "$O/stages.tgz" && echo "packed $n files into $O/stages.tgz"; }
trap pack EXIT
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
# cap N: N seconds, or what is left of the budget less 15 s if that is less (at least 1)
cap() { local t=$(( $(left) - 15 )); [ "$t" -gt "$1" ] && t=$1; [ "$t" -lt 1 ] && t=1; echo "$t"; }
smi() { smi_log "$O/smi.csv"; }
# sanitize_tests TOOL LOG FILTER LIMIT_S: compute-sanitizer TOOL over the attention GPU tests matching the gtest
# FILTER, for at most LIMIT_S s and never past the budget; log in $O/LOG, one summary line.
sanitize_tests() {
  local tool=$1 log=$2 filter=$3 t=$(( $(left) - 10 )); [ "$t" -gt "$4" ] && t=$4
  timeout "$t" compute-sanitizer --tool "$tool" --error-exitcode 3 "$B/tests/test_attention_gpu" --gtest_filter="$filter" \
    > "$O/$log" 2>&1
  echo "$tool ($log): exit $? ($(grep -cE '^\[       OK' "$O/$log") ok; $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$O/$log" | tr '\n' ' '))"
}
# stage NAME NEED_S: run only when NEED_S seconds are left; the stage's own commands carry their timeouts.
want() { local n=$1 need=$2; if [ "$(left)" -lt "$need" ]; then echo "stage $n: skipped ($(left) s left, needs $need)"; return 1; fi
         echo "stage $n: start ($(left) s left)"; smi; return 0; }
M=(--min-time 0.03 --max-noise 0.02 --set measure.timeout=1 --set measure.power_time=0.3)
# `run` on one preset at SQ 8192 with its power pass (presets, settle); the caller adds rounds, kernels and power.
P=(-q --set 'sweep.sq=[8192]' --top-k 1 --min-time 0.05 --max-noise 0.01 --set measure.timeout=2 --set measure.throttle=0)
# The training step: correctness first (bitwise equal gradients across strategies, products against fp64 host
# references, the cast-transpose kernel), then one measured step per preset and precision.
# compute-sanitizer memcheck of one small training step (every strategy, dH 64).
train_memcheck() {
  command -v compute-sanitizer > /dev/null || { echo "train memcheck: no compute-sanitizer"; return 0; }
  timeout "$(cap 120)" compute-sanitizer --tool memcheck --error-exitcode 3 "$B/tests/test_train_step_gpu" \
    --gtest_filter='*StrategiesGiveBitwiseEqualGradients/*hd64*' > "$O/train_memcheck.log" 2>&1
  echo "train memcheck: exit $? ($(grep -E 'ERROR SUMMARY' "$O/train_memcheck.log" | tail -1))"
}
# `dropbench dropout` at 2^29 elements (the copy variant: the GPU's device-to-device rate) into $O/dropout.json.
dropout_report() {
  timeout 60 "$B/dropbench" dropout --config configs/quick.json --set workload.sq=8192 --set measure.min_time=0.2 \
    --set measure.timeout=5 --set 'sweep.elements=[536870912]' -o "$O/dropout.json" > "$O/dropout.md" 2>> "$O/err.log"
  echo "dropout: exit $?"
}
# The cast_transpose launches of one fp8 training step per preset under ncu, isolated (kernel replay, caches
# flushed, clocks as found), and their table against the model.
stage_casts() {
  want casts 240 || return 0
  dropout_report
  command -v ncu > /dev/null || { echo "casts: ncu not installed"; return 0; }
  local p pairs=()
  for p in ${CAST_PRESETS:-8b 70b 405b}; do
    [ "$(left)" -lt 60 ] && { echo "casts $p: skipped ($(left) s left)"; continue; }
    timeout "$(cap 180)" ncu --clock-control none --csv --page details --print-units base --kernel-name-base demangled \
      --kernel-name regex:cast_transpose_kernel --launch-count "${CAST_LAUNCHES:-25}" \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,sm__cycles_elapsed.avg.per_second,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed \
      "$B/dropbench" run --config "configs/llama3-$p.json" -q --no-explore --pipelines stored --set workload.pass=train \
      --set workload.dtype=fp8 --set 'sweep.sq=[8192]' --set 'sweep.rounds=[7]' --set measure.min_samples=1 \
      --set measure.max_samples=1 --set measure.warmup=0 --set measure.power_time=0 --set measure.throttle=0 \
      --set measure.timeout=2 --min-time 0 -o "/tmp/stages_casts_$p.json" > "$O/ncu_casts_$p.csv" 2>&1
    echo "casts ncu $p: exit $?"
    pairs+=("configs/llama3-$p.json=$O/ncu_casts_$p.csv")
  done
  [ ${#pairs[@]} -gt 0 ] && { python3 scripts/cast_ncu.py --dropbench "$B/dropbench" \
    --machine "${CAST_MACHINE:-configs/machines/h100-sxm.json}" --copy "$O/dropout.json" -o "$O/cast_ncu.json" \
    --md "$O/cast_ncu.md" "${pairs[@]}" 2>&1 | tail -25; echo "cast_ncu.py: exit ${PIPESTATUS[0]}"; }
  return 0
}
# The step's GEMMs alone: (name sq embed q_heads kv_heads) puts each shape in `dropbench gemm`'s terms, M = sq,
# K = embed, N = (q_heads + 2 kv_heads) x 128 (N = E: E / 128 - 16 query heads beside 8 KV heads).
stage_gemms() {
  want gemms 60 || return 0
  local p e hq hkv n sh
  for p in ${GEMM_PRESETS:-8b 70b 405b}; do
    read -r e hq hkv <<< "$(python3 -c "import json; w = json.load(open('configs/llama3-$p.json'))['workload']
print(w['embed'], w['q_heads'], w['kv_heads'])")"
    n=$(( (hq + 2 * hkv) * 128 ))
    for sh in "qkv 8192 $e $hq $hkv" "out 8192 $e $((e / 128 - 16)) 8" "out-dw $e 8192 $((e / 128 - 16)) 8" \
              "qkv-dx 8192 $n $((e / 128 - 16)) 8" "qkv-dw $n 8192 $((e / 128 - 16)) 8"; do
      read -r name sq k q kv <<< "$sh"
      [ "$(left)" -lt 20 ] && { echo "gemms $p $name: skipped ($(left) s left)"; continue; }
      timeout "$(cap 60)" "$B/dropbench" gemm -q --top-k "${GEMM_TOPK:-1}" --set "sweep.sq=[$sq]" --set "sweep.embed=[$k]" \
        --set "workload.q_heads=$q" --set "workload.kv_heads=$kv" --set 'sweep.dtype=[bf16,fp8]' "${M[@]}" \
        --set measure.throttle=0 --set "measure.power_time=${GEMM_POWER_TIME:-1}" \
        -o "$O/gemm_${p}_$name.json" >> "$O/gemms.md" 2>> "$O/err.log"
      echo "gemms $p $name (M $sq, N $(( (q + 2 * kv) * 128 )), K $k): exit $?"
    done
  done
  return 0
}
stage_train() {
  want train 200 || return 0
  local x p dt presets=${TRAIN_PRESETS:-8b 70b} dtypes=${TRAIN_DTYPES:-bf16 fp8}
  [ "${TRAIN_TESTS:-1}" = 1 ] && for x in test_train_step_gpu test_cast_transpose_gpu; do
    timeout "$(cap 150)" "$B/tests/$x" > "$O/$x.log" 2>&1
    echo "$x: exit $? ($(grep -c '^\[       OK' "$O/$x.log") ok, $(grep -c '^\[  FAILED  \] .*(' "$O/$x.log") failed)"
  done
  [ "${TRAIN_TESTS:-1}" = 1 ] && { timeout "$(cap 60)" "$B/tests/test_gemm_gpu" --gtest_filter='GemmTrainOperands.*' \
    > "$O/gemm_train_operands.log" 2>&1; echo "GemmTrainOperands: exit $?"; }
  [ "${TRAIN_TESTS:-1}" = 1 ] && train_memcheck
  for p in $presets; do
    for dt in $dtypes; do
      [ "$(left)" -lt 60 ] && { echo "train $p $dt: skipped ($(left) s left)"; continue; }
      timeout "$(cap 300)" "$B/dropbench" run --config "configs/llama3-$p.json" "${P[@]}" --set workload.pass=train \
        --set "workload.dtype=$dt" --set "sweep.rounds=${TRAIN_ROUNDS:-[3,5,7]}" --set measure.power_time=0.3 \
        -o "$O/train_llama3-${p}_$dt.json" > "$O/train_llama3-${p}_$dt.md" 2>> "$O/err.log"
      echo "train $p $dt: exit $?"; smi
    done
  done
  # The PyTorch peers of the step (SDPA cuDNN / FA2 with dropout, matmul / _scaled_mm GEMMs with autograd), both
  # precisions in one report per preset, then dropbench's best strategy against the best peer, per precision.
  local vs=()
  for p in $presets; do
    want "peers train $p" 40 || continue
    PYTHONUNBUFFERED=1 timeout "$(cap 150)" python3 scripts/peers.py --dropbench "$B/dropbench" --config "configs/llama3-$p.json" \
      --only train --sq 8192 --dtype "${dtypes// /,}" --min-time 0.1 -q \
      -o "$O/peers_train_llama3-$p.json" >> "$O/peers.log" 2>&1
    echo "peers train $p: exit $?"; smi
    for dt in $dtypes; do
      [ -f "$O/train_llama3-${p}_$dt.json" ] && [ -f "$O/peers_train_llama3-$p.json" ] &&
        vs+=(--versus "$O/train_llama3-${p}_$dt.json" "$O/peers_train_llama3-$p.json")
    done
  done
  [ ${#vs[@]} -gt 0 ] && python3 scripts/peers.py "${vs[@]}" | tee "$O/versus_train.md"
  return 0
}
for s in "${STAGES[@]}"; do
  case $s in
    train) stage_train ;;
    casts) stage_casts ;;
    gemms) stage_gemms ;;
    trainmc) want trainmc 40 && train_memcheck ;;
    bwdprof)
      want bwdprof 120 || continue
      timeout "$(cap 300)" "$B/dropbench" profile --kernels attention_bwd --out "$O/profile_bwd.json" \
        --ncu-csv "$O/profile_bwd_csv" > "$O/profile_bwd.log" 2>&1
      echo "bwdprof: exit $?"; tail -20 "$O/profile_bwd.log" ;;
    bwdncu)
      want bwdncu 90 || continue
      command -v ncu > /dev/null || { echo "bwdncu: ncu not installed"; continue; }
      ncu --query-metrics 2>/dev/null | grep -E 'gmma|tensor_op|mem_shared|lsu_wavefronts' > "$O/ncu_query_metrics.txt"
      for pt in "128 false" "128 true" "64 false" "64 true"; do
        read -r hd cz <<< "$pt"
        [ "$(left)" -lt 40 ] && { echo "bwdncu $pt: skipped ($(left) s left)"; continue; }
        G=(--set workload.q_heads=32 --set workload.kv_heads=8 --set "workload.head_dim=$hd" --set 'sweep.sq=[8192]'
           --set "sweep.causal=[$cz]" --set 'sweep.pass=[bwd]' --set workload.attention_kernel=wgmma --set 'sweep.rounds=[7]')
        f="$O/ncu_bwd_${hd}_$([ "$cz" = true ] && echo causal || echo full)_none.csv"
        # ncu's demangled name spells the head dim with a cast: attn_bwd_wgmma_kernel<(int)128, (dropbench::DropoutMode)0>
        timeout "$(cap 90)" ncu --clock-control none --csv --page raw --section SpeedOfLight --section ComputeWorkloadAnalysis \
          --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Chart --section MemoryWorkloadAnalysis_Tables \
          --section WarpStateStats --section SchedulerStats --section InstructionStats --section Occupancy \
          --kernel-name-base demangled --kernel-name "regex:attn_bwd_wgmma_kernel<.*$hd, .*DropoutMode\\)0>" --launch-count 1 \
          "$B/dropbench" attention -q --min-time 0 --set measure.min_samples=1 --set measure.max_samples=1 \
          --set measure.warmup=0 "${G[@]}" > "$f" 2>&1
        echo "bwdncu $pt: exit $? ($(grep -c '^"' "$f") csv lines)"
      done
      python3 scripts/ncu_bwd_table.py "$O"/ncu_bwd_*.csv --md "$O/ncu_bwd.md" --json "$O/ncu_bwd.json" | head -40 ;;
    bwdgqa)
      want bwdgqa 90 || continue
      for hq in 32 64 128; do
        G=(--set "workload.q_heads=$hq" --set workload.kv_heads=8 --set workload.head_dim=128 --set 'sweep.sq=[8192]'
           --set 'sweep.causal=[true]' --set 'sweep.pass=[bwd]' --set workload.attention_kernel=wgmma)
        # 0.4 s per variant: a 128-head call takes 12 ms, and these rows are fit points of the model's backward
        timeout "$(cap 60)" "$B/dropbench" attention -q "${G[@]}" --min-time 0.4 --max-noise 0.02 \
          -o "$O/attn_bwd_hq$hq.json" > "$O/attn_bwd_hq$hq.md" 2>&1
        echo "bwdgqa hq $hq: exit $?"
        command -v ncu > /dev/null || continue
        timeout "$(cap 90)" ncu --clock-control none --csv --page details --section SpeedOfLight \
          --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
          --section ComputeWorkloadAnalysis --section Occupancy --kernel-name-base demangled \
          --kernel-name 'regex:DropoutMode\)0>' --launch-count 1 "$B/dropbench" attention -q --min-time 0 \
          --set measure.min_samples=1 --set measure.max_samples=1 --set measure.warmup=0 "${G[@]}" \
          > "$O/ncu_bwd_hq$hq.csv" 2>&1
        echo "bwdgqa ncu hq $hq: exit $?"
      done ;;
    build)
      [ -n "$PKG" ] && { echo "build: skipped (running the package's binaries)"; continue; }
      want build 60 || continue
      cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" > "$O/configure.log" 2>&1
      # $BUILD_TARGETS (space-separated): only those targets, e.g. "dropbench test_attention_gpu dropbench_attention"
      timeout 300 cmake --build "$B" -j "$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS} > "$O/build.log" 2>&1 ||
        { echo "build failed"; tail -30 "$O/build.log"; exit 1; }
      grep -m1 -o 'git_sha[^,]*' "$B/generated/version.h" 2>/dev/null; "$B/dropbench" --version 2>&1 | head -2 ;;
    gpu)
      want gpu ${GPU_NEED:-150} || continue
      if [ -n "$PKG" ]; then
        GPU_TEST_TIMEOUT=$(cap "${GPU_TEST_TIMEOUT:-300}") timeout $(( $(left) - 10 )) scripts/gpu_tests.sh "$B" "$O/gpu" \
          > "$O/gpu_tests.log" 2>&1
        echo "gpu tests: exit $?"; grep -E "^    |[1-9][0-9]* failed|\(exit [1-9]" "$O/gpu_tests.log" | grep -v "^gpu tests" |
          head -20
        tail -1 "$O/gpu_tests.log"
        continue
      fi
      timeout $(( $(left) - 10 )) ctest --test-dir "$B" -L gpu -E "ProfileGpu${GPU_E:+|$GPU_E}" ${GPU_R:+-R "$GPU_R"} \
        --no-tests=error --timeout "${GPU_TEST_TIMEOUT:-120}" --output-on-failure -j 1 > "$O/gpu_tests.log" 2>&1
      echo "gpu tests: exit $?"; grep -E "tests passed|tests failed|\(Failed\)|\(SEGFAULT\)|Timeout" "$O/gpu_tests.log" | head -20 ;;
    profile)
      [ -n "$PKG" ] && { echo "profile: skipped (the package has no test_profile_gpu)"; continue; }
      want profile 300 || continue
      DROPBENCH_PROFILE_GPU_KEEP="$O/profile" timeout 360 ctest --test-dir "$B" -R ProfileGpu --output-on-failure \
        > "$O/profile_gpu.log" 2>&1
      echo "profile: exit $?"; grep -E "tests passed|tests failed|Passed|Failed" "$O/profile_gpu.log" | head -5 ;;
    rngrep)
      want rngrep 60 || continue
      timeout 90 "$B/dropbench" rng --config configs/llama3-70b.json -q --set 'sweep.sq=[4096,8192]' \
        --set 'sweep.rounds=[3,5,7,10]' --set 'sweep.threshold_bits=[8,32]' --set 'sweep.layout=[tile]' \
        "${M[@]}" -o "$O/rng.json" > "$O/rng.md" 2>> "$O/err.log"
      echo "rng: exit $?" ;;
    sigterm)
      want sigterm 30 || continue
      timeout --preserve-status -s TERM 12 "$B/dropbench" run --config configs/llama3-8b.json -q --no-explore \
        --set 'sweep.sq=[2048,4096,8192]' --set 'sweep.rounds=[7]' --min-time 0.05 --set measure.power_time=0 \
        -o "$O/sigterm.json" > /dev/null 2> "$O/sigterm.err"
      echo "sigterm: exit $? (143 expected)"; cat "$O/sigterm.err"
      python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('complete', r['complete'], 'reason', r.get('incomplete_reason'))" "$O/sigterm.json" ;;
    dropout)
      want dropout 60 || continue
      PYTHONUNBUFFERED=1 timeout 40 python3 scripts/peers.py --dropbench "$B/dropbench" --only dropout --config configs/quick.json \
        --set 'sweep.elements=[536870912]' --min-time 0.2 -o "$O/peers_dropout.json" --md "$O/peers_dropout.md" >> "$O/peers.log" 2>&1
      echo "peers dropout: exit $?"
      dropout_report ;;
    settle)
      want settle 100 || continue
      timeout $(( $(left) - 10 )) "$B/dropbench" run --config configs/llama3-70b.json "${P[@]}" --set 'sweep.rounds=[7]' \
        --set 'sweep.attention_kernel=[wgmma]' --set measure.power_time=0.3 --set measure.power_settle=0.5 \
        -o "$O/settle_llama3-70b.json" > "$O/settle_llama3-70b.md" 2>> "$O/err.log"
      echo "settle: exit $?" ;;
    attnrep)
      want attnrep 90 || continue
      timeout 80 "$B/dropbench" attention --config configs/llama3-70b.json -q --set 'sweep.sq=[4096,8192]' \
        --set 'sweep.rounds=[3,7]' --set 'sweep.attention_kernel=[mma,wgmma]' "${M[@]}" \
        -o "$O/attention.json" > "$O/attention.md" 2>> "$O/err.log"
      echo "attention: exit $?" ;;
    presets)
      # $PRESETS picks presets (default "8b 70b 405b"); a report left by an earlier call of the same build
      # (timed out: "complete": false) in $PRESET_RESUME_DIR/run_llama3-<p>.json is resumed, not restarted.
      for p in ${PRESETS:-8b 70b 405b}; do
        want "presets $p" 100 || continue
        t0=$(date +%s); res=()
        [ -n "${PRESET_RESUME_DIR:-}" ] && [ -f "$PRESET_RESUME_DIR/run_llama3-$p.json" ] && res=(--resume "$PRESET_RESUME_DIR/run_llama3-$p.json")
        timeout $(( $(left) - 10 )) "$B/dropbench" run --config configs/llama3-$p.json "${P[@]}" \
          --set "sweep.rounds=${PRESET_ROUNDS:-[7]}" --set 'sweep.attention_kernel=[mma,wgmma]' \
          --set "measure.power_time=${POWER_TIME:-0.3}" ${PRESET_ARGS:-} "${res[@]}" -o "$O/run_llama3-$p.json" > "$O/run_llama3-$p.md" 2>> "$O/err.log"
        rc=$?; echo "run $p: exit $rc in $(( $(date +%s) - t0 )) s${res:+ (resumed)}"; smi
        # A report dropbench refuses to resume (another build or options: exit 2, one line in err.log) is not
        # retried here: the line says why, and the next call can leave PRESET_RESUME_DIR unset.
        [ "$rc" = 2 ] && [ ${#res[@]} -gt 0 ] && echo "run $p: --resume refused: $(tail -1 "$O/err.log")"
      done
      for p in ${PRESETS:-8b 70b 405b}; do
        want "peers $p" 30 || continue
        PYTHONUNBUFFERED=1 timeout 60 python3 scripts/peers.py --dropbench "$B/dropbench" --config configs/llama3-$p.json \
          --only e2e --sq 8192 --min-time 0.1 -q -o "$O/peers_e2e_llama3-$p.json" >> "$O/peers.log" 2>&1
        echo "peers e2e $p: exit $?"
      done ;;
    shard)
      want shard 40 || continue
      R=(rng --config configs/llama3-70b.json -q --set 'sweep.sq=[8192]' --set 'sweep.rounds=[3,7]' \
         --set 'sweep.threshold_bits=[8]' --set 'sweep.layout=[tile,u8]' --min-time 0.1)
      mkdir -p "$O/shard"
      for i in 0 1; do timeout 30 "$B/dropbench" "${R[@]}" --shard $i/2 -o "$O/shard/rng_shard$i.json" > /dev/null 2>> "$O/err.log"; echo "shard $i/2: exit $?"; done
      timeout 30 "$B/dropbench" "${R[@]}" -o "$O/shard/rng_whole.json" > /dev/null 2>> "$O/err.log"; echo "whole: exit $?"
      "$B/dropbench" merge "$O/shard/rng_shard0.json" "$O/shard/rng_shard1.json" -o "$O/shard/rng_merged.json"; echo "merge: exit $?"
      "$B/dropbench" compare "$O/shard/rng_whole.json" "$O/shard/rng_merged.json" > "$O/shard/compare.md" 2>&1; echo "compare: exit $?"
      cat "$O/shard/compare.md" | head -30 ;;
    attn)
      want attn 100 || continue
      timeout 80 "$B/dropbench" attention --config configs/llama3-8b.json -q --set 'sweep.sq=[8192,16384]' \
        --set 'sweep.causal=[false,true]' --set 'sweep.head_dim=[64,128]' --set 'sweep.rounds=[7]' \
        --set 'sweep.attention_kernel=[mma,wgmma]' "${M[@]}" -o "$O/attention.json" > "$O/attention.md" 2>> "$O/err.log"
      echo "attention: exit $?"; smi
      PYTHONUNBUFFERED=1 timeout 80 python3 scripts/peers.py --dropbench "$B/dropbench" --config configs/llama3-8b.json \
        --only attention --sq 8192,16384 --causal false,true --head-dim 64,128 --min-time 0.1 -q \
        -o "$O/peers_attention.json" >> "$O/peers.log" 2>&1
      echo "peers attention: exit $?" ;;
    h2h)
      want h2h 120 || continue
      DROPBENCH_ATTENTION_LIB="$B/libdropbench_attention.so" PYTHONUNBUFFERED=1 timeout $(( $(left) - 10 )) \
        python3 scripts/h2h_attention.py ${H2H_ARGS:---sq 8192,16384 --head-dim 128,64 --causal false,true} \
        -o "$O/h2h${H2H_TAG:-}.json" --md "$O/h2h${H2H_TAG:-}.md" > "$O/h2h${H2H_TAG:-}.log" 2>&1
      echo "h2h: exit $?"; tail -25 "$O/h2h${H2H_TAG:-}.md" 2>/dev/null || tail -20 "$O/h2h${H2H_TAG:-}.log" ;;
    bwdrec)
      # The files of results/<gpu>/attention/backward/ (and its modes/), the commands of scripts/bwd_device.sh's
      # timing part (scripts/bwd_record.sh) with its time caps, from this build or package; a step that would get
      # less than its floor of what is left says skipped
      want bwdrec 120 || continue
      . scripts/bwd_record.sh
      L="$B/libdropbench_attention.so"
      { bwd_context; "$B/dropbench" --version 2>&1 | head -1; } > "$O/context.log"
      # rec NAME FLOOR_S CAP_S CMD...: CMD under timeout min(CAP_S, what is left), output in $O/NAME.log
      rec() { local n=$1 floor=$2 c=$3; shift 3
              [ "$(left)" -lt "$floor" ] && { echo "bwdrec $n: skipped ($(left) s left, needs $floor)"; return; }
              PYTHONUNBUFFERED=1 timeout "$(cap "$c")" "$@" > "$O/$n.log" 2>&1; echo "bwdrec $n: exit $?"; }
      rec h2h_bwd 90 330 python3 scripts/h2h_attention_bwd.py --lib "$L" -o "$O/h2h_bwd.json" --md "$O/h2h_bwd.md"
      rec h2h_bwd_modes 80 150 python3 scripts/h2h_attention_bwd.py --lib "$L" "${BWD_MODES_ARGS[@]}" \
        -o "$O/h2h_bwd_modes.json" --md "$O/h2h_bwd_modes.md"
      rec cli_wgmma 60 120 "$B/dropbench" "${BWD_CLI_WGMMA[@]}" -o "$O/cli_wgmma.json"
      rec cli_pass 30 60 "$B/dropbench" "${BWD_CLI_PASS[@]}" -o "$O/cli_pass.json"
      smi; grep -E '^### |^\| (cuDNN|ours)' "$O/h2h_bwd_modes.md" 2>/dev/null | head -30 ;;
    sanitize)
      # compute-sanitizer memcheck and racecheck of the wgmma kernels as dispatched, on the
      # short shapes and ragged ones (every mode: none, mask, fused), and memcheck of p = 0 == none (dH 64 and 128);
      # $SANITIZE_FILTER replaces the shape filter
      want sanitize 120 || continue
      command -v compute-sanitizer > /dev/null || { echo "sanitize: no compute-sanitizer"; continue; }
      F=${SANITIZE_FILTER:-'Shapes/AttentionVsRef.*/wgmma_B*_S77_*:Shapes/AttentionVsRef.*/wgmma_B2_S300_*:Shapes/AttentionVsRef.*/wgmma_B1_S513_*'}
      sanitize_tests memcheck memcheck.log "$F:Kernels/AttentionGpu.ZeroDropoutEqualsNoneBitwise/wgmma" 150
      [ "$(left)" -lt 40 ] && { echo "racecheck: skipped ($(left) s left)"; continue; }
      sanitize_tests racecheck racecheck.log "$F" 200 ;;
    ncu)
      # Nsight Compute of our wgmma attention (none, mask) beside PyTorch's cuDNN SDPA, one launch each
      # (scripts/h2h_attention.py --profile-once: NVTX range dbprof), SQ $NCU_SQ (default 8192), non-causal, dH
      # $NCU_HD (default "128 64"): ncu_details_hd*.csv (speed of light, warp states, compute workload) and the
      # per-SASS source counters (ncu_source_hd*.csv.gz). Needs $B/libdropbench_attention.so and PyTorch.
      want ncu 120 || continue
      command -v ncu > /dev/null || { echo "ncu: not installed"; continue; }
      for hd in ${NCU_HD:-128 64}; do
        [ "$(left)" -lt 60 ] && { echo "ncu hd $hd: skipped ($(left) s left)"; continue; }
        DROPBENCH_ATTENTION_LIB="$B/libdropbench_attention.so" timeout "$(cap 240)" ncu --clock-control none --nvtx \
          --nvtx-include 'dbprof/' --section SpeedOfLight --section WarpStateStats --section SourceCounters \
          --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis -f -o "/tmp/stages_ncu_hd$hd" \
          python3 scripts/h2h_attention.py --profile-once --sq "${NCU_SQ:-8192}" --head-dim "$hd" --causal false \
          --variants wgmma:none,wgmma:mask,cudnn:none > "$O/ncu_hd$hd.log" 2>&1
        echo "ncu hd $hd: exit $?"
        ncu --import "/tmp/stages_ncu_hd$hd.ncu-rep" --page details --csv > "$O/ncu_details_hd$hd.csv" 2>&1
        ncu --import "/tmp/stages_ncu_hd$hd.ncu-rep" --page source --csv --print-source sass 2>/dev/null \
          | gzip > "$O/ncu_source_hd$hd.csv.gz"
      done ;;
    sweep)
      want sweep 150 || continue
      timeout $(( $(left) - 50 )) "$B/dropbench" run --config configs/paper-sweep.json -q --no-explore \
        --set 'sweep.sq=[2048,8192,32768]' --set 'sweep.embed=[4096,16384]' --set 'sweep.rounds=[7]' \
        --set 'sweep.attention_kernel=[mma,wgmma]' "${M[@]}" -o "$O/run_paper_reduced.json" > "$O/run_paper_reduced.md" 2>> "$O/err.log"
      echo "paper sweep: exit $?"; smi
      PYTHONUNBUFFERED=1 timeout $(( $(left) - 5 )) python3 scripts/peers.py --dropbench "$B/dropbench" --config configs/paper-sweep.json \
        --only e2e --sq 2048,8192,32768 --embed 4096,16384 --min-time 0.1 -q -o "$O/peers_e2e_paper_reduced.json" >> "$O/peers.log" 2>&1
      echo "peers e2e: exit $?" ;;
    trainpeer)
      want trainpeer 240 || continue
      L="$B/libdropbench_attention.so"
      timeout "$(cap 300)" python3 tests/torch_op_gpu.py --lib "$L" > "$O/torch_op_gpu.log" 2>&1
      echo "torch op gpu test: exit $? (77 = skipped)"; tail -3 "$O/torch_op_gpu.log"
      PYTHONUNBUFFERED=1 timeout $(( $(left) - 10 )) python3 scripts/train_peer.py --lib "$L" ${TRAIN_ARGS:-} \
        -o "$O/train_peer.json" --md "$O/train_peer.md" > "$O/train_peer.log" 2>&1
      echo "train peer: exit $?"; tail -25 "$O/train_peer.md" 2>/dev/null || tail -20 "$O/train_peer.log" ;;
    *) echo "unknown stage $s"; exit 2 ;;
  esac
done
smi
echo "done in $(( $(date +%s) - T0 )) s"
