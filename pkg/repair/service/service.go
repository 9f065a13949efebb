package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/bus/bustrace"
	"github.com/skillbus/skillbus/pkg/repair"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// VersionLookup finds a skill at a version; *catalog.Catalog implements it.
type VersionLookup interface {
	LookupVersion(ctx context.Context, name, digest string) (*skill.Skill, error)
}

// FileReader reads a skill version's files; *catalog.Files implements it.
type FileReader interface {
	ReadFile(ctx context.Context, s *skill.Skill, name string) ([]byte, error)
}

// Publisher publishes an approved patch as a new version of a skill whose
// provenance names the repair, and returns the new version's digest and version.
// It fails when the skill's current version is no longer base.
type Publisher interface {
	PublishRepair(ctx context.Context, name, base string, files repair.Files, repairID string) (digest, version string, err error)
}

// Config configures a Service.
type Config struct {
	// Bus, Catalog, Files and Publisher are required.
	Bus       *bus.Bus
	Catalog   VersionLookup
	Files     FileReader
	Publisher Publisher
	// Validate checks a patched skill as the registry would; required (the
	// registry's Validate, see registry.RepairValidator).
	Validate repair.Validator
	// Repairers are tried in order; default repair.Deterministic(), then Chat when
	// set.
	Repairers []repair.Repairer
	// Chat, when set, is the chat-model repairer tried after the deterministic ones.
	Chat *repair.Chat
	// Budget of each skill and fault; defaults as documented on repair.Budget.
	Budget repair.Budget
	// Auto applies every proposed patch without waiting for approval, as if every
	// skill said repair: auto.
	Auto bool
	// Expiry is how long a proposed patch waits for approval before it expires (and
	// its executions fail as they would have without repair); default 1h.
	Expiry time.Duration
	// SweepInterval is how often proposals are checked for expiry; default 30s.
	SweepInterval time.Duration
	// Concurrency is how many repair jobs run at once; default 4.
	Concurrency int
	// AckWait is how long a repair job may run before JetStream hands it to another
	// repair worker; running jobs send InProgress within it. Default 2m.
	AckWait time.Duration
	// Metrics, when set, counts the repairs that end (outcome succeeded or failed).
	Metrics *telemetry.Metrics
	// Log receives the service's logs; default slog.Default().
	Log *slog.Logger
	// Source is the CloudEvents source of what the service publishes; default
	// "/skillbus/repair".
	Source string
}

// Service is a repair worker.
type Service struct {
	cfg    Config
	kv     jetstream.KeyValue
	loop   *bus.Loop
	stop   chan struct{}
	sweeps sync.WaitGroup
}

// New checks cfg.
func New(cfg Config) (*Service, error) {
	if cfg.Bus == nil || cfg.Catalog == nil || cfg.Files == nil || cfg.Publisher == nil || cfg.Validate == nil {
		return nil, errors.New("repair service: Bus, Catalog, Files, Publisher and Validate are required")
	}
	if cfg.Repairers == nil {
		cfg.Repairers = repair.Deterministic()
	}
	if cfg.Chat != nil {
		cfg.Repairers = append(cfg.Repairers, cfg.Chat)
	}
	cfg.Budget = cfg.Budget.WithDefaults()
	if cfg.Expiry == 0 {
		cfg.Expiry = time.Hour
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = 30 * time.Second
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 4
	}
	if cfg.AckWait == 0 {
		cfg.AckWait = 2 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Source == "" {
		cfg.Source = "/skillbus/repair"
	}
	return &Service{cfg: cfg}, nil
}

// ConsumerConfig is the durable consumer every repair worker shares.
func (s *Service) ConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       "repair",
		Description:   "skillbus repair workers",
		FilterSubject: s.cfg.Bus.Subjects.Repair(">"),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.cfg.AckWait,
		// No delivery limit: a job whose writes fail (a full store, a lost leader)
		// comes back with backoff until it is applied. What the job itself decides —
		// an unreadable job, a skill that is gone — is recorded or terminated, never
		// retried.
		MaxDeliver: -1,
	}
}

// Start creates or updates the consumer and starts repairing.
func (s *Service) Start(ctx context.Context) error {
	b := s.cfg.Bus
	var err error
	if s.kv, err = b.KV(ctx, b.BucketRepairs()); err != nil {
		return fmt.Errorf("repair service: %w", err)
	}
	c, err := b.EnsureConsumer(ctx, b.StreamRepair(), s.ConsumerConfig())
	if err != nil {
		return fmt.Errorf("repair service: consumer: %w", err)
	}
	if s.loop, err = bus.Consume(c, s.cfg.Concurrency, s.handle, s.cfg.Log); err != nil {
		return fmt.Errorf("repair service: %w", err)
	}
	s.stop = make(chan struct{})
	s.sweeps.Go(s.sweep)
	return nil
}

// Stop stops taking repair jobs and waits for those in hand until ctx ends.
func (s *Service) Stop(ctx context.Context) {
	if s.stop != nil {
		close(s.stop)
		s.sweeps.Wait()
		s.stop = nil
	}
	if s.loop != nil {
		s.loop.Stop(ctx)
		s.loop = nil
	}
}

func (s *Service) handle(ctx context.Context, msg jetstream.Msg) {
	// A repair job continues the failed execution's trace; a decision, its decider's.
	sctx, span := bustrace.StartConsume(ctx, msg, s.ConsumerConfig().Durable, nil)
	err := s.process(sctx, bustrace.Settling(sctx, msg, ""))
	telemetry.End(span, err)
	if err == nil {
		return
	}
	if ctx.Err() != nil {
		_ = msg.Nak()
		return
	}
	var n uint64 = 1
	if md, _ := msg.Metadata(); md != nil {
		n = md.NumDelivered
	}
	delay := retryDelay(n)
	lvl := slog.LevelWarn
	if n >= 3 {
		lvl = slog.LevelError
	}
	s.cfg.Log.Log(ctx, lvl, "repair service: repair job handed back; will retry", "subject", msg.Subject(), "deliveries", n, "retry_in", delay, "err", err)
	_ = msg.NakWithDelay(delay)
}

// retryDelay is the wait before a repair job's next delivery after n failed ones:
// one second, doubling, at most 30 seconds.
func retryDelay(n uint64) time.Duration {
	const base, most = time.Second, 30 * time.Second
	d := base
	for i := uint64(1); i < n && d < most; i++ {
		d *= 2
	}
	return min(d, most)
}

func (s *Service) process(ctx context.Context, msg jetstream.Msg) error {
	e, err := bus.Decode(msg)
	if err != nil {
		s.cfg.Log.Error("repair service: unreadable repair job terminated", "subject", msg.Subject(), "err", err)
		return msg.TermWithReason("unreadable repair job")
	}
	switch e.Type() {
	case events.TypeRepairRequested:
		if s.cfg.Bus.Subjects.IsRepairParked(msg.Subject()) {
			if refused, err := s.park(ctx, msg, e.Data()); err != nil {
				return err
			} else if refused != "" {
				return msg.TermWithReason(refused)
			}
			break
		}
		var d repair.Diagnosis
		if err := json.Unmarshal(e.Data(), &d); err != nil || d.ID == "" {
			return msg.TermWithReason("unreadable diagnosis")
		}
		if err := s.diagnose(ctx, msg, &d); err != nil {
			return err
		}
	case events.TypeRepairDecided:
		var d events.RepairDecided
		if err := json.Unmarshal(e.Data(), &d); err != nil || d.RepairID == "" {
			return msg.TermWithReason("unreadable decision")
		}
		if err := s.decide(ctx, &d); err != nil {
			return err
		}
	default:
		return msg.TermWithReason("not a repair job: " + e.Type())
	}
	return msg.Ack()
}

// diagnose proposes a patch for a requested repair. A record past requested was
// handled by an earlier delivery (a repair worker that died after proposing): it is
// not proposed twice.
func (s *Service) diagnose(ctx context.Context, msg jetstream.Msg, d *repair.Diagnosis) error {
	rec, _, err := Load(ctx, s.kv, d.ID)
	if err != nil {
		return err
	}
	// What the service recorded, not what the message says.
	d = &rec.Diagnosis
	switch rec.Status {
	case StatusRequested:
	case StatusProposed:
		return s.announce(ctx, rec) // an earlier delivery proposed it and may have died before announcing
	default:
		if Final(rec.Status) {
			return s.release(ctx, rec) // an earlier delivery may have died releasing
		}
		return nil
	}
	sk, err := s.cfg.Catalog.LookupVersion(ctx, d.Skill, d.Digest)
	if err != nil {
		return s.end(ctx, d.ID, StatusFailed, "", "the skill version is gone: "+err.Error())
	}
	files, err := s.files(ctx, sk)
	if err != nil {
		return s.end(ctx, d.ID, StatusFailed, "", "the skill's files cannot be read: "+err.Error())
	}
	spentBefore, _ := spent(ctx, s.kv, rec.BudgetKey)
	stop := s.keepAlive(msg)
	patch, tried, perr := repair.Propose(ctx, d, files, s.cfg.Repairers, s.cfg.Validate, s.cfg.Budget, spentBefore)
	stop()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	n := len(tried)
	if patch != nil {
		n++
	}
	if n > 0 {
		if err := spend(ctx, s.kv, rec.BudgetKey, n); err != nil {
			return err
		}
	}
	b := s.cfg.Bus.Batch()
	for i, a := range tried {
		s.event(b, d.ID, events.TypeRepairAttempted, fmt.Sprint(i+1), events.RepairProgress{RepairID: d.ID, Skill: d.Skill, Attempt: spentBefore + i + 1, By: a.By, Reason: a.Error})
	}
	if patch == nil {
		if err := b.Wait(ctx); err != nil {
			return err
		}
		reason := "no repairer has a patch for this fault"
		if errors.Is(perr, repair.ErrOverBudget) {
			reason = perr.Error()
		} else if len(tried) > 0 {
			reason = "no patch passed: " + tried[len(tried)-1].Error
		}
		return s.end(ctx, d.ID, StatusFailed, "", reason)
	}
	auto := s.cfg.Auto || rec.Auto
	if auto {
		held, err := s.holds(ctx, d, files, patch)
		if err != nil {
			return err
		}
		if len(held) > 0 {
			auto = false
			patch.Summary += " (waits for approval although repair is automatic: " + strings.Join(held, "; ") + ")"
			s.cfg.Log.Warn("repair service: automatic repair held for approval", "repair", d.ID, "skill", d.Skill, "why", held)
		}
	}
	expires := time.Now().Add(s.cfg.Expiry).UTC()
	if err := b.Wait(ctx); err != nil {
		return err
	}
	rec, _, err = update(ctx, s.kv, d.ID, func(r *Record) bool {
		if r.Status != StatusRequested {
			return false
		}
		r.Status, r.Patch, r.Attempts, r.ExpiresAt, r.Auto, r.Spent = StatusProposed, patch, tried, expires, auto, spentBefore
		return true
	})
	if err != nil {
		return err
	}
	s.cfg.Log.Info("repair service: patch proposed", "repair", d.ID, "skill", d.Skill, "by", patch.By, "auto", auto)
	return s.announce(ctx, rec)
}

// holds returns why an automatic patch may not apply by itself: it changes what
// the skill may do rather than what it does (repair.Guarded), or it writes names new
// to the skill that the sender of a parked execution's trigger chose (its inputs,
// its source and type, the events its waits matched, and what the skill could
// decode from them; see senders and repair.Chosen). Both are what a prompt in the trigger's data could steer a
// repairer to write.
func (s *Service) holds(ctx context.Context, d *repair.Diagnosis, files repair.Files, patch *repair.Patch) ([]string, error) {
	var why []string
	if g := repair.Guarded(d.Skill, files, patch.Files); len(g) > 0 {
		why = append(why, "it changes "+strings.Join(g, ", ")+", which only a person may change")
	}
	parked, err := ParkedOn(ctx, s.kv, d.ID)
	if err != nil {
		return nil, err
	}
	var chosen repair.Chosen
	for _, p := range parked {
		senders(&p.Job, chosen.AddData, chosen.AddText)
	}
	if names := patch.Held(d, &chosen); len(names) > 0 {
		why = append(why, "it writes "+strings.Join(names, ", ")+", new to the skill and taken from the trigger's data")
	}
	return why, nil
}

// senders hands what the senders of events chose of a job to data and text: its
// inputs (the trigger's data) and its trigger's id, source, type and subject, and
// each answer it carries — a wait_for_event's matched event's data, which whoever
// may publish that type chose, and a confirmation's who and why.
func senders(j *events.Job, data func([]byte), text func(string)) {
	data(j.Inputs)
	for _, t := range []string{j.Trigger.ID, j.Trigger.Source, j.Trigger.Type, j.Trigger.Subject} {
		text(t)
	}
	for _, a := range j.Answers {
		data(a.Data)
		text(a.By)
		text(a.Reason)
	}
}

// announce publishes a proposal and, for an automatic repair, its approval. A
// redelivered repair job announces again: the message ids are the same.
func (s *Service) announce(ctx context.Context, rec *Record) error {
	if rec.Patch == nil {
		return nil
	}
	p := rec.Patch
	attempt := rec.Spent + len(rec.Attempts) + 1
	b := s.cfg.Bus.Batch()
	s.event(b, rec.ID, events.TypeRepairAttempted, fmt.Sprint(len(rec.Attempts)+1), events.RepairProgress{RepairID: rec.ID, Skill: rec.Skill, Attempt: attempt, By: p.By})
	s.event(b, rec.ID, events.TypeRepairProposed, "", events.RepairProposed{
		RepairID: rec.ID, Skill: rec.Skill, Digest: rec.Diagnosis.Digest, Diff: p.Diff, By: p.By, Summary: p.Summary,
		Files: p.Stats.Files, Hunks: p.Stats.Hunks, Attempt: attempt, Auto: rec.Auto, ExpiresAt: rec.ExpiresAt,
	})
	if rec.Auto {
		s.decision(b, rec.Skill, events.RepairDecided{RepairID: rec.ID, Skill: rec.Skill, Approved: true, By: "auto"})
	}
	return b.Wait(ctx)
}

// decide acts on an approval or rejection of a proposed repair.
func (s *Service) decide(ctx context.Context, d *events.RepairDecided) error {
	rec, _, err := Load(ctx, s.kv, d.RepairID)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	switch {
	case Final(rec.Status):
		return s.release(ctx, rec) // a redelivery: finish releasing
	case rec.Status != StatusProposed && rec.Status != StatusApproved:
		return nil
	case !d.Approved:
		status := StatusRejected
		if d.By == "timeout" {
			status = StatusExpired
		}
		return s.end(ctx, rec.ID, status, d.By, d.Reason)
	}
	if _, _, err := update(ctx, s.kv, rec.ID, func(r *Record) bool {
		if r.Status != StatusProposed {
			return false
		}
		r.Status, r.Decided = StatusApproved, d.By
		return true
	}); err != nil {
		return err
	}
	// Publishing is idempotent for the same files: a repair worker that died after
	// it finds the same version the second time.
	files, err := s.patched(ctx, rec)
	if err != nil {
		return s.end(ctx, rec.ID, StatusFailed, d.By, err.Error())
	}
	digest, version, err := s.cfg.Publisher.PublishRepair(ctx, rec.Skill, rec.Diagnosis.Digest, files, rec.ID)
	if err != nil {
		return s.end(ctx, rec.ID, StatusFailed, d.By, "publishing the repaired version failed: "+err.Error())
	}
	rec, changed, err := update(ctx, s.kv, rec.ID, func(r *Record) bool {
		if r.Status != StatusApproved {
			return false
		}
		r.Status, r.NewDigest, r.NewVersion = StatusApplied, digest, version
		return true
	})
	if err != nil {
		return err
	}
	if changed {
		s.cfg.Metrics.Repair(ctx, rec.Skill, telemetry.RepairSucceeded)
	}
	return s.release(ctx, rec)
}

// patched applies a record's patch to its skill version's files again.
func (s *Service) patched(ctx context.Context, rec *Record) (repair.Files, error) {
	if rec.Patch == nil {
		return nil, errors.New("the record has no patch")
	}
	sk, err := s.cfg.Catalog.LookupVersion(ctx, rec.Skill, rec.Diagnosis.Digest)
	if err != nil {
		return nil, fmt.Errorf("the skill version is gone: %w", err)
	}
	files, err := s.files(ctx, sk)
	if err != nil {
		return nil, err
	}
	out, _, err := repair.Apply(files, rec.Patch.Diff)
	return out, err
}

// end gives a repair a final status other than applied and releases its executions.
func (s *Service) end(ctx context.Context, id, status, by, reason string) error {
	rec, changed, err := update(ctx, s.kv, id, func(r *Record) bool {
		if Final(r.Status) {
			return false
		}
		r.Status, r.Decided, r.Reason = status, by, reason
		return true
	})
	if err != nil {
		return err
	}
	if changed {
		s.cfg.Metrics.Repair(ctx, rec.Skill, telemetry.RepairFailed)
	}
	return s.release(ctx, rec)
}

// release publishes the final event of a repair and the jobs of its parked
// executions.
func (s *Service) release(ctx context.Context, rec *Record) error {
	parked, err := ParkedOn(ctx, s.kv, rec.ID)
	if err != nil {
		return err
	}
	b := s.cfg.Bus.Batch()
	if rec.Status == StatusApplied {
		s.event(b, rec.ID, events.TypeRepairSucceeded, "", events.RepairProgress{RepairID: rec.ID, Skill: rec.Skill, Digest: rec.NewDigest, Version: rec.NewVersion, Executions: len(parked), By: rec.Decided})
	} else {
		s.event(b, rec.ID, events.TypeRepairFailed, "", events.RepairProgress{RepairID: rec.ID, Skill: rec.Skill, Executions: len(parked), By: rec.Decided, Reason: rec.Status + ": " + rec.Reason})
	}
	if err := b.Wait(ctx); err != nil {
		return err
	}
	for _, p := range parked {
		if err := Release(ctx, s.cfg.Bus, s.kv, s.cfg.Source, rec, p); err != nil {
			return err
		}
	}
	s.cfg.Log.Info("repair service: repair ended", "repair", rec.ID, "skill", rec.Skill, "status", rec.Status, "executions", len(parked))
	return nil
}

// sweep expires proposals nobody answered in time.
func (s *Service) sweep() {
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.SweepInterval)
		recs, err := List(ctx, s.kv)
		for _, r := range recs {
			if err == nil && r.Status == StatusProposed && !r.ExpiresAt.IsZero() && time.Now().After(r.ExpiresAt) {
				b := s.cfg.Bus.Batch()
				s.decision(b, r.Skill, events.RepairDecided{RepairID: r.ID, Skill: r.Skill, By: "timeout", Reason: "no answer by " + r.ExpiresAt.Format(time.RFC3339)})
				if err := b.Wait(ctx); err != nil {
					s.cfg.Log.Warn("repair service: could not expire a proposal", "repair", r.ID, "err", err)
				}
			}
		}
		cancel()
	}
}

// files reads every file of a skill version that a patch may change (text files).
func (s *Service) files(ctx context.Context, sk *skill.Skill) (repair.Files, error) {
	out := repair.Files{}
	var names []string
	if sk.Source != "" {
		names = append(names, filepath.Base(sk.Source))
	}
	if sk.Workflow != nil && sk.Workflow.Source != "" && filepath.Base(sk.Workflow.Source) != filepath.Base(sk.Source) {
		names = append(names, filepath.Base(sk.Workflow.Source))
	}
	for _, r := range sk.Resources {
		names = append(names, r.Path)
	}
	for _, n := range names {
		b, err := s.cfg.Files.ReadFile(ctx, sk, n)
		if err != nil {
			return nil, err
		}
		if utf8.Valid(b) {
			out[n] = string(b)
		}
	}
	return out, nil
}

func (s *Service) keepAlive(msg jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(s.cfg.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				_ = msg.InProgress()
			case <-done:
				return
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// event queues an event of a repair on its events subject.
func (s *Service) event(b *bus.Batch, id, typ, tag string, data any) {
	mid := id + "." + events.Kind(typ)
	if tag != "" {
		mid += "." + tag
	}
	b.PublishEvent(s.cfg.Bus.Subjects.Event(id, typ), bus.Event{ID: mid, Source: s.cfg.Source, Type: typ, Meta: bus.Meta{CorrelationID: id}, Data: data})
}

// decision queues a decision on the repair stream.
func (s *Service) decision(b *bus.Batch, skillName string, d events.RepairDecided) {
	publishDecision(b, s.cfg.Bus, s.cfg.Source, skillName, d)
}

func publishDecision(b *bus.Batch, bs *bus.Bus, source, skillName string, d events.RepairDecided) {
	id := d.RepairID + ".decided"
	b.PublishEvent(bs.Subjects.RepairDecided(skillName), bus.Event{ID: id, Source: source, Type: events.TypeRepairDecided, Meta: bus.Meta{CorrelationID: d.RepairID}, Data: d})
}
