package bus_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
)

// What a security probe did with a publisher's credentials to the bucket of
// delayed triggers, which senders write: a message with Nats-Rollup: all erased
// every key of the bucket (then schedules, with the schedulers' lease and last
// ticks), and values of 900 KB were stored, past the routers' event limit, and
// held by every router. The delayed bucket refuses both, and keeps its keys.
func TestDelayedBucketRefusesRollupsAndLargeValues(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx := context.Background()
	kv, err := b.KV(ctx, b.BucketDelayed())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"at.a", "at.b"} {
		if _, err := kv.Create(ctx, k, []byte(`{"at":"2030-01-01T00:00:00Z","source":"app","id":"x"}`)); err != nil {
			t.Fatal(err)
		}
	}
	for _, rollup := range []string{jetstream.MsgRollupAll, jetstream.MsgRollupSubject} {
		m := nats.NewMsg("$KV." + b.BucketDelayed() + ".at.c")
		m.Header.Set(jetstream.MsgRollup, rollup)
		m.Data = []byte("{}")
		if _, err := b.JS.PublishMsg(ctx, m); err == nil || !strings.Contains(err.Error(), "rollup not permitted") {
			t.Errorf("Nats-Rollup: %s: %v, want refused", rollup, err)
		}
	}
	if err := kv.Purge(ctx, "at.a"); err == nil {
		t.Error("a key-value purge (a roll-up of the key) was accepted")
	}
	if st, err := b.JS.Stream(ctx, "KV_"+b.BucketDelayed()); err != nil {
		t.Fatal(err)
	} else if err := st.Purge(ctx); err == nil {
		t.Error("a purge of the stream was accepted")
	}
	big := make([]byte, bus.DelayedMaxValueBytes+1)
	if _, err := kv.Put(ctx, "at.big", big); err == nil {
		t.Errorf("a value of %d bytes was stored", len(big))
	}
	if _, err := kv.Put(ctx, "at.fits", make([]byte, bus.DefaultMaxEventBytes)); err != nil {
		t.Errorf("a value as large as an event: %v", err)
	}
	for _, k := range []string{"at.a", "at.b"} {
		if _, err := kv.Get(ctx, k); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	st, err := b.JS.Stream(ctx, "KV_"+b.BucketDelayed())
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CachedInfo().Config; c.MaxBytes != bus.DelayedMaxBytes || c.MaxMsgs != bus.DelayedMaxKeys || c.Discard != jetstream.DiscardNew {
		t.Errorf("max bytes %d max msgs %d discard %v, want %d, %d and new", c.MaxBytes, c.MaxMsgs, c.Discard, bus.DelayedMaxBytes, bus.DelayedMaxKeys)
	}
}

// A published delayed trigger's key is deleted with a marker that its followers
// see as a deletion, only at the revision it was published at.
func TestDeleteDelayed(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx := context.Background()
	kv, err := b.KV(ctx, b.BucketDelayed())
	if err != nil {
		t.Fatal(err)
	}
	rev, err := kv.Create(ctx, "at.x", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(ctx, "at.>", jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := b.DeleteDelayed(ctx, "at.x", rev+1); err == nil {
		t.Error("deleted at a revision it is not at")
	}
	if err := b.DeleteDelayed(ctx, "at.x", rev); err != nil {
		t.Fatal(err)
	}
	for e := range w.Updates() {
		if e == nil {
			continue
		}
		if e.Key() != "at.x" || e.Operation() != jetstream.KeyValueDelete {
			t.Fatalf("the watch saw %s %v, want the deletion of at.x", e.Key(), e.Operation())
		}
		break
	}
	if _, err := kv.Get(ctx, "at.x"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("after the deletion: %v", err)
	}
	// The marker expires: fired triggers do not fill the bucket.
	st, err := b.JS.Stream(ctx, "KV_"+b.BucketDelayed())
	if err != nil {
		t.Fatal(err)
	}
	if m, err := st.GetLastMsgForSubject(ctx, "$KV."+b.BucketDelayed()+".at.x"); err != nil || m.Header.Get(jetstream.MsgTTLHeader) == "" {
		t.Errorf("the deletion marker has no TTL: %v %v", err, m)
	}
	// The same trigger stored again after it fired is a new delayed trigger.
	if _, err := kv.Create(ctx, "at.x", []byte(`{}`)); err != nil {
		t.Errorf("stored again: %v", err)
	}
}

// A delayed bucket made without limits (by an operator, or before them) gets
// them from Ensure, keeping its keys; limits an operator set are kept.
func TestEnsureBoundsTheDelayedBucket(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	ctx := context.Background()
	b, err := bus.New(srv.Conn(t), bus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := b.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: b.BucketDelayed()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "at.kept", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := b.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := b.JS.Stream(ctx, "KV_"+b.BucketDelayed())
	if err != nil {
		t.Fatal(err)
	}
	c := st.CachedInfo().Config
	if c.AllowRollup || !c.DenyPurge || c.MaxMsgs != bus.DelayedMaxKeys || c.MaxMsgSize != bus.DelayedMaxValueBytes || !c.AllowMsgTTL {
		t.Errorf("after Ensure: rollup %v deny purge %v max msgs %d max msg size %d msg ttl %v", c.AllowRollup, c.DenyPurge, c.MaxMsgs, c.MaxMsgSize, c.AllowMsgTTL)
	}
	if _, err := kv.Get(ctx, "at.kept"); err != nil {
		t.Errorf("the key stored before: %v", err)
	}
	c.MaxMsgs = 2 * bus.DelayedMaxKeys
	if _, err := b.JS.UpdateStream(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := b.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	st, err = b.JS.Stream(ctx, "KV_"+b.BucketDelayed())
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.MaxMsgs; got != 2*bus.DelayedMaxKeys {
		t.Errorf("an operator's limit: %d after Ensure, want %d", got, 2*bus.DelayedMaxKeys)
	}
}

// On a server whose store cannot reserve DelayedMaxBytes (skillbus dev with a
// small --max-store), the delayed bucket is made without a size limit, bounded by
// its key count and value size.
func TestDelayedBucketOnASmallStore(t *testing.T) {
	t.Parallel()
	srv := natstest.StartWith(t, func(o *server.Options) { o.JetStreamMaxStore = 20 << 20 })
	b := srv.Bus(t, bus.Config{})
	st, err := b.JS.Stream(context.Background(), "KV_"+b.BucketDelayed())
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CachedInfo().Config; c.MaxBytes != -1 || c.MaxMsgs != bus.DelayedMaxKeys || c.MaxMsgSize != bus.DelayedMaxValueBytes {
		t.Errorf("max bytes %d max msgs %d max msg size %d, want -1, %d, %d", c.MaxBytes, c.MaxMsgs, c.MaxMsgSize, bus.DelayedMaxKeys, bus.DelayedMaxValueBytes)
	}
}
