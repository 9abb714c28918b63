/*
 * pause: the process that holds a pod sandbox's namespaces open.
 *
 * It sleeps until told to stop. Running as PID 1 of the sandbox it also
 * collects every orphan that gets re-parented to it, so no zombie piles up.
 * SIGINT or SIGTERM end it with status 0.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef PAUSE_VERSION
#define PAUSE_VERSION "3.8-kubelet-rs"
#endif

static void stop_now(int sig)
{
	static const char note[] = "pause: signal received, exiting\n";
	(void)sig;
	(void)!write(STDERR_FILENO, note, sizeof(note) - 1);
	_exit(0);
}

static void collect_children(int sig)
{
	int saved = errno;
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	errno = saved;
}

int main(int argc, char **argv)
{
	struct sigaction act;

	if (argc > 1 && strcmp(argv[1], "-v") == 0) {
		printf("pause version %s\n", PAUSE_VERSION);
		return 0;
	}
	if (getpid() != 1)
		fprintf(stderr, "pause: note: not running as PID 1, orphans are not ours to reap\n");

	memset(&act, 0, sizeof(act));
	sigemptyset(&act.sa_mask);
	act.sa_handler = stop_now;
	if (sigaction(SIGINT, &act, NULL) < 0 || sigaction(SIGTERM, &act, NULL) < 0) {
		perror("pause: sigaction");
		return 1;
	}
	act.sa_handler = collect_children;
	act.sa_flags = SA_NOCLDSTOP | SA_RESTART;
	if (sigaction(SIGCHLD, &act, NULL) < 0) {
		perror("pause: sigaction");
		return 1;
	}

	for (;;)
		pause();
}
