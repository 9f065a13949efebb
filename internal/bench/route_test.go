package bench_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/internal/bench"
)

func TestRunRoute(t *testing.T) {
	t.Parallel()
	r := bench.RunRoute(1000, 500, 20)
	if r.P50 <= 0 || r.P99 < r.P50 || r.UpdateMax < r.UpdateP50 || r.UpdateP50 <= 0 {
		t.Fatalf("result = %+v", r)
	}
	var b bytes.Buffer
	bench.PrintRoute(&b, r)
	if !strings.Contains(b.String(), "against 1000 skills") || !strings.Contains(b.String(), "index update") {
		t.Fatalf("report = %s", b.String())
	}
}
