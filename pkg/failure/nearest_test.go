package failure_test

import (
	"testing"

	"github.com/skillbus/skillbus/pkg/failure"
)

func TestNearest(t *testing.T) {
	for _, tc := range []struct {
		name string
		have []string
		want string
	}{
		{"titel", []string{"body", "title"}, "title"},
		{"isue_key", []string{"issue_key", "branch"}, "issue_key"},
		{"id", []string{"ids", "url"}, "ids"},
		{"id", []string{"name"}, ""},
		{"title", []string{"title", "titles"}, ""},
	} {
		if got := failure.Nearest(tc.name, tc.have); got != tc.want {
			t.Errorf("Nearest(%q, %v) = %q, want %q", tc.name, tc.have, got, tc.want)
		}
	}
}
