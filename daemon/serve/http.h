/* SPDX-License-Identifier: GPL-2.0 */
/*
 * HTTP requests for the threads that talk to other servers (the push backends, the
 * Kubernetes pod list), through libcurl. libcurl is opened on first use only: its
 * dependencies (OpenSSL, GnuTLS, Kerberos, LDAP, nghttp2...) are 5.5 MB of every daemon's
 * RSS once linked, whether anything is sent or not.
 */
#ifndef __LS_HTTP_H
#define __LS_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Room for a URL or a file path setting */
#define HTTP_STR_MAX 108

/* How to reach one server: shared by all its requests. */
struct http_conn {
	uint32_t timeout_s;		/* one request, connection included */
	char auth_header[512];		/* "Authorization: Bearer ..."; "" none */
	char userpwd[384];		/* basic auth "user:password"; "" none */
	char ca_file[HTTP_STR_MAX];	/* the CA bundle of the server's certificate; "": the system's */
	bool insecure_tls;		/* the server's certificate is not checked (a kubelet's self-signed one) */
	const bool *stop;		/* a request in flight ends when this turns true (read atomically) */
};

/* What a server answered: the first @keep bytes of the body are kept (the rest counted). */
struct http_answer {
	long code;			/* the HTTP status; 0: no answer */
	char *body;			/* NUL-terminated; NULL until a byte came */
	size_t len, cap, keep;
	bool cut;			/* the body was longer than keep */
};

/* One request; a POST when body is set, else a GET. */
struct http_req {
	const char *url;
	const char *const *headers;	/* "Name: value" lines, NULL-terminated; NULL: none */
	const void *body;
	size_t body_len;
	/* each header line of the answer, as it comes (gRPC's trailers-only status) */
	void (*on_header)(void *arg, const char *line, size_t len);
	void *header_arg;
};

/* Opens libcurl and sets it up, once, before any thread uses it: -ENOENT when not installed. */
int http__init(char *err, size_t err_len);
/* A connection handle for one thread; NULL: out of memory. */
struct http_client *http__client_new(void);
void http__client_free(struct http_client *c);
/*
 * Sends @req and reads the answer into @a (a->keep set by the caller, a->body freed by
 * http__answer_free). 0 when the server answered (any status); -EIO when it could not be
 * reached or the transfer failed, @err saying why.
 */
int http__perform(struct http_client *c, const struct http_conn *conn, const struct http_req *req,
		  struct http_answer *a, char *err, size_t err_len);
void http__answer_free(struct http_answer *a);
/*
 * Credentials live in files, not in the config: the first line of @path (without its
 * newline) into @buf; -errno, -ENODATA when it is empty.
 */
int http__read_secret(const char *path, char *buf, size_t len);
/* @in percent-encoded for a URL's query (RFC 3986: all but letters, digits, "-._~"); cut at @len. */
void http__escape(char *out, size_t len, const char *in);

#endif
