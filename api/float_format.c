/*
 * float_format.c — shortest round-trip text of a float32.
 *
 * One snprintf("%.16e") gives 17 significant digits of f (as a double, which
 * holds every float32 exactly). A candidate of p digits is those digits
 * rounded half-up to p, with the carry propagated; it is kept when strtof
 * reads it back to the same float. 9 digits always round-trip, and a
 * shorter p that works makes every longer p work too (in practice; the rare
 * exception near a power of two only costs a digit, never correctness,
 * since every answer is checked), so a binary search over 1…9 costs four
 * strtof calls instead of nine snprintf calls.
 *
 * The text is then laid out like %g but without an exponent for numbers
 * from 1e-5 to below 1e15, so integers print as integers ("100", not
 * "1e+02"). The C locale is assumed (a '.' decimal point).
 */
#include "api/float_format.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FULL_DIGITS 17

/* Rounds the FULL_DIGITS digits of `full` to p digits in out[]; returns the
 * decimal exponent, one more than `exp10` when the carry ran off the top. */
static int digits_round(char *out, const char *full, int p, int exp10)
{
    memcpy(out, full, (size_t)p);
    if (full[p] >= '5') {
        int i = p - 1;
        while (i >= 0 && out[i] == '9') out[i--] = '0';
        if (i >= 0) {
            out[i]++;
        } else {
            /* 99…9 became 100…0: one digit more in front, drop the last */
            memmove(out + 1, out, (size_t)p - 1);
            out[0] = '1';
            exp10++;
        }
    }
    return exp10;
}

/* Does d[0..p) × 10^(exp10 - p + 1) read back as f? */
static int digits_round_trip(const char *d, int p, int exp10, float f)
{
    char text[48];
    float back;

    snprintf(text, sizeof text, "%.*se%d", p, d, exp10 - p + 1);
    back = strtof(text, NULL);
    return memcmp(&back, &f, sizeof f) == 0;
}

/* Lays out p digits with exponent exp10 (value d.ddd × 10^exp10). */
static size_t digits_layout(char *buf, int negative, const char *d, int p, int exp10)
{
    char *o = buf;

    if (negative) *o++ = '-';
    if (exp10 >= 0 && exp10 < 15) {
        for (int i = 0; i <= exp10; i++) *o++ = i < p ? d[i] : '0';
        if (p > exp10 + 1) {
            *o++ = '.';
            for (int i = exp10 + 1; i < p; i++) *o++ = d[i];
        }
    } else if (exp10 < 0 && exp10 >= -5) {
        *o++ = '0';
        *o++ = '.';
        for (int i = -1; i > exp10; i--) *o++ = '0';
        for (int i = 0; i < p; i++) *o++ = d[i];
    } else {
        *o++ = d[0];
        if (p > 1) {
            *o++ = '.';
            for (int i = 1; i < p; i++) *o++ = d[i];
        }
        o += sprintf(o, "e%d", exp10);
    }
    *o = '\0';
    return (size_t)(o - buf);
}

size_t api_float_format(char *buf, float f)
{
    char sci[40], full[FULL_DIGITS + 1], best[FULL_DIGITS + 1], cand[FULL_DIGITS + 1];
    int negative = signbit(f) != 0, exp10, best_exp, lo = 1, hi = 9;
    const char *e;

    if (!isfinite(f)) {
        memcpy(buf, "null", 5);
        return 4;
    }
    if (f == 0.0f) {
        strcpy(buf, negative ? "-0" : "0");
        return negative ? 2 : 1;
    }
    if (fabsf(f) < 1e7f && f == (float)(int)f) { /* small integers, the common case */
        return (size_t)snprintf(buf, API_FLOAT_TEXT_MAX, "%d", (int)f);
    }

    /* sci is "[-]d.dddddddddddddddde[+-]XX" */
    snprintf(sci, sizeof sci, "%.16e", fabs((double)f));
    full[0] = sci[0];
    memcpy(full + 1, sci + 2, FULL_DIGITS - 1);
    full[FULL_DIGITS] = '\0';
    e = strchr(sci, 'e');
    exp10 = atoi(e + 1);

    best_exp = digits_round(best, full, 9, exp10);
    while (lo < hi) {
        int mid = (lo + hi) / 2, mid_exp = digits_round(cand, full, mid, exp10);
        if (digits_round_trip(cand, mid, mid_exp, fabsf(f))) {
            hi = mid;
            memcpy(best, cand, (size_t)mid);
            best_exp = mid_exp;
        } else {
            lo = mid + 1;
        }
    }
    /* lo == hi is the digit count; best holds it unless only 9 worked */
    if (lo == 9) best_exp = digits_round(best, full, 9, exp10);
    while (lo > 1 && best[lo - 1] == '0') lo--; /* "1.50" is "1.5" */
    return digits_layout(buf, negative, best, lo, best_exp);
}
