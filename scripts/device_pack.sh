#!/usr/bin/env bash
# Packs a build's binaries for the device machine, so that a device call runs them instead of building there (a
# build takes 150-200 s of a call's 600): dropbench, the C ABI library, every GPU test binary but the profiler's
# (it runs ncu for minutes; build it there when needed), the shared libraries they link that a CUDA image may lack
# (libfmt), and any extra files named on the command line. `scripts/device_stages.sh PACKAGE.txz BUDGET STAGES...`
# unpacks and runs it.
#   scripts/device_pack.sh BUILD_DIR OUT.txz [NAME=FILE ...]
#   e.g. scripts/device_pack.sh build pb.txz libb.so=/tmp/old/libdropbench_attention.so   (a library of another
#        commit for scripts/h2h_attention*.py --lib-b)
# xz with a 384 MiB dictionary: the binaries share their kernels' fatbins, so about 390 MB of stripped binaries
# pack into about 13 MB (34 MB at xz's default dictionary); it takes about 4 minutes on one core. The binaries need
# the build machine's glibc / libstdc++ symbol versions or newer and libcublasLt of the CUDA major they were built
# with (opened at the first GEMM; the device's toolkit has it). Build from a clean tree: the reports name its sha.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: scripts/device_pack.sh BUILD_DIR OUT.txz [NAME=FILE ...]" >&2; exit 2; }
B=$1; OUT=$2; shift 2
for f in "$B/dropbench" "$B/libdropbench_attention.so"; do
  [ -f "$f" ] || { echo "device_pack: $f missing (build the dropbench and dropbench_attention targets)" >&2; exit 2; }
done
S=$(mktemp -d); trap 'rm -rf "$S"' EXIT
mkdir -p "$S/tests" "$S/lib"
cp "$B/dropbench" "$B/libdropbench_attention.so" "$S/"
for t in "$B"/tests/test_*_gpu; do
  [ -x "$t" ] && [ "$(basename "$t")" != test_profile_gpu ] && cp "$t" "$S/tests/"
done
for kv in "$@"; do
  [ "${kv#*=}" != "$kv" ] && [ -f "${kv#*=}" ] || { echo "device_pack: extra file: NAME=FILE, got '$kv'" >&2; exit 2; }
  cp "${kv#*=}" "$S/${kv%%=*}"
done
# (nothing to carry where fmt is linked statically: the grep may match nothing)
{ ldd "$S/dropbench" "$S/libdropbench_attention.so" "$S"/tests/test_* 2>/dev/null || true; } | awk '/=> \// {print $3}' |
  { grep -E '/libfmt\.so' || true; } | sort -u | xargs -r cp -L -t "$S/lib"
find "$S" -type f -exec strip --strip-unneeded {} + 2>/dev/null || true
echo "device_pack: $(find "$S" -type f | wc -l) files, $(du -sm "$S" | cut -f1) MB; compressing"
tar cf - -C "$S" . | xz -T1 -9e --lzma2=preset=9e,dict=384MiB > "$OUT.part"
mv "$OUT.part" "$OUT"
echo "device_pack: $OUT $(( $(stat -c %s "$OUT") / 1048576 )) MB"
