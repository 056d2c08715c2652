/*
 * text.h - the text side of generation, as pure functions over bytes:
 * stop strings matched across token boundaries, and splitting a model's
 * <think>...</think> reasoning from its answer. Both work incrementally on
 * streamed text, holding back only the bytes that could still turn out to be
 * the start of a stop string or a tag, so a stream never shows text that a
 * later token would have removed. Inputs are valid UTF-8 (the detokenizer
 * never yields a broken character), and every cut these functions make falls
 * on a character boundary because stop strings and tags start with a lead
 * byte.
 */
#ifndef OB_SERVER_TEXT_H
#define OB_SERVER_TEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

/* The first stop string to be complete in text[from..len): the occurrence
 * that ends first (of those, the one that starts first). Returns its byte
 * position and sets *which to the stop's index, or returns (size_t)-1. */
size_t ob_srv_stop_find(const char *text, size_t len, size_t from, char *const *stops, int n_stops, int *which);

/* Bytes at the end of text[0..len) to hold back: the longest suffix that is
 * a proper prefix of some stop string (0 when none). */
size_t ob_srv_stop_holdback(const char *text, size_t len, char *const *stops, int n_stops);

/* Reasoning splitter: text before "</think>" is reasoning, after it is the
 * answer. A model that opens with "<think>" (after optional whitespace), or
 * whose prompt already ended inside "<think>", starts in reasoning; any other
 * first text makes the whole output the answer. */
typedef struct ob_srv_think {
    int state;     /* THINK_WAIT_OPEN, THINK_REASONING, THINK_CONTENT (text.c) */
    bool trim;     /* drop whitespace at the start of the current part */
    ob_buf hold;   /* bytes not classified yet */
} ob_srv_think;

/* enabled false: everything is content. prompt_opened: the prompt ended
 * with an unclosed "<think>" (DeepSeek-R1-style templates). */
void ob_srv_think_init(ob_srv_think *t, bool enabled, bool prompt_opened);
/* Feed the next text; appends what is decided to content / reasoning.
 * final: no more text will come, so flush what is held. */
int ob_srv_think_push(ob_srv_think *t, const char *s, size_t n, bool final, ob_buf *content, ob_buf *reasoning);
void ob_srv_think_free(ob_srv_think *t);

/* True when text ends with an opening "<think>" that is not closed after it
 * (trailing whitespace ignored): the template put the model in thinking. */
bool ob_srv_prompt_opens_think(const char *text, size_t len);

#endif
