package router_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/router"
)

// forge publishes, on a trigger subject any publisher may use, a harmless
// trigger that no skill takes, under the Nats-Msg-Id msgID.
func (f *fixture) forge(msgID string) {
	f.t.Helper()
	h := ce("forged-"+msgID, "com.example.other")
	h["Nats-Msg-Id"] = msgID
	f.publish("skillbus.trigger.com.example.other", h, `{}`)
}

// A publisher that stores a trigger under the id of a burst's run before the
// run is published does not suppress it: the burst still runs, once.
func TestDebounceRunIDTakenByAPublisherStillRuns(t *testing.T) {
	t.Parallel()
	f := setup(t, debounced(time.Second, 30*time.Second))
	f.forge("debounce.digest." + events.ActivationID("/test", "a1"))
	f.change("a1", "readme", 1)
	natstest.Eventually(t, 20*time.Second, func() bool { return len(f.runs()) == 1 }, "the burst never ran")
	f.quiet()
	if got := f.runs(); fmt.Sprint(got["readme"]) != "[1]" {
		t.Fatalf("runs by doc: %v; want readme once with n 1", got)
	}
}

// A publisher that reads a batch's first item and stores a trigger under the id
// of the batch's run does not suppress it: the batch still runs, once.
func TestBatchRunIDTakenByAPublisherStillRuns(t *testing.T) {
	t.Parallel()
	f := setupBatch(t, batched(2, time.Hour))
	f.order("o01", "north")
	var u events.RouteUnmatched
	f.event(events.ActivationID("/test", "o01"), events.TypeRouteUnmatched, &u)
	sum := sha256.Sum256([]byte("batch\x00ingest\x00north"))
	id := hex.EncodeToString(sum[:16])
	evs, err := f.b.JS.Stream(f.ctx, f.b.StreamEvents())
	if err != nil {
		t.Fatal(err)
	}
	first, err := evs.GetLastMsgForSubject(f.ctx, f.b.Subjects.BatchItems(id))
	if err != nil {
		t.Fatal(err)
	}
	f.forge("batch.ingest." + router.BatchRunID(id, first.Sequence))
	f.order("o02", "north")
	natstest.Eventually(t, 20*time.Second, func() bool { return len(f.batchRuns()) == 1 }, "the full batch never ran")
	f.settled()
	if got, want := f.batchRuns(), [][]string{ids("o", 1, 2)}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("runs %v; want %v", got, want)
	}
}
