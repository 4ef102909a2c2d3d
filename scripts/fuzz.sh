#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with Clang, ASan and UBSan into build-fuzz, runs each
# over its seed corpus for SECONDS_PER_TARGET seconds (default 10), and fails on any crash, leak,
# timeout or sanitizer report, naming the reproducer: fuzz.sh [SECONDS_PER_TARGET] [TARGET...].
# New inputs go to a scratch folder, never into tests/fuzz/corpus/. Reproduce a failure with
# build-fuzz/tests/fuzz/<target> <reproducer>. Regenerate a target's seeds (all but config_fuzz,
# whose seeds are `SIGILFS_TEST_KDF=1 sigilfs init --kdf test` configs) with
# <target> --make-corpus=DIR.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build-fuzz
seconds=${1:-10}
shift || true
if ! [[ $seconds =~ ^[0-9]+$ ]]; then
  echo "usage: fuzz.sh [SECONDS_PER_TARGET] [TARGET...]" >&2
  exit 2
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(config_fuzz header_fuzz unit_fuzz names_fuzz
  verity_record_fuzz long_name_fuzz)

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found (scripts/install-deps.sh installs it)" >&2
  exit 2
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$top" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DSIGILFS_FUZZ=ON -DSIGILFS_ASAN=ON -DSIGILFS_TESTS=OFF >/dev/null
cmake --build "$build" --target "${targets[@]}" -j"${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/sigilfs-fuzz.XXXXXX")
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
symbolizer=$(command -v llvm-symbolizer || true)
[ -n "$symbolizer" ] && export ASAN_SYMBOLIZER_PATH=$symbolizer

failed=()
summary=()
for t in "${targets[@]}"; do
  corpus=$top/tests/fuzz/corpus/$t
  [ -d "$corpus" ] || { echo "fuzz: no seed corpus $corpus" >&2; exit 2; }
  mkdir -p "$scratch/$t/new" "$scratch/$t/artifacts"
  log=$scratch/$t/log
  # The largest seed sets the first inputs' length; let mutations grow well past a page.
  max_len=$(( $(find "$corpus" -type f -printf '%s\n' | sort -n | tail -n1) * 2 ))
  [ "$max_len" -ge 8192 ] || max_len=8192
  echo "fuzz: $t for ${seconds}s"
  status=0
  "$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len="$max_len" -print_final_stats=1 -artifact_prefix="$scratch/$t/artifacts/" \
    "$scratch/$t/new" "$corpus" >"$log" 2>&1 || status=$?
  stats=$(grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -n1 || true)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n1)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' <<<"$stats" || true)
  summary+=("$(printf '%-20s runs %-9s exec/s %-7s %s' "$t" "${runs:-?}" "${rate:-?}" "$cov")")
  reports=$(grep -cE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|SUMMARY: ' \
    "$log" || true)
  artifacts=$(find "$scratch/$t/artifacts" -type f | sort)
  if [ "$status" -ne 0 ] || [ "$reports" -gt 0 ] || [ -n "$artifacts" ]; then
    failed+=("$t")
    echo "fuzz: $t FAILED (exit $status); log $log" >&2
    # The first report, up to its summary line.
    awk '/ERROR: (Address|Leak)Sanitizer|ERROR: libFuzzer|runtime error:|fuzz invariant/ { on = 1 }
         on { print } on && /^SUMMARY: / { exit }' "$log" | head -n60 >&2
    for a in $artifacts; do
      echo "fuzz: reproducer $a" >&2
      echo "fuzz:   run: $build/tests/fuzz/$t $a" >&2
    done
  fi
done

echo
echo "fuzz: results (${seconds}s per target; logs and new inputs in $scratch)"
printf '  %s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: no crashes, leaks or sanitizer reports"
