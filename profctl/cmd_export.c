// SPDX-License-Identifier: MIT
/*
 * `profctl export --format pprof|chrome|folded [-o OUT] [--with-calls] TRACE`:
 * the command line, the output file and its errors. The formats themselves
 * live in viewer-export/export/. OUT is written as OUT.tmp.PID and renamed
 * over OUT only once complete, so a failed export leaves nothing behind;
 * `-o -` writes to stdout.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profctl/profctl.h"
#include "viewer-export/export/export.h"

#define EXPORT_USAGE "usage: profctl export --format pprof|chrome|folded [-o OUT|-] [--with-calls] TRACE\n"

struct format {
	const char *name, *ext;
	int (*run)(const char *path, FILE *out, const struct export_opts *o, char *err);
};

static const struct format formats[] = {
	{ "pprof", ".pb.gz", export_pprof },
	{ "chrome", ".json", export_chrome },
	{ "folded", ".folded", export_folded },
};

static const struct format *format_find(const char *name)
{
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
		if (strcmp(formats[i].name, name) == 0)
			return &formats[i];
	return NULL;
}

/* TRACE with its extension (if any) replaced by the format's: malloc'd, NULL on ENOMEM. */
static char *default_output(const char *trace, const char *ext)
{
	const char *slash = strrchr(trace, '/'), *dot = strrchr(trace, '.');
	size_t stem = (dot && dot > (slash ? slash : trace) && dot[1]) ? (size_t)(dot - trace)
								       : strlen(trace);
	char *out = malloc(stem + strlen(ext) + 1);

	if (out) {
		memcpy(out, trace, stem);
		strcpy(out + stem, ext);
	}
	return out;
}

/* Exports into a temporary file next to out, renamed over it at the end. */
static int export_to_file(const struct format *f, const char *trace, const char *out,
			  const struct export_opts *o, char *err)
{
	char tmp[4096];
	FILE *fp;
	int fd, rc;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", out, (int)getpid()) >= (int)sizeof(tmp)) {
		snprintf(err, EXPORT_ERR_LEN, "output name too long: %s", out);
		return -ENAMETOOLONG;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	fp = fd < 0 ? NULL : fdopen(fd, "w");
	if (!fp) {
		rc = -errno;
		snprintf(err, EXPORT_ERR_LEN, "cannot write %s: %s", out, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(tmp);
		}
		return rc;
	}
	rc = f->run(trace, fp, o, err);
	if (!rc && (ferror(fp) || fflush(fp) != 0 || fsync(fd) != 0)) {
		rc = -(errno ? errno : EIO);
		snprintf(err, EXPORT_ERR_LEN, "cannot write %s: %s", out, strerror(-rc));
	}
	if (fclose(fp) != 0 && !rc) {
		rc = -(errno ? errno : EIO);
		snprintf(err, EXPORT_ERR_LEN, "cannot write %s: %s", out, strerror(-rc));
	}
	if (!rc && rename(tmp, out) != 0) {
		rc = -errno;
		snprintf(err, EXPORT_ERR_LEN, "cannot rename the finished export to %s: %s", out,
			 strerror(errno));
	}
	if (rc)
		unlink(tmp);
	return rc;
}

static int export_to_stdout(const struct format *f, const char *trace,
			    const struct export_opts *o, char *err)
{
	int rc = f->run(trace, stdout, o, err);

	if (!rc && (fflush(stdout) != 0 || ferror(stdout))) {
		rc = -(errno ? errno : EIO);
		snprintf(err, EXPORT_ERR_LEN, "cannot write to stdout: %s", strerror(-rc));
	}
	return rc;
}

int cmd_export(int argc, char **argv)
{
	struct export_opts o = { 0 };
	const char *fmt = NULL, *out = NULL, *trace = NULL;
	const struct format *f;
	char err[EXPORT_ERR_LEN], *def = NULL;
	int rc;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if ((strcmp(a, "--format") == 0 || strcmp(a, "-f") == 0) && i + 1 < argc) {
			fmt = argv[++i];
		} else if (strncmp(a, "--format=", 9) == 0) {
			fmt = a + 9;
		} else if (strcmp(a, "-o") == 0 && i + 1 < argc) {
			out = argv[++i];
		} else if (strcmp(a, "--with-calls") == 0) {
			o.with_calls = true;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			fputs(EXPORT_USAGE, stdout);
			return 0;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "profctl: export: unknown option or missing value: %s\n", a);
			return 2;
		} else if (!trace) {
			trace = a;
		} else {
			fprintf(stderr, "profctl: export: one trace at a time (%s, then %s)\n", trace, a);
			return 2;
		}
	}
	if (!fmt || !trace) {
		fprintf(stderr, "profctl: export: %s\n" EXPORT_USAGE,
			!fmt ? "--format is required" : "no trace given");
		return 2;
	}
	f = format_find(fmt);
	if (!f) {
		fprintf(stderr, "profctl: export: unknown format '%s' (pprof, chrome or folded)\n", fmt);
		return 2;
	}
	if (!out) {
		out = def = default_output(trace, f->ext);
		if (!def) {
			fprintf(stderr, "profctl: export: out of memory\n");
			return 1;
		}
	}
	rc = strcmp(out, "-") == 0 ? export_to_stdout(f, trace, &o, err)
				   : export_to_file(f, trace, out, &o, err);
	if (rc)
		fprintf(stderr, "profctl: export: %s: %s\n", trace, err);
	else if (strcmp(out, "-") != 0)
		fprintf(stderr, "profctl: export: wrote %s\n", out);
	free(def);
	return rc ? 1 : 0;
}
