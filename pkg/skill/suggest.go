package skill

import (
	"strings"
)

// closest returns the candidate most like s, or "" when none is close enough to be a
// plausible typo. Case and '-'/'_' differences count for little, so "Max-Retries"
// finds "max_retries".
func closest(s string, candidates []string) string {
	if s == "" {
		return ""
	}
	fold := func(x string) string { return strings.ReplaceAll(strings.ToLower(x), "-", "_") }
	fs := fold(s)
	best, bestD := "", 0
	for _, c := range candidates {
		if c == s {
			continue
		}
		d := editDistance(fs, fold(c))
		// Allow about one edit per three characters, at least one, at most three.
		limit := min(max(len(c)/3, 1), 3)
		if d <= limit && (best == "" || d < bestD) {
			best, bestD = c, d
		}
	}
	return best
}

// didYouMean is "; did you mean X?" when a close candidate exists, else "".
func didYouMean(s string, candidates []string) string {
	if c := closest(s, candidates); c != "" {
		return "; did you mean " + c + "?"
	}
	return ""
}

// editDistance is the optimal string alignment distance between a and b: insertions,
// deletions, substitutions and transpositions of adjacent bytes each cost one.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		// Long strings are never typos of our short keywords; avoid the quadratic cost.
		if a == b {
			return 0
		}
		return max(len(a), len(b))
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
