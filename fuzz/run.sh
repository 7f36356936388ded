#!/usr/bin/env bash
# Builds every libFuzzer target in fuzz/ with the toolchain's libFuzzer and AddressSanitizer, then runs each
# for FUZZ_SECONDS (default 15) on a scratch copy of its seed corpus. Exits non-zero when a target fails to
# build, crashes, breaks an invariant, hangs longer than 5 s on one input or needs more than 2 GB.
#
#   fuzz/run.sh                        every target
#   fuzz/run.sh Config                 only the named targets
#   FUZZ_SECONDS=300 fuzz/run.sh       longer runs
#   FUZZ_JOBS=1 fuzz/run.sh            one target at a time (default: as many at once as there are cores)
#
# A target is fuzz/<Target>.swift (one LLVMFuzzerTestOneInput), its seeds in fuzz/corpus/<Target>/, an
# optional libFuzzer dictionary fuzz/<Target>.dict, and one line in TARGETS below. Everything built or
# written goes to .build/fuzz/; a crashing input is saved in .build/fuzz/artifacts/<Target>/.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=/opt/swift/usr/bin:$PATH
# Swift's own crash backtracer would take over the signal libFuzzer needs to save the crashing input.
export SWIFT_BACKTRACE=enable=no

# One line per target: its name, then the modules it imports, each after the modules it depends on.
TARGETS=(
    "LightCommand BridgeCore"
    "APIBody BridgeCore"
    "Config BridgeCore BridgeYAML"
    "SeedRoom BridgeCore"
    "DevicePayload BridgeCore"
)

FUZZ_SECONDS=${FUZZ_SECONDS:-15}
FUZZ_JOBS=${FUZZ_JOBS:-$(nproc)}
SWIFTC=${SWIFTC:-swiftc}
OUT=.build/fuzz
FLAGS=(-sanitize=fuzzer,address -parse-as-library -O -g -swift-version 6 -use-ld=lld)

# The flags that build, and link against, one of the package's modules: its C modules and system libraries.
module_flags() {
    case $1 in
        BridgeCore) ;;
        BridgeYAML) echo "-I Sources/CYAML -lyaml" ;;
        *) echo "fuzz/run.sh: no build rule for module $1" >&2; return 1 ;;
    esac
}

# Whether $1 exists and is newer than every other argument (and than this script).
up_to_date() {
    local output=$1 input
    shift
    [ -e "$output" ] || return 1
    for input in "$@" "$0"; do
        [ "$input" -nt "$output" ] && return 1
    done
    return 0
}

# Runs a compiler command with its output in the log $1, shown only when the command fails.
compile() {
    local log=$1
    shift
    "$@" >"$log" 2>&1 && return 0
    tail -n 30 "$log" | sed 's/^/    /'
    return 1
}

# Builds Sources/$1 into a static library and a module (instrumented like the targets, so coverage and
# AddressSanitizer reach the parsers) unless they are newer than its sources and the modules $2... it imports.
build_module() {
    local module=$1 flags sources folders dependency dependencies=()
    shift
    flags=$(module_flags "$module") || return 1
    # Every Swift file of the module, in subfolders too (Sources/BridgeCore/Devices/), as SwiftPM builds it.
    mapfile -t sources < <(find "Sources/$module" -name '*.swift' | sort)
    mapfile -t folders < <(find "Sources/$module" -type d)
    for dependency in "$@"; do dependencies+=("$OUT/modules/lib$dependency.a"); done
    # The folders too: their times change when a source file is removed.
    up_to_date "$OUT/modules/lib$module.a" "${folders[@]}" "${sources[@]}" "${dependencies[@]}" && return 0
    rm -f "$OUT/modules/lib$module.a"
    # shellcheck disable=SC2086  # $flags holds several words on purpose
    compile "$OUT/logs/build-$module.log" "$SWIFTC" "${FLAGS[@]}" -wmo -num-threads "$(nproc)" -module-name "$module" \
        -emit-library -static -emit-module -emit-module-path "$OUT/modules/$module.swiftmodule" \
        -I "$OUT/modules" $flags "${sources[@]}" -o "$OUT/modules/lib$module.a"
}

# Links fuzz/$1.swift with the shared support code and the static libraries of the modules $2... it imports.
build_target() {
    local target=$1 module libraries=() flags=() more
    shift
    for module in "$@"; do
        [ -f "$OUT/modules/lib$module.a" ] || return 1
        libraries=("$OUT/modules/lib$module.a" "${libraries[@]}")
        read -ra more <<<"$(module_flags "$module")"
        flags+=("${more[@]}")
    done
    up_to_date "$OUT/bin/$target" "fuzz/$target.swift" fuzz/Support/*.swift "${libraries[@]}" && return 0
    rm -f "$OUT/bin/$target"
    compile "$OUT/logs/build-$target.log" "$SWIFTC" "${FLAGS[@]}" -module-name "${target}Fuzzer" \
        -I "$OUT/modules" "${flags[@]}" "fuzz/$target.swift" fuzz/Support/*.swift "${libraries[@]}" \
        -o "$OUT/bin/$target"
}

for value in "$FUZZ_SECONDS" "$FUZZ_JOBS"; do
    # libFuzzer reads -max_total_time=0 as "no limit".
    [[ "$value" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz/run.sh: FUZZ_SECONDS and FUZZ_JOBS must be positive" >&2; exit 2; }
done

selected=("${TARGETS[@]}")
if [ $# -gt 0 ]; then
    selected=()
    for name in "$@"; do
        found=
        for line in "${TARGETS[@]}"; do
            [ "${line%% *}" = "$name" ] && selected+=("$line") && found=1
        done
        [ -n "$found" ] || { echo "fuzz/run.sh: unknown target $name" >&2; exit 2; }
    done
fi

mkdir -p "$OUT/modules" "$OUT/bin" "$OUT/logs"
# Modules from another compiler or other flags don't load or don't match: start over when either changes.
toolchain="$("$SWIFTC" --version 2>&1) ${FLAGS[*]}"
if [ "$(cat "$OUT/toolchain" 2>/dev/null)" != "$toolchain" ]; then
    rm -rf "$OUT/modules" "$OUT/bin"
    mkdir -p "$OUT/modules" "$OUT/bin"
    echo "$toolchain" >"$OUT/toolchain"
fi
passed=0
failed=0
start=$SECONDS
attempted=()
for line in "${selected[@]}"; do
    read -ra words <<<"$line"
    for ((i = 1; i < ${#words[@]}; i++)); do
        module=${words[i]}
        [[ " ${attempted[*]} " == *" $module "* ]] && continue
        attempted+=("$module")
        build_module "$module" "${words[@]:1:i-1}" || echo "fuzz: module $module failed to build"
    done
done
ready=()
for line in "${selected[@]}"; do
    read -ra words <<<"$line"
    if build_target "${words[@]}"; then
        ready+=("${words[0]}")
    else
        echo "fuzz: ${words[0]} FAILED to build"
        failed=$((failed + 1))
    fi
done
echo "fuzz: built ${#ready[@]} target(s) in $((SECONDS - start)) s"

# Fuzzes $1 on a scratch copy of its seeds; leaves libFuzzer's output in logs/$1.log and
# "<exit status> <seconds>" in logs/$1.status.
run_target() {
    local target=$1 began=$SECONDS status options
    local corpus="$OUT/corpus/$target" artifacts="$OUT/artifacts/$target"
    # The scratch corpus keeps what earlier runs found; the seeds are copied in again so edits to them count.
    rm -rf "$artifacts"
    mkdir -p "$corpus" "$artifacts"
    cp -R "fuzz/corpus/$target/." "$corpus/"
    options=(-max_total_time="$FUZZ_SECONDS" -timeout=5 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$artifacts/")
    [ -f "fuzz/$target.dict" ] && options+=(-dict="fuzz/$target.dict")
    "$OUT/bin/$target" "${options[@]}" "$corpus" >"$OUT/logs/$target.log" 2>&1
    status=$?
    echo "$status $((SECONDS - began))" >"$OUT/logs/$target.status"
}

# FUZZ_JOBS targets at a time (default: one per core); each gets FUZZ_SECONDS of its own.
running=0
for target in "${ready[@]}"; do
    if [ "$running" -ge "$FUZZ_JOBS" ]; then
        wait -n
        running=$((running - 1))
    fi
    rm -f "$OUT/logs/$target.status"
    run_target "$target" &
    running=$((running + 1))
done
wait

for target in "${ready[@]}"; do
    log="$OUT/logs/$target.log"
    read -r status seconds <"$OUT/logs/$target.status" 2>/dev/null || status=1
    executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    coverage=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
    if [ "$status" -eq 0 ]; then
        echo "fuzz: $target passed: ${executions:-?} executions in ${seconds} s (${coverage:-cov: ?})"
        passed=$((passed + 1))
    else
        echo "fuzz: $target FAILED (exit $status) after ${executions:-?} executions; log: $log"
        grep -v '^#[0-9]' "$log" | tail -n 40 | sed 's/^/    /'
        for artifact in "$OUT/artifacts/$target"/*; do
            [ -f "$artifact" ] && echo "    input: $artifact ($(wc -c <"$artifact") bytes)"
        done
        failed=$((failed + 1))
    fi
done
echo "fuzz: total $((SECONDS - start)) s"
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
