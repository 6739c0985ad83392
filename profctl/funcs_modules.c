// SPDX-License-Identifier: MIT
/*
 * Module discovery and read-only mapping for `profctl funcs` (see
 * funcs_modules.h). A file is mapped as the loader would lay it out (its
 * PT_LOAD segments at their offsets from one base, the rest of the span
 * zeroes) but never executable: nothing of it runs.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "profctl/funcs_modules.h"
#include "profctl/profctl.h"

#define AGENT_NAME "libprofagent.so"

static void note(struct funcs_modules *m, const char *fmt, ...)
{
	char buf[PATH_MAX + 128], **n = realloc(m->notes, (m->n_notes + 1) * sizeof(*n));
	va_list ap;

	if (!n)
		return;
	m->notes = n;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if ((m->notes[m->n_notes] = strdup(buf)))
		m->n_notes++;
}

static bool known(const struct funcs_modules *m, const char *path)
{
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->items[i].path, path) == 0)
			return true;
	return false;
}

/* Reads the ELF header and program headers of fd; 0 or -ENOEXEC. */
static int read_phdrs(int fd, Elf64_Ehdr *eh, Elf64_Phdr **ph)
{
	size_t len;

	if (pread(fd, eh, sizeof(*eh), 0) != (ssize_t)sizeof(*eh) ||
	    memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_machine != EM_X86_64 || eh->e_phentsize != sizeof(Elf64_Phdr) || !eh->e_phnum)
		return -ENOEXEC;
	len = (size_t)eh->e_phnum * sizeof(Elf64_Phdr);
	*ph = malloc(len);
	if (!*ph)
		return -ENOMEM;
	if (pread(fd, *ph, len, (off_t)eh->e_phoff) != (ssize_t)len) {
		free(*ph);
		return -ENOEXEC;
	}
	return 0;
}

/* Maps the PT_LOADs of fd read-only from one base; fills lm's base and executable segments. */
static int map_segments(int fd, const Elf64_Ehdr *eh, const Elf64_Phdr *ph, struct loaded_module *lm)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), lo = UINT64_MAX, hi = 0;
	uint8_t *span;

	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD) {
			lo = ph[i].p_vaddr < lo ? ph[i].p_vaddr : lo;
			hi = ph[i].p_vaddr + ph[i].p_memsz > hi ? ph[i].p_vaddr + ph[i].p_memsz : hi;
		}
	if (hi <= lo || hi - lo > (1ull << 36))
		return -ENOEXEC;
	lo &= ~(page - 1);
	span = mmap(NULL, hi - lo, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (span == MAP_FAILED)
		return -errno;
	lm->base = (uint64_t)(uintptr_t)span - lo;
	for (int i = 0; i < eh->e_phnum; i++) {
		uint64_t at = ph[i].p_vaddr & ~(page - 1), skew = ph[i].p_vaddr - at;

		if (ph[i].p_type != PT_LOAD || !ph[i].p_filesz)
			continue;
		if (ph[i].p_offset < skew ||
		    mmap((void *)(uintptr_t)(lm->base + at), ph[i].p_filesz + skew, PROT_READ,
			 MAP_PRIVATE | MAP_FIXED, fd, (off_t)(ph[i].p_offset - skew)) == MAP_FAILED)
			return -ENOEXEC;
		if ((ph[i].p_flags & PF_X) && lm->n_segs < LOADED_MODULE_MAX_SEGMENTS) {
			lm->seg_lo[lm->n_segs] = lm->base + ph[i].p_vaddr;
			lm->seg_hi[lm->n_segs++] = lm->base + ph[i].p_vaddr + ph[i].p_memsz;
		}
	}
	return 0;
}

/* Adds path mapped for reading (once); a file that cannot be is noted, not fatal. */
static int add_module(struct funcs_modules *m, const char *path)
{
	struct loaded_module lm = { 0 };
	Elf64_Ehdr eh;
	Elf64_Phdr *ph = NULL;
	int fd, err;

	if (known(m, path) || strncmp(strrchr(path, '/') ? strrchr(path, '/') + 1 : path,
				      AGENT_NAME, strlen(AGENT_NAME)) == 0)
		return 0; /* the agent never instruments itself */
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		note(m, "%s: cannot open: %s", path, strerror(errno));
		return 0;
	}
	err = read_phdrs(fd, &eh, &ph);
	if (!err)
		err = map_segments(fd, &eh, ph, &lm);
	free(ph);
	close(fd);
	if (err == -ENOMEM)
		return err;
	if (err || !lm.n_segs) {
		note(m, "%s: %s", path, err ? "not an x86-64 ELF file that can be mapped"
					    : "no executable segment");
		return 0;
	}
	if (m->n == m->cap) {
		size_t ncap = m->cap ? m->cap * 2 : 16;
		struct loaded_module *n = realloc(m->items, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		m->items = n;
		m->cap = ncap;
	}
	lm.path = strdup(path);
	if (!lm.path)
		return -ENOMEM;
	m->items[m->n++] = lm;
	return 0;
}

int funcs_modules_of_pid(pid_t pid, struct funcs_modules *m)
{
	char path[64], line[PATH_MAX + 256];
	FILE *f;
	int err = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f || !fgets(line, sizeof(line), f)) {
		err = errno == ENOENT || errno == ESRCH ? -ESRCH : -(errno ? errno : EIO);
		fprintf(stderr, "profctl: funcs: %s: %s\n", path,
			err == -ESRCH ? "no such process" : strerror(-err));
		if (f)
			fclose(f);
		return err;
	}
	do {
		char perms[8], *file;
		int col = 0;

		if (sscanf(line, "%*x-%*x %7s %*x %*x:%*x %*u %n", perms, &col) < 1 || !col)
			continue;
		file = line + col;
		file[strcspn(file, "\n")] = '\0';
		if (perms[2] != 'x' || file[0] != '/')
			continue; /* anonymous, [vdso], [stack]... */
		if (strstr(file, " (deleted)"))
			note(m, "%s: the file was replaced or removed since it was mapped", file);
		else
			err = add_module(m, file);
	} while (!err && fgets(line, sizeof(line), f));
	fclose(f);
	return err;
}

/* Whether the ELF at path asks for an interpreter (a dynamic executable). */
static int is_dynamic(const char *path)
{
	Elf64_Ehdr eh;
	Elf64_Phdr *ph = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC), dynamic = 0;

	if (fd < 0)
		return -errno;
	if (read_phdrs(fd, &eh, &ph)) {
		close(fd);
		return -ENOEXEC;
	}
	for (int i = 0; i < eh.e_phnum; i++)
		dynamic |= ph[i].p_type == PT_INTERP;
	free(ph);
	close(fd);
	return dynamic;
}

/* The loader's list: "name => /path (0x...)", "/path (0x...)", "name => not found". */
static int parse_loader_line(struct funcs_modules *m, char *line)
{
	char *arrow = strstr(line, " => "), *path = arrow ? arrow + 4 : line, *end;

	while (*path == '\t' || *path == ' ')
		path++;
	if (strncmp(path, "not found", 9) == 0) {
		*arrow = '\0';
		note(m, "%s: not found by the loader", line + strspn(line, "\t "));
		return 0;
	}
	if (path[0] != '/')
		return 0; /* linux-vdso.so.1, statically linked */
	end = strstr(path, " (0x");
	if (end)
		*end = '\0';
	return add_module(m, path);
}

/* Runs the loader on exe in list mode; its stdout is read into m. */
static int loader_list(char *const argv[], const char *exe, const char *agent_path,
		       struct funcs_modules *m)
{
	int fds[2], status, err = 0;
	char line[PATH_MAX + 128];
	pid_t child;
	FILE *f;

	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	child = fork();
	if (child < 0)
		return -errno;
	if (child == 0) {
		dup2(fds[1], STDOUT_FILENO);
		setenv("LD_TRACE_LOADED_OBJECTS", "1", 1);
		setenv("LD_PRELOAD", agent_path, 1);
		execv(exe, argv);
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	while (f && !err && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		err = parse_loader_line(m, line);
	}
	if (f)
		fclose(f);
	waitpid(child, &status, 0);
	if (!err && (!WIFEXITED(status) || WEXITSTATUS(status))) {
		fprintf(stderr, "profctl: funcs: the dynamic loader could not list %s's libraries\n", exe);
		err = -ENOEXEC;
	}
	return err;
}

int funcs_modules_of_command(char *const argv[], const char *agent_path, struct funcs_modules *m)
{
	char found[PATH_MAX], real[PATH_MAX];
	int dynamic, err;

	if (profctl_find_command(argv[0], found, sizeof(found)) || !realpath(found, real)) {
		fprintf(stderr, "profctl: funcs: %s: command not found\n", argv[0]);
		return -ENOENT;
	}
	dynamic = is_dynamic(real);
	if (dynamic < 0) {
		fprintf(stderr, "profctl: funcs: %s: not an x86-64 ELF executable\n", real);
		return -ENOEXEC;
	}
	/* the executable first, as the process lists it (/proc/self/exe: the real path) */
	err = add_module(m, real);
	if (!err && dynamic)
		err = loader_list(argv, real, agent_path, m);
	return err;
}

void funcs_modules_free(struct funcs_modules *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->items[i].path);
	for (size_t i = 0; i < m->n_notes; i++)
		free(m->notes[i]);
	free(m->items);
	free(m->notes);
	memset(m, 0, sizeof(*m));
}
