package bench_test

import (
	"bytes"
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/bench"
)

// The registry benchmark runs in `make bench`; a tiny run keeps it from rotting.
func TestRegistryBenchRuns(t *testing.T) {
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := bench.RunRegistry(ctx, bench.RegistryConfig{Skills: 200, CatalogSkills: 40, Edits: 5, Out: &out})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, re := range []string{
		`load\+validate\s+200 skills in\s+\S+`,
		`first publish\s+40 skills`,
		`edit→catalogs\s+5 edits\s+p50\s+\S+\s+p99\s+\S+`,
		`settings: 5 catalogs \(1 router \+ 4 workers\).*debounce 100ms.*storage=file replicas=1 sync_interval=default \(2m\)`,
	} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("output lacks %s:\n%s", re, out.String())
		}
	}
}
