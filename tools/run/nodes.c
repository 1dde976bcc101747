/* SPDX-License-Identifier: MIT */
/* A job across nodes (two guests, or hosts): node 0's emunic-run serves the
 * bootstrap of every rank; every other node's keeps a control link to it,
 * hands over how its ranks ended and follows node 0 to the end. */
#include "run.h"

#include "emunic/boot_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int node_of(const struct job *j, int r)
{
	int k = 0;

	while (k + 1 < j->nodes && r >= (int)((long)(k + 1) * j->n / j->nodes))
		k++;
	return k;
}

/* Node > 0: the control link to node 0, whose address the ranks use too. */
void node_connect(struct job *j)
{
	snprintf(j->addr, sizeof(j->addr), "%s", j->server);
	j->ctl = emunic_wire_connect(j->server, 60 * 1000);
	if (j->ctl < 0 || emunic_wire_send(j->ctl, EMUNIC_BOOT_NODE_HELLO, j->node, NULL, 0)) {
		say("node %d: cannot reach node 0's emunic-run at %s", j->node, j->server);
		exit(EXIT_LAUNCH);
	}
}

/* Node 0: node k's launcher says its ranks are done (and how), or failed. */
void on_node_msg(struct job *j, int k)
{
	struct emunic_boot_msg m;
	char why[512] = "";

	if (emunic_wire_recv_hdr(j->node_fd[k], &m, 5000)) {
		close(j->node_fd[k]);
		j->node_fd[k] = -1;
		if (!j->node_done[k])
			fail(j, EXIT_LAUNCH, "node %d's emunic-run went away", k);
		return;
	}
	if (m.len)
		emunic_wire_recv_body(j->node_fd[k], why, m.len < sizeof(why) ? m.len : sizeof(why) - 1, 5000);
	if (m.type != EMUNIC_BOOT_NODE_DONE)
		fail(j, EXIT_LAUNCH, "node %d: %s", k, why);
	j->node_done[k] = true;
	/* Under --keep-going a node's ranks may have failed: "CODE WHY". */
	if (why[0]) {
		char *rest;
		long code = strtol(why, &rest, 10);

		if (code > 0 && code < 256) {
			say("node %d: %s (--keep-going)", k, rest + (*rest == ' '));
			if (!j->first_fail) {
				j->first_fail = (int)code;
				snprintf(j->first_why, sizeof(j->first_why), "node %d: %s", k, rest + (*rest == ' '));
			}
		}
	}
}

/* Node 0: every other node's ranks are done (true on other nodes). */
bool nodes_done(const struct job *j)
{
	for (int k = 1; k < j->nodes && j->node == 0; k++)
		if (!j->node_done[k])
			return false;
	return true;
}

/* Node > 0 after its ranks finished: wait for node 0 to end the job. */
int follow_server(struct job *j)
{
	struct emunic_boot_msg m;
	char why[512] = "";

	if (j->first_fail) {	/* --keep-going: tell node 0 which status the job ends with */
		char done[300];

		snprintf(done, sizeof(done), "%d %s", j->first_fail, j->first_why);
		emunic_wire_send(j->ctl, EMUNIC_BOOT_NODE_DONE, j->node, done, strlen(done) + 1);
	} else {
		emunic_wire_send(j->ctl, EMUNIC_BOOT_NODE_DONE, j->node, NULL, 0);
	}
	if (emunic_wire_recv_hdr(j->ctl, &m, -1))
		return 0;	/* node 0 closed: the job ended well */
	if (m.len)
		emunic_wire_recv_body(j->ctl, why, m.len < sizeof(why) ? m.len : sizeof(why) - 1, 5000);
	say("node 0 aborted the job: %s", why);
	return EXIT_LAUNCH;
}
