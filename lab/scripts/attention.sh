#!/usr/bin/env bash
# Standalone build / run of the attention kernels' GPU test and benchmark with nvcc directly (no CMake, so it
# works while other modules are in progress). `build` compiles into build-attn/ (ptxas resource reports in
# build-attn/ptxas.log (mma.sync kernel) and build-attn/ptxas_wgmma.log (wgmma kernel)); `run` executes the
# test and the benchmark there (both kernel families; SQS="8192 16384" by default), logs under $OUT (or build-attn/).
#   scripts/attention.sh build        # here (needs nvcc, GoogleTest)
#   scripts/attention.sh run          # on a machine with an H200 (binaries are self-contained: static cudart)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=build-attn
NVCC=${NVCC:-nvcc}
FLAGS=(-gencode=arch=compute_90a,code=sm_90a -std=c++20 --expt-relaxed-constexpr -O3 -lineinfo -I. -Itests)
case "${1:-build}" in
  build)
    mkdir -p $B
    $NVCC "${FLAGS[@]}" -Xptxas -v -c kernels/attention/attention.cu -o $B/attention.o 2> $B/ptxas.log &
    $NVCC "${FLAGS[@]}" -Xptxas -v -c kernels/attention/attention_wgmma.cu -o $B/attention_wgmma.o 2> $B/ptxas_wgmma.log &
    $NVCC "${FLAGS[@]}" -c kernels/attention/attention_ref.cu -o $B/attention_ref.o &
    wait
    if grep -E "error|warning" $B/ptxas_wgmma.log; then echo "wgmma kernel: compiler errors/warnings (above)"; fi
    $NVCC "${FLAGS[@]}" -c tests/test_attention_gpu.cu -o $B/test_attention_gpu.o &
    $NVCC "${FLAGS[@]}" -Xptxas -v -c bench/bench_attention.cu -o $B/bench_attention.o 2> $B/ptxas_bench.log &
    g++ -std=c++20 -O2 -I. -I/usr/local/cuda/include -c kernels/common/check.cpp -o $B/check_stub.o
    wait
    LINK=(-Xcompiler -static-libstdc++ -Xcompiler -static-libgcc)
    $NVCC -arch=sm_90a "${LINK[@]}" $B/test_attention_gpu.o $B/attention.o $B/attention_wgmma.o $B/attention_ref.o $B/check_stub.o \
      -lcublasLt -lgtest -lgtest_main -lpthread -o $B/test_attention_gpu
    $NVCC -arch=sm_90a "${LINK[@]}" $B/bench_attention.o $B/attention.o $B/attention_wgmma.o $B/attention_ref.o $B/check_stub.o -lcublasLt -o $B/bench_attention
    echo "mma.sync kernel instances:"
    grep -E "registers|spill" $B/ptxas.log | paste - - | sed 's/ptxas info    : //' | sort | uniq -c | sort -rn | head -20
    echo "wgmma kernel instances:"
    grep -E "registers|spill" $B/ptxas_wgmma.log | paste - - | sed 's/ptxas info    : //' | sort | uniq -c | sort -rn | head -20
    ls -la $B/test_attention_gpu $B/bench_attention
    ;;
  run)
    LOG=${OUT:-$B}
    nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv | tee $LOG/smi.txt || true
    set +e
    if ! $B/test_attention_gpu --gtest_list_tests >/dev/null 2>&1; then
      echo "prebuilt binaries do not start here ($(ldd --version | head -1)); building the benchmark with nvcc"
      $B/test_attention_gpu --gtest_list_tests 2>&1 | head -3
      $NVCC "${FLAGS[@]}" bench/bench_attention.cu kernels/attention/attention.cu kernels/attention/attention_wgmma.cu kernels/attention/attention_ref.cu kernels/common/check.cpp -lcublasLt -o $B/bench_attention
    fi
    timeout ${TEST_TIMEOUT:-300} $B/test_attention_gpu --gtest_brief=0 ${GTEST_FILTER:+--gtest_filter=$GTEST_FILTER} 2>&1 | tee $LOG/test.log | grep -E "FAILED|PASSED|Failure|error|tests ran" | tail -40
    echo "test exit: ${PIPESTATUS[0]}"
    if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
      timeout 180 compute-sanitizer --tool memcheck --error-exitcode 3 $B/test_attention_gpu \
        --gtest_filter='Shapes/AttentionVsRef.*S77*:Shapes/AttentionVsRef.*S300*' > $LOG/memcheck.log 2>&1
      echo "memcheck exit: $? ($(grep -c 'Invalid\|ERROR SUMMARY: [1-9]' $LOG/memcheck.log) error lines)"
      timeout 180 compute-sanitizer --tool racecheck --error-exitcode 3 $B/test_attention_gpu \
        --gtest_filter='Shapes/AttentionVsRef.*B1_S77*' > $LOG/racecheck.log 2>&1
      echo "racecheck exit: $? ($(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $LOG/racecheck.log | tr '\n' ' '))"
    fi
    for sq in ${SQS:-8192 16384}; do
      $B/bench_attention $sq ${HEADS:-32} ${KV_HEADS:-8} ${REPS:-30} ${HD:-0} 2>&1 | tee -a $LOG/bench.log | grep -E "^[0-9]|^dH|^B=|MISMATCH|error"
      if [ "${TORCH:-1}" = 1 ] && command -v python3 >/dev/null; then
        timeout 150 python3 lab/scripts/attention_torch_ref.py $sq 2>&1 | tee -a $LOG/torch.log | grep -v Warning
      fi
    done
    nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv | tee -a $LOG/smi.txt || true
    ;;
  profile)
    # Nsight Compute (full set, clocks left alone) of one wgmma launch per named mode at SQ ${PSQ:-4096}, dH 128,
    # non-causal: the benchmark's wgmma launches come 7 per mode (check + 3 warm-ups + 3 timed) in the order
    # none, mask, fused (a), fused (b); text reports under $OUT.
    LOG=${OUT:-$B}
    for pm in ${PMODES:-none:0 fused_a:14}; do
      name=${pm%%:*}; skip=${pm##*:}
      timeout 240 ncu --clock-control none -k regex:attn_fwd_wgmma --launch-skip $skip --launch-count 1 --set full \
        --import-source no -f -o /tmp/prof_$name $B/bench_attention ${PSQ:-4096} 32 8 3 128 > /tmp/prof_$name.log 2>&1
      echo "ncu $name: exit $? $(grep -c '==PROF==' /tmp/prof_$name.log) prof lines"
      ncu --import /tmp/prof_$name.ncu-rep --page details > $LOG/prof_${name}_details.txt 2>&1
      ncu --import /tmp/prof_$name.ncu-rep --page source --csv --print-source sass > $LOG/prof_${name}_sass.csv 2>&1
    done
    ;;
  compare)
    # Session 5's dropout-variant comparison (docs/attention.md "Cutting the dropout instructions"), with binaries
    # from a CMake build dir BD (default build): GPU tests, then bench_attention BENCH_MODE=rr (round-robin: none,
    # mask new/old/packed, fused (a) new/old/alternative, fused (b) new/old; SQ in $SQS, dH 128 both causal, dH 64), then Nsight Compute of one
    # launch of each variant (BENCH_MODE=seq, SQ 8192 non-causal, dH 128) unless NCU=0. Logs under $OUT.
    LOG=${OUT:-$B}; BD=${BD:-build}
    nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv | tee $LOG/smi.txt || true
    set +e
    if [ "${TESTS:-1}" = 1 ]; then
      timeout 120 $BD/tests/test_attention_gpu 2>&1 | tee $LOG/test_attention.log | grep -E "FAILED|PASSED|tests ran" | tail -15
      echo "test_attention_gpu exit: ${PIPESTATUS[0]}"
      timeout 120 $BD/tests/test_pipelines_gpu 2>&1 | tee $LOG/test_pipelines.log | grep -E "FAILED|PASSED|tests ran" | tail -8
      echo "test_pipelines_gpu exit: ${PIPESTATUS[0]}"
    fi
    for sq in ${SQS:-8192 16384}; do
      BENCH_MODE=rr timeout 120 $BD/bench/bench_attention $sq 32 8 ${REPS:-25} 128 2>&1 | tee -a $LOG/rr.log | grep -E "^rr|MISMATCH|error"
    done
    BENCH_MODE=rr timeout 60 $BD/bench/bench_attention 8192 32 8 ${REPS64:-11} 64 2>&1 | tee -a $LOG/rr.log | grep -E "^rr|MISMATCH|error"
    nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv | tee -a $LOG/smi.txt || true
    snap() { if [ -n "${TARTO:-}" ]; then tar czf "$TARTO" -C "$(dirname $LOG)" "$(basename $LOG)"; fi; }
    snap
    if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
      timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 $BD/tests/test_attention_gpu \
        --gtest_filter='Shapes/AttentionVsRef.*wgmma*S77*:Shapes/AttentionVsRef.*wgmma*S300*:AttentionKernels.WgmmaFusedDesignsEqualMaskBitwise' > $LOG/memcheck.log 2>&1
      echo "memcheck exit: $? ($(grep -E 'ERROR SUMMARY|PASSED|FAILED' $LOG/memcheck.log | tr '\n' ' '))"
      timeout 60 compute-sanitizer --tool racecheck --error-exitcode 3 $BD/tests/test_attention_gpu \
        --gtest_filter='Shapes/AttentionVsRef.*wgmma*S77*' > $LOG/racecheck.log 2>&1
      echo "racecheck exit: $? ($(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED' $LOG/racecheck.log | tr '\n' ' '))"
      snap
    fi
    if [ "${NCU:-1}" = 1 ] && command -v ncu >/dev/null; then
      BENCH_MODE=seq BENCH_CAUSAL=0 timeout ${NCU_TIMEOUT:-120} ncu --clock-control none -k regex:attn_fwd_wgmma --launch-count 9 \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats --section SchedulerStats \
        --section WarpStateStats --metrics sm__inst_executed_pipe_alu.sum,sm__inst_executed_pipe_fma.sum,sm__inst_executed_pipe_fmaheavy.sum,sm__inst_executed_pipe_xu.sum,sm__inst_executed_pipe_lsu.sum,sm__inst_executed_pipe_uniform.sum,sm__inst_executed_pipe_tensor_op_gmma.sum \
        -f -o /tmp/ncu_s5 $BD/bench/bench_attention 8192 32 8 1 128 > $LOG/ncu_run.log 2>&1
      echo "ncu exit: $?"
      ncu --import /tmp/ncu_s5.ncu-rep --page raw --csv > $LOG/ncu_raw.csv 2>&1
      ncu --import /tmp/ncu_s5.ncu-rep --page details --csv > $LOG/ncu_details.csv 2>&1
      snap
      ls -la $LOG
    fi
    ;;
  s6)
    # Session 6's one device call (docs/attention.md "Masks made under S_j"), with prebuilt binaries in build-attn/
    # (or $B): clocks/power before, during (nvidia-smi every 500 ms) and after; the GPU test; bench_attention
    # BENCH_MODE=rr BENCH_RR_SET=s6 (none, mask coding 3 vs 1, fused (a) coding 3 vs 1) at SQ 8192 / 16384,
    # dH 128 / 64, causal and not, ${PASSES:-2} passes (each pass a fresh process per shape; no new pass after
    # PASS_DEADLINE s); compute-sanitizer memcheck of the coding test and the S77 shapes (ends by SAN_END s).
    # Logs under $OUT, tarred into $OUT/s6.tgz as they come.
    LOG=${OUT:-$B}; set +e
    snap() { tar czf $LOG/s6.tgz -C $LOG --exclude s6.tgz . 2>/dev/null; }
    nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,driver_version --format=csv | tee $LOG/smi.txt
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 500 > $LOG/smi_during.csv 2>&1 &
    SMI=$!
    if ! $B/test_attention_gpu --gtest_list_tests > /dev/null 2>&1; then
      echo "prebuilt binaries do not start here: $($B/test_attention_gpu --gtest_list_tests 2>&1 | head -2)"
      lt=$(find /usr/local /opt /usr/lib -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
      [ -n "$lt" ] && export LD_LIBRARY_PATH=$(dirname $lt):${LD_LIBRARY_PATH:-}
    fi
    if ! $B/test_attention_gpu --gtest_list_tests > /dev/null 2>&1; then
      echo "still not (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}); building here, one pass"; PASSES=1
      for u in kernels/attention/attention.cu kernels/attention/attention_wgmma.cu kernels/attention/attention_ref.cu tests/test_attention_gpu.cu bench/bench_attention.cu; do
        $NVCC "${FLAGS[@]}" -split-compile=0 -c $u -o $B/$(basename ${u%.cu}).o &
      done
      g++ -std=c++20 -O2 -I. -I/usr/local/cuda/include -c kernels/common/check.cpp -o $B/check_stub.o; wait
      $NVCC -arch=sm_90a $B/test_attention_gpu.o $B/attention.o $B/attention_wgmma.o $B/attention_ref.o $B/check_stub.o -lcublasLt -lgtest -lgtest_main -lpthread -o $B/test_attention_gpu
      $NVCC -arch=sm_90a $B/bench_attention.o $B/attention.o $B/attention_wgmma.o $B/attention_ref.o $B/check_stub.o -lcublasLt -o $B/bench_attention
    fi
    timeout ${TEST_TIMEOUT:-60} $B/test_attention_gpu > $LOG/test_attention.log 2>&1; echo "test_attention_gpu exit: $?"
    grep -E "^\[  (PASSED|FAILED) |tests ran|input seed" $LOG/test_attention.log; snap
    for pass in $(seq ${PASSES:-2}); do
      if [ $pass -gt 1 ] && [ $SECONDS -gt ${PASS_DEADLINE:-100} ]; then echo "pass $pass skipped: ${SECONDS}s gone"; break; fi
      for hd in 128 64; do
        for sq in ${SQS:-8192 16384}; do
          if [ $SECONDS -gt ${RR_DEADLINE:-150} ]; then echo "rr hd $hd sq $sq skipped: ${SECONDS}s gone"; continue; fi
          reps=$([ $hd = 128 ] && echo ${REPS:-21} || echo ${REPS64:-15})
          BENCH_MODE=rr BENCH_RR_SET=s6 timeout 60 $B/bench_attention $sq 32 8 $reps $hd > $LOG/rr_p${pass}_hd${hd}_sq${sq}.log 2>&1
          echo "rr pass $pass hd $hd sq $sq exit $?"
        done
      done
      cat $LOG/rr_p${pass}_*.log > $LOG/rr_pass$pass.log; rm -f $LOG/rr_p${pass}_*.log
      grep -E "^rr|MISMATCH|error" $LOG/rr_pass$pass.log | sed -E 's/ \(p10 [0-9. ]+p90 [0-9. ]+\)//; s/per-round ratio //'; snap
    done
    # The 70B preset's heads (64 q / 8 kv), causal dH 128, SQ 4096 / 8192 (results/h200/session6: 1.070-1.087).
    if [ $SECONDS -lt ${X70_DEADLINE:-125} ]; then
      for sq in 4096 8192; do
        BENCH_MODE=rr BENCH_RR_SET=s6 BENCH_CAUSAL=1 timeout 40 $B/bench_attention $sq 64 8 ${REPS70:-15} 128 >> $LOG/rr_70b.log 2>&1
        echo "rr 70b heads sq $sq exit $?"
      done
      grep -E "^rr|MISMATCH|error" $LOG/rr_70b.log | sed -E 's/ \(p10 [0-9. ]+p90 [0-9. ]+\)//; s/per-round ratio //'; snap
    fi
    kill $SMI 2>/dev/null
    nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv | tee -a $LOG/smi.txt
    if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer > /dev/null; then
      san=$(( ${SAN_END:-170} - SECONDS )); [ $san -gt ${SAN_TIMEOUT:-50} ] && san=${SAN_TIMEOUT:-50}
      echo "memcheck: ${san}s left for it"; [ $san -lt 10 ] && san=1
      timeout $san compute-sanitizer --tool memcheck --error-exitcode 3 $B/test_attention_gpu \
        --gtest_filter='AttentionKernels.WgmmaDropoutCodingsEqualBitwise:Shapes/AttentionVsRef.*wgmma*S77*' > $LOG/memcheck.log 2>&1
      echo "memcheck exit: $? ($(grep -E 'ERROR SUMMARY|PASSED|FAILED' $LOG/memcheck.log | tr '\n' ' '))"
    fi
    snap; ls -la $LOG
    ;;
  s7)
    # Session 7's device calls (docs/attention.md "Where mask mode's time goes"), prebuilt binaries in build-attn/:
    # nvidia-smi before / during (500 ms) / after; the GPU test; PHASE=probe: Nsight Compute (WarpStateStats,
    # SourceCounters, pipes) of one launch each of none and the mask codings (BENCH_RR_SET=s7, SQ 8192, dH 128,
    # non-causal), then rr at $RR_SHAPES; PHASE=final: rr at every shape (pass 1), memcheck (S77/S300 shapes + the
    # coding test), then passes up to ${PASSES:-2} while time is left (no new rr of pass >= 2 after RR_DEADLINE s). Logs under $S7_LOG (/tmp/s7),
    # tarred into $OUT/s7.tgz as they come (one file comes back).
    LOG=${S7_LOG:-/tmp/s7}; TGZ=${OUT:-$B}/s7.tgz; mkdir -p $LOG; set +e
    snap() { tar czf $TGZ -C $LOG --exclude '*.ncu-rep' . 2>/dev/null; }
    nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,driver_version --format=csv | tee $LOG/smi.txt
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 500 > $LOG/smi_during.csv 2>&1 &
    SMI=$!
    timeout ${TEST_TIMEOUT:-40} $B/test_attention_gpu > $LOG/test_attention.log 2>&1; echo "test_attention_gpu exit: $?"
    grep -E "^\[  (PASSED|FAILED) |tests ran|input seed" $LOG/test_attention.log; snap
    rr() {  # rr HD SQ CAUSAL REPS TAG
      BENCH_MODE=rr BENCH_RR_SET=s7 BENCH_CAUSAL=$3 timeout 40 $B/bench_attention $2 ${HEADS:-32} ${KV_HEADS:-8} $4 $1 > $LOG/rr_$5_hd$1_sq$2_c$3.log 2>&1
      echo "rr $5 hd $1 sq $2 causal $3 exit $? (${SECONDS}s)"
    }
    if [ "${PHASE:-probe}" = probe ]; then
      if command -v ncu > /dev/null; then
        BENCH_MODE=seq BENCH_RR_SET=s7 BENCH_CAUSAL=0 timeout ${NCU_TIMEOUT:-60} ncu --clock-control none -k regex:attn_fwd_wgmma \
          --launch-count ${NCU_COUNT:-7} --section SpeedOfLight --section WarpStateStats --section SourceCounters --section SchedulerStats \
          --metrics sm__inst_executed_pipe_alu.sum,sm__inst_executed_pipe_fma.sum,sm__inst_executed_pipe_xu.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active \
          -f -o $LOG/s7 $B/bench_attention 8192 32 8 1 128 > $LOG/ncu_run.log 2>&1
        echo "ncu exit: $? (${SECONDS}s)"
        ncu --import $LOG/s7.ncu-rep --page details --csv > $LOG/ncu_details.csv 2>&1
        ncu --import $LOG/s7.ncu-rep --page raw --csv > $LOG/ncu_raw.csv 2>&1
        ncu --import $LOG/s7.ncu-rep --page source --csv --print-source sass > $LOG/ncu_source.csv 2>&1
        gzip -f $LOG/ncu_source.csv $LOG/ncu_raw.csv; echo "ncu export done (${SECONDS}s)"; snap
      fi
      for sh in ${RR_SHAPES:-128:8192:0 128:16384:0 128:8192:1 64:8192:0 64:16384:1}; do
        IFS=: read hd sq c <<< "$sh"; [ $SECONDS -gt ${RR_DEADLINE:-100} ] && { echo "rr $sh skipped"; continue; }
        rr $hd $sq $c $([ $hd = 128 ] && echo ${REPS:-15} || echo ${REPS64:-11}) p1
      done
    else
      # pass 1, memcheck, then further passes while time is left
      for pass in $(seq ${PASSES:-2}); do
        for hd in 128 64; do for sq in 8192 16384; do for c in 0 1; do
          [ $pass -gt 1 ] && [ $SECONDS -gt ${RR_DEADLINE:-110} ] && { echo "rr p$pass hd $hd sq $sq c $c skipped"; continue; }
          rr $hd $sq $c $([ $hd = 128 ] && echo ${REPS:-15} || echo ${REPS64:-11}) p$pass
        done; done; done; snap
        if [ $pass = 1 ] && command -v compute-sanitizer > /dev/null; then
          timeout ${SAN_TIMEOUT:-60} compute-sanitizer --tool memcheck --error-exitcode 3 $B/test_attention_gpu \
            --gtest_filter='Shapes/AttentionVsRef.*S77*:Shapes/AttentionVsRef.*S300*:AttentionKernels.WgmmaDropoutCodingsEqualBitwise' > $LOG/memcheck.log 2>&1
          echo "memcheck exit: $? ($(grep -E 'ERROR SUMMARY|PASSED|FAILED' $LOG/memcheck.log | tr '\n' ' ')) (${SECONDS}s)"; snap
        fi
      done
    fi
    kill $SMI 2>/dev/null
    nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv | tee -a $LOG/smi.txt
    grep -h -E "^rr|MISMATCH|not bitwise" $LOG/rr_*.log 2>/dev/null | sed -E 's/ \(p10 [0-9. ]+p90 [0-9. ]+\)//; s/per-round ratio //' > $LOG/rr_summary.txt
    cat $LOG/rr_summary.txt; snap; ls -la $LOG
    ;;
  sass)
    # Per-instance SASS summary of the wgmma kernel (needs cuobjdump, and build-attn/attention_wgmma.o).
    LOG=${OUT:-$B}
    cuobjdump --dump-sass $B/attention_wgmma.o > $B/wgmma.sass
    awk '/Function :/ {name=$3} /HGMMA/ {hg[name]++} /STL|LDL/ {sp[name]++} /MUFU.EX2/ {ex[name]++} /IMAD.WIDE.U32/ {im[name]++}
         /^ +\/\*[0-9a-f]+\*\// {n[name]++}
         END {for (k in n) printf "%6d instr %4d HGMMA %4d EX2 %4d IMAD.WIDE.U32 %3d LDL/STL  %s\n", n[k], hg[k], ex[k], im[k], sp[k], k}' \
      $B/wgmma.sass | sort -k9 | tee $LOG/sass_summary.txt
    ;;
esac
