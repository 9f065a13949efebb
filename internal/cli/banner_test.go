package cli_test

import (
	"strings"
	"testing"

	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/pkg/registry"
)

// The commands dev's banner suggests reach its server, and guess no data a skill
// would refuse.
func TestBannerCommandsReachTheServer(t *testing.T) {
	t.Parallel()
	rep := &registry.Report{Loaded: []string{"greet-customer", "hello"}}
	out := cli.Banner("nats://127.0.0.1:4222", "/tmp/s", []string{"skills"}, rep, 2, "")
	if !strings.Contains(out, "  skillbus trigger --skill hello --data '{\"name\":\"Ada\"}' --wait\n") || strings.Contains(out, "--nats-url") {
		t.Errorf("default port:\n%s", out)
	}
	rep.Loaded = []string{"greet-customer"}
	out = cli.Banner("nats://127.0.0.1:14222", "/tmp/s", []string{"skills"}, rep, 2, "")
	for _, want := range []string{
		"skillbus --nats-url nats://127.0.0.1:14222 skills show greet-customer",
		"skillbus --nats-url nats://127.0.0.1:14222 trigger --skill greet-customer --data '{...}' --wait",
		"skillbus --nats-url nats://127.0.0.1:14222 skills list",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "'{}'") {
		t.Errorf("suggests empty data:\n%s", out)
	}
}
