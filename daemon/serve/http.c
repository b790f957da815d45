// SPDX-License-Identifier: GPL-2.0
/* HTTP requests through libcurl, opened with dlopen on first use (http.h). */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include "api/engine.h"
#include "serve/http.h"

/* the connection's share of a request's time */
#define HTTP_CONNECT_TIMEOUT_S 5
#define LIBCURL "libcurl.so.4"

static struct {
	CURLcode (*global_init)(long);
	CURL *(*easy_init)(void);
	void (*easy_reset)(CURL *);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_perform)(CURL *);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	void (*easy_cleanup)(CURL *);
	const char *(*easy_strerror)(CURLcode);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
} cu;

static bool ready;

int http__init(char *err, size_t err_len)
{
	void *h;

	if (ready)
		return 0;
	if (!(h = dlopen(LIBCURL, RTLD_NOW | RTLD_LOCAL))) {
		snprintf(err, err_len, "talking to servers needs libcurl: %s (install libcurl4)", dlerror());
		return -ENOENT;
	}
	cu.global_init = dlsym(h, "curl_global_init");
	cu.easy_init = dlsym(h, "curl_easy_init");
	cu.easy_reset = dlsym(h, "curl_easy_reset");
	cu.easy_setopt = dlsym(h, "curl_easy_setopt");
	cu.easy_perform = dlsym(h, "curl_easy_perform");
	cu.easy_getinfo = dlsym(h, "curl_easy_getinfo");
	cu.easy_cleanup = dlsym(h, "curl_easy_cleanup");
	cu.easy_strerror = dlsym(h, "curl_easy_strerror");
	cu.slist_append = dlsym(h, "curl_slist_append");
	cu.slist_free_all = dlsym(h, "curl_slist_free_all");
	if (!cu.global_init || !cu.easy_init || !cu.easy_reset || !cu.easy_setopt || !cu.easy_perform ||
	    !cu.easy_getinfo || !cu.easy_cleanup || !cu.easy_strerror || !cu.slist_append || !cu.slist_free_all) {
		snprintf(err, err_len, "%s lacks a function lockscoped calls (libcurl 7.85 or newer)", LIBCURL);
		dlclose(h);
		return -ENOSYS;
	}
	/* before any thread: curl's global set-up is not thread-safe */
	if (cu.global_init(CURL_GLOBAL_DEFAULT)) {
		snprintf(err, err_len, "libcurl could not start");
		dlclose(h);
		return -ENOMEM;
	}
	ready = true;
	return 0;	/* kept open for the process's life */
}

struct http_client *http__client_new(void)
{
	return ready ? (struct http_client *)cu.easy_init() : NULL;
}

void http__client_free(struct http_client *c)
{
	if (c)
		cu.easy_cleanup((CURL *)c);
}

void http__answer_free(struct http_answer *a)
{
	free(a->body);
	a->body = NULL;
	a->len = a->cap = 0;
}

static size_t keep_body(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct http_answer *a = arg;
	size_t n = size * nmemb, take = a->len + n > a->keep ? a->keep - a->len : n;

	if (take < n)
		a->cut = true;
	if (take && a->len + take + 1 > a->cap) {
		size_t cap = a->cap ? a->cap : 4096;
		char *b;

		while (cap < a->len + take + 1)
			cap *= 2;
		if (!(b = realloc(a->body, cap)))
			return 0;	/* ends the transfer: CURLE_WRITE_ERROR */
		a->body = b;
		a->cap = cap;
	}
	if (take) {
		memcpy(a->body + a->len, ptr, take);
		a->len += take;
		a->body[a->len] = 0;
	}
	return n;
}

static size_t pass_header(char *line, size_t size, size_t nmemb, void *arg)
{
	const struct http_req *req = arg;

	req->on_header(req->header_arg, line, size * nmemb);
	return size * nmemb;
}

/* curl's progress callback: a request in flight ends when its owner stops */
static int abort_on_stop(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	const bool *stop = arg;

	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	return stop && __atomic_load_n(stop, __ATOMIC_RELAXED);
}

int http__perform(struct http_client *client, const struct http_conn *conn, const struct http_req *req,
		  struct http_answer *a, char *err, size_t err_len)
{
	CURL *c = (CURL *)client;
	struct curl_slist *headers = NULL;
	const char *const *h;
	CURLcode rc;

	a->code = 0;
	a->len = 0;
	a->cut = false;
	if (!c) {
		snprintf(err, err_len, "libcurl could not start");
		return -EIO;
	}
	cu.easy_reset(c);
	for (h = req->headers; h && *h; h++)
		headers = cu.slist_append(headers, *h);
	if (conn->auth_header[0])
		headers = cu.slist_append(headers, conn->auth_header);
	if (req->body) {
		cu.easy_setopt(c, CURLOPT_POSTFIELDS, req->body);
		cu.easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
	}
	if (req->on_header) {
		cu.easy_setopt(c, CURLOPT_HEADERFUNCTION, pass_header);
		cu.easy_setopt(c, CURLOPT_HEADERDATA, (void *)req);
	}
	cu.easy_setopt(c, CURLOPT_URL, req->url);
	cu.easy_setopt(c, CURLOPT_HTTPHEADER, headers);
	cu.easy_setopt(c, CURLOPT_USERAGENT, "lockscoped/" LS_VERSION);
	cu.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	cu.easy_setopt(c, CURLOPT_TIMEOUT, (long)conn->timeout_s);
	cu.easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)(conn->timeout_s < HTTP_CONNECT_TIMEOUT_S ?
								conn->timeout_s : HTTP_CONNECT_TIMEOUT_S));
	cu.easy_setopt(c, CURLOPT_WRITEFUNCTION, keep_body);
	cu.easy_setopt(c, CURLOPT_WRITEDATA, a);
	cu.easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	cu.easy_setopt(c, CURLOPT_XFERINFOFUNCTION, abort_on_stop);
	cu.easy_setopt(c, CURLOPT_XFERINFODATA, (void *)conn->stop);
	cu.easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	/* a gzip'd answer when the server offers one (a pod list is mostly repeated keys) */
	cu.easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
	if (conn->userpwd[0]) {
		cu.easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		cu.easy_setopt(c, CURLOPT_USERPWD, conn->userpwd);
	}
	if (conn->ca_file[0])
		cu.easy_setopt(c, CURLOPT_CAINFO, conn->ca_file);
	if (conn->insecure_tls) {
		cu.easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
		cu.easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	rc = cu.easy_perform(c);
	cu.slist_free_all(headers);
	if (rc != CURLE_OK) {
		snprintf(err, err_len, "%s", cu.easy_strerror(rc));
		return -EIO;
	}
	cu.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a->code);
	return 0;
}

int http__read_secret(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return -errno;
	if (!fgets(buf, len, f)) {
		fclose(f);
		return -ENODATA;
	}
	fclose(f);
	n = strcspn(buf, "\r\n");
	buf[n] = 0;
	return n ? 0 : -ENODATA;
}

void http__escape(char *out, size_t len, const char *in)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *in; in++) {
		unsigned char c = *in;
		bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			     c == '-' || c == '.' || c == '_' || c == '~';

		if (o + (plain ? 1 : 3) >= len)
			break;
		if (plain) {
			out[o++] = c;
		} else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 0xf];
		}
	}
	if (len)
		out[o] = 0;
}
