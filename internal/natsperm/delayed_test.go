package natsperm_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/schedule"
)

// TestDelayedTriggersUnderSenders stores delayed triggers as a publisher, with the
// generated users, and then tries what a security probe did with a publisher's
// credentials: a message with Nats-Rollup: all on a delayed trigger's key (it
// erased every delayed trigger, the schedulers' lease and their last ticks),
// values of 900 KB (held by every router), and a delayed trigger written straight
// into the bucket with the scheduler's own source. The rollup and the large value
// are refused, the schedulers' bucket cannot be written at all, every delayed
// trigger stays, and the forged one is dropped, not published.
func TestDelayedTriggersUnderSenders(t *testing.T) {
	url, v := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := &fleet{t: t, ctx: ctx, url: url, v: v, ledger: &ledger{}, skills: t.TempDir()}
	copySkill(t, f.skills, "hello")
	f.service(cli.Registry, "registry", "--skills", f.skills)
	admin, err := jetstream.New(f.conn("registry"))
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 20*time.Second, func() bool {
		_, err := admin.KeyValue(ctx, "delayed")
		return err == nil
	}, "the registry did not create the buckets")
	f.service(cli.Router, "router", "--ensure=false")
	delayed, err := admin.KeyValue(ctx, "delayed")
	if err != nil {
		t.Fatal(err)
	}
	schedules, err := admin.KeyValue(ctx, "schedules")
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 20*time.Second, func() bool {
		_, err := schedules.Get(ctx, "leader")
		return err == nil
	}, "no scheduler leads")

	var stored struct {
		ActivationID string `json:"activation_id"`
	}
	for _, role := range []string{"publisher", "operator"} {
		out := f.must(role, "trigger --in 1h", "trigger", "--skill", "hello", "--source", "/app", "--id", "victim-"+role, "--in", "1h", "--json")
		if err := json.Unmarshal([]byte(out), &stored); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		if _, err := delayed.Get(ctx, "at."+stored.ActivationID); err != nil {
			t.Fatalf("%s's delayed trigger is not in KV delayed: %v", role, err)
		}
	}
	victim := "at." + stored.ActivationID
	_, err = f.cli("publisher", "trigger", "--skill", "hello", "--source", "/skillbus/scheduler", "--id", "schedule:hello:2030-01-01T00:00:00Z", "--in", "1h")
	if err == nil || !strings.Contains(err.Error(), "/skillbus/") {
		t.Errorf("a delayed trigger with the scheduler's source: %v, want refused", err)
	}

	pub := f.conn("publisher")
	pubJS, err := jetstream.New(pub)
	if err != nil {
		t.Fatal(err)
	}
	// Roll-ups: refused by the bucket (the publisher may write its keys), and
	// by the permissions on the schedulers' bucket.
	roll := nats.NewMsg("$KV.delayed.at.wipe")
	roll.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupAll)
	roll.Data = []byte(`{}`)
	if _, err := pubJS.PublishMsg(ctx, roll); err == nil || !strings.Contains(err.Error(), "rollup not permitted") {
		t.Errorf("Nats-Rollup: all on KV delayed: %v, want refused", err)
	}
	f.ledger.add("publisher", "roll up KV delayed", false)
	for _, subj := range []string{"$KV.schedules.at.wipe", "$KV.schedules.leader"} {
		m := nats.NewMsg(subj)
		m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupAll)
		m.Data = []byte(`{}`)
		c, cc := context.WithTimeout(ctx, time.Second)
		_, err := pubJS.PublishMsg(c, m)
		cc()
		f.denied("publisher", "write "+subj, subj, err)
	}
	// No read of the bucket: a read by subject takes wildcards, and would hand
	// a sender every other sender's delayed triggers.
	for _, subj := range []string{"$JS.API.DIRECT.GET.KV_delayed.$KV.delayed.at.*", "$JS.API.DIRECT.GET.KV_delayed"} {
		c, cc := context.WithTimeout(ctx, time.Second)
		_, err := pub.RequestWithContext(c, subj, []byte(`{"last_by_subj":"$KV.delayed.at.*"}`))
		cc()
		f.denied("publisher", "read KV delayed ("+subj+")", subj, err)
	}
	// A value larger than an event, as the probe stored 151 of.
	big, _ := json.Marshal(schedule.Delayed{At: time.Now().Add(time.Hour), Skill: "hello", Source: "/app", ID: "big", Data: json.RawMessage(`"` + strings.Repeat("x", 900<<10) + `"`)})
	if _, err := pubJS.Publish(ctx, "$KV.delayed.at.big", big); err == nil {
		t.Errorf("a delayed trigger of %d bytes was stored", len(big))
	}
	// Written straight into the bucket, due now, with the scheduler's source.
	forged, _ := json.Marshal(schedule.Delayed{At: time.Now(), Skill: "hello", Source: schedule.Source, ID: "schedule:hello:2030-01-01T00:00:00Z"})
	if _, err := pubJS.Publish(ctx, "$KV.delayed.at.forged", forged); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 20*time.Second, func() bool {
		_, err := delayed.Get(ctx, "at.forged")
		return errors.Is(err, jetstream.ErrKeyNotFound)
	}, "the router did not drop the forged delayed trigger")
	trig, err := admin.Stream(ctx, "SKILLBUS_TRIGGERS")
	if err != nil {
		t.Fatal(err)
	}
	if n := trig.CachedInfo().State.Msgs; n != 0 {
		t.Errorf("the TRIGGERS stream holds %d messages; the forged delayed trigger was published", n)
	}
	if _, err := delayed.Get(ctx, victim); err != nil {
		t.Errorf("the delayed trigger stored first: %v", err)
	}
	if _, err := schedules.Get(ctx, "leader"); err != nil {
		t.Errorf("the schedulers' lease: %v", err)
	}
	if got := v.take(); len(got) > 0 {
		t.Errorf("unexpected violations: %v", got)
	}
}
