/*
 * utf8.h - small UTF-8 helpers the tokenizer and the streaming detokenizer
 * share. Unicode tables (categories, normalisation) come from utf8proc; this
 * file only handles the byte encoding.
 */
#ifndef OB_CORE_UTF8_H
#define OB_CORE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length of the sequence a lead byte starts (1-4), or 0 for a byte that
 * cannot start one (continuation byte, 0xF8..0xFF). */
static inline int ob_utf8_seq_len(unsigned char c) {
    if (c < 0x80) return 1;
    if (c < 0xC2) return 0;
    if (c < 0xE0) return 2;
    if (c < 0xF0) return 3;
    if (c < 0xF5) return 4;
    return 0;
}

/* Decode one code point from s[0..n). Returns the bytes used (1-4), or -1
 * for an invalid, overlong, surrogate or truncated sequence. */
int ob_utf8_decode(const char *s, size_t n, uint32_t *cp);
/* Encode cp into out (4 bytes of room); returns bytes written, 0 if invalid. */
int ob_utf8_encode(uint32_t cp, char *out);
/* True if s[0..n) is entirely valid UTF-8. */
int ob_utf8_valid(const char *s, size_t n);
/* Length of the longest prefix of s[0..n) that does not end in the middle of
 * a (so far valid) multi-byte sequence: what a streamer may send now. */
size_t ob_utf8_complete_prefix(const char *s, size_t n);

#endif
