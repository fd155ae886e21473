#!/usr/bin/env bash
# nvtx_record.sh — run a dropbench command under the nvtx_recorder injection library and print the tree of
# NVTX ranges it pushed (no Nsight Systems needed).
#
# Usage:
#   scripts/nvtx_record.sh [options] [--] <dropbench subcommand | path/to/dropbench> [args...]
#
#   scripts/nvtx_record.sh rng --dry-run --set 'sweep.sq=[256,512]'
#   scripts/nvtx_record.sh ./build/dropbench dropout --dry-run --quiet
#   scripts/nvtx_record.sh --log /tmp/ranges.log --no-collapse rng --dry-run
#
# Options:
#   --lib PATH       recorder library (default: $NVTX_RECORDER, else build/tests/libnvtx_recorder.so)
#   --log FILE       keep the raw log in FILE (default: a temporary file, removed afterwards)
#   --domain NAME    print only this domain ("" for the default domain; default: every domain)
#   --no-collapse    print every range as pushed; by default same-named siblings are merged into one line
#                    with "  [xN]" (a measured run repeats every phase once per sample)
#   -h, --help       this text
#
# If the first word after the options is not an executable file, it is a dropbench subcommand and the
# binary is $DROPBENCH (default: build/dropbench). dropbench's own stdout and stderr go to stderr, so
# stdout is only the tree:  scripts/nvtx_record.sh rng --dry-run > tree.txt
# Output: "[<domain>]" then one range per line, indented two spaces per level. Exit status: dropbench's
# (2 for usage errors here, 3 when the log is unbalanced).
#
# Log format (tests/nvtx_recorder.cpp): "push <domain>\t<name>" and "pop <domain>", one line per event.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
die() { echo "nvtx_record.sh: $*" >&2; exit 2; }

lib="${NVTX_RECORDER:-}"
log=""
keep_log=0
collapse=1
domain_filter=""
have_filter=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --lib) [[ $# -ge 2 ]] || die "--lib needs a path"; lib="$2"; shift 2 ;;
    --log) [[ $# -ge 2 ]] || die "--log needs a file"; log="$2"; keep_log=1; shift 2 ;;
    --domain) [[ $# -ge 2 ]] || die "--domain needs a name"; domain_filter="$2"; have_filter=1; shift 2 ;;
    --no-collapse) collapse=0; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) break ;;
  esac
done
[[ $# -gt 0 ]] || { usage >&2; exit 2; }

if [[ -z "$lib" ]]; then
  for cand in "$repo/build/tests/libnvtx_recorder.so" "$repo"/build*/tests/libnvtx_recorder.so; do
    if [[ -f "$cand" ]]; then lib="$cand"; break; fi
  done
fi
[[ -n "$lib" && -f "$lib" ]] ||
  die "recorder library not found${lib:+ at $lib}; build it: cmake --build build --target nvtx_recorder (or pass --lib)"
lib="$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")"  # absolute: dlopen must not search

cmd=("$@")
if [[ ! ( -f "${cmd[0]}" && -x "${cmd[0]}" ) ]]; then
  bin="${DROPBENCH:-$repo/build/dropbench}"
  [[ -x "$bin" ]] || die "dropbench binary not found at $bin (set DROPBENCH or pass its path first)"
  cmd=("$bin" "${cmd[@]}")
fi

if [[ -z "$log" ]]; then
  log="$(mktemp "${TMPDIR:-/tmp}/dropbench_nvtx.XXXXXX")"
  trap 'rm -f "$log"' EXIT
fi
rm -f "$log"  # the recorder appends, and creates it at the first NVTX call

status=0
NVTX_INJECTION64_PATH="$lib" DROPBENCH_NVTX_LOG="$log" "${cmd[@]}" 1>&2 || status=$?

if [[ ! -s "$log" ]]; then
  echo "nvtx_record.sh: no NVTX events were recorded (exit status $status)" >&2
  exit $(( status != 0 ? status : 3 ))
fi
[[ $keep_log -eq 1 ]] && echo "nvtx_record.sh: raw log in $log" >&2

# Tree builder/printer. Names stay in the log's escaped form (\t, \n, \\). With collapse on, the tree is
# a trie of range paths: same-named siblings are merged (first appearance decides the order) and counted.
awk -v collapse="$collapse" -v want="$domain_filter" -v filter="$have_filter" '
function new_node(nm,   id) { id = ++nodes; name[id] = nm; nch[id] = 0; cnt[id] = 0; return id }
function show(n, depth,   i, c, pad) {
  pad = ""
  for (i = 0; i < depth; i++) pad = pad "  "
  for (i = 1; i <= nch[n]; i++) {
    c = child[n, i]
    print pad name[c] (cnt[c] > 1 ? "  [x" cnt[c] "]" : "")
    show(c, depth + 1)
  }
}
function complain(msg) { printf "nvtx_record.sh: log line %d: %s\n", NR, msg > "/dev/stderr"; bad = 1 }
{
  if (substr($0, 1, 5) == "push ") {
    rest = substr($0, 6); t = index(rest, "\t")
    if (t == 0) { complain("malformed push"); next }
    d = substr(rest, 1, t - 1); nm = substr(rest, t + 1)
    if (!(d in root)) { root[d] = new_node(d); order[++ndom] = d; sp[d] = 0; stk[d, 0] = root[d] }
    p = stk[d, sp[d]]
    if (collapse && ((p, nm) in named)) {
      c = named[p, nm]
    } else {
      c = new_node(nm); child[p, ++nch[p]] = c
      if (collapse) named[p, nm] = c
    }
    cnt[c]++
    stk[d, ++sp[d]] = c
  } else if (substr($0, 1, 4) == "pop ") {
    d = substr($0, 5)
    if (!(d in root) || sp[d] == 0) { complain("unbalanced pop in domain \"" d "\""); next }
    sp[d]--
  } else {
    complain("malformed line")
  }
}
END {
  for (i = 1; i <= ndom; i++) {
    d = order[i]
    if (sp[d] > 0) {
      printf "nvtx_record.sh: %d range(s) still open at the end in domain \"%s\"\n", sp[d], d > "/dev/stderr"
      bad = 1
    }
    if (filter && d != want) continue
    print "[" d "]"
    show(root[d], 0)
  }
  if (filter && !(want in root)) {
    printf "nvtx_record.sh: no ranges in domain \"%s\"\n", want > "/dev/stderr"
    bad = 1
  }
  exit (bad ? 3 : 0)
}' "$log" || { rc=$?; [[ $status -ne 0 ]] && exit $status; exit $rc; }

exit $status
