# benchmark-e2e-report.sh — Scripts/benchmark's report rows and JSON keys for sections 4, 6 and 8
# (end to end, connect, peripheral); sourced by Scripts/benchmark where the report prints them.
# shellcheck shell=bash
if want e2e; then
    read -r e2e_r e2e_r_min e2e_r_max e2e_r_n <<<"$(e2e ratio)"
    read -r offered _ _ _ <<<"$(e2e offered)"
    read -r latency_interval _ _ _ <<<"$(e2e latency_interval)"
    row "e2e_central_cpu_per_notification_ratio_vs_bleak" 3 "$e2e_r" "$e2e_r_min" "$e2e_r_max" "$e2e_r_n" "$(goal "$e2e_r" 0.5)"
    json_field e2e_central_cpu_per_notification_ratio_vs_bleak "$e2e_r"
    read -r e2e_c e2e_c_min e2e_c_max e2e_c_n <<<"$(e2e ratio_vs_c)"
    row "e2e_central_cpu_per_notification_ratio_vs_c_floor" 3 "$e2e_c" "$e2e_c_min" "$e2e_c_max" "$e2e_c_n" \
        "$(goal "$e2e_c" 1.25) (C: Benchmarks/c/notify-central.c)"
    json_field e2e_central_cpu_per_notification_ratio_vs_c_floor "$e2e_c"
    json_field e2e_offered_notifications_per_s "$offered"
    for side in bluezkit bleak c; do
        name=BlueZKit; [ "$side" = bleak ] && name=bleak; [ "$side" = c ] && name="C floor (libdbus)"
        read -r m lo hi n <<<"$(e2e "${side}_cpu_ms_per_notification")"
        row "  CPU ms per notification, $name central" 3 "$m" "$lo" "$hi" "$n" ""
        json_field "e2e_cpu_ms_per_notification_$side" "$m"
    done
    read -r m lo hi n <<<"$(e2e bleak_self_reported_cpu_ms_per_notification)"
    [ "$n" = 0 ] || row "  CPU ms per notification, bleak's own process_time" 3 "$m" "$lo" "$hi" "$n" "(cross-check)"
    read -r m lo hi n <<<"$(e2e bleak_acquire_cpu_ms_per_notification)"
    if [ "$n" != 0 ]; then
        row "  CPU ms per notification, bleak with AcquireNotify" 3 "$m" "$lo" "$hi" "$n" \
            "(opt-in; ratio $(printf '%.2f' "$(ratio "$(e2e bluezkit_cpu_ms_per_notification | cut -d' ' -f1)" "$m")"))"
        json_field e2e_cpu_ms_per_notification_bleak_acquire_notify "$m"
    fi
    read -r m lo hi n <<<"$(e2e bluezkit_socket_cpu_ms_per_notification)"
    if [ "$n" != 0 ]; then
        row "  CPU ms per notification, BlueZKit with --notify-sockets" 3 "$m" "$lo" "$hi" "$n" \
            "(opt-in AcquireNotify; ratio $(printf '%.2f' "$(ratio "$m" "$(e2e bleak_cpu_ms_per_notification | cut -d' ' -f1)")") to bleak, $(printf '%.2f' "$(ratio "$m" "$(e2e bleak_acquire_cpu_ms_per_notification | cut -d' ' -f1)")") to bleak's AcquireNotify)"
        json_field e2e_cpu_ms_per_notification_bluezkit_notify_sockets "$m"
    fi
    read -r m lo hi n <<<"$(e2e bluezkit_text_cpu_ms_per_notification)"
    if [ "$n" != 0 ]; then
        row "  CPU ms per notification, BlueZKit without --json" 3 "$m" "$lo" "$hi" "$n" \
            "(human lines; ratio $(printf '%.2f' "$(ratio "$m" "$(e2e bleak_cpu_ms_per_notification | cut -d' ' -f1)")"))"
        json_field e2e_cpu_ms_per_notification_bluezkit_human_output "$m"
    fi
    for side in bluezkit bleak c; do
        name=BlueZKit; [ "$side" = bleak ] && name=bleak; [ "$side" = c ] && name="C floor"
        read -r m lo hi n <<<"$(e2e "${side}_notifications_per_s")"
        row "  notifications/s at saturation, $name central" 1 "$m" "$lo" "$hi" "$n" "($(printf '%.0f' "$offered")/s offered)"
        json_field "e2e_notifications_per_s_$side" "$m"
    done
    read -r lat_s lat_s_lo lat_s_hi lat_s_n <<<"$(e2e bluezkit_latency_ms)"
    read -r lat_p lat_p_lo lat_p_hi lat_p_n <<<"$(e2e bleak_latency_ms)"
    if [ "$lat_s_n" != 0 ] && [ "$lat_p_n" != 0 ]; then
        row "  latency notified → reading (ms), BlueZKit central" 1 "$lat_s" "$lat_s_lo" "$lat_s_hi" "$lat_s_n" "(at ${latency_interval} ms)"
        row "  latency notified → reading (ms), bleak central" 1 "$lat_p" "$lat_p_lo" "$lat_p_hi" "$lat_p_n" "(at ${latency_interval} ms)"
        added=$(difference "$lat_s" "$lat_p" 3)
        figure_row "  added latency, BlueZKit - bleak (ms)" 1 "$added" "(difference of the medians)"
        json_field e2e_latency_ms_bluezkit "$lat_s"
        json_field e2e_latency_ms_bleak "$lat_p"
        json_field e2e_added_latency_ms "$added"
    else
        note_row "  latency" "not measured: the readings did not align with the peripheral's lines"
    fi
    read -r con_s con_s_lo con_s_hi con_s_n <<<"$(e2e bluezkit_connect_to_first_reading_ms)"
    read -r con_p con_p_lo con_p_hi con_p_n <<<"$(e2e bleak_connect_to_first_reading_ms)"
    if [ "$con_s_n" != 0 ] && [ "$con_p_n" != 0 ]; then
        row "  connect → first notification (ms), BlueZKit central" 0 "$con_s" "$con_s_lo" "$con_s_hi" "$con_s_n" \
            "(ratio $(printf '%.2f' "$(ratio "$con_s" "$con_p")"))"
        row "  connect → first notification (ms), bleak central" 0 "$con_p" "$con_p_lo" "$con_p_hi" "$con_p_n" ""
        json_field e2e_connect_to_first_notification_ms_bluezkit "$con_s"
        json_field e2e_connect_to_first_notification_ms_bleak "$con_p"
    fi
fi
if want connect; then
    read -r cs cs_lo cs_hi cs_n <<<"$(connect bluezkit_connect)"
    read -r cb cb_lo cb_hi cb_n <<<"$(connect bleak_connect)"
    if [ "$cs_n" != 0 ] && [ "$cb_n" != 0 ]; then
        read -r cs10 _ _ _ <<<"$(connect bluezkit_connect_p10)"
        read -r cs90 _ _ _ <<<"$(connect bluezkit_connect_p90)"
        read -r cb10 _ _ _ <<<"$(connect bleak_connect_p10)"
        read -r cb90 _ _ _ <<<"$(connect bleak_connect_p90)"
        cr=$(ratio "$cs" "$cb")
        row "connect_to_first_notification_ms, BlueZKit central" 0 "$cs" "$cs_lo" "$cs_hi" "$cs_n" \
            "(10th–90th percentile $(printf '%.0f–%.0f' "$cs10" "$cs90"); ratio $(printf '%.2f' "$cr"))"
        row "connect_to_first_notification_ms, bleak central" 0 "$cb" "$cb_lo" "$cb_hi" "$cb_n" \
            "(10th–90th percentile $(printf '%.0f–%.0f' "$cb10" "$cb90"))"
        json_field connect_to_first_notification_ms "$cs"
        json_field connect_to_first_notification_ms_bluezkit "$cs"
        json_field connect_to_first_notification_ms_bluezkit_p10 "$cs10"
        json_field connect_to_first_notification_ms_bluezkit_p90 "$cs90"
        json_field connect_to_first_notification_ms_bleak "$cb"
        json_field connect_to_first_notification_ms_bleak_p10 "$cb10"
        json_field connect_to_first_notification_ms_bleak_p90 "$cb90"
        json_field connect_to_first_notification_ratio_vs_bleak "$cr"
        read -r cw cw_lo cw_hi cw_n <<<"$(connect bluezkit_warm_connect)"
        if [ "$cw_n" != 0 ]; then
            cwr=$(ratio "$cw" "$cb")
            row "  the same, BlueZKit central warm (GATT database cached)" 0 "$cw" "$cw_lo" "$cw_hi" "$cw_n" \
                "(like bleak's counted attempt: ratio $(printf '%.2f' "$cwr"))"
            json_field connect_to_first_notification_ms_bluezkit_warm "$cw"
            json_field connect_to_first_notification_warm_ratio_vs_bleak "$cwr"
        fi
        for phase in to_create_connection_ms scan_stop_ms to_create_connection_after_scan_stop_ms link_ms att_waiting_ms \
            att_host_ms notification_wait_ms delivery_ms att_requests; do
            read -r ps ps_lo ps_hi ps_n <<<"$(connect "bluezkit_$phase")"
            read -r pw pw_lo pw_hi pw_n <<<"$(connect "bluezkit_warm_$phase")"
            read -r pb pb_lo pb_hi pb_n <<<"$(connect "bleak_$phase")"
            [ "$ps_n" != 0 ] || [ "$pb_n" != 0 ] || continue
            # scan_stop: ours is its StopDiscovery (after its "discovered" line); bleak's, the kernel
            # ending its scan for the device (bleak stopped its discovery before the line).
            [ "$ps_n" = 0 ] || row "  $phase, BlueZKit central" 1 "$ps" "$ps_lo" "$ps_hi" "$ps_n" "(HCI trace)"
            [ "$pw_n" = 0 ] || row "  $phase, BlueZKit central, warm" 1 "$pw" "$pw_lo" "$pw_hi" "$pw_n" "(HCI trace)"
            [ "$pb_n" = 0 ] || row "  $phase, bleak central" 1 "$pb" "$pb_lo" "$pb_hi" "$pb_n" "(HCI trace)"
            [ "$ps_n" = 0 ] || json_field "connect_${phase}_bluezkit" "$ps"
            [ "$pw_n" = 0 ] || json_field "connect_${phase}_bluezkit_warm" "$pw"
            [ "$pb_n" = 0 ] || json_field "connect_${phase}_bleak" "$pb"
        done
    else
        note_row "connect_to_first_notification_ms" "not measured: no run of one side reached its first reading"
    fi
fi
if want peripheral; then
    read -r pr_r _ _ _ <<<"$(peripheral peripheral_ratio)"
    read -r pr_s pr_s_lo pr_s_hi pr_s_n <<<"$(peripheral bluezkit_peripheral_cpu_ms_per_notification)"
    read -r pr_b pr_b_lo pr_b_hi pr_b_n <<<"$(peripheral bless_peripheral_cpu_ms_per_notification)"
    if [ "$pr_s_n" != 0 ] && [ "$pr_b_n" != 0 ]; then
        row "peripheral_cpu_per_notification_ratio_vs_bless$PERIPHERAL_KEY_SUFFIX" 3 "$pr_r" "$(ratio "$pr_s_lo" "$pr_b_hi" 3)" \
            "$(ratio "$pr_s_hi" "$pr_b_lo" 3)" 1 "$(goal "$pr_r" 0.25) (heart-rate-peripheral / bless_peripheral.py, 50/s, bluetoothd $PERIPHERAL_BLUEZ)"
        row "  CPU ms per notification sent, BlueZKit peripheral" 3 "$pr_s" "$pr_s_lo" "$pr_s_hi" "$pr_s_n" ""
        row "  CPU ms per notification sent, bless peripheral" 3 "$pr_b" "$pr_b_lo" "$pr_b_hi" "$pr_b_n" ""
        json_field "peripheral_cpu_per_notification_ratio_vs_bless$PERIPHERAL_KEY_SUFFIX" "$pr_r"
        json_field "e2e_peripheral_cpu_per_notification_ratio_vs_bless$PERIPHERAL_KEY_SUFFIX" "$pr_r"
        json_field "e2e_peripheral_cpu_ms_per_notification_bluezkit$PERIPHERAL_KEY_SUFFIX" "$pr_s"
        json_field "e2e_peripheral_cpu_ms_per_notification_bless$PERIPHERAL_KEY_SUFFIX" "$pr_b"
    else
        note_row "peripheral_cpu_per_notification_ratio_vs_bless" "not measured: a side has no run with its figure"
    fi
    read -r pc_r pc_r_lo pc_r_hi pc_r_n <<<"$(peripheral peripheral_ratio_vs_c)"
    read -r pr_c pr_c_lo pr_c_hi pr_c_n <<<"$(peripheral c_peripheral_cpu_ms_per_notification)"
    if [ "$pr_s_n" != 0 ] && [ "$pr_c_n" != 0 ]; then
        row "peripheral_cpu_per_notification_ratio_vs_c_floor$PERIPHERAL_KEY_SUFFIX" 3 "$pc_r" "$pc_r_lo" "$pc_r_hi" \
            "$pc_r_n" "$(goal "$pc_r" 1.15) (C: Benchmarks/c/notify-peripheral.c, bluetoothd $PERIPHERAL_BLUEZ)"
        row "  CPU ms per notification sent, C floor (libdbus)" 3 "$pr_c" "$pr_c_lo" "$pr_c_hi" "$pr_c_n" ""
        json_field "peripheral_cpu_per_notification_ratio_vs_c_floor$PERIPHERAL_KEY_SUFFIX" "$pc_r"
        json_field "e2e_peripheral_cpu_ms_per_notification_c$PERIPHERAL_KEY_SUFFIX" "$pr_c"
    else
        note_row "peripheral_cpu_per_notification_ratio_vs_c_floor" "not measured: a side has no run with its figure"
    fi
fi
