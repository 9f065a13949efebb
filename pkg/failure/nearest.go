package failure

// Nearest returns the name of have closest to name by edit distance (insertions,
// deletions, substitutions and swaps of neighbours each count 1), if it is close
// enough to be a misspelling: at most 1 for names of up to 4 characters, at most a
// third of the length (and at least 2) beyond. Ties go to the first in have; an
// exact match is not a repair and gives "".
func Nearest(name string, have []string) string {
	best, bestD := "", -1
	limit := max(2, len([]rune(name))/3)
	if len([]rune(name)) <= 4 {
		limit = 1
	}
	for _, h := range have {
		if h == name {
			return ""
		}
		d := distance(name, h)
		if d <= limit && (bestD < 0 || d < bestD) {
			best, bestD = h, d
		}
	}
	return best
}

// distance is the optimal string alignment distance of a and b.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 200 || len(rb) > 200 {
		return 1 << 20
	}
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
