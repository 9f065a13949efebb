package cli_test

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
)

// startDev runs `skillbus dev` on a free port and a fresh store with the example
// skills and args, until the test ends (then it must stop without an error), and
// returns its output.
func startDev(t *testing.T, args ...string) *natstest.Buffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &natstest.Buffer{}
	done := make(chan error, 1)
	all := append([]string{"dev", "--port", "-1", "--store", t.TempDir(), "--skills", filepath.Join("..", "..", "testdata", "skills"), "--log-level", "warn"}, args...)
	go func() { done <- cli.Skillbus(ctx, all, noEnv, logs, logs) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev: %v", err)
		}
	})
	return logs
}

// devLine waits for dev's output to have a line matching re (what its banner says
// once it runs) and returns the match's groups.
func devLine(t *testing.T, logs *natstest.Buffer, re string) []string {
	t.Helper()
	r := regexp.MustCompile(re)
	natstest.Eventually(t, 60*time.Second, func() bool { return r.MatchString(logs.String()) }, "dev's output has no %s:\n%s", re, logs)
	return r.FindStringSubmatch(logs.String())
}
