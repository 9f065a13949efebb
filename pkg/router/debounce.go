package router

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

// A debounce is held by the server, not by a router. Each burst — a skill and a
// value of its key — has three subjects in the EVENTS stream, under an id that
// hashes the two (debounceID):
//
//	<prefix>.events.<id>.debounce.timer   a scheduled message: when the run starts
//	<prefix>.events.<id>.debounce.latest  the last trigger folded into the burst
//	<prefix>.events.<id>.debounce.fired   what the timer publishes when it is due
//
// Folding a trigger (Router.fold) publishes the timer again, due a period after
// the trigger but no later than the timeout after the burst's first (kept in a
// header of the timer), on condition that it is still the timer it read: a new
// scheduled message on a subject replaces the one before it, so the server keeps
// one timer per burst. Then the trigger becomes the latest, unless a trigger
// stored after it in TRIGGERS already is (routers take triggers concurrently),
// again by a conditional write. When the timer is due the server publishes the
// latest — read at that moment, as the timer's source — on the fired subject and
// purges the timer. Routers consume the fired messages (durable
// <durable>-debounce) and publish each as an explicit invocation of the skill
// named by the trigger whose data it carries (source /skillbus/debounce/<skill>,
// id that trigger's activation) on the skill's TriggerDebounced subject, which
// only routers may publish: it is routed like any other trigger, past the
// debounce; the name makes a burst's data run once however often it fires.
// A trigger that becomes the latest just as the timer fires would be left
// without a timer: the router that folded it, and the router that handles the
// fired message, each arm a timer for a burst that has none. A router that dies
// at any step leaves its trigger unacked, and the trigger, delivered again, is
// folded again.

// Headers of the debounce subjects.
const (
	headerDebounceSkill = events.HeaderDebounceSkill
	headerDebounceFirst = events.HeaderDebounceFirst
	headerDebounceAct   = events.HeaderDebounceAct
	headerDebounceSeq   = events.HeaderDebounceSeq
)

// DebounceSource is the source of the trigger a debounced skill's burst runs as.
func DebounceSource(skillName string) string { return events.SourceDebounced + skillName }

// folding is a trigger to fold into a skill's burst (db) or to add to its
// batch (bt), for the skill's version digest.
type folding struct {
	db     *skill.Debounce
	bt     *skill.Batch
	key    string
	digest string
}

func debounceID(name, key string) string {
	sum := sha256.Sum256([]byte(name + "\x00" + key))
	return hex.EncodeToString(sum[:16])
}

type debounceSubjects struct{ timer, latest, fired string }

func (r *Router) debounceSubjects(id string) debounceSubjects {
	sub := r.cfg.Bus.Subjects
	return debounceSubjects{timer: sub.DebounceTimer(id), latest: sub.DebounceLatest(id), fired: sub.DebounceFired(id)}
}

// DebounceConsumerConfig is the durable consumer every router shares for the
// debounced runs that are due.
func (r *Router) DebounceConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        r.cfg.Durable + "-debounce",
		Description:    "skillbus routers: debounced and batched runs that are due",
		FilterSubjects: []string{r.cfg.Bus.Subjects.DebounceFired("*"), r.cfg.Bus.Subjects.BatchFired("*")},
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        r.cfg.AckWait,
		MaxDeliver:     -1,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	}
}

func (r *Router) startDebounce(ctx context.Context) error {
	c, err := r.cfg.Bus.EnsureConsumer(ctx, r.cfg.Bus.StreamEvents(), r.DebounceConsumerConfig())
	if err != nil {
		return fmt.Errorf("debounce consumer: %w", err)
	}
	r.fired, err = bus.Consume(c, 4, r.handleFired, r.cfg.Log)
	return err
}

// foldAll folds the trigger into the bursts of the skills admit debounced, and
// adds it to the batches of those it batched.
func (r *Router) foldAll(ctx context.Context, t *trigger) error {
	for name, f := range t.folds {
		if f.bt != nil {
			if err := r.appendBatch(ctx, t, name, f); err != nil {
				return fmt.Errorf("batch of %s: %w", name, err)
			}
			continue
		}
		if err := r.fold(ctx, t, name, f); err != nil {
			return fmt.Errorf("debounce of %s: %w", name, err)
		}
	}
	return nil
}

func (r *Router) fold(ctx context.Context, t *trigger, name string, f folding) error {
	id := debounceID(name, f.key)
	s := r.debounceSubjects(id)
	at := time.Now()
	if t.md() != nil {
		at = t.md().Timestamp // the same on every delivery
	}
	if err := r.armTimer(ctx, s, name, f.db, at, false); err != nil {
		return err
	}
	if err := r.fault("debounce.armed"); err != nil {
		return err
	}
	if err := r.setLatest(ctx, s, id, name, f.digest, t); err != nil {
		return err
	}
	// The timer may have fired between the two writes, with the latest before
	// this one: a burst without a timer gets one (if none came meanwhile).
	return r.armTimer(ctx, s, name, f.db, at, true)
}

// setLatest makes t the burst's latest: the trigger stored last in TRIGGERS,
// whichever router folds it first. A trigger stored before the latest does not
// replace it.
func (r *Router) setLatest(ctx context.Context, s debounceSubjects, id, name, digest string, t *trigger) error {
	for range maxRateRaces {
		var cur, seq uint64
		m, err := r.events.GetLastMsgForSubject(ctx, s.latest)
		switch {
		case err == nil:
			seq = m.Sequence
			cur, _ = strconv.ParseUint(m.Header.Get(headerDebounceSeq), 10, 64)
		case !errors.Is(err, jetstream.ErrMsgNotFound):
			return err
		}
		if t.ref.Seq <= cur {
			return nil
		}
		lm := nats.NewMsg(s.latest)
		for k, v := range t.msg.Headers() {
			if !strings.HasPrefix(k, "Nats-") {
				lm.Header[k] = v
			}
		}
		lm.Header.Set(headerDebounceSkill, name)
		lm.Header.Set(headerDebounceAct, t.actID)
		lm.Header.Set(headerDebounceSeq, strconv.FormatUint(t.ref.Seq, 10))
		if lm.Header.Del(events.HeaderBurstDigest); digest != "" {
			lm.Header.Set(events.HeaderBurstDigest, digest)
		}
		lm.Header.Set(bus.HeaderMsgID, "debounce."+id+"."+t.actID)
		lm.Data = t.msg.Data()
		_, err = r.cfg.Bus.Publish(ctx, lm, jetstream.WithExpectLastSequencePerSubject(seq))
		if !lostRace(err) {
			return err
		}
	}
	return fmt.Errorf("lost %d races for the latest trigger in a row", maxRateRaces)
}

// armTimer publishes the burst's timer, due a period after at but no later than
// the timeout after the burst's first trigger. With onlyIfNone it arms a burst
// that has no timer, and leaves one that has alone.
func (r *Router) armTimer(ctx context.Context, s debounceSubjects, name string, db *skill.Debounce, at time.Time, onlyIfNone bool) error {
	for range maxRateRaces {
		first, seq := at, uint64(0)
		m, err := r.events.GetLastMsgForSubject(ctx, s.timer)
		switch {
		case err == nil:
			if onlyIfNone {
				return nil
			}
			seq = m.Sequence
			if ft, err := time.Parse(time.RFC3339Nano, m.Header.Get(headerDebounceFirst)); err == nil {
				first = ft
			}
		case !errors.Is(err, jetstream.ErrMsgNotFound):
			return err
		}
		due := at.Add(time.Duration(db.Period))
		if limit := first.Add(time.Duration(db.Timeout)); limit.Before(due) {
			due = limit
		}
		if due != due.Truncate(time.Second) { // the schedule has whole seconds: never early
			due = due.Truncate(time.Second).Add(time.Second)
		}
		tm := nats.NewMsg(s.timer)
		tm.Header.Set(headerDebounceSkill, name)
		tm.Header.Set(headerDebounceFirst, first.UTC().Format(time.RFC3339Nano))
		_, err = r.cfg.Bus.Publish(ctx, tm, jetstream.WithScheduleAt(due), jetstream.WithScheduleTarget(s.fired),
			jetstream.WithScheduleSource(s.latest), jetstream.WithExpectLastSequencePerSubject(seq))
		if lostRace(err) {
			continue // fired, or moved by another router: read it again
		}
		return err
	}
	return fmt.Errorf("lost %d races for the timer in a row", maxRateRaces)
}

func (r *Router) handleFired(ctx context.Context, msg jetstream.Msg) {
	fire := r.fire
	if msg.Headers().Get(events.HeaderBatchSkill) != "" {
		fire = r.fireBatch
	}
	if err := fire(ctx, msg); err != nil {
		var n uint64 = 1
		if md, _ := msg.Metadata(); md != nil {
			n = md.NumDelivered
		}
		delay := r.retryDelay(n)
		r.cfg.Log.Log(ctx, slog.LevelWarn, "router: debounced run not started; will retry", "subject", msg.Subject(), "deliveries", n, "retry_in", delay, "err", err)
		_ = msg.NakWithDelay(delay)
		return
	}
	_ = msg.Ack()
}

// fire publishes a burst that is due as an explicit invocation of its skill, with
// the last trigger's data, named by that trigger's activation.
func (r *Router) fire(ctx context.Context, msg jetstream.Msg) error {
	h := msg.Headers()
	name, act := h.Get(headerDebounceSkill), h.Get(headerDebounceAct)
	if act == "" {
		// The timer came due before its router published the trigger (it died in
		// between): the trigger, delivered again, opens a burst of its own.
		return nil
	}
	ev, err := bus.Decode(msg)
	if err != nil {
		r.cfg.Log.Error("router: a debounced trigger is unreadable; dropped", "skill", name, "subject", msg.Subject(), "err", err)
		return nil
	}
	ev.SetID(act)
	ev.SetSource(DebounceSource(name))
	m := bus.Encode(r.cfg.Bus.Subjects.TriggerDebounced(name), "debounce."+name+"."+act, ev)
	if d := h.Get(events.HeaderBurstDigest); d != "" {
		m.Header.Set(events.HeaderBurstDigest, d) // the version it runs on if the skill is deleted
	}
	// Where the run stands for cancel_on: at its last trigger (recordOf).
	m.Header.Set(headerDebounceSeq, h.Get(headerDebounceSeq))
	if err := r.publishRun(ctx, m, name); err != nil {
		return err
	}
	// A trigger folded while the timer fired is the latest of a burst with no
	// timer: give it one. If a new burst opened meanwhile, this write loses to it.
	tok := strings.Split(msg.Subject(), ".")
	if len(tok) < 4 {
		return nil
	}
	s := r.debounceSubjects(tok[len(tok)-3])
	// Read failing, the message is delivered again: its run, published again,
	// is the same message (by its id), and routed once.
	last, err := r.events.GetLastMsgForSubject(ctx, s.latest)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("reading the burst's latest trigger: %w", err)
	case last.Header.Get(headerDebounceAct) == act:
		return nil
	}
	return r.armTimer(ctx, s, name, &skill.Debounce{Period: skill.Duration(time.Second), Timeout: skill.Duration(time.Second)}, time.Now(), true)
}

// admitDebounce is admit's verdict on a debounced skill. The trigger is folded
// into the skill's burst for its key only if the skill would run at once: admit
// takes it and notes it in t.unfolded, and selectFor, seeing it in the plan's
// running skills, folds it (t.folds) and decides again, when admit refuses it.
// A skill only in a fallback chain, or cut by maxActive, is not folded. The
// burst's own run is not debounced: that is known by the subject it came on,
// which only routers may publish, and never by its source: any publisher can
// send a trigger from DebounceSource, and even read a burst's activation id
// from its latest, and so could run its own data past the debounce and have
// the burst's real run dropped as routed before.
func (t *trigger) admitDebounce(name string, c *compiledFlow, why string) (ok bool, _ string, decided bool) {
	if t.burstOf == name {
		return true, why, false
	}
	if f, ok := t.folds[name]; ok {
		w := f.String()
		if f.bt != nil {
			t.verdicts.batched = append(t.verdicts.batched, name+": "+w)
		} else {
			t.verdicts.debounced = append(t.verdicts.debounced, name+": "+w)
		}
		return false, joinWhy(why, w), true
	}
	if _, ok := t.unfolded[name]; ok {
		return true, why, false
	}
	f, key, field := folding{db: c.debounce, digest: c.digest}, c.dkey, "debounce"
	if c.batch != nil {
		f, key, field = folding{bt: c.batch, digest: c.digest}, c.bkey, "batch"
	}
	if key != nil {
		k, err := key.KeyOf(t.event())
		if err != nil {
			w := fmt.Sprintf("%s key error: %v (key: %s)", field, err, key)
			t.verdicts.failed = append(t.verdicts.failed, name+": "+w)
			return false, joinWhy(why, w), true
		}
		f.key = k
	}
	if t.offline {
		// Decided once, with no second decision to leave the skill out of:
		// shown as it would be folded if it ran.
		t.fold(name, f)
		return t.admitDebounce(name, c, why)
	}
	if t.unfolded == nil {
		t.unfolded = make(map[string]folding, 1)
	}
	t.unfolded[name] = f
	return true, why, false
}

func (t *trigger) fold(name string, f folding) {
	if t.folds == nil {
		t.folds = make(map[string]folding, 1)
	}
	t.folds[name] = f
}

// foldRunning folds the trigger into the bursts of the debounced skills d
// starts at once, and reports whether it folded any: d is then to be decided
// again, without them.
func (t *trigger) foldRunning(d *selector.Decision) bool {
	if len(t.unfolded) == 0 {
		return false
	}
	folded := false
	for _, name := range d.Running() {
		if f, ok := t.unfolded[name]; ok {
			delete(t.unfolded, name)
			t.fold(name, f)
			folded = true
		}
	}
	return folded
}

// String is the verdict on a trigger folded into a burst or added to a batch.
func (f folding) String() string {
	if f.bt != nil {
		return f.batchString()
	}
	w := "debounce " + f.db.String()
	if f.key != "" {
		w += fmt.Sprintf(" (key %q)", clip(f.key, 64))
	}
	return w + ": folded into one run with the last trigger's data"
}
