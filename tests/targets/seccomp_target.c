// SPDX-License-Identifier: MIT
/*
 * A process under a seccomp filter (one that allows everything, so it runs
 * normally): profctl attach must refuse it with a clear reason rather than
 * risk the filter killing it mid-injection. Exits when argv[1] exists.
 */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = { .len = 1, .filter = &allow };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		perror("seccomp");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	while (argc > 1 && access(argv[1], F_OK) != 0)
		usleep(10000);
	return 0;
}
