// Package text is fenec's full-text index: a tokenizer and an in-memory
// BM25 index over one text field of one collection of one tenant.
//
// Each Index keeps its own statistics (document count, total and average
// length, document frequency per term), so ranking inside a tenant depends
// only on that tenant's documents. Postings are compact slices, one pair
// per term (document slots as uint32, term frequencies as uint16, 6 bytes
// a posting), sorted by slot; each document's distinct terms, which Remove
// needs, lie in one shared arena. A query token repeated counts once; a
// term repeated more than MaxTF times in one document counts MaxTF times.
// Scores are float64; ties are broken by id, ascending.
//
// It is for ranking documents by a bag-of-words query. It is not for
// phrase or proximity search, stemming, stop words, language detection, or
// storing the text itself: the engine keeps documents and calls Put and
// Remove as they change.
//
// Concurrency: an Index does no locking of its own. Put and Remove must not
// run concurrently with anything else on the same Index; Search, Len and the
// statistics may run concurrently with each other. The engine satisfies
// this by calling writes under its tenant write lock and searches under the
// read lock.
package text
