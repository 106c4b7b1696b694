/*
 * lookup3's hashlittle2 (Bob Jenkins, public domain, lookup3.c, May 2006), reduced to the
 * byte-at-a-time little-endian reading, which gives the same result on every platform.
 * The one feature hash of simhash-doc/1 (_native.c) and minhash-doc/1 (_minhash.c): both
 * extensions include this header, so the two schemes cannot drift apart.
 */
#ifndef SCRAPY_SIMHASH_LOOKUP3_H
#define SCRAPY_SIMHASH_LOOKUP3_H

#include <stddef.h>
#include <stdint.h>

#define ROT(x, k) (((x) << (k)) | ((x) >> (32 - (k))))

#define MIX(a, b, c)                \
    {                               \
        a -= c; a ^= ROT(c, 4);  c += b; \
        b -= a; b ^= ROT(a, 6);  a += c; \
        c -= b; c ^= ROT(b, 8);  b += a; \
        a -= c; a ^= ROT(c, 16); c += b; \
        b -= a; b ^= ROT(a, 19); a += c; \
        c -= b; c ^= ROT(b, 4);  b += a; \
    }

#define FINAL(a, b, c)              \
    {                               \
        c ^= b; c -= ROT(b, 14);    \
        a ^= c; a -= ROT(c, 11);    \
        b ^= a; b -= ROT(a, 25);    \
        c ^= b; c -= ROT(b, 16);    \
        a ^= c; a -= ROT(c, 4);     \
        b ^= a; b -= ROT(a, 14);    \
        c ^= b; c -= ROT(b, 24);    \
    }

static inline uint32_t load_le32(const uint8_t *k)
{
    return (uint32_t)k[0] | ((uint32_t)k[1] << 8) | ((uint32_t)k[2] << 16) |
           ((uint32_t)k[3] << 24);
}

/* lookup3 hashlittle2(key, length, &c, &b) with both initial values 0; returns c | b << 32. */
static uint64_t jenkins64(const uint8_t *k, size_t length)
{
    uint32_t a, b, c;
    a = b = c = 0xdeadbeefu + (uint32_t)length;

    while (length > 12) {
        a += load_le32(k);
        b += load_le32(k + 4);
        c += load_le32(k + 8);
        MIX(a, b, c);
        length -= 12;
        k += 12;
    }
    switch (length) { /* all the case statements fall through */
    case 12: c += ((uint32_t)k[11]) << 24; /* fall through */
    case 11: c += ((uint32_t)k[10]) << 16; /* fall through */
    case 10: c += ((uint32_t)k[9]) << 8;   /* fall through */
    case 9:  c += k[8];                    /* fall through */
    case 8:  b += ((uint32_t)k[7]) << 24;  /* fall through */
    case 7:  b += ((uint32_t)k[6]) << 16;  /* fall through */
    case 6:  b += ((uint32_t)k[5]) << 8;   /* fall through */
    case 5:  b += k[4];                    /* fall through */
    case 4:  a += ((uint32_t)k[3]) << 24;  /* fall through */
    case 3:  a += ((uint32_t)k[2]) << 16;  /* fall through */
    case 2:  a += ((uint32_t)k[1]) << 8;   /* fall through */
    case 1:  a += k[0]; break;
    case 0:  return (uint64_t)c | ((uint64_t)b << 32);
    }
    FINAL(a, b, c);
    return (uint64_t)c | ((uint64_t)b << 32);
}

#endif /* SCRAPY_SIMHASH_LOOKUP3_H */
