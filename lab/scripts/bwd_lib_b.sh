#!/usr/bin/env bash
# A second build of the attention library (lib B of h2h_attention_bwd.py --lib-b) and of the backward's GPU test
# binary from a patched tree, in about 15 s on 2 cores instead of a full build: the four wgmma backward translation
# units are compiled from TREE (its headers first on the include path), put into a copy of BUILD's
# libdropbench_kernels.a in place of BUILD's objects, and the library and the test binary are linked again with the
# link lines ninja has for BUILD. Only a change confined to kernels/attention/bwd/wgmma/ (and what those units
# include) is carried; BUILD must be a configured and built tree of the same base.
#   lab/scripts/bwd_lib_b.sh BUILD TREE OUT_DIR     -> OUT_DIR/libb.so, OUT_DIR/test_attention_bwd_gpu_b, ptxas logs
# Example: git worktree add /tmp/cand bwd-dq-own && lab/scripts/bwd_lib_b.sh build /tmp/cand /tmp/libb
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: lab/scripts/bwd_lib_b.sh BUILD TREE OUT_DIR" >&2; exit 2; }
B=$(realpath "$1"); T=$(realpath "$2"); mkdir -p "$3"; D=$(realpath "$3")
[ -f "$B/build.ninja" ] && [ -f "$B/libdropbench_kernels.a" ] || { echo "BUILD $B: not a built tree" >&2; exit 2; }
cd "$B"
S=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' CMakeCache.txt)  # BUILD's source tree
units=(hd64 hd128 hd64_fused hd128_fused)
for u in "${units[@]}"; do
  # BUILD's own compile line for the unit, with TREE's file and headers
  line=$(ninja -t commands dropbench_attention | grep -F "attention_bwd_wgmma_$u.cu.o " | grep -F -- "-c ")
  line=${line/ -I$S / -I$T -I$S }
  src=$(sed -E 's/.* -c ([^ ]+) .*/\1/' <<< "$line")
  line=${line/ -c $src / -c $T/kernels/attention/bwd/attention_bwd_wgmma_$u.cu }
  line=$(sed -E "s# -o [^ ]+\$# -o $D/attention_bwd_wgmma_$u.cu.o -Xptxas -v#; s# -MD -MT [^ ]+ -MF [^ ]+##" <<< "$line")
  eval "$line" 2> "$D/$u.ptxas" &
done
wait
cp libdropbench_kernels.a "$D/k.a"
(cd "$D" && for u in "${units[@]}"; do ar r k.a "attention_bwd_wgmma_$u.cu.o"; done)
link() {  # link TARGET OUT: ninja's link line of TARGET with the patched archive
  local l; l=$(ninja -t commands "$1" | tail -1)
  l=${l/ -o $1 / -o $2 }
  eval "${l/ libdropbench_kernels.a / $D/k.a }"
}
link libdropbench_attention.so "$D/libb.so"
link tests/test_attention_bwd_gpu "$D/test_attention_bwd_gpu_b"
grep -h "spill" "$D"/*.ptxas | sort | uniq -c
ls -la "$D/libb.so" "$D/test_attention_bwd_gpu_b"
