/* SPDX-License-Identifier: GPL-2.0 */
/* Growable arrays: the one doubling realloc behind the daemon's row and pick lists. */
#ifndef __LS_VEC_H
#define __LS_VEC_H

#include <errno.h>
#include <stdlib.h>

/*
 * Makes room for element @nr in *@v (*@cap elements of @size bytes), doubling from
 * LS_VEC_MIN: small, since many vectors stay short (a short-lived thread's one or two
 * points; 64 of them cost 3.6 KiB per thread of a 10 000-thread churn).
 * Returns 0, or -ENOMEM with *@v untouched.
 */
#define LS_VEC_MIN 4

static inline int ls_vec_reserve(void *v, size_t *cap, size_t nr, size_t size)
{
	void **p = v;
	size_t ncap;
	void *nv;

	if (nr < *cap)
		return 0;
	ncap = *cap ? 2 * *cap : LS_VEC_MIN;
	nv = realloc(*p, ncap * size);
	if (!nv)
		return -ENOMEM;
	*p = nv;
	*cap = ncap;
	return 0;
}

/*
 * qsort() of @nr elements at @v, which may be NULL when @nr is 0 (an empty vector):
 * qsort's pointer is declared non-null, and passing NULL is undefined even for 0 elements.
 */
static inline void ls_sort(void *v, size_t nr, size_t size, int (*cmp)(const void *, const void *))
{
	if (nr > 1)
		qsort(v, nr, size, cmp);
}

#endif
