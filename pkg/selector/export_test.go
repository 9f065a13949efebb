package selector

// SearchExhaustive is SearchEvidence scoring every document the request
// matches, pruning none.
func (x *Index) SearchExhaustive(text string, q Query) ([]Hit, Evidence) {
	q.exhaustive = true
	return x.SearchEvidence(text, q)
}

// CountReads makes x's searches count the postings they read, in PostingsRead.
func (x *Index) CountReads() { x.countReads = true }

// PostingsRead is the postings x's searches read since CountReads.
func (x *Index) PostingsRead() int64 { return x.reads.Load() }

// Exhaustive makes every search of x's index score every document matched.
func (x *Selector) Exhaustive() { x.idx.exhaustive = true }

// ValueWords is valueWords.
func ValueWords(text string) (uint64, int) { return valueWords(text) }

// Unquoted is unquoted.
func Unquoted(text string) string { return unquoted(text) }

// RouteText is routeText.
func RouteText(text string) string { return routeText(text) }

// ValueParts is valueParts.
func ValueParts(text string, values uint64) map[string]bool { return valueParts(text, values) }

// ScanWords is scanWords.
func ScanWords(text string, fn func(w string, start bool)) { scanWords(text, fn) }

// SplitJoined is splitJoined.
func SplitJoined(text string) string { return splitJoined(text) }

// SignTest is signTest.
func SignTest(a, b int) float64 { return signTest(a, b) }
