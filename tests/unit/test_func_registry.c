// SPDX-License-Identifier: MIT
/* daemon/events/func_registry.c: ids from hostile tables, agents after an exec, later tables. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/events/func_registry.h"
#include "tests/unit/unit.h"

/* A table as the agent would send it: functions id_i named name_i. */
static Profd__FunctionTable *table(size_t n, const uint32_t *ids, const char *const *names)
{
	Profd__FunctionTable *t = calloc(1, sizeof(*t));

	profd__function_table__init(t);
	t->n_functions = n;
	t->functions = calloc(n ? n : 1, sizeof(*t->functions));
	for (size_t i = 0; i < n; i++) {
		t->functions[i] = calloc(1, sizeof(**t->functions));
		profd__instrumented_function__init(t->functions[i]);
		t->functions[i]->id = ids[i];
		t->functions[i]->name = strdup(names[i]);
	}
	return t;
}

struct named_log {
	uint32_t ids[16];
	int n;
};

static void on_named(void *ctx, uint32_t id, const Profd__InstrumentedFunction *f)
{
	struct named_log *log = ctx;

	(void)f;
	if (log->n < 16)
		log->ids[log->n++] = id;
}

static void test_first_table_names_ids(void)
{
	struct func_registry r = { 0 };
	struct named_log log = { 0 };

	func_registry_new_agent(&r);
	CHECK_EQ_INT(func_registry_session_id(&r, 1), 0); /* no table yet */
	CHECK_EQ_INT(func_registry_add(&r, table(3, (uint32_t[]){ 1, 2, 4 },
						 (const char *[]){ "a", "b", "d" }),
				       on_named, &log), 0);
	CHECK_EQ_INT(log.n, 3);
	CHECK_EQ_INT(func_registry_session_id(&r, 2), 2);
	CHECK_EQ_INT(func_registry_session_id(&r, 3), 0); /* a gap: dropped at attach */
	CHECK_EQ_INT(func_registry_session_id(&r, 5), 0);
	CHECK_EQ_INT(func_registry_session_id(&r, 0), 0);
	CHECK_EQ_STR(func_registry_name(&r, 4), "d");
	CHECK(func_registry_name(&r, 5) == NULL);
	func_registry_free(&r);
}

static void test_second_agent_numbers_after_the_first(void)
{
	struct func_registry r = { 0 };

	func_registry_new_agent(&r);
	CHECK_EQ_INT(func_registry_add(&r, table(2, (uint32_t[]){ 1, 2 },
						 (const char *[]){ "a", "b" }), NULL, NULL), 0);
	func_registry_new_agent(&r); /* after an exec */
	CHECK_EQ_INT(func_registry_add(&r, table(1, (uint32_t[]){ 1 }, (const char *[]){ "x" }),
				       NULL, NULL), 0);
	CHECK_EQ_INT(func_registry_session_id(&r, 1), 3);
	CHECK_EQ_INT(func_registry_session_id(&r, 2), 0);
	CHECK_EQ_STR(func_registry_name(&r, 3), "x");
	CHECK_EQ_STR(func_registry_name(&r, 1), "a");
	CHECK_EQ_INT((int)r.n_tables, 2);
	func_registry_free(&r);
}

static void test_later_table_only_adds_above(void)
{
	struct func_registry r = { 0 };
	Profd__FunctionTable *again, *same;

	func_registry_new_agent(&r);
	CHECK_EQ_INT(func_registry_add(&r, table(2, (uint32_t[]){ 1, 2 },
						 (const char *[]){ "a", "b" }), NULL, NULL), 0);
	again = table(1, (uint32_t[]){ 2 }, (const char *[]){ "evil" });
	CHECK_EQ_INT(func_registry_add(&r, again, NULL, NULL), -EBADMSG);
	profd__function_table__free_unpacked(again, NULL);
	CHECK_EQ_STR(func_registry_name(&r, 2), "b");
	/* a dlopen: ids 3.. */
	CHECK_EQ_INT(func_registry_add(&r, table(1, (uint32_t[]){ 3 }, (const char *[]){ "c" }),
				       NULL, NULL), 0);
	CHECK_EQ_INT(func_registry_session_id(&r, 3), 3);
	/* an empty table (nothing matched in the new module) changes nothing */
	same = table(0, NULL, NULL);
	CHECK_EQ_INT(func_registry_add(&r, same, NULL, NULL), 0);
	CHECK_EQ_INT(func_registry_session_id(&r, 3), 3);
	func_registry_free(&r);
}

static void test_hostile_ids_refused(void)
{
	struct func_registry r = { 0 };
	Profd__FunctionTable *zero = table(1, (uint32_t[]){ 0 }, (const char *[]){ "z" });
	Profd__FunctionTable *huge = table(1, (uint32_t[]){ FUNC_REGISTRY_MAX_ID + 1 },
					   (const char *[]){ "h" });

	func_registry_new_agent(&r);
	CHECK_EQ_INT(func_registry_add(&r, zero, NULL, NULL), -EBADMSG);
	CHECK_EQ_INT(func_registry_add(&r, huge, NULL, NULL), -EBADMSG);
	CHECK(r.names == NULL); /* nothing allocated for them */
	profd__function_table__free_unpacked(zero, NULL);
	profd__function_table__free_unpacked(huge, NULL);
	func_registry_free(&r);
}

int main(void)
{
	RUN_TEST(test_first_table_names_ids);
	RUN_TEST(test_second_agent_numbers_after_the_first);
	RUN_TEST(test_later_table_only_adds_above);
	RUN_TEST(test_hostile_ids_refused);
	return unit_summary();
}
