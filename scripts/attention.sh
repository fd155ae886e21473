#!/usr/bin/env bash
# Standalone build / run of the attention kernel's GPU test and benchmark with nvcc directly (no CMake, so it
# works while other modules are in progress). `build` compiles into build-attn/ (ptxas resource report in
# build-attn/ptxas.log); `run` executes the test and the benchmark there, logs under $OUT (or build-attn/).
#   scripts/attention.sh build        # here (needs nvcc, GoogleTest)
#   scripts/attention.sh run          # on a machine with an H200 (binaries are self-contained: static cudart)
set -euo pipefail
cd "$(dirname "$0")/.."
B=build-attn
NVCC=${NVCC:-nvcc}
FLAGS=(-gencode=arch=compute_90a,code=sm_90a -std=c++20 --expt-relaxed-constexpr -O3 -lineinfo -I. -Ikernels -Itests)
case "${1:-build}" in
  build)
    mkdir -p $B
    $NVCC "${FLAGS[@]}" -Xptxas -v -c kernels/attention.cu -o $B/attention.o 2> $B/ptxas.log &
    $NVCC "${FLAGS[@]}" -c kernels/attention_ref.cu -o $B/attention_ref.o &
    wait
    $NVCC "${FLAGS[@]}" -c tests/test_attention_gpu.cu -o $B/test_attention_gpu.o &
    $NVCC "${FLAGS[@]}" -Xptxas -v -c tests/bench_attention.cu -o $B/bench_attention.o 2> $B/ptxas_bench.log &
    g++ -std=c++20 -O2 -I. -I/usr/local/cuda/include -c tests/standalone_check.cpp -o $B/check_stub.o
    wait
    LINK=(-Xcompiler -static-libstdc++ -Xcompiler -static-libgcc)
    $NVCC -arch=sm_90a "${LINK[@]}" $B/test_attention_gpu.o $B/attention.o $B/attention_ref.o $B/check_stub.o \
      -lgtest -lgtest_main -lpthread -o $B/test_attention_gpu
    $NVCC -arch=sm_90a "${LINK[@]}" $B/bench_attention.o $B/attention.o $B/attention_ref.o $B/check_stub.o -o $B/bench_attention
    grep -E "registers|spill" $B/ptxas.log | paste - - | sed 's/ptxas info    : //' | sort | uniq -c | sort -rn | head -20
    ls -la $B/test_attention_gpu $B/bench_attention
    ;;
  run)
    LOG=${OUT:-$B}
    nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv | tee $LOG/smi.txt || true
    set +e
    if ! $B/test_attention_gpu --gtest_list_tests >/dev/null 2>&1; then
      echo "prebuilt binaries do not start here ($(ldd --version | head -1)); building the benchmark with nvcc"
      $B/test_attention_gpu --gtest_list_tests 2>&1 | head -3
      $NVCC "${FLAGS[@]}" tests/bench_attention.cu kernels/attention.cu kernels/attention_ref.cu tests/standalone_check.cpp -o $B/bench_attention
    fi
    $B/test_attention_gpu --gtest_brief=0 2>&1 | tee $LOG/test.log | grep -E "^\[ info|FAILED|PASSED|OK \]|Failure|error" | tail -60
    echo "test exit: ${PIPESTATUS[0]}"
    if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
      timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 $B/test_attention_gpu \
        --gtest_filter='Shapes/AttentionVsRef.*S77*:Shapes/AttentionVsRef.*S300*' > $LOG/memcheck.log 2>&1
      echo "memcheck exit: $? ($(grep -c 'Invalid\|ERROR SUMMARY: [1-9]' $LOG/memcheck.log) error lines)"
      timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 $B/test_attention_gpu \
        --gtest_filter='Shapes/AttentionVsRef.*B1_S77*' > $LOG/racecheck.log 2>&1
      echo "racecheck exit: $? ($(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $LOG/racecheck.log | tr '\n' ' '))"
    fi
    $B/bench_attention ${SQ:-8192} ${HEADS:-32} ${REPS:-30} 2>&1 | tee $LOG/bench.log
    if [ "${TORCH:-1}" = 1 ] && command -v python3 >/dev/null; then
      timeout 120 python3 scripts/attention_torch_ref.py ${SQ:-8192} 2>&1 | tee $LOG/torch.log | grep -v Warning
    fi
    nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv | tee -a $LOG/smi.txt || true
    ;;
esac
