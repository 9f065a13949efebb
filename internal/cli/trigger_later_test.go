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

// laterSystem is a registry serving hello on a server no router runs on yet, and
// a count of the triggers published.
func laterSystem(t *testing.T) (s *dlqSystem, b *bus.Bus, triggers func() uint64) {
	t.Helper()
	srv := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	url := srv.URL()
	s = &dlqSystem{t: t, ctx: ctx, dir: t.TempDir(), calls: map[string]*atomic.Int64{},
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
	triggers = func() uint64 {
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
	return s, b, triggers
}

// trigger --in stores the trigger while no router runs; a router started later
// publishes it when it is due, once, and the skill runs with its data.
func TestTriggerLater(t *testing.T) {
	t.Parallel()
	s, b, triggers := laterSystem(t)
	ctx := s.ctx

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

// runs delayed lists the delayed triggers waiting, soonest first; runs cancel
// takes the activation trigger --in printed, or --skill, and a cancelled trigger
// is never published.
func TestDelayedTriggersListedAndCancelled(t *testing.T) {
	t.Parallel()
	s, b, triggers := laterSystem(t)
	later := func(in, id string, args ...string) string {
		t.Helper()
		out, err := s.skillbus(append([]string{"trigger", "--source", "/test", "--id", id, "--in", in, "--json"}, args...)...)
		var got struct {
			ActivationID string `json:"activation_id"`
		}
		if err != nil || json.Unmarshal([]byte(out), &got) != nil || got.ActivationID == "" {
			t.Fatalf("trigger --in %s: %v\n%s", in, err, out)
		}
		return got.ActivationID
	}
	gone := later("2s", "gone", "--skill", "hello")
	kept := later("3s", "kept", "--skill", "hello", "--data", `{"name":"Kit"}`)
	byType := later("2h", "by-type", "com.example.greet")
	bySkill := later("1h", "by-skill", "--skill", "hello")

	out, err := s.skillbus("runs", "delayed")
	if err != nil {
		t.Fatalf("runs delayed: %v\n%s", err, out)
	}
	for _, act := range []string{gone, kept, bySkill, byType} {
		if !strings.Contains(out, act) {
			t.Fatalf("runs delayed does not list %s:\n%s", act, out)
		}
	}
	if i := strings.Index(out, byType); !strings.Contains(out[i:], "com.example.greet") || strings.Index(out, bySkill) > i || strings.Index(out, gone) > strings.Index(out, kept) {
		t.Errorf("runs delayed, want soonest first, skill or type named:\n%s", out)
	}
	var listed []struct {
		ActivationID string    `json:"activation_id"`
		Skill        string    `json:"skill"`
		At           time.Time `json:"at"`
	}
	out, err = s.skillbus("runs", "delayed", "--skill", "hello", "--json")
	if err != nil || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 3 || listed[0].ActivationID != gone || listed[2].ActivationID != bySkill {
		t.Fatalf("runs delayed --skill hello --json: %v\n%s", err, out)
	}

	// runs show of the activation of a trigger not yet due says so.
	s.wantError([]string{"runs", "show", gone}, 1, "is the activation of a delayed trigger for hello (source /test, id gone)")
	out, err = s.skillbus("runs", "cancel", gone)
	if err != nil || !strings.Contains(out, gone+" cancelled: the delayed trigger for hello (source /test, id gone)") {
		t.Fatalf("runs cancel %s: %v\n%s", gone, err, out)
	}
	s.wantError([]string{"runs", "cancel", gone}, 1, "nor a delayed trigger waiting with that activation")
	out, err = s.skillbus("runs", "cancel", "--skill", "hello", "--since", "1h", "--json")
	var cancelled []struct {
		ActivationID string `json:"activation_id"`
		State        string `json:"state"`
	}
	if err != nil || json.Unmarshal([]byte(out), &cancelled) != nil || len(cancelled) != 2 || cancelled[0].State != "delayed" {
		t.Fatalf("runs cancel --skill hello: %v\n%s", err, out)
	}
	// kept again: it was cancelled with the rest of hello's.
	kept = later("3s", "kept-2", "--skill", "hello", "--data", `{"name":"Kit"}`)
	out, _ = s.skillbus("runs", "delayed")
	if strings.Contains(out, bySkill) || !strings.Contains(out, byType) || !strings.Contains(out, kept) {
		t.Fatalf("runs delayed after the cancels:\n%s", out)
	}

	// Once a router runs, the trigger due after the cancelled one is published,
	// and it alone: the cancelled one, due first, would have been by then.
	s.service(cli.Router)
	s.service(cli.Worker)
	res, err := client.New(b).Follow(s.ctx, kept, nil)
	if err != nil || !res.Completed || res.Outputs["greeting"] != "Hello, Kit!" {
		t.Fatalf("result %+v, %v", res, err)
	}
	if n := triggers(); n != 1 {
		t.Errorf("%d triggers published, want 1: the cancelled ones were not to be", n)
	}
}
