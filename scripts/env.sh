# Sourced by the scripts: puts nvcc on PATH when the toolkit lives in /usr/local/cuda.
if ! command -v nvcc >/dev/null 2>&1; then
  for d in /usr/local/cuda/bin /usr/local/cuda-13*/bin /usr/local/cuda-12*/bin; do
    if [ -x "$d/nvcc" ]; then export PATH="$d:$PATH"; break; fi
  done
fi
BUILD_DIR="${BUILD_DIR:-build}"
JOBS="${JOBS:-$(nproc)}"
configure_and_build() {
  if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" "$@"
  fi
  cmake --build "$BUILD_DIR" -j "$JOBS"
}
# One nvidia-smi line (clocks, power, temperature, throttle reasons) appended to $1: the device scripts log one
# before and after each stage, beside the reports' own NVML figures.
smi_log() {
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv,noheader >> "$1" 2>&1
}
