// SPDX-License-Identifier: MIT
/* common/proc_text.h: a whole small text file in one buffer. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/proc_text.h"

int proc_text_read(const char *path, char **text, size_t *len)
{
	size_t cap = 8192, n = 0; /* a process start's maps fit, in two pages */
	char *buf = malloc(cap), *grown;
	int fd, err = 0;
	ssize_t got;

	if (!buf)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		goto err_free;
	}
	for (;;) {
		if (cap - n < 4096 + 1) { /* seq_file hands out at least a page per read */
			grown = realloc(buf, cap * 2);
			if (!grown) {
				err = -ENOMEM;
				goto err_close;
			}
			buf = grown;
			cap *= 2;
		}
		got = read(fd, buf + n, cap - n - 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			err = -errno;
			goto err_close;
		}
		if (got == 0)
			break;
		n += (size_t)got;
	}
	close(fd);
	buf[n] = '\0';
	*text = buf;
	if (len)
		*len = n;
	return 0;
err_close:
	close(fd);
err_free:
	free(buf);
	return err;
}
