#!/usr/bin/env bash
# nsys.sh — profile dropbench with Nsight Systems, capturing exactly one NVTX range of the "dropbench"
# domain: a whole command, or a single sweep point.
#
# Usage:
#   scripts/nsys.sh [options] command <subcommand> [dropbench args...]
#   scripts/nsys.sh [options] point '<point range name>' <subcommand> [dropbench args...]
#
# Examples:
#   scripts/nsys.sh command rng --set 'sweep.sq=[8192]'
#     runs:  nsys profile --trace=cuda,nvtx,cublas --capture-range=nvtx --nvtx-capture='rng@dropbench' \
#                 --capture-range-end=stop --force-overwrite=true -o rng ./build/dropbench rng --set 'sweep.sq=[8192]'
#   scripts/nsys.sh point 'point sq=8192 rounds=7 threshold_bits=8 layout=tile' rng
#     runs:  nsys profile --trace=cuda,nvtx,cublas --capture-range=nvtx \
#                 --nvtx-capture='point sq=8192 rounds=7 threshold_bits=8 layout=tile@dropbench' \
#                 --capture-range-end=stop-shutdown --force-overwrite=true -o rng-point ./build/dropbench rng
#   scripts/nsys.sh --print point 'point elements=4096 dropout_dtype=bf16' dropout   # only print the command
#
# Options:
#   -o, --output NAME   report name (default: <subcommand>, or <subcommand>-point); nsys adds .nsys-rep
#   --binary PATH       dropbench binary (default: $DROPBENCH, else build/dropbench)
#   --trace LIST        nsys --trace list (default: cuda,nvtx,cublas)
#   --unregistered      also match NVTX ranges named by plain (non-registered) strings; see below
#   -n, --print         print the nsys command and exit (works without nsys installed)
#   -h, --help          this text
#
# How the capture works:
#   dropbench pushes NVTX ranges in the domain "dropbench" (src/core/nvtx.hpp): "<command>" > "point <axis>=<v>
#   ..." (axes in sweep order, e.g. "point sq=8192 rounds=7 threshold_bits=8 layout=tile") > "variant
#   <name>" > "<phase>". `--capture-range=nvtx --nvtx-capture='<range name>@dropbench'` starts collection
#   when a range with exactly that name is pushed in that domain, and --capture-range-end ends it when that
#   range is popped: `stop` (command mode: the process ends right after anyway) or `stop-shutdown` (point
#   mode: kill dropbench once the point is done instead of running the rest of the sweep uncaptured).
#   The point name must match character for character: print the names with
#     scripts/nvtx_record.sh --domain dropbench <subcommand> --dry-run [same --set/--config args]
#
# Registered strings: by default nsys matches --nvtx-capture only against NVTX *registered* strings
# (nvtxDomainRegisterString) to keep overhead low. dropbench registers every range name, so no extra
# setting is needed. For ranges named with plain strings, nsys needs
#   --env-var=NSYS_NVTX_PROFILER_REGISTER_ONLY=0
# which --unregistered adds.
#
# Exit status: nsys's; 2 for usage errors or when nsys is not on PATH.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
die() { echo "nsys.sh: $*" >&2; exit 2; }

output=""
binary="${DROPBENCH:-}"
trace="cuda,nvtx,cublas"
unregistered=0
print_only=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    -o|--output) [[ $# -ge 2 ]] || die "$1 needs a name"; output="$2"; shift 2 ;;
    --binary) [[ $# -ge 2 ]] || die "--binary needs a path"; binary="$2"; shift 2 ;;
    --trace) [[ $# -ge 2 ]] || die "--trace needs a list"; trace="$2"; shift 2 ;;
    --unregistered) unregistered=1; shift ;;
    -n|--print) print_only=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) break ;;
  esac
done
[[ $# -gt 0 ]] || { usage >&2; exit 2; }

mode="$1"; shift
case "$mode" in
  command)
    [[ $# -ge 1 ]] || die "command mode needs a dropbench subcommand, e.g.: scripts/nsys.sh command rng"
    sub="$1"
    range="$sub"
    range_end="stop"
    default_output="$sub"
    ;;
  point)
    [[ $# -ge 2 ]] || die "point mode needs the point range name and a subcommand, e.g.: scripts/nsys.sh point 'point sq=8192 rounds=7 threshold_bits=8 layout=tile' rng"
    range="$1"; shift
    sub="$1"
    [[ "$range" == "point "* ]] || die "a point range name starts with \"point \" (got \"$range\")"
    range_end="stop-shutdown"
    default_output="$sub-point"
    ;;
  *) die "unknown mode \"$mode\": use 'command' or 'point' (see --help)" ;;
esac
[[ "$range" != *@* ]] || die "range name \"$range\" contains '@', which --nvtx-capture reads as the domain separator"
[[ -n "$output" ]] || output="$default_output"

if [[ -z "$binary" ]]; then
  binary="$repo/build/dropbench"
  # Print the familiar relative form when run from the repository root.
  [[ "$PWD" == "$repo" ]] && binary="./build/dropbench"
fi

cmd=(nsys profile "--trace=$trace" --capture-range=nvtx "--nvtx-capture=$range@dropbench"
     "--capture-range-end=$range_end" --force-overwrite=true)
[[ $unregistered -eq 1 ]] && cmd+=(--env-var=NSYS_NVTX_PROFILER_REGISTER_ONLY=0)
cmd+=(-o "$output" "$binary" "$@")

# One argument, quoted for a POSIX shell only when needed (readable copy-paste form).
shq() {
  if [[ "$1" =~ ^[A-Za-z0-9_./=:,@+%-]+$ ]]; then
    printf '%s' "$1"
  else
    printf "'%s'" "${1//\'/\'\\\'\'}"
  fi
}
printable() {
  local sep="" a
  for a in "$@"; do printf '%s' "$sep"; shq "$a"; sep=" "; done
  echo
}

if [[ $print_only -eq 1 ]]; then
  printable "${cmd[@]}"
  exit 0
fi

command -v nsys >/dev/null 2>&1 ||
  die "nsys (Nsight Systems CLI) is not on PATH. Install Nsight Systems, or add its bin folder to PATH
  (e.g. /opt/nvidia/nsight-systems/<version>/bin). Without nsys, scripts/nvtx_record.sh shows the NVTX ranges."
[[ -x "$binary" ]] || die "dropbench binary not found at $binary (build it, set DROPBENCH or pass --binary)"

echo "nsys.sh: $(printable "${cmd[@]}")" >&2
exec "${cmd[@]}"
