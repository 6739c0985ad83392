/* SPDX-License-Identifier: MIT */
/*
 * Hand-made Perfetto packets for the trace reader's tests: what the writer
 * never writes (missing fields, events out of order, named ENDs). The
 * includer defines PID and includes unit.h and perfetto_trace_subset.pb-c.h.
 */
#ifndef PROFD_TRACE_HAND_H
#define PROFD_TRACE_HAND_H

#define SEQ_ID_CASE \
	PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID

struct hand {
	uint8_t buf[65536];
	size_t len;
};

/* Appends p as one record (packets here stay under 128 bytes). */
static inline void hand_put(struct hand *h, const Perfetto__Protos__TracePacket *p)
{
	size_t n = perfetto__protos__trace_packet__get_packed_size(p);

	CHECK(n < 128 && h->len + n + 2 <= sizeof(h->buf));
	h->buf[h->len++] = 0x0a;
	h->buf[h->len++] = (uint8_t)n;
	h->len += perfetto__protos__trace_packet__pack(p, h->buf + h->len);
}

static inline void hand_seq(Perfetto__Protos__TracePacket *p, uint32_t seq)
{
	p->optional_trusted_packet_sequence_id_case = SEQ_ID_CASE;
	p->trusted_packet_sequence_id = seq;
}

/* A thread descriptor (uuid 5, PID/PID) that also clears sequence 1. */
static inline void hand_thread(struct hand *h)
{
	Perfetto__Protos__ThreadDescriptor td = PERFETTO__PROTOS__THREAD_DESCRIPTOR__INIT;
	Perfetto__Protos__TrackDescriptor d = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;

	td.has_pid = td.has_tid = 1;
	td.pid = td.tid = PID;
	d.has_uuid = 1;
	d.uuid = 5;
	d.thread = &td;
	hand_seq(&p, 1);
	p.has_sequence_flags = 1;
	p.sequence_flags = 1;
	p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR;
	p.track_descriptor = &d;
	hand_put(h, &p);
}

/*
 * A track event of `type` on uuid 5 at ts (has_ts false: none); seq 0: no
 * sequence id; named by the string name, or by name_iid (0: unnamed).
 */
static inline void hand_track_event(struct hand *h, uint32_t seq, bool has_ts, uint64_t ts,
				    int type, const char *name, uint64_t name_iid)
{
	Perfetto__Protos__TrackEvent te = PERFETTO__PROTOS__TRACK_EVENT__INIT;
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;

	te.has_type = 1;
	te.type = type;
	te.has_track_uuid = 1;
	te.track_uuid = 5;
	if (name) {
		te.name_field_case = PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME;
		te.name = (char *)name;
	} else if (name_iid) {
		te.name_field_case = PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME_IID;
		te.name_iid = name_iid;
	}
	if (seq)
		hand_seq(&p, seq);
	p.has_timestamp = has_ts;
	p.timestamp = ts;
	p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT;
	p.track_event = &te;
	hand_put(h, &p);
}

#endif
