// SPDX-License-Identifier: MIT
/*
 * Separate debug files: the build-id path, the .gnu_debuglink section and
 * its three candidate places, the CRC-32 that accepts a candidate. Every
 * module is hostile: the debuglink name is bounded and never a path, and
 * the CRC reads at most MAX_DEBUGLINK_BYTES.
 */
#include "daemon/symbols/debug_file.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DEBUGLINK_BYTES (4ull << 30) /* CRC-32 reads it all: bound the work */
#define CRC_CHUNK (1u << 16)
#define HOST_ELFDATA (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB)

int debug_file_build_id_path(char *buf, size_t size, const char *root, const uint8_t *id,
			     size_t len)
{
	size_t i, off;
	int n;

	if (len < 2)
		return -EINVAL;
	n = snprintf(buf, size, "%s/.build-id/%02x/", root ? root : DEBUG_FILE_ROOT, id[0]);
	if (n < 0 || (size_t)n >= size)
		return -ENAMETOOLONG;
	off = (size_t)n;
	for (i = 1; i < len; i++, off += 2)
		if (off + 3 > size || snprintf(buf + off, size - off, "%02x", id[i]) != 2)
			return -ENAMETOOLONG;
	if (off + sizeof(".debug") > size)
		return -ENAMETOOLONG;
	memcpy(buf + off, ".debug", sizeof(".debug"));
	return 0;
}

bool debug_file_headers_in_file(Elf *elf, uint64_t file_size)
{
	GElf_Ehdr eh;
	size_t n;

	if (!gelf_getehdr(elf, &eh) || elf_getshdrnum(elf, &n) != 0 || n == 0 ||
	    eh.e_shentsize == 0)
		return false;
	return eh.e_shoff <= file_size && n <= (file_size - eh.e_shoff) / eh.e_shentsize;
}

/* True when the section's bytes lie inside the file (NOBITS has none). */
static bool section_in_file(const GElf_Shdr *sh, uint64_t file_size)
{
	if (sh->sh_type == SHT_NOBITS)
		return false;
	return sh->sh_offset <= file_size && sh->sh_size <= file_size - sh->sh_offset;
}

/*
 * The .gnu_debuglink section: a NUL-terminated file name, padding to 4, then
 * the debug file's CRC-32 in the file's byte order.
 */
bool debug_file_read_debuglink(Elf *elf, uint64_t file_size, char *name, size_t name_size,
			       uint32_t *crc)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx, len, crc_off;
	GElf_Ehdr eh;
	GElf_Shdr sh;
	Elf_Data *d;
	const char *sec;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return false;
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || !section_in_file(&sh, file_size))
			continue;
		sec = elf_strptr(elf, shstrndx, sh.sh_name);
		if (sec && strcmp(sec, ".gnu_debuglink") == 0)
			break;
	}
	if (!scn || !(d = elf_getdata(scn, NULL)) || !d->d_buf)
		return false;
	len = strnlen(d->d_buf, d->d_size);
	crc_off = (len + 4) & ~(size_t)3;
	if (len == 0 || len >= name_size || crc_off > d->d_size || d->d_size - crc_off < 4 ||
	    memchr(d->d_buf, '/', len) || strcmp(d->d_buf, "..") == 0 || strcmp(d->d_buf, ".") == 0)
		return false;
	memcpy(name, d->d_buf, len + 1);
	/* the section is raw bytes: the CRC is in the file's byte order */
	memcpy(crc, (const uint8_t *)d->d_buf + crc_off, 4);
	if (gelf_getehdr(elf, &eh) && eh.e_ident[EI_DATA] != HOST_ELFDATA)
		*crc = __builtin_bswap32(*crc);
	return true;
}

int debug_file_debuglink_path(char *buf, size_t size, unsigned int i, const char *root,
			      const char *module_path, const char *name)
{
	const char *slash = strrchr(module_path, '/');
	int dir_len, n;

	if (module_path[0] != '/' || !slash || i >= DEBUG_FILE_DEBUGLINK_PLACES ||
	    slash - module_path > INT_MAX)
		return -EINVAL;
	dir_len = (int)(slash - module_path); /* 0 for a file in / */
	if (i == 0)
		n = snprintf(buf, size, "%.*s/%s", dir_len, module_path, name);
	else if (i == 1)
		n = snprintf(buf, size, "%.*s/.debug/%s", dir_len, module_path, name);
	else
		n = snprintf(buf, size, "%s%.*s/%s", root ? root : DEBUG_FILE_ROOT, dir_len,
			     module_path, name);
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* The CRC-32 of zlib and gdb's gnu_debuglink_crc32 (reflected 0xedb88320). */
static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t len, const uint32_t *table)
{
	crc = ~crc;
	while (len--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

static void crc32_table(uint32_t *table)
{
	uint32_t i, k, c;

	for (i = 0; i < 256; i++) {
		for (c = i, k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
		table[i] = c;
	}
}

int debug_file_crc32(int fd, uint32_t *out)
{
	uint32_t table[256], crc = 0;
	uint8_t *buf = malloc(CRC_CHUNK);
	struct stat st;
	off_t off = 0;
	ssize_t n;

	if (!buf)
		return -ENOMEM;
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size > MAX_DEBUGLINK_BYTES) {
		free(buf);
		return -EFBIG;
	}
	crc32_table(table);
	while ((n = pread(fd, buf, CRC_CHUNK, off)) > 0) {
		crc = crc32_update(crc, buf, (size_t)n, table);
		off += n;
	}
	free(buf);
	if (n < 0)
		return -EIO;
	*out = crc;
	return 0;
}
