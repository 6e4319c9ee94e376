/*
 * base64.c — strict RFC 4648 base64, table-driven.
 *
 * Decoding maps each character through a 256-entry table to its 6 bits, or
 * to 0xFF when it is not in the alphabet ('=' included: padding is handled
 * apart, in the last group only). The table values of a run of groups are
 * OR-ed together, so the hot loop has no branch but its own; bit 7 of that
 * OR says whether any character was bad, and only then is the text scanned
 * again to say where. Eight characters make 48 bits, written with one
 * 8-byte store whose last two bytes the next step overwrites.
 *
 * Encoding is the mirror: one 8-byte load gives six bytes, 48 bits, cut into
 * eight indices of the alphabet and written with one store. The tail (fewer
 * than three bytes) gets '=' padding.
 */
#include "api/base64.h"

#include <stdint.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) ||                                                                    \
    (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__ && __BYTE_ORDER__ != __ORDER_BIG_ENDIAN__)
#error "base64.c needs to know the byte order (__BYTE_ORDER__)"
#endif

static const char alphabet[64] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* 6-bit value of each byte, 0xFF outside the alphabet. */
static const unsigned char sextet[256] = {
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3e, 0xff, 0xff, 0xff, 0x3f,
    0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x3b, 0x3c, 0x3d, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e,
    0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28,
    0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, 0x30, 0x31, 0x32, 0x33, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
};

int api_base64_encoded_length(size_t n, size_t *len) {
    size_t groups = n / 3 + (n % 3 != 0);
    if (groups > SIZE_MAX / 4) return -1;
    *len = groups * 4;
    return 0;
}

/* Eight bytes at s, the first the most significant: one unaligned load. */
static inline uint64_t load_be64(const unsigned char *s) {
    uint64_t x;
    memcpy(&x, s, 8);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    x = __builtin_bswap64(x);
#endif
    return x;
}

/* Stores x << shift, most significant byte first, as one store of eight
 * (the caller has room for eight). */
static inline void store_be(unsigned char *d, uint64_t x, unsigned shift) {
    x <<= shift;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    x = __builtin_bswap64(x);
#endif
    memcpy(d, &x, 8);
}

size_t api_base64_encode(char *dst, const void *src, size_t n) {
    const unsigned char *s = src;
    char *d = dst;
    size_t i = 0;

    /* six bytes a step, read as one load of eight: while eight are there */
    for (; i + 8 <= n; i += 6, d += 8) {
        uint64_t x = load_be64(s + i) >> 16;
        uint64_t c = (uint64_t)(unsigned char)alphabet[(x >> 42) & 63] << 56 |
                     (uint64_t)(unsigned char)alphabet[(x >> 36) & 63] << 48 |
                     (uint64_t)(unsigned char)alphabet[(x >> 30) & 63] << 40 |
                     (uint64_t)(unsigned char)alphabet[(x >> 24) & 63] << 32 |
                     (uint64_t)(unsigned char)alphabet[(x >> 18) & 63] << 24 |
                     (uint64_t)(unsigned char)alphabet[(x >> 12) & 63] << 16 |
                     (uint64_t)(unsigned char)alphabet[(x >> 6) & 63] << 8 |
                     (uint64_t)(unsigned char)alphabet[x & 63];
        store_be((unsigned char *)d, c, 0);
    }
    for (; i + 3 <= n; i += 3, d += 4) {
        uint32_t x = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        d[0] = alphabet[(x >> 18) & 63];
        d[1] = alphabet[(x >> 12) & 63];
        d[2] = alphabet[(x >> 6) & 63];
        d[3] = alphabet[x & 63];
    }
    if (i < n) {
        uint32_t x = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0);
        d[0] = alphabet[(x >> 18) & 63];
        d[1] = alphabet[(x >> 12) & 63];
        d[2] = i + 1 < n ? alphabet[(x >> 6) & 63] : '=';
        d[3] = '=';
        d += 4;
    }
    return (size_t)(d - dst);
}

int api_base64_decoded_length(const char *text, size_t len, size_t *n) {
    size_t pad = 0;

    if (len % 4 != 0) return -1;
    if (len > 0 && text[len - 1] == '=') pad = text[len - 2] == '=' ? 2 : 1;
    *n = len / 4 * 3 - pad;
    return 0;
}

/* Decodes len (a multiple of 4) characters without padding; the OR of
 * their table values (bit 7 set when any was bad). */
static unsigned decode_groups(unsigned char *d, const unsigned char *s, size_t len) {
    uint64_t bad = 0;
    size_t i = 0;

    /* eight characters a step, stored as one write of eight bytes (six of
     * them new): while at least eight more characters follow, so the two
     * extra bytes land where later groups write */
    for (; i + 16 <= len; i += 8, d += 6) {
        uint64_t a = sextet[s[i]], b = sextet[s[i + 1]], c = sextet[s[i + 2]], e = sextet[s[i + 3]],
                 f = sextet[s[i + 4]], g = sextet[s[i + 5]], h = sextet[s[i + 6]],
                 k = sextet[s[i + 7]];
        bad |= a | b | c | e | f | g | h | k;
        store_be(d, a << 42 | b << 36 | c << 30 | e << 24 | f << 18 | g << 12 | h << 6 | k, 16);
    }
    for (; i + 8 <= len; i += 8, d += 6) {
        uint64_t a = sextet[s[i]], b = sextet[s[i + 1]], c = sextet[s[i + 2]], e = sextet[s[i + 3]],
                 f = sextet[s[i + 4]], g = sextet[s[i + 5]], h = sextet[s[i + 6]],
                 k = sextet[s[i + 7]];
        uint64_t x = a << 42 | b << 36 | c << 30 | e << 24 | f << 18 | g << 12 | h << 6 | k;
        bad |= a | b | c | e | f | g | h | k;
        d[0] = (unsigned char)(x >> 40);
        d[1] = (unsigned char)(x >> 32);
        d[2] = (unsigned char)(x >> 24);
        d[3] = (unsigned char)(x >> 16);
        d[4] = (unsigned char)(x >> 8);
        d[5] = (unsigned char)x;
    }
    if (i < len) {
        uint32_t a = sextet[s[i]], b = sextet[s[i + 1]], c = sextet[s[i + 2]], e = sextet[s[i + 3]];
        uint32_t x = a << 18 | b << 12 | c << 6 | e;
        bad |= a | b | c | e;
        d[0] = (unsigned char)(x >> 16);
        d[1] = (unsigned char)(x >> 8);
        d[2] = (unsigned char)x;
    }
    return (unsigned)(bad & 0x80);
}

static size_t first_bad(const unsigned char *s, size_t len) {
    size_t i = 0;
    while (i < len && sextet[s[i]] != 0xFF)
        i++;
    return i;
}

/* The last group of a text: two to four characters of the alphabet, then
 * '=' up to four; the bits past the last byte are zero. */
static int decode_last(unsigned char *d, const unsigned char *s, size_t *bad_at) {
    unsigned v[4];
    size_t pad = s[3] != '=' ? 0 : s[2] != '=' ? 1 : 2;

    for (size_t i = 0; i < 4 - pad; i++) {
        v[i] = sextet[s[i]];
        if (v[i] == 0xFF) return *bad_at = i, -1;
    }
    if (pad == 2 && (v[1] & 0x0F) != 0) return *bad_at = 1, -1;
    if (pad == 1 && (v[2] & 0x03) != 0) return *bad_at = 2, -1;
    d[0] = (unsigned char)(v[0] << 2 | v[1] >> 4);
    if (pad < 2) d[1] = (unsigned char)(v[1] << 4 | v[2] >> 2);
    if (pad < 1) d[2] = (unsigned char)(v[2] << 6 | v[3]);
    return 0;
}

int api_base64_decode_part(void *dst, const char *text, size_t len, int final, size_t *bad_at) {
    const unsigned char *s = (const unsigned char *)text;
    size_t body;

    if (len % 4 != 0) {
        *bad_at = len - len % 4;
        return -1;
    }
    if (len == 0) return 0;
    body = final ? len - 4 : len;
    if (decode_groups(dst, s, body) != 0) {
        *bad_at = first_bad(s, body);
        return -1;
    }
    if (final && decode_last((unsigned char *)dst + body / 4 * 3, s + body, bad_at) < 0) {
        *bad_at += body;
        return -1;
    }
    return 0;
}

int api_base64_decode(void *dst, const char *text, size_t len, size_t *bad_at) {
    return api_base64_decode_part(dst, text, len, 1, bad_at);
}

size_t api_base64_first_invalid(const char *text, size_t len) {
    unsigned char part[3072];
    size_t whole = len - len % 4, bad;

    /* parts of 4096 characters (3072 bytes) into a scratch buffer */
    for (size_t at = 0; at < whole; at += 4096) {
        size_t n = whole - at < 4096 ? whole - at : 4096;
        if (api_base64_decode_part(part, text + at, n, at + n == whole, &bad) < 0) return at + bad;
    }
    for (size_t i = whole; i < len; i++) /* the one to three left over */
        if (sextet[(unsigned char)text[i]] == 0xFF && text[i] != '=') return i;
    return len;
}
