package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/client"
)

// trigger --in stores the trigger while no router runs; a router started later
// publishes it when it is due, once, and the skill runs with its data.
func TestTriggerLater(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := srv.URL()
	s := &dlqSystem{t: t, ctx: ctx, dir: t.TempDir(), calls: map[string]*atomic.Int64{},
		env: func(k string) string {
			if k == "SKILLBUS_NATS_URL" {
				return url
			}
			return ""
		}}
	nc := srv.Conn(t)
	b, err := bus.New(nc, bus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.js = b.JS
	triggers := func() uint64 {
		st, err := b.JS.Stream(ctx, b.StreamTriggers())
		if err != nil {
			return 0
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	for _, f := range []string{"SKILL.md", "skill.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "skills", "hello", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(s.dir, "hello"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s.dir, "hello", f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s.service(cli.Registry, "--skills", s.dir)
	natstest.Eventually(t, 20*time.Second, func() bool { return s.catalogVersion("hello") != "" }, "the registry did not publish hello")

	before := time.Now()
	out, err := s.skillbus("trigger", "--skill", "hello", "--data", `{"name":"Ada"}`, "--source", "/test", "--id", "later-1", "--in", "2s", "--json")
	if err != nil {
		t.Fatalf("trigger --in: %v\n%s", err, out)
	}
	var got struct {
		ActivationID string    `json:"activation_id"`
		At           time.Time `json:"at"`
		Subject      string    `json:"subject"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.ActivationID == "" || got.Subject != "skillbus.trigger.skill.hello" {
		t.Fatalf("output %q (%v)", out, err)
	}
	if d := got.At.Sub(before); d < time.Second || d > 3*time.Second {
		t.Errorf("due at %v, %v after the command started; want about 2s", got.At, d)
	}
	out, err = s.skillbus("trigger", "--skill", "hello", "--source", "/test", "--id", "later-1", "--in", "1h")
	if err != nil || !strings.Contains(out, "already waits") {
		t.Errorf("the same trigger again: %v\n%s", err, out)
	}
	if n := triggers(); n != 0 {
		t.Fatalf("%d triggers published before any router ran", n)
	}

	s.service(cli.Router)
	s.service(cli.Worker)
	res, err := client.New(b).Follow(ctx, got.ActivationID, nil)
	if err != nil || !res.Completed || res.Outputs["greeting"] != "Hello, Ada!" {
		t.Fatalf("result %+v, %v", res, err)
	}
	if time.Now().Before(got.At) {
		t.Errorf("ran before it was due (%v)", got.At)
	}
	if n := triggers(); n != 1 {
		t.Errorf("%d triggers published, want 1", n)
	}
}
