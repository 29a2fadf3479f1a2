#!/system/bin/sh
# mobilebert-kit device-side benchmark loop.
#
# Runs on the phone (Android's mksh + toybox) and under any POSIX sh (dash in
# the test simulator). mbk pushes it next to benchmark_model and the model,
# runs it through `adb shell`, and reads what it prints.
#
# Subcommands:
#   sh bench_loop.sh topology
#       one line per core: "cpu N MAX_FREQ_KHZ CAPACITY ONLINE" ("-" if unknown)
#   sh bench_loop.sh snapshot
#       one JSON object: thermal zones (millidegrees C) and core frequencies (kHz)
#   sh bench_loop.sh run --bin PATH --mask HEX [--trials N] [--baseline-mc MC]
#                        [--tolerance-mc MC] [--cooldown-timeout S] [--poll S]
#                        [--lock-freq max|KHZ] [--result-file PATH] -- BENCHMARK_MODEL_ARGS...
#       for each trial: cool down to the baseline, snapshot, run
#       `taskset MASK BIN ARGS`, snapshot, then print
#         @@MBK_LOG_BEGIN i / <tool output> / @@MBK_LOG_END i rc
#         @@MBK_RESULT_HEX i <hex bytes of PATH>   (with --result-file: the file the tool wrote, then removed)
#         @@MBK_JSON {"trial":i,...}
#       and finally @@MBK_DONE. Errors are "@@MBK_ERROR message" and exit 3.
#
# All sysfs paths are read under $MBK_SYSROOT (empty on a phone; the device
# simulator points it at a fake sysfs tree). Cooldown time is counted in
# poll intervals slept, so it needs no clock with sub-second resolution.

SYS="${MBK_SYSROOT:-}/sys"
CPU_DIR="$SYS/devices/system/cpu"
THERMAL_DIR="$SYS/class/thermal"

die() {
    echo "@@MBK_ERROR $*"
    exit 3
}

# Prints its argument if it is an integer, else "null" (JSON).
num() {
    case "$1" in
        '' | *[!0-9-]* | -) printf 'null' ;;
        *) printf '%s' "$1" ;;
    esac
}

read_file() {
    cat "$1" 2>/dev/null
}

# Temperature of one zone in millidegrees, or empty if the sensor is unusable.
# Most zones report millidegrees; some report whole degrees.
zone_mc() {
    v=$(read_file "$1/temp")
    case "$v" in '' | *[!0-9-]*) return ;; esac
    if [ "$v" -gt -1000 ] && [ "$v" -lt 1000 ]; then v=$((v * 1000)); fi
    # Unplugged sensors report 0, -40 C or absurd values.
    if [ "$v" -le 0 ] || [ "$v" -gt 150000 ]; then return; fi
    printf '%s' "$v"
}

# Zones that follow the CPU: cpu*, soc, big/little/mid/prime, gold/silver, tsens, skin.
relevant_zone() {
    case "$1" in
        *cpu* | *CPU* | *soc* | *SOC* | *big* | *BIG* | *little* | *LITTLE* | *mid* | *MID* | *prime* | *gold* | *silver* | *tsens* | *skin*) return 0 ;;
    esac
    return 1
}

# Hottest relevant zone (all zones if none is relevant), millidegrees; empty if none.
max_temp() {
    best=""
    any=""
    for z in "$THERMAL_DIR"/thermal_zone*; do
        [ -d "$z" ] || continue
        t=$(zone_mc "$z")
        [ -n "$t" ] || continue
        type=$(read_file "$z/type")
        if [ -z "$any" ] || [ "$t" -gt "$any" ]; then any=$t; fi
        if relevant_zone "$type"; then
            if [ -z "$best" ] || [ "$t" -gt "$best" ]; then best=$t; fi
        fi
    done
    if [ -n "$best" ]; then printf '%s' "$best"; else printf '%s' "$any"; fi
}

cmd_topology() {
    for d in "$CPU_DIR"/cpu[0-9]*; do
        [ -d "$d" ] || continue
        n=${d##*/cpu}
        f=$(read_file "$d/cpufreq/cpuinfo_max_freq")
        c=$(read_file "$d/cpu_capacity")
        o=$(read_file "$d/online")
        echo "cpu $n ${f:--} ${c:--} ${o:-1}"
    done
}

snapshot_json() {
    printf '{"zones":{'
    sep=""
    for z in "$THERMAL_DIR"/thermal_zone*; do
        [ -d "$z" ] || continue
        t=$(zone_mc "$z")
        [ -n "$t" ] || continue
        type=$(read_file "$z/type" | tr -cd 'A-Za-z0-9_.-')
        printf '%s"%s:%s":%s' "$sep" "${z##*/}" "$type" "$t"
        sep=","
    done
    printf '},"max_mc":%s,"cpus":{' "$(num "$(max_temp)")"
    sep=""
    for d in "$CPU_DIR"/cpu[0-9]*; do
        [ -d "$d" ] || continue
        n=${d##*/cpu}
        printf '%s"%s":{"cur":%s,"max":%s,"cap":%s}' "$sep" "$n" \
            "$(num "$(read_file "$d/cpufreq/scaling_cur_freq")")" \
            "$(num "$(read_file "$d/cpufreq/cpuinfo_max_freq")")" \
            "$(num "$(read_file "$d/cpufreq/scaling_max_freq")")"
        sep=","
    done
    printf '}}'
}

# Cores selected by a hex mask, one per line.
mask_cpus() {
    m=$((0x$1))
    for d in "$CPU_DIR"/cpu[0-9]*; do
        n=${d##*/cpu}
        if [ $(((m >> n) & 1)) -eq 1 ]; then echo "$n"; fi
    done
}

# Root only: pins the selected cores' frequency, restoring it on exit.
lock_freq() {
    [ "$(id -u)" = "0" ] || die "frequency locking needs root: run 'adb root' (userdebug/eng builds) or leave out --lock-freq"
    RESTORE="./mbk_restore_freq.sh"
    : >"$RESTORE"
    trap 'sh "$RESTORE" 2>/dev/null' EXIT INT TERM
    for n in $(mask_cpus "$MASK"); do
        p="$CPU_DIR/cpu$n/cpufreq"
        [ -w "$p/scaling_max_freq" ] || die "cannot write $p/scaling_max_freq"
        echo "echo $(read_file "$p/scaling_min_freq") > $p/scaling_min_freq" >>"$RESTORE"
        echo "echo $(read_file "$p/scaling_max_freq") > $p/scaling_max_freq" >>"$RESTORE"
        if [ "$LOCK" = "max" ]; then target=$(read_file "$p/cpuinfo_max_freq"); else target=$LOCK; fi
        echo "$target" >"$p/scaling_max_freq"
        echo "$target" >"$p/scaling_min_freq"
        echo "$target" >"$p/scaling_max_freq"
    done
}

cmd_run() {
    BIN=""
    MASK=""
    TRIALS=1
    BASELINE=""
    TOL=2000
    TIMEOUT=120
    POLL=2
    LOCK=""
    RESULT=""
    while [ $# -gt 0 ]; do
        case "$1" in
            --bin) BIN=$2; shift 2 ;;
            --mask) MASK=$2; shift 2 ;;
            --trials) TRIALS=$2; shift 2 ;;
            --baseline-mc) BASELINE=$2; shift 2 ;;
            --tolerance-mc) TOL=$2; shift 2 ;;
            --cooldown-timeout) TIMEOUT=$2; shift 2 ;;
            --poll) POLL=$2; shift 2 ;;
            --lock-freq) LOCK=$2; shift 2 ;;
            --result-file) RESULT=$2; shift 2 ;;
            --) shift; break ;;
            *) die "unknown option $1" ;;
        esac
    done
    [ -n "$BIN" ] || die "--bin is required"
    case "$MASK" in '' | *[!0-9a-fA-F]*) die "--mask must be a hex mask, got '$MASK'" ;; esac
    for v in "$TRIALS" "$TOL" "$TIMEOUT" "$POLL"; do
        case "$v" in '' | *[!0-9]*) die "numeric option expected, got '$v'" ;; esac
    done
    [ -f "$BIN" ] || die "benchmark binary $BIN is missing on the device"
    [ -x "$BIN" ] || chmod 755 "$BIN" 2>/dev/null
    [ -x "$BIN" ] || die "benchmark binary $BIN is not executable (a noexec mount?); push it under /data/local/tmp"
    if [ -n "$LOCK" ]; then lock_freq; fi

    # With no baseline from the host, the first trial starts as the device is.
    given_baseline=$BASELINE
    if [ -z "$BASELINE" ]; then BASELINE=$(max_temp); fi

    i=0
    while [ "$i" -lt "$TRIALS" ]; do
        waited=0
        timed_out=false
        if [ -n "$BASELINE" ] && { [ "$i" -gt 0 ] || [ -n "$given_baseline" ]; }; then
            while :; do
                t=$(max_temp)
                [ -z "$t" ] && break
                [ "$t" -le $((BASELINE + TOL)) ] && break
                if [ "$waited" -ge "$TIMEOUT" ]; then
                    timed_out=true
                    break
                fi
                sleep "$POLL"
                waited=$((waited + POLL))
            done
        fi
        before=$(snapshot_json)
        [ -n "$RESULT" ] && rm -f "$RESULT"
        echo "@@MBK_LOG_BEGIN $i"
        taskset "$MASK" "$BIN" "$@" 2>&1
        rc=$?
        echo "@@MBK_LOG_END $i $rc"
        # benchmark_litert_model's result file is binary (a proto): sent as hex, since adb shell carries text.
        if [ -n "$RESULT" ] && [ -f "$RESULT" ]; then
            echo "@@MBK_RESULT_HEX $i $(od -An -v -tx1 "$RESULT" | tr -d ' \n')"
            rm -f "$RESULT"
        fi
        after=$(snapshot_json)
        echo "@@MBK_JSON {\"trial\":$i,\"mask\":\"$MASK\",\"cooldown_s\":$waited,\"cooldown_timed_out\":$timed_out,\"baseline_mc\":$(num "$BASELINE"),\"exit_code\":$rc,\"before\":$before,\"after\":$after}"
        [ "$rc" -eq 0 ] || break
        i=$((i + 1))
    done
    echo "@@MBK_DONE"
}

case "$1" in
    topology) cmd_topology ;;
    snapshot) snapshot_json; echo ;;
    run) shift; cmd_run "$@" ;;
    *) die "usage: sh bench_loop.sh topology|snapshot|run ..." ;;
esac
