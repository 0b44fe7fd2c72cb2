# shellcheck shell=bash disable=SC2034  # it sets variables for the scripts that source it
# Scripts/lib/benchmark.sh — what Scripts/benchmark and Scripts/benchmark-dbus share. Set
# BENCH_NAME (the prefix of every message) and source it; it sets SELF (the calling script),
# ROOT (the package) and OUT (Benchmarks/.out), and defines:
#
#   log MESSAGE, die MESSAGE     "NAME: MESSAGE" on stderr; die adds "error: " and exits 1
#   bench_usage                  prints the calling script's header comment
#   bench_parse_options ARG...   sets variables from "--flag VALUE" and "--flag=VALUE" as the
#                                associative array BENCH_OPTIONS says ([--flag]="VARIABLE what
#                                it needs", for the message when the value is missing), and to 1
#                                for BENCH_SWITCHES ([--flag]=VARIABLE); -h/--help prints the usage
#   bench_positive VALUE...      dies unless each is a positive whole number
#   bench_absolute VARIABLE      makes the relative path in VARIABLE absolute (empty stays empty)
#   bench_start PACKAGE...       installs the Debian packages (Scripts/lib/packages.sh), checks
#                                for swift, makes OUT and WORK (a temporary folder, removed on
#                                exit, with every process still running that `started` named)
#   started PID                  a process to stop on exit (until waited for)
#   run_logged SECONDS OUT CMD...  runs CMD (stdout to OUT, stderr to OUT.err) with a time
#                                limit; dies with its last lines when it fails
#   wait_ready FILE PID SECONDS WHAT, wait_for PID SECONDS WHAT (sets WAIT_STATUS)
#   bench_python                 the Python references' virtual environment OUT/venv with bleak,
#                                dbus-fast and bless from PyPI (made when missing): sets PYTHON
#                                and PY_VERSIONS (after bench_start)
#   bench_build PRODUCT...       swift build -c release of the products and BenchmarkReport in
#                                SCRATCH (BENCH_SCRATCH, default OUT/swiftpm); sets BIN
#   stats, ratio, difference, slope, verdict   BenchmarkReport's statistics (see its header)
#   callgrind_total FILE         the total Ir of a callgrind output file
#   output_field NAME FILE       the second word of FILE's first line whose first word is NAME
#   bench_header, row LABEL DECIMALS MEDIAN MIN MAX RUNS [NOTE]   the table: columns of
#                                BENCH_LABEL_WIDTH and BENCH_RANGE_WIDTH, and a last one headed
#                                BENCH_NOTE_HEADING (the goal and notes) when that is set
#   json_field NAME VALUE, json_write FILE   the figures file (BenchmarkReport json)

SELF=$(readlink -f -- "$0")
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=$ROOT/Benchmarks/.out

log() { printf '%s: %s\n' "$BENCH_NAME" "$*" >&2; }
die() { printf '%s: error: %s\n' "$BENCH_NAME" "$*" >&2; exit 1; }
bench_usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$SELF"; }

# --- Options -----------------------------------------------------------------

declare -A BENCH_OPTIONS=() BENCH_SWITCHES=()
bench_parse_options() {
    local option spec
    while [ $# -gt 0 ]; do
        option=${1%%=*}
        spec=${BENCH_OPTIONS[$option]:-}
        if [ "$1" = -h ] || [ "$1" = --help ]; then
            bench_usage
            exit 0
        elif [ -n "$spec" ] && [ "$option" != "$1" ]; then
            printf -v "${spec%% *}" '%s' "${1#*=}"
            shift
        elif [ -n "$spec" ]; then
            [ $# -ge 2 ] || die "$option needs ${spec#* }"
            printf -v "${spec%% *}" '%s' "$2"
            shift 2
        elif [ -n "${BENCH_SWITCHES[$1]:-}" ]; then
            printf -v "${BENCH_SWITCHES[$1]}" 1
            shift
        else
            bench_usage >&2
            die "unknown argument: $1"
        fi
    done
}

bench_positive() {
    local value
    for value in "$@"; do
        [[ $value =~ ^[1-9][0-9]*$ ]] || die "not a positive number: $value"
    done
}

bench_absolute() {
    case ${!1} in "" | /*) ;; *) printf -v "$1" '%s' "$PWD/${!1}" ;; esac
}

# --- Tools, the work folder and the processes started here -------------------

bench_start() {
    # shellcheck source=packages.sh
    . "$ROOT/Scripts/lib/packages.sh"
    PACKAGES_LOG_PREFIX=$BENCH_NAME
    packages_ensure "$@" || die "cannot install the Debian packages this needs (see above)"
    command -v swift >/dev/null 2>&1 || die "swift is not on PATH (the Swift toolchain is needed)"
    mkdir -p "$OUT"
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/$BENCH_NAME.XXXXXX")
    trap bench_cleanup EXIT
    trap 'exit 130' INT TERM
}

# The processes started here that may still run (a pid leaves once waited for, so that a
# reused pid is never killed).
declare -A LIVE=()
started() { LIVE[$1]=1; }
bench_cleanup() {
    local pid
    for pid in "${!LIVE[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${!LIVE[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}

# run_logged SECONDS OUTFILE COMMAND...: runs COMMAND in the background (so that a signal to
# the script stops it), waits for it; fails with its last lines.
run_logged() {
    local seconds=$1 out=$2 pid status=0
    shift 2
    timeout "$seconds" "$@" >"$out" 2>"$out.err" &
    pid=$!
    started "$pid"
    wait "$pid" || status=$?
    unset "LIVE[$pid]"
    [ "$status" -eq 0 ] || die "$(basename "$1") failed ($status): $(tail -5 "$out" "$out.err" | tr '\n' ' ')"
}

# Waits until FILE has a line "ready" while PID lives; fails after SECONDS.
wait_ready() {
    local file=$1 pid=$2 seconds=$3 what=$4 i
    for ((i = 0; i < seconds * 20; i++)); do
        grep -q '^ready$' "$file" 2>/dev/null && return 0
        kill -0 "$pid" 2>/dev/null || die "$what exited before it was ready: $(tail -3 "$file" "$file.err" 2>/dev/null | tr '\n' ' ')"
        sleep 0.05
    done
    die "$what not ready after ${seconds}s"
}

# Waits for PID for at most SECONDS; its status is in WAIT_STATUS.
wait_for() {
    local pid=$1 seconds=$2 what=$3 i
    for ((i = 0; i < seconds * 20; i++)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            WAIT_STATUS=0
            wait "$pid" || WAIT_STATUS=$?
            unset "LIVE[$pid]"
            return 0
        fi
        sleep 0.05
    done
    die "$what did not finish within ${seconds}s"
}

# --- The Python references ---------------------------------------------------

bench_python() {
    local venv=$OUT/venv
    PYTHON=$venv/bin/python
    if ! [ -x "$PYTHON" ] || ! "$PYTHON" -c 'import bleak, dbus_fast, bless, dbus_next' >/dev/null 2>&1; then
        log "making the Python environment ${venv#"$ROOT"/} (bleak, dbus-fast, bless from PyPI)"
        [ -x "$PYTHON" ] || /usr/bin/python3 -m venv "$venv" || die "cannot make a virtual environment in $venv"
        "$PYTHON" -m pip install --quiet --disable-pip-version-check bleak dbus-fast bless >"$OUT/pip.log" 2>&1 || {
            tail -20 "$OUT/pip.log" >&2
            die "pip install bleak dbus-fast bless failed"
        }
    fi
    PY_VERSIONS=$("$PYTHON" -c "from importlib.metadata import version as v; print('bleak', v('bleak') + ', dbus-fast', v('dbus-fast') + ', bless', v('bless'))")
    log "Python side: $PY_VERSIONS"
}

# --- Build -------------------------------------------------------------------

bench_build() {
    local product attempt
    SCRATCH=${BENCH_SCRATCH:-$OUT/swiftpm}
    [ $# -eq 0 ] || log "building $* (release, scratch path ${SCRATCH#"$ROOT"/})"
    for product in "$@" BenchmarkReport; do
        # Sources edited during the build (a colleague's editor) make SwiftPM stop: try again.
        for attempt in 1 2 3 4; do
            if (cd "$ROOT" && swift build -c release --product "$product" --scratch-path "$SCRATCH") >"$WORK/swift-build.log" 2>&1; then
                break
            fi
            if [ "$attempt" -lt 4 ] && grep -q 'was modified during the build' "$WORK/swift-build.log"; then
                log "  a source changed during the build; building $product again in 20 s"
                sleep 20
                continue
            fi
            tail -40 "$WORK/swift-build.log" >&2
            die "swift build of $product failed"
        done
    done
    BIN=$(cd "$ROOT" && swift build -c release --scratch-path "$SCRATCH" --show-bin-path)
    for product in "$@" BenchmarkReport; do [ -x "$BIN/$product" ] || die "no $BIN/$product"; done
}

# --- Statistics (Benchmarks/BenchmarkReport) ---------------------------------

# A call that fails (a sample that is not a number) says why on stderr and shows as nan.
report() { "$BIN/BenchmarkReport" "$@"; }
stats() { report stats "$@" || echo "nan nan nan 0"; }                  # VALUES... -> "median min max count"
ratio() { report ratio "$@" || echo nan; }                              # A B [DECIMALS] -> A / B
difference() { report difference "$@" || echo nan; }                    # A B [DECIMALS] -> A - B
slope() { report slope "$@" || echo nan; }                              # N1 V1 N2 V2 [DECIMALS]
verdict() { report verdict "$@" || echo misses; }                       # VALUE GOAL -> meets|misses

callgrind_total() { awk '/^(totals|summary):/ { print $2; exit }' "$1"; }
output_field() { awk -v n="$1" '$1 == n { print $2; exit }' "$2"; }

# --- Report ------------------------------------------------------------------

BENCH_NOTE_HEADING=
bench_header() {
    printf '%-*s %12s   %-*s %4s' "$BENCH_LABEL_WIDTH" "measure" "median" "$BENCH_RANGE_WIDTH" "min – max" "runs"
    if [ -n "$BENCH_NOTE_HEADING" ]; then printf '  %s\n' "$BENCH_NOTE_HEADING"; else printf '\n'; fi
}
row() {
    printf '%-*s %12.*f   %-*s %4s' "$BENCH_LABEL_WIDTH" "$1" "$2" "$3" \
        "$BENCH_RANGE_WIDTH" "$(printf '%.*f – %.*f' "$2" "$4" "$2" "$5")" "$6"
    if [ -n "$BENCH_NOTE_HEADING" ]; then printf '  %s\n' "${7:-}"; else printf '\n'; fi
}

BENCH_JSON_FIELDS=()
json_field() { BENCH_JSON_FIELDS+=("$1" "$2"); }  # NAME VALUE
json_write() {  # FILE
    report json "$1" ${BENCH_JSON_FIELDS[@]+"${BENCH_JSON_FIELDS[@]}"} || die "cannot write $1"
    log "wrote $1"
}
