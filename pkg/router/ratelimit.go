package router

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

// A rate limit is counted fleet-wide in KV ratelimits, one key per trigger a
// skill took in a window of its period:
//
//	<skill>.<key digest>.<window start, unix seconds>.<activation id> = its place, 1..limit
//
// A router gives a trigger the next place by writing its key on condition that
// the last key written in the window is still the one it read (the stream's
// expected last sequence, over the window's wildcard subject): of two routers
// racing for the last place one wins, the other reads again and finds the window
// full. The key names the trigger's activation, so a trigger delivered again —
// its router died after counting it and before publishing its jobs, or before
// acking — finds its place instead of taking another. A trigger over the limit
// writes nothing. The window is read from the trigger's time in the stream,
// which every delivery of it shares. Each key expires a period after its window
// ends, so the bucket holds only the current windows.

// limiter counts rate limits; nil counts nothing.
type limiter struct {
	b      *bus.Bus
	kv     jetstream.Stream // the bucket's stream, for direct gets by subject
	prefix string           // "$KV.<bucket>."
}

// maxRateRaces bounds how often one count is retried after losing a race for a
// place: each loss means another router took one, so a window of limit places is
// decided within limit losses.
const maxRateRaces = 1000

func newLimiter(ctx context.Context, b *bus.Bus) (*limiter, error) {
	name := b.BucketRateLimits()
	s, err := b.Stream(ctx, "KV_"+name)
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", name, err)
	}
	return &limiter{b: b, kv: s, prefix: "$KV." + name + "."}, nil
}

// rateCheck is a rate limit a trigger is to be counted against: the skill's
// limit and the value of its key for the trigger.
type rateCheck struct {
	rl  *skill.RateLimit
	key string
}

// place is where a trigger stands in its window.
type place struct {
	n     int       // its place, 1..limit; or, over the limit, the places taken
	over  bool      // the window is full: the trigger is not taken
	peek  bool      // read only: n is the place the trigger would get
	start time.Time // the window's start
}

// window is the start and end of the window of period that holds at.
func window(at time.Time, period time.Duration) (time.Time, time.Time) {
	p := int64(period / time.Second)
	s := at.Unix()
	s -= s % p
	start := time.Unix(s, 0).UTC()
	return start, start.Add(period)
}

// keyDigest names a key's value in a KV key: any string may be a key's value.
func keyDigest(v string) string {
	if v == "" {
		return "_"
	}
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:12])
}

// take gives the trigger of activation act a place in its window of rc's limit
// for skill name, or finds the one it has; at is the trigger's time in the
// stream. With act "" it only reads: the place a trigger at that time would get.
func (l *limiter) take(ctx context.Context, name string, rc rateCheck, at time.Time, act string) (place, error) {
	period := time.Duration(rc.rl.Period)
	start, end := window(at, period)
	base := l.prefix + name + "." + keyDigest(rc.key) + "." + strconv.FormatInt(start.Unix(), 10)
	wild, own := base+".*", base+"."+act
	if act != "" {
		m, err := l.kv.GetLastMsgForSubject(ctx, own)
		switch {
		case err == nil:
			if n := rank(m); n > 0 {
				return place{n: n, start: start}, nil
			}
		case !errors.Is(err, jetstream.ErrMsgNotFound):
			return place{}, fmt.Errorf("rate limit of %s: %w", name, err)
		}
	}
	for range maxRateRaces {
		last, seq := 0, uint64(0)
		m, err := l.kv.GetLastMsgForSubject(ctx, wild)
		switch {
		case err == nil:
			last, seq = rank(m), m.Sequence
		case !errors.Is(err, jetstream.ErrMsgNotFound):
			return place{}, fmt.Errorf("rate limit of %s: %w", name, err)
		}
		if last >= rc.rl.Limit {
			return place{n: last, over: true, start: start}, nil
		}
		if act == "" {
			return place{n: last + 1, peek: true, start: start}, nil
		}
		// Kept a period past the window's end: a trigger delivered again in that
		// time finds its place.
		ttl := max(time.Until(end), 0) + period
		_, err = l.b.Publish(ctx, &nats.Msg{Subject: own, Data: strconv.AppendInt(nil, int64(last+1), 10)},
			jetstream.WithExpectLastSequenceForSubject(seq, wild), jetstream.WithMsgTTL(ttl.Truncate(time.Second)+time.Second))
		if err == nil {
			return place{n: last + 1, start: start}, nil
		}
		if !lostRace(err) {
			return place{}, fmt.Errorf("rate limit of %s: %w", name, err)
		}
	}
	return place{}, fmt.Errorf("rate limit of %s: lost %d races for a place in a row", name, maxRateRaces)
}

// rank is the place a key holds; 0 for anything else (the marker the bucket
// leaves where a key expired).
func rank(m *jetstream.RawStreamMsg) int {
	n, err := strconv.Atoi(string(m.Data))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// lostRace is a conditional write refused because another came first.
func lostRace(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// String is a place as a candidate's reason gives it.
func (p place) String(rc rateCheck) string {
	s := "rate_limit " + rc.rl.String()
	if rc.key != "" {
		s += fmt.Sprintf(" (key %q)", clip(rc.key, 64))
	}
	switch {
	case p.over:
		return fmt.Sprintf("%s: rate limited, %d of %d taken in the window from %s", s, p.n, rc.rl.Limit, p.start.Format(time.RFC3339))
	case p.peek:
		return fmt.Sprintf("%s: %d of %d taken in the window from %s", s, p.n-1, rc.rl.Limit, p.start.Format(time.RFC3339))
	}
	return fmt.Sprintf("%s: %d of %d in the window from %s", s, p.n, rc.rl.Limit, p.start.Format(time.RFC3339))
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// count counts the trigger against the rate limits of the skills d starts at
// once that admit found one for, in the order they run, and reports whether
// any was counted (d is then to be decided again, with the verdicts). It stops at
// the first skill over its limit: the plan without it may not start the others.
func (r *Router) count(ctx context.Context, t *trigger, d *selector.Decision) (bool, error) {
	pending := t.uncounted
	t.uncounted = nil
	if r.limits == nil {
		return false, nil
	}
	at, act := time.Now(), ""
	if t.md() != nil {
		at, act = t.md().Timestamp, t.actID
	}
	counted := false
	for _, name := range d.Running() {
		rc, ok := pending[name]
		if !ok {
			continue
		}
		counted = true
		p, err := r.limits.take(ctx, name, rc, at, act)
		if err != nil {
			return false, err
		}
		if p.over {
			if t.limited == nil {
				t.limited = map[string]string{}
			}
			t.limited[name] = p.String(rc)
			break
		}
		if t.rated == nil {
			t.rated = map[string]string{}
		}
		t.rated[name] = p.String(rc)
	}
	return counted, nil
}
