#!/usr/bin/env bash
# Standalone build / run of our wgmma FP8 GEMM's GPU test and benchmark with nvcc directly (no CMake; the
# CMake build with -DDROPBENCH_EXPERIMENTS=ON has them too: targets test_gemm_wgmma_gpu, bench_gemm_wgmma). `build` compiles into build-gw-nv/ (ptxas resource
# report in build-gw-nv/ptxas.log); `run` executes the test, a memcheck of small cases, the SASS check and the
# benchmark there, logs under $OUT (or build-gw-nv/).
#   lab/gemm_wgmma/gemm_wgmma.sh build        # here (needs nvcc, GoogleTest)
#   lab/gemm_wgmma/gemm_wgmma.sh run          # on a machine with an H200 (static cudart; needs libcublasLt.so.13)
# Environment for run: ROUNDS (5), REPS (4), SHAPES (8b,70b,405b), SANITIZE (1), CLUSTER (1: time the c2
# variants too), SKIP_TEST (0), B (build folder).
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${B:-build-gw-nv}
NVCC=${NVCC:-nvcc}
FLAGS=(-gencode=arch=compute_90a,code=sm_90a -std=c++20 --expt-relaxed-constexpr -O3 -lineinfo -I. -Itests)
LINK=(-Xcompiler -static-libstdc++ -Xcompiler -static-libgcc)
build() {
  mkdir -p $B
  $NVCC "${FLAGS[@]}" -Xptxas -v -c lab/gemm_wgmma/gemm_wgmma.cu -o $B/gemm_wgmma.o 2> $B/ptxas.log &
  $NVCC "${FLAGS[@]}" -c kernels/gemm/gemm.cu -o $B/gemm.o &
  wait
  $NVCC "${FLAGS[@]}" -c kernels/gemm/gemm_ref.cu -o $B/gemm_ref.o &
  $NVCC "${FLAGS[@]}" -c kernels/rng/rng_mask.cu -o $B/rng_mask.o &
  wait
  $NVCC "${FLAGS[@]}" -c lab/gemm_wgmma/test_gemm_wgmma_gpu.cu -o $B/test_gemm_wgmma_gpu.o &
  $NVCC "${FLAGS[@]}" -c lab/gemm_wgmma/bench_gemm_wgmma.cu -o $B/bench_gemm_wgmma.o &
  g++ -std=c++20 -O2 -I. -I/usr/local/cuda/include -c kernels/common/check.cpp -o $B/check_stub.o
  wait
  $NVCC -arch=sm_90a "${LINK[@]}" $B/test_gemm_wgmma_gpu.o $B/gemm_wgmma.o $B/gemm.o $B/gemm_ref.o $B/check_stub.o \
    -lcublasLt -lgtest -lgtest_main -lpthread -o $B/test_gemm_wgmma_gpu
  $NVCC -arch=sm_90a "${LINK[@]}" $B/bench_gemm_wgmma.o $B/gemm_wgmma.o $B/gemm.o $B/rng_mask.o $B/check_stub.o \
    -lcublasLt -ldl -lpthread -o $B/bench_gemm_wgmma
  grep -E "Compiling|registers|spill|warn" $B/ptxas.log | grep -B1 -A1 wgmma | sed 's/ptxas info    : //' | head -20
  ls -la $B/test_gemm_wgmma_gpu $B/bench_gemm_wgmma
}
case "${1:-build}" in
  build) build ;;
  run)
    LOG=${OUT:-$B}
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv | tee $LOG/smi.txt || true
    set +e
    if ! $B/test_gemm_wgmma_gpu --gtest_list_tests >/dev/null 2>&1; then
      echo "prebuilt binaries do not start here; rebuilding with nvcc"
      build > $LOG/rebuild.log 2>&1 || { tail -30 $LOG/rebuild.log; exit 1; }
    fi
    if command -v cuobjdump >/dev/null; then
      cuobjdump -sass $B/gemm_wgmma.o > $LOG/sass.txt 2>&1
      echo "SASS: $(grep -c QGMMA $LOG/sass.txt) QGMMA, $(grep -c HGMMA $LOG/sass.txt) HGMMA, $(grep -c UTMALDG $LOG/sass.txt) UTMALDG, $(grep -cE 'LDL|STL' $LOG/sass.txt) LDL/STL"
      gzip -f $LOG/sass.txt
    fi
    if [ "${SKIP_TEST:-0}" = 1 ]; then
      trc=0
      echo "[       OK ] (test skipped: SKIP_TEST=1) _c2" > $LOG/test.log
    else
      timeout ${TEST_TIMEOUT:-60} $B/test_gemm_wgmma_gpu --gtest_brief=0 > $LOG/test.log 2>&1
      trc=$?
      echo "test exit: $trc"
      grep -E "^\[ info|FAILED|PASSED|Failure|Expected|error|tests? ran" $LOG/test.log | tail -40
    fi
    if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
      timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 $B/test_gemm_wgmma_gpu \
        --gtest_filter='*m77*:*m1_*:*m250*' > $LOG/memcheck.log 2>&1
      echo "memcheck exit: $? ($(grep -E 'ERROR SUMMARY' $LOG/memcheck.log | tail -1))"
    fi
    # The cluster (c2) variants enter the benchmark only when all of their test cases passed.
    CL=${CLUSTER:-1}
    if [ $trc -eq 124 ] || grep -qE '^\[  FAILED  \].*_c2' $LOG/test.log || ! grep -qE '^\[       OK \].*_c2' $LOG/test.log; then CL=0; fi
    if [ $trc -eq 124 ] && ! grep -qE '^\[       OK \].*llama8b_full_staged ' $LOG/test.log; then
      echo "test timed out before the base kernel passed: no benchmark"; exit 1
    fi
    echo "benchmark with cluster variants: $CL"
    DMON=""
    if command -v nvidia-smi >/dev/null; then
      nvidia-smi dmon -s pc -d 1 > $LOG/dmon.txt 2>&1 &
      DMON=$!
    fi
    timeout ${BENCH_TIMEOUT:-240} $B/bench_gemm_wgmma ${ROUNDS:-5} ${REPS:-4} ${SHAPES:-8b,70b,405b} $CL > $LOG/bench.log 2>&1
    echo "bench exit: $?"
    [ -n "$DMON" ] && kill $DMON 2>/dev/null
    cat $LOG/bench.log
    nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv | tee -a $LOG/smi.txt || true
    ;;
esac
