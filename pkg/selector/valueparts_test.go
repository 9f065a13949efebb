package selector_test

import (
	"slices"
	"testing"

	"github.com/skillbus/skillbus/pkg/selector"
)

// partOfValue is what valueParts replaced, read once per part (and so in time
// growing with the square of a request): whether w, a part of a joined word of
// text, is a part of one of its values and of none of its other words.
func partOfValue(text string, values uint64, w string) bool {
	j, inValue, inOther := 0, false, false
	selector.ScanWords(text, func(o string, _ bool) {
		if slices.Contains(selector.Words(selector.SplitJoined(o)), w) {
			if j < 64 && values&(1<<j) != 0 {
				inValue = true
			} else {
				inOther = true
			}
		}
		j++
	})
	return inValue && !inOther
}

// FuzzValueParts: valueParts, read in one pass, says what partOfValue said of
// every part of every word.
func FuzzValueParts(f *testing.F) {
	for _, s := range []string{
		"meet on the 5th at 5 o'clock", "my iPhone15 and iPhone 15", "Room12B, room 12", "",
		"the 5th and 5th", "Oakland Oak land", "a1b2 A1B2 b2", "\xff9x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		values, _ := selector.ValueWords(s)
		got := selector.ValueParts(s, values)
		for _, o := range selector.Words(s) {
			for _, w := range selector.Words(selector.SplitJoined(o)) {
				if want := partOfValue(s, values, w); got[w] != want {
					t.Fatalf("%q: part %q of a value only: %v, want %v", s, w, got[w], want)
				}
			}
		}
	})
}
