#!/usr/bin/env bash
# Where the pipeline's CPU goes, per stage: one flat-out session of
# bench/load_target (1 thread, 2 s, --freq 0) under `perf record -a -g`
# (cpu-clock, 4999 Hz), then the samples of profd's threads and of the
# agent's flusher, each classified by the first stage function on its call
# chain (leaf first), in ns per recorded event. See bench/README.md (issue 28).
# Usage: bench/pipeline_stages.sh [--trace-compression deflate|zstd|none] [BUILD_DIR]
# Needs perf and the right to record every CPU (root, or perf_event_paranoid -1):
# otherwise prints `skip: REASON` and exits 0.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=build
COMPRESSION=deflate
while [ $# -gt 0 ]; do
	case "$1" in
	--trace-compression)
		[ $# -ge 2 ] || { echo "usage: $0 [--trace-compression C] [BUILD_DIR]" >&2; exit 2; }
		COMPRESSION=$2
		shift
		;;
	-*) echo "usage: $0 [--trace-compression C] [BUILD_DIR]" >&2; exit 2 ;;
	*) BUILD=$1 ;;
	esac
	shift
done
# shellcheck source=bench/bench_common.bash
. "$ROOT/bench/bench_common.bash"

if ! command -v perf >/dev/null; then
	echo "skip: perf is not installed"
	exit 0
fi
if [ "$(id -u)" -ne 0 ] && [ "$(cat /proc/sys/kernel/perf_event_paranoid)" -gt -1 ]; then
	echo "skip: recording every CPU needs root or kernel.perf_event_paranoid=-1"
	exit 0
fi
require_load_target_build

tmp=$(mktemp -d)
profd_pid=
perf_pid=
cleanup() {
	if [ -n "$perf_pid" ]; then kill -INT "$perf_pid" 2>/dev/null || true; fi
	if [ -n "$profd_pid" ]; then kill -TERM "$profd_pid" 2>/dev/null || true; fi
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

profd_start "$tmp"
perf record -a -g -F 4999 -o "$tmp/perf.data" 2>"$tmp/perf.err" &
perf_pid=$!
sleep 0.5 # perf's start-up on every CPU, before the session's
"$ROOT/$BUILD/profctl" run --funcs 'load_*' --freq 0 --trace-compression "$COMPRESSION" \
	-o "$tmp/run.pftrace" -- "$ROOT/$BUILD/bench/load_target" 1 2 >"$tmp/run.out" 2>"$tmp/run.err"
kill -INT "$perf_pid"
wait "$perf_pid" || true
perf_pid=
read -r events _ < <(summary_counts "$tmp/run.err") || true
if [ -z "${events:-}" ] || [ "$events" -eq 0 ]; then
	echo "FAIL: no events recorded" >&2
	sed 's/^/  | /' "$tmp/run.err" >&2
	exit 1
fi
echo "one flat-out session, --trace-compression $COMPRESSION: $events events recorded," \
	"load average $(cut -d' ' -f1-3 /proc/loadavg)"
flusher=$(perf script -i "$tmp/perf.data" -G -F comm,tid 2>/dev/null |
	awk '$1 == "profd-flusher" { n[$2]++ } END { for (t in n) if (n[t] > m) { m = n[t]; b = t }; print b }')
perf script -i "$tmp/perf.data" --pid "$profd_pid" -F tid,ip,sym 2>/dev/null >"$tmp/profd.txt"
: >"$tmp/flusher.txt"
if [ -n "$flusher" ]; then
	perf script -i "$tmp/perf.data" --tid "$flusher" -F tid,ip,sym 2>/dev/null >"$tmp/flusher.txt"
fi
python3 - "$tmp/profd.txt" "$tmp/flusher.txt" "$events" <<'EOF'
import collections, re, sys

HZ = 4999.0
PROFD = [  # first match from the leaf up names the stage
    ('write (kernel)', r'(__GI___libc_write|__libc_write|write|sink_write)$'),
    ('receive (socket)', r'(__libc_recvmsg|recvmsg|conn_read|conn_readable)$'),
    ('one pass (decode, call stacks, encoding)', r'(on_chunk|event_reader_)'),
    ('compression', r'(isal_|igzip|encode_deflate|adler32|create_hufftables|job_compress|'
                    r'job_run|job_fill|codec_|ZSTD_|sink_worker)'),
    ('decode', r'(decode_chunks|deliver_events|deliver_chunks|next_chunk|collect_pairs|'
               r'event_decoder_|convert_cache|get_varint|handle_events)'),
    ('exact figures', r'(sched_session_call|offcpu_|func_stats_|on_func_agg|on_thread_drops|'
                      r'deliver_aggregates|get_func_agg)'),
    ('call stacks (replay)', r'(call_stacks_|call_thread_|on_events|begin_call|end_call|'
                             r'slice_run)'),
    ('Perfetto encoding', r'(pw_|perfetto_writer_|perfetto_slice_|pwb_|trace_sink_put)'),
]
FLUSHER = [
    ('send (socket)', r'(__libc_sendmsg|sendmsg|frame_send)'),
    ('ring segments trimmed (madvise)', r'(__madvise|madvise|segments_trim)'),
    ('aggregates', r'(flusher_put_aggregates|put_one_aggregate|count_open_calls)'),
    ('encode events', r'(flusher_put_event_chunk|flusher_put_events|event_encode|'
                      r'encode_span|flusher_drain_thread)'),
]


def table(path, rules, other, title, events):
    counts, total = collections.Counter(), 0
    for block in open(path).read().split('\n\n'):
        lines = [l.strip() for l in block.strip().split('\n') if l.strip()]
        if len(lines) < 2:
            continue
        total += 1
        stage = other
        for line in lines[1:]:
            sym = re.sub(r'\+0x[0-9a-f]+$', '', (line.split(None, 1) + [''])[1])
            hit = next((name for name, rx in rules if re.match(rx, sym)), None)
            if hit:
                stage = hit
                break
        counts[stage] += 1
    if not total:
        print('%s: no samples' % title)
        return
    print('%-44s %6.1f ns/event  (%d samples)' % (title, total / HZ * 1e9 / events, total))
    for name, n in counts.most_common():
        print('  %-42s %6.1f ns/event  %5.1f %%' % (name, n / HZ * 1e9 / events,
                                                   100.0 * n / total))


events = int(sys.argv[3])
table(sys.argv[1], PROFD, 'other (set-up, symbols, scheduler events)', 'profd', events)
table(sys.argv[2], FLUSHER, 'other', 'flusher', events)
EOF
