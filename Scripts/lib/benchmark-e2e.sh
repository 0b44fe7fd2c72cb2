# benchmark-e2e.sh — Scripts/benchmark's sections 4 (end to end), 6 (connect to the first
# notification) and 8 (the peripheral side), each run in a guest of its own; sourced by
# Scripts/benchmark where they run, in its shell (its variables, want, step, run_logged, run_shown).
# The helpers e2e, connect and peripheral read their figures back for the report
# (Scripts/lib/benchmark-e2e-report.sh).
# shellcheck shell=bash
if want e2e; then
    step "end to end: heart-rate-central beside bleak in the emulated BlueZ environment ($E2E_RUNS runs of $E2E_COUNT notifications)"
    run_logged 1800 "$WORK/vm-setup.out" "$ROOT/Scripts/bluez-vm" setup
    mkdir -p "$WORK/vm"
    E2E_JSON=$WORK/vm/e2e.json
    # The C floor, built on the host (the guest's root is the host's).
    mkdir -p "$OUT/c"
    read -r -a DBUS_FLAGS <<<"$(pkg-config --cflags --libs dbus-1)"
    gcc -std=c99 -O2 -g -Wall -Wextra -Werror -o "$OUT/c/notify-central" "$ROOT/Benchmarks/c/notify-central.c" \
        "${DBUS_FLAGS[@]}" || die "gcc failed on Benchmarks/c/notify-central.c"
    # Guest time: about 25 s per run plus the notifications themselves (the C floor's E2E_RUNS / 2
    # runs too), the three calibration runs, six latency runs and the boot.
    E2E_TIMEOUT=$((300 + (E2E_RUNS + E2E_RUNS / 2 + 13) * (40 + E2E_COUNT / 20)))
    status=0
    run_shown $((E2E_TIMEOUT + 60)) "$WORK/e2e.out" "$ROOT/Scripts/bluez-vm" run --share "$WORK/vm" \
        --timeout "$E2E_TIMEOUT" -- "$ROOT/Scripts/guest/e2e-benchmark.py" --bin "$BIN" --python "$PYTHON" \
        --bleak-central "$ROOT/Benchmarks/python/bleak_central.py" --c-central "$OUT/c/notify-central" \
        --runs "$E2E_RUNS" --count "$E2E_COUNT" --intervals "$E2E_INTERVALS" --json "$E2E_JSON" \
        ${E2E_GUEST_ARGS:-} || status=$?
    if [ "$status" -ne 0 ] || ! [ -s "$E2E_JSON" ]; then
        rm -rf "$OUT/e2e-guest-logs"
        cp -r "$WORK/vm/.bluez-vm" "$OUT/e2e-guest-logs" 2>/dev/null || true
        cp "$WORK/e2e.out" "$WORK/e2e.out.err" "$OUT/e2e-guest-logs/" 2>/dev/null || true
        grep -v '^bluetoothd\[' "$WORK/e2e.out.err" | tail -20 >&2 || true
        die "the end-to-end benchmark failed ($status); guest logs in ${OUT#"$ROOT"/}/e2e-guest-logs"
    fi
    cp "$E2E_JSON" "$OUT/e2e-last.json"
    # One line per figure: NAME MEDIAN MIN MAX RUNS.
    "$PYTHON" - "$E2E_JSON" >"$WORK/e2e.figures" <<'PY'
import sys, json
result = json.load(open(sys.argv[1]))
summary = result["summary"]
print("offered", result["offered_per_s"], result["offered_per_s"], result["offered_per_s"], 1)
print("interval", result["interval_ms"], result["interval_ms"], result["interval_ms"], 1)
pairs = summary.get("ratio_per_pair") or [float("nan")]
print("ratio", summary.get("ratio", float("nan")), min(pairs), max(pairs), len(summary.get("ratio_per_pair", [])))
pairs = summary.get("ratio_vs_c_per_pair") or [float("nan")]
print("ratio_vs_c", summary.get("ratio_vs_c", float("nan")), min(pairs), max(pairs),
      len(summary.get("ratio_vs_c_per_pair", [])))
for side in ("bluezkit", "bleak", "c", "bluezkit_text", "bleak_acquire", "bluezkit_socket"):
    for key in ("cpu_ms_per_notification", "notifications_per_s", "self_reported_cpu_ms_per_notification", "latency_ms",
                "connect_to_first_reading_ms"):
        value = summary.get(f"{side}_{key}")
        if value:
            print(f"{side}_{key}", *value)
for key in ("bluezkit_peripheral_cpu_ms_per_notification", "bless_peripheral_cpu_ms_per_notification",
            "peripheral_ratio"):
    value = summary.get(key)
    if value:
        print(key, *(value if isinstance(value, (list, tuple)) else (value, value, value, 1)))
latency_interval = next((run["interval_ms"] for run in result["latency_runs"]), 0)
print("latency_interval", latency_interval, latency_interval, latency_interval, 1)
PY
fi
if want connect; then
    step "connect → first notification: $CONNECT_RUNS runs per side in the emulated BlueZ environment, traced by btmon"
    run_logged 1800 "$WORK/vm-setup.out" "$ROOT/Scripts/bluez-vm" setup
    mkdir -p "$WORK/vm-connect"
    CONNECT_JSON=$WORK/vm-connect/connect.json
    # Guest time: the boot, then up to 30 s per run (bleak's take about 10).
    CONNECT_TIMEOUT=$((300 + CONNECT_RUNS * 3 * 30))
    status=0
    run_shown $((CONNECT_TIMEOUT + 60)) "$WORK/connect.out" "$ROOT/Scripts/bluez-vm" run --btsnoop \
        --share "$WORK/vm-connect" --timeout "$CONNECT_TIMEOUT" -- "$ROOT/Scripts/guest/e2e-benchmark.py" \
        --bin "$BIN" --python "$PYTHON" --bleak-central "$ROOT/Benchmarks/python/bleak_central.py" \
        --skip-central-runs --connect-runs "$CONNECT_RUNS" --latency-runs 0 --btsnoop /run/bluez-vm/btmon.snoop \
        --json "$CONNECT_JSON" || status=$?
    if [ "$status" -ne 0 ] || ! [ -s "$CONNECT_JSON" ]; then
        rm -rf "$OUT/connect-guest-logs"
        cp -r "$WORK/vm-connect/.bluez-vm" "$OUT/connect-guest-logs" 2>/dev/null || true
        cp "$WORK/connect.out" "$WORK/connect.out.err" "$OUT/connect-guest-logs/" 2>/dev/null || true
        grep -v '^bluetoothd\[' "$WORK/connect.out.err" | tail -20 >&2 || true
        die "the connect benchmark failed ($status); guest logs in ${OUT#"$ROOT"/}/connect-guest-logs"
    fi
    cp "$CONNECT_JSON" "$OUT/connect-last.json"
    # One line per figure: NAME MEDIAN MIN MAX RUNS, and NAME_p10 / NAME_p90.
    "$PYTHON" - "$CONNECT_JSON" >"$WORK/connect.figures" <<'PY'
import sys, json
summary = json.load(open(sys.argv[1]))["summary"]
for side in ("bluezkit", "bluezkit_warm", "bleak"):
    d = summary.get(f"{side}_connect_distribution_ms")
    if d:
        print(f"{side}_connect", d["median"], d["min"], d["max"], d["runs"])
        print(f"{side}_connect_p10", d["p10"], d["p10"], d["p10"], 1)
        print(f"{side}_connect_p90", d["p90"], d["p90"], d["p90"], 1)
    for phase in ("to_create_connection_ms", "link_ms", "att_waiting_ms", "att_host_ms", "notification_wait_ms",
                  "delivery_ms", "att_requests", "scan_stop_ms", "to_create_connection_after_scan_stop_ms"):
        value = summary.get(f"{side}_connect_{phase}")
        if value:
            print(f"{side}_{phase}", *value)
PY
fi
if want peripheral; then
    step "the peripheral side: heart-rate-peripheral beside bless and the C floor, $PERIPHERAL_RUNS runs each, in the emulated BlueZ environment (bluetoothd $PERIPHERAL_BLUEZ)"
    run_logged 1800 "$WORK/vm-setup.out" "$ROOT/Scripts/bluez-vm" setup --bluez "$PERIPHERAL_BLUEZ"
    mkdir -p "$WORK/vm-peripheral"
    PERIPHERAL_JSON=$WORK/vm-peripheral/peripheral.json
    # The C floor, built on the host (the guest's root is the host's).
    mkdir -p "$OUT/c"
    read -r -a DBUS_FLAGS <<<"$(pkg-config --cflags --libs dbus-1)"
    gcc -std=c99 -O2 -g -Wall -Wextra -Werror -o "$OUT/c/notify-peripheral" \
        "$ROOT/Benchmarks/c/notify-peripheral.c" "${DBUS_FLAGS[@]}" -lm ||
        die "gcc failed on Benchmarks/c/notify-peripheral.c"
    PERIPHERAL_TIMEOUT=$((300 + PERIPHERAL_RUNS * 3 * 90))
    status=0
    run_shown $((PERIPHERAL_TIMEOUT + 60)) "$WORK/peripheral.out" "$ROOT/Scripts/bluez-vm" run \
        --bluez "$PERIPHERAL_BLUEZ" --share "$WORK/vm-peripheral" --timeout "$PERIPHERAL_TIMEOUT" -- "$ROOT/Scripts/guest/e2e-benchmark.py" \
        --bin "$BIN" --python "$PYTHON" --bleak-central "$ROOT/Benchmarks/python/bleak_central.py" \
        --skip-central-runs --latency-runs 0 --bless-peripheral "$ROOT/Benchmarks/python/bless_peripheral.py" \
        --c-peripheral "$OUT/c/notify-peripheral" --peripheral-runs "$PERIPHERAL_RUNS" --json "$PERIPHERAL_JSON" ||
        status=$?
    if [ "$status" -ne 0 ] || ! [ -s "$PERIPHERAL_JSON" ]; then
        rm -rf "$OUT/peripheral-guest-logs"
        cp -r "$WORK/vm-peripheral/.bluez-vm" "$OUT/peripheral-guest-logs" 2>/dev/null || true
        cp "$WORK/peripheral.out" "$WORK/peripheral.out.err" "$OUT/peripheral-guest-logs/" 2>/dev/null || true
        grep -v '^bluetoothd\[' "$WORK/peripheral.out.err" | tail -20 >&2 || true
        die "the peripheral benchmark failed ($status); guest logs in ${OUT#"$ROOT"/}/peripheral-guest-logs"
    fi
    cp "$PERIPHERAL_JSON" "$OUT/peripheral-last.json"
    "$PYTHON" - "$PERIPHERAL_JSON" >"$WORK/peripheral.figures" <<'PY'
import sys, json
summary = json.load(open(sys.argv[1]))["summary"]
for key in ("bluezkit_peripheral_cpu_ms_per_notification", "bless_peripheral_cpu_ms_per_notification",
            "c_peripheral_cpu_ms_per_notification"):
    if summary.get(key):
        print(key, *summary[key])
if "peripheral_ratio" in summary:
    print("peripheral_ratio", *(summary["peripheral_ratio"],) * 3, 1)
pairs = summary.get("peripheral_ratio_vs_c_per_pair") or [float("nan")]
if "peripheral_ratio_vs_c" in summary:
    print("peripheral_ratio_vs_c", summary["peripheral_ratio_vs_c"], min(pairs), max(pairs),
          len(summary.get("peripheral_ratio_vs_c_per_pair", [])))
PY
fi
peripheral() {  # peripheral NAME -> "MEDIAN MIN MAX RUNS" ("nan nan nan 0" when absent)
    local line
    line=$(awk -v n="$1" '$1 == n { print $2, $3, $4, $5; exit }' "$WORK/peripheral.figures" 2>/dev/null)
    echo "${line:-nan nan nan 0}"
}
connect() {  # connect NAME -> "MEDIAN MIN MAX RUNS" ("nan nan nan 0" when absent)
    local line
    line=$(awk -v n="$1" '$1 == n { print $2, $3, $4, $5; exit }' "$WORK/connect.figures" 2>/dev/null)
    echo "${line:-nan nan nan 0}"
}
e2e() {  # e2e NAME -> "MEDIAN MIN MAX RUNS" ("nan nan nan 0" when absent)
    local line
    line=$(awk -v n="$1" '$1 == n { print $2, $3, $4, $5; exit }' "$WORK/e2e.figures" 2>/dev/null)
    echo "${line:-nan nan nan 0}"
}
