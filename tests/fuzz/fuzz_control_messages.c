// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the control messages. Input: the bytes of one socket
 * connection, read through proto/frame.c's frame_reader; every whole frame is
 * unpacked as the protobuf-c message its type carries (the receiver's unpack
 * call), every field is read, the message is packed again and re-read, then
 * freed. Function tables go through the daemon's own registry
 * (daemon/events/func_registry.c), whose ids index its names, then the ids of
 * events are looked up as on_record() does; requests and hellos go through
 * a copy of session.c's few checks on them. Never exits.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/events/func_registry.h"
#include "daemon/sampling/sampler.h"
#include "daemon/sampling/stub_map.h"
#include "proto/frame.h"
#include "profd.pb-c.h"

#define CHECK(cond) ((cond) ? (void)0 : abort())

/* Copies of daemon/session.c's private limits: keep them in step. */
#define MAX_RING_PAGES 4096
/* Fuzzer-only bound: each agent's table may cost the daemon 32 MiB of names. */
#define MAX_AGENTS 8

static volatile uint64_t sink; /* keeps the field reads */

/* The message each frame type carries; NULL: empty payload, or not protobuf (events). */
static const ProtobufCMessageDescriptor *const frame_message[FRAME_TYPE_MAX] = {
	[FRAME_RUN_REQUEST] = &profd__run_request__descriptor,
	[FRAME_SESSION_STARTED] = &profd__session_started__descriptor,
	[FRAME_TARGET_FORKED] = &profd__target_forked__descriptor,
	[FRAME_SAMPLING_READY] = &profd__sampling_ready__descriptor,
	[FRAME_TARGET_EXITED] = &profd__target_exited__descriptor,
	[FRAME_SESSION_SUMMARY] = &profd__session_summary__descriptor,
	[FRAME_ERROR] = &profd__error_reply__descriptor,
	[FRAME_STATUS_REQUEST] = &profd__status_request__descriptor,
	[FRAME_STATUS_REPLY] = &profd__status_reply__descriptor,
	[FRAME_STOP_REQUEST] = &profd__stop_request__descriptor,
	[FRAME_STOP_REPLY] = &profd__stop_reply__descriptor,
	[FRAME_SNAPSHOT_REQUEST] = &profd__snapshot_request__descriptor,
	[FRAME_SNAPSHOT_REPLY] = &profd__snapshot_reply__descriptor,
	[FRAME_AGENT_HELLO] = &profd__agent_hello__descriptor,
	[FRAME_AGENT_CONFIG] = &profd__agent_config__descriptor,
	[FRAME_FUNCTION_TABLE] = &profd__function_table__descriptor,
	[FRAME_AGENT_GOODBYE] = &profd__agent_goodbye__descriptor,
	[FRAME_LIVE_REQUEST] = &profd__live_request__descriptor,
	[FRAME_LIVE_FIGURES] = &profd__live_figures__descriptor,
	[FRAME_AUTO_ARGS_QUERY] = &profd__auto_args_query__descriptor,
	[FRAME_AUTO_ARGS] = &profd__auto_args__descriptor,
	[FRAME_AUTO_ARGS_LATE] = &profd__auto_args_late__descriptor,
};

/* What session.c keeps about one connection's session, as far as messages drive it. */
struct mirror {
	bool session;            /* a run request was accepted */
	int32_t target;
	int agents;              /* hellos accepted */
	bool agent;              /* an agent is connected (after a hello) */
	struct func_registry funcs;
	struct stub_map *stubs;
};

static size_t touch_message(const ProtobufCMessage *m);

static size_t scalar_size(ProtobufCType type)
{
	switch (type) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_STRING:
		return sizeof(char *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(ProtobufCMessage *);
	default:
		return 4;
	}
}

/* Reads one value of a field the way a receiver would; returns the unknown fields in it. */
static size_t touch_value(const ProtobufCFieldDescriptor *f, const void *v, bool repeated)
{
	const char *str;
	const ProtobufCBinaryData *bin;
	const ProtobufCMessage *sub;

	switch (f->type) {
	case PROTOBUF_C_TYPE_STRING:
		memcpy(&str, v, sizeof(str));
		/* the daemon strdup()s repeated strings without a NULL check */
		CHECK(str != NULL || !repeated);
		if (str)
			sink += strlen(str);
		break;
	case PROTOBUF_C_TYPE_BYTES:
		bin = v;
		for (size_t i = 0; i < bin->len; i++)
			sink += bin->data[i];
		break;
	case PROTOBUF_C_TYPE_MESSAGE:
		memcpy(&sub, v, sizeof(sub));
		CHECK(sub != NULL || !repeated);
		if (sub) {
			CHECK(sub->descriptor == f->descriptor);
			return touch_message(sub);
		}
		break;
	default:
		for (size_t i = 0; i < scalar_size(f->type); i++)
			sink += ((const uint8_t *)v)[i];
	}
	return 0;
}

/*
 * Every field of m, every element of its repeated fields, submessages
 * included; returns the unknown fields kept in all of them.
 */
static size_t touch_message(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	const uint8_t *base = (const uint8_t *)m;
	size_t unknown = m->n_unknown_fields;

	CHECK(d->magic == PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC);
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const void *field = base + f->offset;

		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n;
			const uint8_t *arr;

			memcpy(&n, base + f->quantifier_offset, sizeof(n));
			memcpy(&arr, field, sizeof(arr));
			CHECK(n == 0 || arr != NULL);
			for (size_t j = 0; j < n; j++)
				unknown += touch_value(f, arr + j * scalar_size(f->type), true);
		} else {
			unknown += touch_value(f, field, false);
		}
	}
	return unknown;
}

/*
 * Packs m again: the size must be what get_packed_size said, and it must
 * unpack to the same size. Not when m kept unknown fields: protobuf-c 1.4.1
 * keeps an overlong-encoded tag of field 0 (80 00) as one, packs it as a
 * plain 0 and then refuses that.
 */
static void repack(const ProtobufCMessage *m, size_t unknown)
{
	size_t len = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = malloc(len ? len : 1);
	ProtobufCMessage *again;

	CHECK(buf != NULL);
	CHECK(protobuf_c_message_pack(m, buf) == len);
	if (unknown) {
		free(buf);
		return;
	}
	again = protobuf_c_message_unpack(m->descriptor, NULL, len, buf);
	CHECK(again != NULL);
	CHECK(protobuf_c_message_get_packed_size(again) == len);
	protobuf_c_message_free_unpacked(again, NULL);
	free(buf);
}

/* handle_run_request(): one session per connection, ring and stack sizes bounded. */
static void run_request(struct mirror *s, const Profd__RunRequest *req)
{
	if (s->session)
		return;
	if (req->ring_pages > MAX_RING_PAGES || (req->ring_pages & (req->ring_pages - 1)))
		return;
	if (req->stack_bytes % 8 || req->stack_bytes > SAMPLER_MAX_STACK_BYTES)
		return;
	/* session_new() copies these */
	CHECK(req->n_func_patterns == 0 || req->func_patterns != NULL);
	sink += strlen(req->target_comm && req->target_comm[0] ? req->target_comm : "target");
	sink += strlen(req->output_name ? req->output_name : "");
	s->session = true;
}

/* handle_target_forked(): a positive pid, once. */
static void target_forked(struct mirror *s, const Profd__TargetForked *msg)
{
	if (s->session && msg->pid > 0 && !s->target)
		s->target = msg->pid;
}

/* handle_agent_hello(): a new agent starts its ids after the ones already named. */
static void agent_hello(struct mirror *s, const Profd__AgentHello *hello)
{
	/* session_by_token() compares with strcmp */
	if (!hello->agent_token || s->agent || s->agents == MAX_AGENTS)
		return;
	sink += strlen(hello->agent_token);
	s->agent = true;
	s->agents++;
	func_registry_new_agent(&s->funcs);
}

static void named(void *ctx, uint32_t id, const Profd__InstrumentedFunction *f)
{
	struct mirror *s = ctx;

	CHECK(id > s->funcs.agent_base && f->id > 0 && f->name);
	CHECK(strcmp(func_registry_name(&s->funcs, id), f->name) == 0);
}

/* handle_function_table(), then every id an event could carry, as on_record() checks it. */
static bool function_table(struct mirror *s, Profd__FunctionTable *t)
{
	if (!s->agent)
		return false;
	if (func_registry_add(&s->funcs, t, named, s)) {
		s->agent = false; /* conn_close_later(s->agent) */
		return false;
	}
	for (size_t i = 0; i < t->n_functions; i++) {
		uint32_t id = func_registry_session_id(&s->funcs, t->functions[i]->id);

		CHECK(id <= s->funcs.n_funcs);
		if (id)
			sink += strlen(func_registry_name(&s->funcs, id));
	}
	CHECK(func_registry_session_id(&s->funcs, s->funcs.agent_n_funcs + 1) == 0);
	CHECK(func_registry_session_id(&s->funcs, 0) == 0);
	/* its untimed stubs, as handle_function_table takes them: any value, refused or kept */
	for (size_t i = 0; i < t->n_untimed_stubs && i < 4096 && s->stubs; i++) {
		const Profd__InstrumentedFunction *f = t->untimed_stubs[i];
		int err = stub_map_add(s->stubs, f->stub, f->address, f->stub_same_offsets);
		uint64_t func;

		CHECK(err == 0 || err == -EINVAL || err == -ENOSPC || err == -ENOMEM);
		if (err == 0) /* the same stub twice names either function */
			CHECK(stub_map_function_at(s->stubs, f->stub, &func));
	}
	return true;
}

/* Unpacks one frame's payload as its type's message and hands it to the mirror. */
static void take_frame(struct mirror *s, const struct frame_header *hdr, const uint8_t *payload)
{
	const ProtobufCMessageDescriptor *d = frame_message[hdr->type];
	ProtobufCMessage *m;
	bool kept = false;

	if (!d)
		return;
	m = protobuf_c_message_unpack(d, NULL, hdr->length, payload);
	if (!m)
		return; /* every receiver refuses a malformed message */
	CHECK(m->descriptor == d && protobuf_c_message_check(m));
	repack(m, touch_message(m));
	switch (hdr->type) {
	case FRAME_RUN_REQUEST:
		run_request(s, (const Profd__RunRequest *)m);
		break;
	case FRAME_TARGET_FORKED:
		target_forked(s, (const Profd__TargetForked *)m);
		break;
	case FRAME_AGENT_HELLO:
		agent_hello(s, (const Profd__AgentHello *)m);
		break;
	case FRAME_FUNCTION_TABLE:
		kept = function_table(s, (Profd__FunctionTable *)m);
		break;
	case FRAME_AGENT_GOODBYE:
		s->agent = false; /* the next hello is a new agent (after an exec) */
		break;
	}
	if (!kept)
		protobuf_c_message_free_unpacked(m, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct frame_reader r;
	struct mirror s = { .stubs = stub_map_new() };
	struct frame_header hdr;
	const uint8_t *payload;
	size_t off = 0;
	int ret = 0;

	frame_reader_init(&r);
	while (off < size && ret >= 0) {
		size_t room, n;
		uint8_t *dst = frame_reader_space(&r, size - off, &room);

		CHECK(dst != NULL && room > 0); /* whole frames are taken after each piece */
		n = size - off < room ? size - off : room;
		memcpy(dst, data + off, n);
		frame_reader_commit(&r, n);
		off += n;
		while ((ret = frame_reader_next(&r, &hdr, &payload)) == 1) {
			CHECK(frame_type_known(hdr.type) && hdr.length <= FRAME_PAYLOAD_MAX);
			take_frame(&s, &hdr, payload);
		}
		/* a bad header ends the connection, as in daemon/server.c */
		CHECK(ret == 0 || ret == -EPROTO || ret == -EMSGSIZE);
	}
	func_registry_free(&s.funcs);
	stub_map_free(s.stubs);
	frame_reader_free(&r);
	return 0;
}
