package bench_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/internal/bench"
)

func TestRunFilter(t *testing.T) {
	t.Parallel()
	r := bench.RunFilter(2000, 3)
	if r.Without <= 0 || r.With <= 0 || r.Rounds != 3 {
		t.Fatalf("result = %+v", r)
	}
	var b bytes.Buffer
	bench.PrintFilter(&b, r)
	if !strings.Contains(b.String(), "filter cost per trigger") || !strings.Contains(b.String(), bench.FilterExpr) {
		t.Fatalf("report = %s", b.String())
	}
}
