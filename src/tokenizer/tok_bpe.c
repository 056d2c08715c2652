/*
 * tok_bpe.c - byte-pair encoding by merge rank (Hugging Face's BPE model,
 * and GGUF "gpt2" vocabularies).
 *
 * A word starts as one symbol per character (with byte fallback or an unknown
 * token for characters outside the vocabulary) and the pair with the lowest
 * merge rank is merged, leftmost first, until no pair has a merge. Symbols
 * form a doubly linked list and candidate merges sit in a binary heap keyed
 * by (rank, position); a popped entry that no longer matches its pair is
 * stale and skipped. Each merge pushes at most two entries, so a word of n
 * characters costs O(n log n) whatever its content (a megabyte of one
 * repeated letter included), where rescanning all pairs per merge would be
 * quadratic.
 *
 * Words recur, so results are cached per encode call (words under 256 bytes,
 * like Hugging Face's cache); the cache keeps the tokenizer itself immutable
 * and thread-safe.
 */
#include <string.h>

#include "../core/mem.h"
#include "../core/status.h"
#include "tok_internal.h"

typedef struct bpe_sym {
    ob_token id;
    int32_t prev, next;
    uint32_t len; /* bytes of text; 0 once merged into its left neighbour */
} bpe_sym;

typedef struct bpe_merge {
    uint64_t key; /* rank << 32 | position: the heap's order */
    ob_token merged;
} bpe_merge;

struct tk_cache_ent {
    const char *s;
    uint32_t len;
    uint32_t start, count; /* ids in the output array */
};

#define BPE_CACHE_MAX_WORD 256
#define BPE_CACHE_MAX_ENTRIES 8192

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (*cap >= need) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = ob_realloc(*p, c * elem);
    if (!q) return ob_err(OB_ERR_OOM, "tokenizer: out of memory (%zu BPE symbols)", c);
    *p = q;
    *cap = c;
    return 0;
}

/* A 4-ary min-heap: half the depth of a binary heap and children side by
 * side in memory, which matters for million-symbol words. */
static void heap_push(bpe_merge *h, size_t *n, bpe_merge m) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t parent = (i - 1) / 4;
        if (h[parent].key <= m.key) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = m;
}

static bpe_merge heap_pop(bpe_merge *h, size_t *n) {
    bpe_merge top = h[0];
    bpe_merge last = h[--(*n)];
    size_t i = 0, len = *n;
    for (;;) {
        size_t c = 4 * i + 1;
        if (c >= len) break;
        size_t best = c;
        size_t end = c + 4 < len ? c + 4 : len;
        for (size_t k = c + 1; k < end; k++)
            if (h[k].key < h[best].key) best = k;
        if (h[best].key >= last.key) break;
        h[i] = h[best];
        i = best;
    }
    if (len > 0) h[i] = last;
    return top;
}

static inline bool model_id(const ob_tokenizer *t, ob_token id) {
    return id >= 0 && (t->tokens[id].attr & TKA_MODEL);
}

/* Look up a character with the continuing-subword prefix / end-of-word
 * suffix Hugging Face adds around it. */
static ob_token lookup_char(tk_work *w, const char *s, size_t n, bool first, bool last) {
    const tk_model *m = &w->t->model;
    bool pre = !first && m->cont_prefix_len > 0, suf = last && m->eow_suffix_len > 0;
    if (!pre && !suf) {
        ob_token id = tk_find(w->t, s, n);
        return model_id(w->t, id) ? id : OB_TOKEN_NULL;
    }
    tk_buf *b = &w->tmp;
    b->n = 0;
    if (pre && tk_buf_put(b, m->cont_prefix, m->cont_prefix_len) < 0) return OB_TOKEN_NULL;
    if (tk_buf_put(b, s, n) < 0) return OB_TOKEN_NULL;
    if (suf && tk_buf_put(b, m->eow_suffix, m->eow_suffix_len) < 0) return OB_TOKEN_NULL;
    ob_token id = tk_find(w->t, b->p, b->n);
    return model_id(w->t, id) ? id : OB_TOKEN_NULL;
}

static int add_sym(tk_work *w, size_t *n, ob_token id, size_t len) {
    OB_TRY(grow(&w->sym, &w->sym_cap, *n + 1, sizeof(bpe_sym)));
    bpe_sym *s = (bpe_sym *)w->sym + *n;
    s->id = id;
    s->len = (uint32_t)len;
    s->prev = (int32_t)*n - 1;
    s->next = -1;
    if (*n > 0) ((bpe_sym *)w->sym)[*n - 1].next = (int32_t)*n;
    (*n)++;
    return 0;
}

static inline bool merge_of(const tk_model *m, ob_token a, ob_token b, uint32_t *rank, ob_token *merged) {
    uint64_t v;
    if (!tk_map_get(&m->merges, ((uint64_t)(uint32_t)a << 32) | (uint32_t)b, &v)) return false;
    *rank = (uint32_t)(v >> 32);
    *merged = (ob_token)(uint32_t)v;
    return true;
}

/* Encode one word: characters (with byte fallback / unknown-token fusion)
 * then merges lowest rank first, leftmost on ties; appends the ids. */
static int bpe_word(tk_work *w, const char *s, size_t n, ob_tokens *out) {
    if (n >= UINT32_MAX) return ob_err(OB_ERR_RANGE, "tokenizer: a %zu-byte word is too long", n);
    const ob_tokenizer *t = w->t;
    const tk_model *m = &t->model;
    size_t nsym = 0;
    /* Unknown characters wait in (unk_id, unk_len) so consecutive ones can
     * fuse, exactly in Hugging Face's order of operations. */
    ob_token unk_id = OB_TOKEN_NULL;
    size_t unk_len = 0;
    for (size_t i = 0; i < n;) {
        int l = tk_u8len((unsigned char)s[i]);
        if ((size_t)l > n - i) l = (int)(n - i);
        bool first = i == 0, last = i + (size_t)l >= n;
        ob_token id = lookup_char(w, s + i, (size_t)l, first, last);
        if (id >= 0) {
            if (unk_id >= 0) {
                OB_TRY(add_sym(w, &nsym, unk_id, unk_len));
                unk_id = OB_TOKEN_NULL;
            }
            OB_TRY(add_sym(w, &nsym, id, (size_t)l));
        } else {
            bool done = false;
            if (m->byte_fallback) {
                bool all = true;
                for (int k = 0; k < l; k++) all &= m->byte_tok[(unsigned char)s[i + k]] >= 0;
                if (all) {
                    for (int k = 0; k < l; k++) OB_TRY(add_sym(w, &nsym, m->byte_tok[(unsigned char)s[i + k]], 1));
                    done = true;
                }
            }
            if (!done && m->unk >= 0) {
                if (unk_id >= 0 && m->fuse_unk) {
                    unk_len += (size_t)l;
                } else {
                    if (unk_id >= 0) OB_TRY(add_sym(w, &nsym, unk_id, unk_len));
                    unk_id = m->unk;
                    unk_len = (size_t)l;
                }
            }
            /* No byte fallback and no unknown token: the character is dropped (as in HF). */
        }
        i += (size_t)l;
    }
    if (unk_id >= 0) OB_TRY(add_sym(w, &nsym, unk_id, unk_len));
    if (nsym == 0) return 0;

    OB_TRY(grow(&w->heap, &w->heap_cap, nsym + 1, sizeof(bpe_merge)));
    bpe_sym *sym = w->sym;
    bpe_merge *heap = w->heap;
    size_t hn = 0;
    for (size_t i = 0; i + 1 < nsym; i++) {
        uint32_t rank;
        ob_token merged;
        if (merge_of(m, sym[i].id, sym[i + 1].id, &rank, &merged))
            heap_push(heap, &hn, (bpe_merge){((uint64_t)rank << 32) | i, merged});
    }
    while (hn > 0) {
        bpe_merge top = heap_pop(heap, &hn);
        uint32_t pos = (uint32_t)top.key;
        bpe_sym *a = &sym[pos];
        if (a->len == 0 || a->next < 0) continue;
        bpe_sym *b = &sym[a->next];
        uint32_t rank;
        ob_token merged;
        if (!merge_of(m, a->id, b->id, &rank, &merged) || merged != top.merged) continue; /* stale */
        a->id = merged;
        a->len += b->len;
        b->len = 0;
        a->next = b->next;
        if (a->next >= 0) sym[a->next].prev = (int32_t)pos;
        /* Each merge adds at most two heap entries: room for both. */
        OB_TRY(grow(&w->heap, &w->heap_cap, hn + 2, sizeof(bpe_merge)));
        heap = w->heap;
        if (a->prev >= 0 && merge_of(m, sym[a->prev].id, a->id, &rank, &merged))
            heap_push(heap, &hn, (bpe_merge){((uint64_t)rank << 32) | (uint32_t)a->prev, merged});
        if (a->next >= 0 && merge_of(m, a->id, sym[a->next].id, &rank, &merged))
            heap_push(heap, &hn, (bpe_merge){((uint64_t)rank << 32) | pos, merged});
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next) OB_TRY(ob_tokens_push(out, sym[i].id));
    return 0;
}

int tk_cache_lookup(tk_work *w, const char *s, size_t n, ob_tokens *out, uint64_t *hash) {
    *hash = 0;
    if (n >= BPE_CACHE_MAX_WORD) return 0;
    *hash = tk_hash_bytes(s, n) & ~(1ull << 63); /* never the empty-slot key */
    uint64_t idx;
    if (!tk_map_get(&w->cache, *hash, &idx)) return 0;
    const struct tk_cache_ent *e = &w->cache_ent[idx];
    if (e->len != n || memcmp(e->s, s, n) != 0) return 0;
    for (uint32_t k = 0; k < e->count; k++) OB_TRY(ob_tokens_push(out, out->ids[e->start + k]));
    return 1;
}

int tk_cache_insert(tk_work *w, const char *s, size_t n, uint64_t hash, const ob_tokens *out, size_t start) {
    if (n >= BPE_CACHE_MAX_WORD || out->n - start >= UINT32_MAX || start >= UINT32_MAX) return 0;
    if (w->cache_n >= BPE_CACHE_MAX_ENTRIES) {
        tk_map_clear(&w->cache);
        w->cache_n = 0;
    }
    if (!w->cache.slots) OB_TRY(tk_map_init(&w->cache, 64)); /* grows with use: most calls are short */
    OB_TRY(grow((void **)&w->cache_ent, &w->cache_cap, w->cache_n + 1, sizeof *w->cache_ent));
    w->cache_ent[w->cache_n] = (struct tk_cache_ent){s, (uint32_t)n, (uint32_t)start, (uint32_t)(out->n - start)};
    OB_TRY(tk_map_put(&w->cache, hash, w->cache_n));
    w->cache_n++;
    return 0;
}

/* A whole word that is itself a token wins with ignore_merges (Llama 3);
 * otherwise the cached or freshly merged ids of the word. */
int tk_bpe_encode(tk_work *w, const char *s, size_t n, ob_tokens *out) {
    const ob_tokenizer *t = w->t;
    if (n == 0) return 0;
    if (t->model.ignore_merges) {
        ob_token id = tk_find(t, s, n);
        if (model_id(t, id)) return ob_tokens_push(out, id);
    }
    uint64_t h;
    int hit = tk_cache_lookup(w, s, n, out, &h);
    if (hit != 0) return hit < 0 ? hit : 0;
    size_t start = out->n;
    OB_TRY(bpe_word(w, s, n, out));
    return tk_cache_insert(w, s, n, h, out, start);
}

void tk_work_free(tk_work *w) {
    tk_buf_free(&w->text[0]);
    tk_buf_free(&w->text[1]);
    tk_buf_free(&w->tmp);
    tk_buf_free(&w->tmp2);
    ob_free(w->pieces[0].v);
    ob_free(w->pieces[1].v);
    ob_free(w->segs.v);
    tk_match_free(&w->match);
    ob_free(w->sym);
    ob_free(w->heap);
    tk_map_free(&w->cache);
    ob_free(w->cache_ent);
    ob_free(w->ugm_score);
    ob_free(w->ugm_prev);
    ob_free(w->ugm_id);
    memset(w, 0, sizeof *w);
}
