// SPDX-License-Identifier: MIT
/*
 * `profctl run` for a program of another architecture run by qemu-user
 * (through binfmt_misc, or as `qemu-ARCH PROG`): which architecture the
 * program is, where that architecture's agent lives (ARCH/libprofagent.so
 * next to profctl: build/aarch64/ in the build tree, PKGLIBDIR/aarch64/
 * installed), and how it reaches the program: through QEMU_SET_ENV, which
 * qemu adds to the guest's environment only, so that qemu's own loader
 * (x86-64) never tries to preload an arm64 library. Also whether the program
 * is statically linked, which no preload reaches whatever its architecture.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "profctl/profctl.h"

static const struct {
	uint16_t machine;
	const char *name;
} known_machines[] = {
	{ EM_X86_64, "x86_64" },
	{ EM_AARCH64, "aarch64" },
};

static const char *machine_name(uint16_t machine)
{
	for (size_t i = 0; i < sizeof(known_machines) / sizeof(known_machines[0]); i++)
		if (known_machines[i].machine == machine)
			return known_machines[i].name;
	return NULL;
}

/* "qemu-aarch64", "qemu-aarch64-static": the architecture it runs. */
static int arch_of_qemu(const char *path, char *arch, size_t len)
{
	const char *base = strrchr(path, '/');
	size_t n;

	base = base ? base + 1 : path;
	if (strncmp(base, "qemu-", 5) != 0)
		return 0;
	base += 5;
	n = strcspn(base, "-");
	if (n == 0 || n >= len)
		return 0;
	memcpy(arch, base, n);
	arch[n] = '\0';
	return 1;
}

int foreign_arch_of(const char *cmd_path, char *arch, size_t len)
{
	Elf64_Ehdr eh;
	struct utsname u;
	const char *name;
	int fd = open(cmd_path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, &eh, sizeof(eh));

	if (fd >= 0)
		close(fd);
	arch[0] = '\0';
	if (uname(&u))
		return -errno;
	if (arch_of_qemu(cmd_path, arch, len))
		return strcmp(arch, u.machine) ? 1 : (arch[0] = '\0', 0);
	if (n != (ssize_t)sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
		return 0; /* a script, or unreadable: its interpreter is native, we assume */
	name = machine_name(eh.e_machine);
	if (!name || !strcmp(name, u.machine))
		return 0;
	snprintf(arch, len, "%s", name);
	return 1;
}

int foreign_arch_preload(const char *agent_path)
{
	const char *old = getenv("QEMU_SET_ENV"), *user = getenv("LD_PRELOAD");
	char *v;
	int err;

	/* qemu splits QEMU_SET_ENV at commas: such a path cannot go through */
	if (strchr(agent_path, ','))
		return -EINVAL;
	if (user && (!*user || strchr(user, ',')))
		user = NULL;
	/* the agent first: it takes itself out of LD_PRELOAD again (agent/agent.c) */
	if (asprintf(&v, "%s%sLD_PRELOAD=%s%s%s,PROFD_AGENT_GUEST=1", old && *old ? old : "",
		     old && *old ? "," : "", agent_path, user ? ":" : "", user ? user : "") < 0)
		return -ENOMEM;
	err = setenv("QEMU_SET_ENV", v, 1) ? -errno : 0;
	free(v);
	return err;
}

/*
 * No PT_INTERP: no dynamic loader runs, so LD_PRELOAD loads nothing (a
 * static-pie too, which has PT_DYNAMIC but relocates itself).
 */
int command_is_static(const char *cmd_path)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	int fd = open(cmd_path, O_RDONLY | O_CLOEXEC), is_static = 0;

	if (fd < 0)
		return 0;
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize < sizeof(ph) || eh.e_phnum == 0)
		goto out; /* a script, or unreadable: its interpreter is dynamic, we assume */
	is_static = 1;
	for (uint16_t i = 0; i < eh.e_phnum && is_static; i++) {
		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)) !=
		    (ssize_t)sizeof(ph))
			is_static = 0;
		else if (ph.p_type == PT_INTERP)
			is_static = 0;
	}
out:
	close(fd);
	return is_static;
}
