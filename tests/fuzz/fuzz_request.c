// SPDX-License-Identifier: GPL-2.0
/*
 * Requests as the socket reads them: the input is what a client sends, split into lines as
 * the server splits it, each handed to server__request() (parse, then the engine's
 * handler) for one client, which then hangs up. The first byte says who the client is.
 * Every few hundred inputs the engine drains its rings and ticks, so queries also run over
 * real figures and scans that were asked for end.
 */
#include <unistd.h>
#include "serve/server.h"
#include "fuzz.h"

enum fuzz_peer {
	FUZZ_PEER_INPROCESS,	/* `lockscope scan` without a daemon */
	FUZZ_PEER_ROOT,
	FUZZ_PEER_MEMBER,	/* a member of group lockscope: no capabilities */
	FUZZ_PEER_MAX,
};

#define FUZZ_TICK_EVERY 256

static cJSON *on_request(void *ctx, uint64_t client, const struct ls_peer *peer, const cJSON *req)
{
	return engine__handle(ctx, client, peer, req);
}

/*
 * The engine loads its BPF programs once, here: libFuzzer does not time this as an input.
 * Made by the first input instead, the verifier's load counted against the 20 s timeout
 * of one input and failed CI under load (timeout after 25 s inside bpf_prog_load).
 */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_engine(NULL);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint64_t client, inputs;
	struct engine *e = fuzz_engine(NULL);
	struct server_opts so = { .on_request = on_request, .ctx = e };
	struct ls_peer peers[FUZZ_PEER_MAX] = {
		[FUZZ_PEER_ROOT] = { .pid = getpid(), .cap_sys_ptrace = true, .cap_syslog = true },
		[FUZZ_PEER_MEMBER] = { .pid = getpid(), .uid = 65534, .gid = 65534 },
	};
	const struct ls_peer *peer;
	char *text, *line, *nl;

	if (!size)
		return 0;
	peer = data[0] % FUZZ_PEER_MAX == FUZZ_PEER_INPROCESS ? NULL : &peers[data[0] % FUZZ_PEER_MAX];
	text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = 0;
	client++;
	for (line = text; line; line = nl) {
		cJSON *resp;
		char *out;

		nl = strchr(line, '\n');
		if (nl)
			*nl++ = 0;
		if (!*line)
			continue;
		resp = server__request(&so, client, peer, line);
		if (!resp)
			continue;
		out = cJSON_PrintUnformatted(resp);
		free(out);
		cJSON_Delete(resp);
	}
	engine__client_gone(e, client);
	free(text);
	if (++inputs % FUZZ_TICK_EVERY == 0) {
		engine__consume(e);
		engine__tick(e);
	}
	return 0;
}
