package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/repair"
	"github.com/skillbus/skillbus/pkg/repair/service"
)

// repair list --json prints the fields scripts rely on; approve publishes the
// decision on the repair stream for a repair worker; a second decision is refused.
func TestRepairCommands(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx := t.Context()
	kv, err := b.KV(ctx, b.BucketRepairs())
	if err != nil {
		t.Fatal(err)
	}
	diff := "--- a/skill.yaml\n+++ b/skill.yaml\n@@ -1 +1 @@\n-a\n+b\n"
	rec := &service.Record{ID: "0123456789abcdef0123", Skill: "issue-title", Status: service.StatusProposed, BudgetKey: "k",
		Diagnosis: repair.Diagnosis{Skill: "issue-title", Digest: "d1", Fault: failure.Fault{Kind: failure.FaultReference, Name: "titel", Step: "post"}, Error: "no key"},
		Patch:     &repair.Patch{Diff: diff, By: "reference"}, Created: time.Now()}
	if _, _, err := service.Create(ctx, kv, rec); err != nil {
		t.Fatal(err)
	}
	for _, ex := range []string{"ex1", "ex2"} {
		if _, err := kv.Put(ctx, service.ParkedKey(rec.ID, ex), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	skillbus := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := cli.Skillbus(context.Background(), append(args, "--nats-url", srv.URL()), noEnv, &out, &out)
		return out.String(), err
	}
	out, err := skillbus("repair", "list", "--json")
	if err != nil {
		t.Fatal(err, out)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 {
		t.Fatalf("%v: %s", err, out)
	}
	got := list[0]
	if got["id"] != rec.ID || got["skill"] != "issue-title" || got["status"] != "proposed" || got["diff"] != diff || got["executions"] != 2.0 {
		t.Fatalf("list: %v", got)
	}
	if out, err = skillbus("repair", "list"); err != nil || !strings.Contains(out, "0123456789ab  issue-title  proposed  reference titel") {
		t.Fatalf("table: %v\n%s", err, out)
	}
	if out, err = skillbus("repair", "show", "0123"); err != nil || !strings.Contains(out, diff) || !strings.Contains(out, "waiting     2 executions") {
		t.Fatalf("show: %v\n%s", err, out)
	}
	if out, err = skillbus("repair", "approve", "0123", "--by", "ada"); err != nil || !strings.Contains(out, "approved by ada") {
		t.Fatalf("approve: %v\n%s", err, out)
	}
	st, err := b.JS.Stream(ctx, b.StreamRepair())
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctx, b.Subjects.RepairDecided("issue-title"))
	if err != nil {
		t.Fatal(err)
	}
	var d events.RepairDecided
	e, err := bus.DecodeFast(bus.FromNATS(&nats.Msg{Header: m.Header, Data: m.Data}))
	if err == nil {
		err = json.Unmarshal(e.Data, &d)
	}
	if err != nil || !d.Approved || d.By != "ada" || d.RepairID != rec.ID || e.Type != events.TypeRepairDecided {
		t.Fatalf("decision %+v %v %s", d, err, m.Data)
	}
	if _, err = skillbus("repair", "show", "nope"); err == nil {
		t.Fatal("show of an unknown repair succeeded")
	}
}
