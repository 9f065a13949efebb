package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The delayed bucket holds the triggers senders store to be published later
// (skillbus trigger --at/--in, package schedule): keys at.<activation id>. Senders
// write it, so unlike the other buckets it is bounded and cannot be rolled up:
//
//   - no roll-ups and no purges (the stream denies them): one message with the
//     header Nats-Rollup: all would otherwise erase every sender's delayed triggers;
//   - a value is at most DelayedMaxValueBytes (a trigger the routers accept, at
//     their default limit, and its envelope), and the bucket holds at most
//     DelayedMaxKeys messages and DelayedMaxBytes, full at which a new delayed
//     trigger is refused (discard new): every router follows the bucket (keeping
//     about 150 bytes a key), so what it holds bounds what they hold;
//   - the marker a router leaves when it published one (DeleteDelayed) expires
//     after DelayedMarkerTTL, so fired triggers do not fill the bucket.
//
// The schedulers' own keys (lease, last ticks) are in the schedules bucket, which
// no sender may write.
const (
	// DelayedMaxValueBytes bounds one delayed trigger as stored.
	DelayedMaxValueBytes = DefaultMaxEventBytes + 4<<10
	// DelayedMaxBytes bounds the delayed bucket's size. JetStream reserves it in
	// its store when the bucket is created: on a server whose store cannot (a
	// small skillbus dev --max-store) the bucket is made without it, bounded by
	// DelayedMaxKeys and DelayedMaxValueBytes, rather than take most of the store.
	DelayedMaxBytes = 64 << 20
	// DelayedMaxKeys bounds the delayed bucket's messages: delayed triggers
	// waiting and the markers of those published in the last DelayedMarkerTTL.
	DelayedMaxKeys = 100_000
	// DelayedMarkerTTL is how long the deletion of a published delayed trigger
	// stays in the bucket: routers following it see it at once; one that
	// reconnects later finds the key gone when it is due.
	DelayedMarkerTTL = time.Hour
)

// BucketDelayed is the bucket of delayed triggers.
func (b *Bus) BucketDelayed() string { return b.bucketName("delayed") }

// DelayedStream is the stream of the delayed bucket: a key-value bucket as
// nats.go makes one (history 1, direct gets, discard new), with the limits above.
func (b *Bus) DelayedStream() jetstream.StreamConfig {
	name := b.BucketDelayed()
	return jetstream.StreamConfig{
		Name:              "KV_" + name,
		Description:       "skillbus delayed triggers: one key per trigger to publish later, until it is published",
		Subjects:          []string{"$KV." + name + ".>"},
		Storage:           b.cfg.Storage,
		Replicas:          b.cfg.Replicas,
		MaxMsgsPerSubject: 1,
		MaxMsgs:           DelayedMaxKeys,
		MaxBytes:          DelayedMaxBytes,
		MaxMsgSize:        DelayedMaxValueBytes,
		MaxConsumers:      -1,
		Discard:           jetstream.DiscardNew,
		Duplicates:        2 * time.Minute,
		AllowDirect:       true,
		DenyDelete:        true,
		DenyPurge:         true,
		AllowRollup:       false,
		// Per-message TTLs, for DeleteDelayed's markers. No markers for messages
		// that expire (SubjectDeleteMarkerTTL): the server allows them only with
		// roll-ups. A key that expires unseen is found gone when it is due.
		AllowMsgTTL: true,
	}
}

// ensureDelayed creates the delayed bucket's stream, or brings an existing one to
// DelayedStream without losing what it holds: its limits are set only where it
// has none (an operator may have changed them; lowering a limit below what the
// bucket holds would make the server drop the oldest triggers), and its size
// limit not at all (a reservation the store may not have room for: the key count
// bounds it).
func (b *Bus) ensureDelayed(ctx context.Context) error {
	want := b.DelayedStream()
	for range 3 {
		st, err := b.JS.Stream(ctx, want.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			_, err = b.JS.CreateStream(ctx, want)
			if err != nil && insufficientStorage(err) {
				want.MaxBytes = -1
				_, err = b.JS.CreateStream(ctx, want)
			}
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				continue
			}
			return err
		}
		if err != nil {
			return err
		}
		have := st.CachedInfo().Config
		next := have
		next.Description, next.Replicas = want.Description, want.Replicas
		next.MaxMsgsPerSubject, next.Discard, next.AllowDirect = 1, jetstream.DiscardNew, true
		next.DenyDelete, next.DenyPurge, next.AllowRollup = true, true, false
		next.AllowMsgTTL, next.SubjectDeleteMarkerTTL = true, 0
		if next.MaxMsgs <= 0 {
			next.MaxMsgs = want.MaxMsgs
		}
		if next.MaxMsgSize <= 0 {
			next.MaxMsgSize = want.MaxMsgSize
		}
		if next.Description == have.Description && next.Replicas == have.Replicas && next.MaxMsgsPerSubject == have.MaxMsgsPerSubject &&
			next.Discard == have.Discard && next.AllowDirect == have.AllowDirect && next.DenyDelete == have.DenyDelete &&
			next.DenyPurge == have.DenyPurge && next.AllowRollup == have.AllowRollup && next.AllowMsgTTL == have.AllowMsgTTL &&
			next.SubjectDeleteMarkerTTL == have.SubjectDeleteMarkerTTL && next.MaxMsgs == have.MaxMsgs && next.MaxMsgSize == have.MaxMsgSize {
			return nil
		}
		_, err = b.JS.UpdateStream(ctx, next)
		return err
	}
	return errors.New("created and deleted again while starting")
}

// ErrDelayedExists: CreateDelayed found its key taken (or deleted within the
// deletion marker's TTL): the same delayed trigger was stored before.
var ErrDelayedExists = errors.New("bus: a delayed trigger of that key was stored before")

// CreateDelayed stores value under key of the delayed bucket, only if the key
// holds nothing: a create-only publish, which reads nothing back, so that a
// sender needs no read of the bucket (a key-value create reads the key it
// finds, and a read by subject takes wildcards: every sender's triggers).
func (b *Bus) CreateDelayed(ctx context.Context, key string, value []byte) error {
	m := nats.NewMsg("$KV." + b.BucketDelayed() + "." + key)
	m.Data = value
	_, err := b.JS.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(0))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		return ErrDelayedExists
	}
	if err != nil {
		return fmt.Errorf("bus: storing delayed trigger %s: %w", key, err)
	}
	return nil
}

// DeleteDelayed deletes the delayed trigger key of the delayed bucket if it is
// still at revision rev, leaving a deletion marker that expires after
// DelayedMarkerTTL (a key-value delete's marker would stay for good).
func (b *Bus) DeleteDelayed(ctx context.Context, key string, rev uint64) error {
	m := nats.NewMsg("$KV." + b.BucketDelayed() + "." + key)
	m.Header.Set("KV-Operation", "DEL")
	if _, err := b.JS.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(DelayedMarkerTTL)); err != nil {
		return fmt.Errorf("bus: deleting delayed trigger %s: %w", key, err)
	}
	return nil
}

// insufficientStorage reports JetStream's refusal of a stream whose MaxBytes its
// store cannot reserve.
func insufficientStorage(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == 10047 // JSStorageResourcesExceededErr
}
