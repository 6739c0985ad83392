// SPDX-License-Identifier: MIT
/*
 * A subprogram DIE as a struct dwarf_function: its formal parameters in
 * order, each type resolved through typedefs and qualifiers to what an
 * argument recorder needs (class, size, signedness, enumerators, string or
 * pointer), and what the ABI rules (dwarf_abi.c) need to place it. Copies
 * every string into the result's arena; never keeps a DIE.
 */
#include "daemon/symbols/dwarf_describe.h"

#include <dwarf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/symbols/dwarf_abi.h"

#define MAX_TYPE_CHAIN 32        /* typedef/qualifier links: a cycle ends here */
#define MAX_PARAMS 256
#define MAX_ENUMERATORS 65536
#define MAX_ORIGIN_HOPS 8        /* abstract_origin / specification links */
#define MAX_AGGREGATE_DEPTH 8
#define ARENA_CHUNK 1024

struct arena_chunk {
	struct arena_chunk *next;
	size_t used, size;
	_Alignas(16) unsigned char data[];
};

/* The result and the memory its strings and arrays live in. */
struct function_alloc {
	struct dwarf_function pub;
	struct arena_chunk *chunks;
};

static void *arena_alloc(struct function_alloc *fa, size_t size)
{
	struct arena_chunk *c = fa->chunks;
	size_t need = (size + 15) & ~(size_t)15;

	if (need < size)
		return NULL;
	if (!c || c->size - c->used < need) {
		size_t cap = need > ARENA_CHUNK ? need : ARENA_CHUNK;

		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->size = cap;
		c->used = 0;
		c->next = fa->chunks;
		fa->chunks = c;
	}
	c->used += need;
	return c->data + c->used - need;
}

static const char *arena_strdup(struct function_alloc *fa, const char *s)
{
	size_t len;
	char *copy;

	if (!s)
		return NULL;
	len = strlen(s);
	copy = arena_alloc(fa, len + 1);
	if (copy)
		memcpy(copy, s, len + 1);
	return copy;
}

void dwarf_function_free(struct dwarf_function *f)
{
	struct function_alloc *fa = (struct function_alloc *)f;
	struct arena_chunk *c, *next;

	if (!f)
		return;
	for (c = fa->chunks; c; c = next) {
		next = c->next;
		free(c);
	}
	free(fa);
}

/* ---- DIE helpers -------------------------------------------------------- */

static const char *attr_string(Dwarf_Die *die, unsigned int name)
{
	Dwarf_Attribute a;

	return dwarf_attr_integrate(die, name, &a) ? dwarf_formstring(&a) : NULL;
}

const char *dwarf_describe_name(Dwarf_Die *die)
{
	const char *name = attr_string(die, DW_AT_linkage_name);

	if (!name)
		name = attr_string(die, DW_AT_MIPS_linkage_name);
	return name ? name : attr_string(die, DW_AT_name);
}

/* The DIE the attribute name of die refers to (through origins), or NULL. */
static Dwarf_Die *attr_die(Dwarf_Die *die, unsigned int name, Dwarf_Die *out)
{
	Dwarf_Attribute a;

	return dwarf_attr_integrate(die, name, &a) ? dwarf_formref_die(&a, out) : NULL;
}

static Dwarf_Die *own_ref(Dwarf_Die *die, unsigned int name, Dwarf_Die *out)
{
	Dwarf_Attribute a;

	return dwarf_attr(die, name, &a) ? dwarf_formref_die(&a, out) : NULL;
}

static bool is_qualifier(int tag)
{
	return tag == DW_TAG_typedef || tag == DW_TAG_const_type || tag == DW_TAG_volatile_type ||
	       tag == DW_TAG_restrict_type || tag == DW_TAG_atomic_type ||
	       tag == DW_TAG_immutable_type || tag == DW_TAG_packed_type ||
	       tag == DW_TAG_shared_type;
}

/*
 * Follows typedefs and qualifiers from type to the type itself (*out).
 * *name gets the first typedef's name. Returns 1 (found), 0 (void: the
 * chain ends without a type) or -EINVAL (a broken link or a cycle).
 */
static int peel_type(Dwarf_Die *type, Dwarf_Die *out, const char **name, bool *is_const)
{
	Dwarf_Die cur = *type;
	int i;

	for (i = 0; i < MAX_TYPE_CHAIN; i++) {
		int tag = dwarf_tag(&cur);

		if (tag == DW_TAG_const_type && is_const)
			*is_const = true;
		if (!is_qualifier(tag)) {
			*out = cur;
			return 1;
		}
		if (tag == DW_TAG_typedef && name && !*name)
			*name = dwarf_diename(&cur);
		if (!dwarf_hasattr(&cur, DW_AT_type))
			return 0;
		if (!own_ref(&cur, DW_AT_type, &cur))
			return -EINVAL;
	}
	return -EINVAL;
}

static uint64_t die_size(Dwarf_Die *die)
{
	Dwarf_Word size;
	int s = dwarf_bytesize(die);

	if (s > 0)
		return (uint64_t)s;
	return dwarf_aggregate_size(die, &size) == 0 ? size : 0;
}

static bool is_c_language(Dwarf_Die *die)
{
	Dwarf_Die cu;
	int lang;

	if (!dwarf_diecu(die, &cu, NULL, NULL))
		return false;
	lang = dwarf_srclang(&cu);
	return lang == DW_LANG_C89 || lang == DW_LANG_C || lang == DW_LANG_C99 ||
	       lang == DW_LANG_C11;
}

/* ---- types -------------------------------------------------------------- */

/* Everything describe_type works out for one type. */
struct type_info {
	struct dwarf_value_type t;
	struct abi_value abi;
};

static void set_scalar(struct type_info *ti, enum dwarf_type_class cls, uint64_t size,
		       bool is_signed)
{
	ti->t.cls = cls;
	ti->t.size = size > 255 ? 255 : (uint8_t)size;
	ti->t.is_signed = is_signed;
	ti->abi.kind = size > 0 && size <= 8 ? ABI_SCALAR : ABI_UNKNOWN;
	ti->abi.size = size;
	if (size == 16 && cls == DWARF_TYPE_INT)
		ti->abi.kind = ABI_INT128;
	if (ti->abi.kind != ABI_SCALAR)
		ti->t.cls = DWARF_TYPE_OTHER;
}

static void describe_base(Dwarf_Die *die, struct type_info *ti)
{
	Dwarf_Attribute a;
	Dwarf_Word enc = 0;
	uint64_t size = die_size(die);
	const char *name = dwarf_diename(die);

	if (dwarf_attr(die, DW_AT_encoding, &a))
		dwarf_formudata(&a, &enc);
	switch (enc) {
	case DW_ATE_boolean:
		return set_scalar(ti, DWARF_TYPE_BOOL, size, false);
	case DW_ATE_signed_char:
	case DW_ATE_unsigned_char:
		return set_scalar(ti, size == 1 ? DWARF_TYPE_CHAR : DWARF_TYPE_INT, size,
				  enc == DW_ATE_signed_char);
	case DW_ATE_signed:
		return set_scalar(ti, DWARF_TYPE_INT, size, true);
	case DW_ATE_unsigned:
	case DW_ATE_UTF:
		return set_scalar(ti, DWARF_TYPE_INT, size, false);
	case DW_ATE_float:
		ti->t.size = size > 255 ? 255 : (uint8_t)size;
		ti->abi.size = size;
		if (size == 4 || size == 8) {
			ti->t.cls = DWARF_TYPE_FLOAT;
			ti->abi.kind = ABI_FLOAT;
		} else if (size == 16) {
			ti->abi.kind = ABI_FLOAT128;
			ti->abi.x87 = name && strcmp(name, "long double") == 0;
		}
		return;
	case DW_ATE_complex_float:
		ti->abi.kind = ABI_COMPLEX;
		ti->abi.size = size;
		return;
	default:
		return; /* OTHER, UNKNOWN: fixed point, decimal float, ... */
	}
}

/* A pointer to plain char (signed or not, const or not) is a string. */
static bool points_to_char(Dwarf_Die *ptr)
{
	Dwarf_Die pointee, base;
	const char *name;

	if (!own_ref(ptr, DW_AT_type, &pointee) || peel_type(&pointee, &base, NULL, NULL) != 1 ||
	    dwarf_tag(&base) != DW_TAG_base_type || die_size(&base) != 1)
		return false;
	name = dwarf_diename(&base);
	return name && strcmp(name, "char") == 0;
}

/* An enumerator's value: data forms widened by the enum's signedness. */
static int enumerator_value(Dwarf_Attribute *a, bool is_signed, int64_t *out)
{
	unsigned int form = dwarf_whatform(a);
	Dwarf_Sword s;
	Dwarf_Word u;
	int bits = form == DW_FORM_data1 ? 8 : form == DW_FORM_data2 ? 16 :
		   form == DW_FORM_data4 ? 32 : 0;

	if (form == DW_FORM_sdata || form == DW_FORM_implicit_const) {
		if (dwarf_formsdata(a, &s) != 0)
			return -EINVAL;
		*out = s;
		return 0;
	}
	if (dwarf_formudata(a, &u) != 0)
		return -EINVAL;
	if (is_signed && bits && (u >> (bits - 1)) & 1)
		u |= ~(Dwarf_Word)0 << bits; /* sign-extend data1/2/4 of a signed enum */
	*out = (int64_t)u;
	return 0;
}

/* Signed when the underlying type says so, else when any enumerator is negative. */
static bool enum_signed(Dwarf_Die *die)
{
	Dwarf_Die under, base, child;
	Dwarf_Attribute a;
	Dwarf_Word enc;
	int i = 0;

	if (own_ref(die, DW_AT_type, &under) && peel_type(&under, &base, NULL, NULL) == 1 &&
	    dwarf_attr(&base, DW_AT_encoding, &a) && dwarf_formudata(&a, &enc) == 0)
		return enc == DW_ATE_signed || enc == DW_ATE_signed_char;
	if (dwarf_child(die, &child) != 0)
		return false;
	do {
		Dwarf_Sword s;

		if (dwarf_tag(&child) == DW_TAG_enumerator &&
		    dwarf_attr(&child, DW_AT_const_value, &a) &&
		    dwarf_whatform(&a) == DW_FORM_sdata && dwarf_formsdata(&a, &s) == 0 && s < 0)
			return true;
	} while (++i < MAX_ENUMERATORS && dwarf_siblingof(&child, &child) == 0);
	return false;
}

static int describe_enum(struct function_alloc *fa, Dwarf_Die *die, struct type_info *ti)
{
	struct dwarf_enumerator *v;
	Dwarf_Die child;
	size_t n = 0, cap = 0;
	int ret = 0;

	set_scalar(ti, DWARF_TYPE_ENUM, die_size(die), enum_signed(die));
	if (ti->t.cls != DWARF_TYPE_ENUM || dwarf_child(die, &child) != 0)
		return 0;
	do {
		Dwarf_Attribute a;
		const char *name = dwarf_diename(&child);
		int64_t value;

		if (dwarf_tag(&child) != DW_TAG_enumerator || !name ||
		    !dwarf_attr(&child, DW_AT_const_value, &a) ||
		    enumerator_value(&a, ti->t.is_signed, &value) < 0)
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;

			v = arena_alloc(fa, ncap * sizeof(*v));
			if (!v)
				return -ENOMEM;
			if (n)
				memcpy(v, ti->t.enumerators, n * sizeof(*v));
			ti->t.enumerators = v;
			cap = ncap;
		}
		v = (struct dwarf_enumerator *)ti->t.enumerators;
		v[n].value = value;
		v[n].name = arena_strdup(fa, name);
		if (!v[n++].name)
			return -ENOMEM;
	} while (n < MAX_ENUMERATORS && (ret = dwarf_siblingof(&child, &child)) == 0);
	ti->t.n_enumerators = n;
	return ret < 0 ? -EINVAL : 0;
}

/*
 * Whether every member of the aggregate die sits at a multiple of its own
 * alignment (*align: the largest). A packed or bit-field struct is not
 * certain to be returned in registers, so both answer false.
 */
static bool members_aligned(Dwarf_Die *die, int depth, uint64_t *align)
{
	Dwarf_Die child, type, base;
	int tag = dwarf_tag(die), i = 0;

	*align = 1;
	if (depth > MAX_AGGREGATE_DEPTH)
		return false;
	if (tag == DW_TAG_array_type)
		return own_ref(die, DW_AT_type, &type) && peel_type(&type, &base, NULL, NULL) == 1 &&
		       members_aligned(&base, depth + 1, align);
	if (tag != DW_TAG_structure_type && tag != DW_TAG_union_type &&
	    tag != DW_TAG_class_type) {
		uint64_t size = die_size(die);

		*align = size >= 8 ? 8 : size ? size : 1;
		return size > 0;
	}
	if (dwarf_child(die, &child) != 0)
		return true; /* empty */
	do {
		Dwarf_Attribute a;
		Dwarf_Word off = 0;
		uint64_t a_member;

		if (dwarf_tag(&child) != DW_TAG_member)
			continue;
		if (dwarf_hasattr(&child, DW_AT_bit_size) ||
		    (dwarf_attr(&child, DW_AT_data_member_location, &a) &&
		     dwarf_formudata(&a, &off) != 0) ||
		    !own_ref(&child, DW_AT_type, &type) ||
		    peel_type(&type, &base, NULL, NULL) != 1 ||
		    !members_aligned(&base, depth + 1, &a_member) || off % a_member)
			return false;
		if (a_member > *align)
			*align = a_member;
	} while (++i < MAX_PARAMS * 16 && dwarf_siblingof(&child, &child) == 0);
	return true;
}

/* regs_certain matters to a returned aggregate only: parameters skip the member walk. */
static void describe_aggregate(Dwarf_Die *die, bool is_return, struct type_info *ti)
{
	uint64_t align;

	ti->abi.kind = ABI_AGGREGATE;
	ti->abi.size = die_size(die);
	ti->abi.regs_certain = is_return && ti->abi.size <= 16 && is_c_language(die) &&
			       members_aligned(die, 0, &align);
}

/* "const char *", "struct stat *", "void *": one level, for display. */
static const char *pointer_name(struct function_alloc *fa, Dwarf_Die *ptr)
{
	const char *name = NULL, *tag_word = "";
	bool is_const = false;
	Dwarf_Die pointee, base;
	char buf[256];
	int r = own_ref(ptr, DW_AT_type, &pointee) ? peel_type(&pointee, &base, &name, &is_const)
						   : 0;

	if (r < 0)
		return NULL;
	if (r == 0) {
		name = "void";
	} else if (!name) {
		int tag = dwarf_tag(&base);

		name = dwarf_diename(&base);
		tag_word = tag == DW_TAG_structure_type ? "struct " :
			   tag == DW_TAG_union_type ? "union " :
			   tag == DW_TAG_enumeration_type ? "enum " : "";
		if (tag == DW_TAG_pointer_type)
			name = "void *"; /* a pointer to a pointer: enough to show */
	}
	if (!name)
		return NULL;
	snprintf(buf, sizeof(buf), "%s%s%s *", is_const ? "const " : "", tag_word, name);
	return arena_strdup(fa, buf);
}

/* Describes the type at the end of type's typedef/qualifier chain (type NULL: void). */
static int describe_type(struct function_alloc *fa, Dwarf_Die *type, bool is_return,
			 struct type_info *ti)
{
	const char *typedef_name = NULL;
	Dwarf_Die base;
	int r = type ? peel_type(type, &base, &typedef_name, NULL) : 0;

	memset(ti, 0, sizeof(*ti));
	ti->t.cls = DWARF_TYPE_OTHER;
	ti->abi.kind = ABI_UNKNOWN;
	if (r < 0)
		return 0; /* a broken chain: unknown, not an error for the whole function */
	if (r == 0) {
		ti->t.cls = DWARF_TYPE_VOID;
		ti->abi.kind = ABI_VOID;
		return 0;
	}
	ti->t.name = arena_strdup(fa, typedef_name ? typedef_name : dwarf_diename(&base));
	switch (dwarf_tag(&base)) {
	case DW_TAG_base_type:
		describe_base(&base, ti);
		return 0;
	case DW_TAG_pointer_type:
		set_scalar(ti, points_to_char(&base) ? DWARF_TYPE_STRING : DWARF_TYPE_POINTER,
			   die_size(&base) ? die_size(&base) : 8, false);
		if (!ti->t.name)
			ti->t.name = pointer_name(fa, &base);
		return 0;
	case DW_TAG_reference_type:
	case DW_TAG_rvalue_reference_type:
		set_scalar(ti, DWARF_TYPE_POINTER, die_size(&base) ? die_size(&base) : 8, false);
		return 0;
	case DW_TAG_enumeration_type:
		return describe_enum(fa, &base, ti);
	case DW_TAG_structure_type:
	case DW_TAG_union_type:
	case DW_TAG_class_type:
	case DW_TAG_array_type:
		describe_aggregate(&base, is_return, ti);
		return 0;
	default:
		return 0; /* member pointers, nullptr_t, ...: unknown */
	}
}

/* ---- parameters ------------------------------------------------------------ */

/*
 * The DIE whose children list the parameters: die itself when it has any,
 * else the first origin (abstract instance, declaration) that has.
 */
static void params_owner(Dwarf_Die *die, Dwarf_Die *out)
{
	Dwarf_Die cur = *die, child;
	int i;

	*out = *die;
	for (i = 0; i < MAX_ORIGIN_HOPS; i++) {
		if (dwarf_child(&cur, &child) == 0) {
			*out = cur;
			return;
		}
		if (!own_ref(&cur, DW_AT_abstract_origin, &cur) &&
		    !own_ref(&cur, DW_AT_specification, &cur))
			return;
	}
}

/* Template parameters may precede the formal ones (C++). */
static bool is_template_param(int tag)
{
	return tag == DW_TAG_template_type_parameter || tag == DW_TAG_template_value_parameter ||
	       tag == DW_TAG_GNU_template_parameter_pack;
}

/*
 * Counts the formal parameters (and whether there are unspecified ones) of
 * owner. Compilers list them first, in declaration order, before the
 * body's variables, blocks and call sites: the count stops at the first
 * other child, so a definition's hundreds of body DIEs are never walked.
 * (Were a parameter listed after the body, the ones before it would still
 * be placed right: only later slots depend on earlier parameters.)
 */
static int count_params(Dwarf_Die *owner, size_t *n, bool *variadic)
{
	Dwarf_Die child;
	int ret = 0;

	*n = 0;
	*variadic = false;
	if (dwarf_child(owner, &child) != 0)
		return 0;
	do {
		int tag = dwarf_tag(&child);

		if (tag == DW_TAG_formal_parameter && ++*n > MAX_PARAMS)
			return -E2BIG;
		if (tag == DW_TAG_unspecified_parameters)
			*variadic = true;
		else if (tag != DW_TAG_formal_parameter && !is_template_param(tag))
			break;
	} while ((ret = dwarf_siblingof(&child, &child)) == 0);
	return ret < 0 ? -EINVAL : 0;
}

/*
 * An out-of-line instance lists its parameters as links to the abstract
 * ones; a compiler clone may drop or reorder them. True when die's i-th
 * parameter is the i-th of its abstract origin for every i.
 */
static bool same_params_as_origin(Dwarf_Die *die, size_t n)
{
	Dwarf_Die origin, mine, theirs, link;
	size_t n_origin, i;
	bool variadic;
	int a = 0, b = 0;

	if (!own_ref(die, DW_AT_abstract_origin, &origin))
		return true;
	params_owner(&origin, &origin);
	if (count_params(&origin, &n_origin, &variadic) < 0 || n_origin != n)
		return false;
	if (n == 0)
		return true;
	if (dwarf_child(die, &mine) != 0 || dwarf_child(&origin, &theirs) != 0)
		return false;
	for (i = 0; i < n; i++) {
		while (a == 0 && dwarf_tag(&mine) != DW_TAG_formal_parameter)
			a = dwarf_siblingof(&mine, &mine);
		while (b == 0 && dwarf_tag(&theirs) != DW_TAG_formal_parameter)
			b = dwarf_siblingof(&theirs, &theirs);
		if (a != 0 || b != 0 || !own_ref(&mine, DW_AT_abstract_origin, &link) ||
		    dwarf_dieoffset(&link) != dwarf_dieoffset(&theirs))
			return false;
		a = dwarf_siblingof(&mine, &mine);
		b = dwarf_siblingof(&theirs, &theirs);
	}
	return true;
}

/* Why the compiler's ABI for die may not be the declaration's, or NULL. */
static const char *abi_changed(Dwarf_Die *die, const char *symbol_name, size_t n)
{
	Dwarf_Attribute a;
	Dwarf_Word cc;
	const char *name;

	if (dwarf_attr_integrate(die, DW_AT_calling_convention, &a) &&
	    dwarf_formudata(&a, &cc) == 0 && cc == DW_CC_nocall)
		return "calling convention changed by the compiler (DW_CC_nocall)";
	if (!dwarf_hasattr(die, DW_AT_abstract_origin))
		return NULL;
	name = dwarf_describe_name(die);
	if (!symbol_name || !name || strcmp(symbol_name, name) != 0)
		return "out-of-line instance under another name: a compiler clone may have changed its ABI";
	if (!same_params_as_origin(die, n))
		return "parameters differ from the declaration's";
	return NULL;
}

static int describe_param(struct function_alloc *fa, Dwarf_Die *param, bool promote,
			  struct dwarf_value *v, struct abi_value *k)
{
	struct type_info ti;
	Dwarf_Die type;
	int ret = describe_type(fa, attr_die(param, DW_AT_type, &type), false, &ti);

	if (ret < 0)
		return ret;
	if (ti.t.cls == DWARF_TYPE_VOID) { /* a parameter without a type */
		ti.t.cls = DWARF_TYPE_OTHER;
		ti.abi.kind = ABI_UNKNOWN;
	}
	ti.abi.promoted = promote && ti.abi.kind == ABI_FLOAT && ti.abi.size == 4;
	v->name = arena_strdup(fa, attr_string(param, DW_AT_name));
	v->type = ti.t;
	*k = ti.abi;
	return 0;
}

/* Fills params[0 .. n) and kinds from owner's formal parameters. */
static int describe_params(struct function_alloc *fa, Dwarf_Die *owner, bool promote,
			   struct dwarf_value *params, struct abi_value *kinds, size_t n)
{
	Dwarf_Die child;
	size_t i = 0;
	int ret = 0;

	if (n == 0)
		return 0;
	if (dwarf_child(owner, &child) != 0)
		return -EINVAL;
	do {
		if (dwarf_tag(&child) != DW_TAG_formal_parameter)
			continue;
		ret = describe_param(fa, &child, promote, &params[i], &kinds[i]);
		if (ret < 0)
			return ret;
		i++;
	} while (i < n && (ret = dwarf_siblingof(&child, &child)) == 0);
	return i == n ? 0 : -EINVAL;
}

static bool unprototyped_c(Dwarf_Die *die)
{
	Dwarf_Attribute a;
	bool prototyped = false;

	if (dwarf_attr_integrate(die, DW_AT_prototyped, &a))
		dwarf_formflag(&a, &prototyped);
	return !prototyped && is_c_language(die);
}

static int describe_all(struct function_alloc *fa, Dwarf_Die *die, const char *symbol_name,
			enum dwarf_params_arch arch)
{
	struct dwarf_function *f = &fa->pub;
	struct abi_value *kinds = NULL, ret_kind;
	struct type_info ret_ti;
	const char *changed;
	Dwarf_Die owner, type;
	size_t i;
	int ret;

	params_owner(die, &owner);
	ret = count_params(&owner, &f->n_params, &f->variadic);
	if (ret < 0)
		return ret;
	f->params = arena_alloc(fa, (f->n_params + 1) * sizeof(*f->params));
	kinds = calloc(f->n_params + 1, sizeof(*kinds));
	if (!f->params || !kinds) {
		free(kinds);
		return -ENOMEM;
	}
	memset(f->params, 0, (f->n_params + 1) * sizeof(*f->params));
	ret = describe_params(fa, &owner, unprototyped_c(die), f->params, kinds, f->n_params);
	if (ret == 0)
		ret = describe_type(fa, attr_die(die, DW_AT_type, &type), true, &ret_ti);
	if (ret < 0) {
		free(kinds);
		return ret;
	}
	f->ret = (struct dwarf_value){ .name = "retval", .type = ret_ti.t };
	ret_kind = ret_ti.abi;
	dwarf_abi_place(arch, kinds, f->n_params, &ret_kind, f->params, &f->ret);
	free(kinds);
	changed = abi_changed(die, symbol_name, f->n_params);
	for (i = 0; i < f->n_params; i++) {
		if (changed)
			f->params[i] = (struct dwarf_value){ .name = f->params[i].name,
							     .type = f->params[i].type,
							     .reason = changed };
		f->n_supported += f->params[i].loc != DWARF_LOC_NONE;
	}
	if (changed && f->ret.loc != DWARF_LOC_NONE) {
		f->ret.loc = DWARF_LOC_NONE;
		f->ret.reason = changed;
	}
	return 0;
}

int dwarf_describe_function(Dwarf_Die *die, uint64_t entry, const char *symbol_name,
			    enum dwarf_params_arch arch, struct dwarf_function **out)
{
	struct function_alloc *fa = calloc(1, sizeof(*fa));
	int ret;

	if (!fa)
		return -ENOMEM;
	fa->pub.entry = entry;
	fa->pub.name = arena_strdup(fa, attr_string(die, DW_AT_name));
	ret = describe_all(fa, die, symbol_name, arch);
	if (ret < 0) {
		dwarf_function_free(&fa->pub);
		return ret;
	}
	*out = &fa->pub;
	return 0;
}
