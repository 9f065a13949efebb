// Package bus is skillbus's one door to NATS JetStream: the streams, consumers and
// buckets skillbus uses created idempotently, CloudEvents written in structured
// content mode and read in structured or binary mode, pipelined publishing that
// waits for every acknowledgement before the caller acks its input, and a bounded
// consume loop.
//
// Every other package reaches the broker through a *Bus's named operations, which
// say what the caller does: Stream, Consumer, EnsureConsumer and OrderedConsumer
// (stream.go); KV, ObjectStore and EnsureObjectStore for buckets; Publish for a
// single persisted message, Batch for the pipelined publishes of a handler,
// PublishLive for what only live followers need; Request, Subscribe and AddService
// for micro services; Connected, Reconnects, WaitConnected and Reconnected for the
// connection's state (conn.go). Messages are read through the Msg interface — a
// jetstream.Msg is one as a consumer hands it over, MsgOf makes one of a message
// read back from a stream — by Decode, DecodeFast and DecisionOfJob, and by the
// trace helpers of package bustrace.
//
// Bus.NC and Bus.JS, the raw connection and JetStream context, are for this
// package and for tests; a test of internal/archtest fails when other code uses
// them. A component that speaks plain NATS by design takes Bus.Conn.
package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/skillbus/skillbus/events"
)

// Config configures the streams and buckets. The zero value is the default of a single
// server with file storage.
type Config struct {
	// Prefix of every subject and stream name; default "skillbus".
	Prefix string
	// Replicas of every stream and bucket; default 1 (use 3 on a cluster).
	Replicas int
	// Storage of every stream and bucket; default file.
	Storage jetstream.StorageType
	// DuplicateWindow is how long JetStream remembers Nats-Msg-Id to drop repeats;
	// default 2m.
	DuplicateWindow time.Duration
	// TriggerMaxAge, DeadMaxAge and EventsMaxAge bound how long triggers, dead letters
	// and events are kept; defaults 7 days, 30 days and 7 days. Events include each
	// execution's outcome and each activation's routing decision, so EventsMaxAge is
	// also how long a trigger published again with the same source and id is
	// answered with its first result instead of running again.
	//
	// These and JobsMaxAge, left zero, are the defaults for a stream Ensure creates;
	// a stream that exists keeps the retention it has, so that a process started
	// without them does not undo an operator's. Set, Ensure applies them.
	TriggerMaxAge, DeadMaxAge, EventsMaxAge time.Duration
	// JobsMaxAge is how long the JOBS stream keeps a job; default 7 days. A job is
	// kept after it ran because it is its activation's record: a trigger published
	// again with the same source and id within JobsMaxAge finds its job and starts
	// nothing new. A job still unrun after JobsMaxAge (a pool with no worker for
	// that long) is dropped.
	JobsMaxAge time.Duration
	// PublishAckTimeout is how long a pipelined publish (Batch) waits for its
	// acknowledgement before failing with jetstream.ErrAsyncPublishTimeout; default
	// 10s. A publish that reached a stream leader which then died is never answered:
	// without a bound its Wait would block for good, holding the handler and, through
	// its in-progress acks, the job. Publishing again with the same message id is safe.
	PublishAckTimeout time.Duration
}

func (c *Config) setDefaults() error {
	if c.Prefix == "" {
		c.Prefix = "skillbus"
	}
	if err := events.CheckToken("subject prefix", c.Prefix); err != nil {
		return err
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Replicas < 0 || c.Replicas > 5 {
		return fmt.Errorf("replicas must be between 1 and 5, got %d", c.Replicas)
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = 2 * time.Minute
	}
	if c.TriggerMaxAge == 0 {
		c.TriggerMaxAge = 7 * 24 * time.Hour
	}
	if c.DeadMaxAge == 0 {
		c.DeadMaxAge = 30 * 24 * time.Hour
	}
	if c.EventsMaxAge == 0 {
		c.EventsMaxAge = 7 * 24 * time.Hour
	}
	if c.JobsMaxAge == 0 {
		c.JobsMaxAge = 7 * 24 * time.Hour
	}
	for _, a := range []struct {
		name string
		d    time.Duration
	}{{"triggers", c.TriggerMaxAge}, {"dead letters", c.DeadMaxAge}, {"events", c.EventsMaxAge}, {"jobs", c.JobsMaxAge}} {
		// JetStream refuses a stream that forgets messages before their ids.
		if a.d < c.DuplicateWindow {
			return fmt.Errorf("the %s are kept %v, less than the duplicate window %v; keep them at least that long", a.name, a.d, c.DuplicateWindow)
		}
	}
	if c.PublishAckTimeout == 0 {
		c.PublishAckTimeout = 10 * time.Second
	}
	if c.PublishAckTimeout < 0 {
		return fmt.Errorf("publish ack timeout must be positive, got %v", c.PublishAckTimeout)
	}
	return nil
}

// Bus is a connection to NATS with the names of skillbus's streams and buckets,
// and the operations skillbus does on them.
type Bus struct {
	// NC and JS are the raw connection and JetStream context: for this package and
	// for tests only (see the package doc); everything else uses the bus's named
	// operations, or Conn.
	NC       *nats.Conn
	JS       jetstream.JetStream
	Subjects events.Subjects
	cfg      Config
	pipe     *pipeline // Batch's publishing
	// ageSet is, by stream name, whether its retention was given rather than
	// defaulted: see Config.TriggerMaxAge.
	ageSet map[string]bool
}

// maxPending bounds, twice over, the publishes awaiting their acknowledgement:
// those of the bus's pipeline (Batch's, see pipeline.go), and apart from them
// those of JetStream's PublishMsgAsync (a Batch's publishes with other options).
// So a bus holds at most twice maxPending unacknowledged; a publisher past either
// bound waits for room.
const maxPending = 16384

// New wraps an existing connection. It does not create anything: a service that
// owns the streams and buckets calls Ensure; a client of a running skillbus
// (pkg/client) needs nothing more.
func New(nc *nats.Conn, cfg Config) (*Bus, error) {
	if nc == nil {
		return nil, errors.New("bus: nil connection")
	}
	given := [4]bool{cfg.TriggerMaxAge != 0, cfg.JobsMaxAge != 0, cfg.DeadMaxAge != 0, cfg.EventsMaxAge != 0}
	if err := cfg.setDefaults(); err != nil {
		return nil, fmt.Errorf("bus: %w", err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(maxPending), jetstream.WithPublishAsyncTimeout(cfg.PublishAckTimeout))
	if err != nil {
		return nil, fmt.Errorf("bus: %w", err)
	}
	b := &Bus{NC: nc, JS: js, Subjects: events.Subjects{Prefix: cfg.Prefix}, cfg: cfg, pipe: newPipeline(nc, cfg.PublishAckTimeout, maxPending)}
	b.ageSet = map[string]bool{b.StreamTriggers(): given[0], b.StreamJobs(): given[1], b.StreamDead(): given[2], b.StreamEvents(): given[3]}
	return b, nil
}

// Config returns the configuration with defaults applied.
func (b *Bus) Config() Config { return b.cfg }

// Stream names.
func (b *Bus) StreamTriggers() string { return b.streamName("TRIGGERS") }
func (b *Bus) StreamJobs() string     { return b.streamName("JOBS") }
func (b *Bus) StreamRepair() string   { return b.streamName("REPAIR") }
func (b *Bus) StreamDead() string     { return b.streamName("DLQ") }
func (b *Bus) StreamEvents() string   { return b.streamName("EVENTS") }

func (b *Bus) streamName(s string) string {
	return strings.ToUpper(strings.ReplaceAll(b.cfg.Prefix, "-", "_")) + "_" + s
}

// Bucket names. With the default prefix they are skills, runs, stats, workers and
// cache; another prefix is prepended ("acme_skills") so two installations can
// share a server.
func (b *Bus) BucketSkills() string  { return b.bucketName("skills") }
func (b *Bus) BucketRuns() string    { return b.bucketName("runs") }
func (b *Bus) BucketStats() string   { return b.bucketName("stats") }
func (b *Bus) BucketWorkers() string { return b.bucketName("workers") }
func (b *Bus) BucketCache() string   { return b.bucketName("cache") }
func (b *Bus) BucketRepairs() string { return b.bucketName("repairs") }
func (b *Bus) BucketHooks() string   { return b.bucketName("hooks") }
func (b *Bus) BucketSchedules() string {
	return b.bucketName("schedules")
}
func (b *Bus) BucketRateLimits() string { return b.bucketName("ratelimits") }

func (b *Bus) bucketName(s string) string {
	if b.cfg.Prefix == "skillbus" {
		return s
	}
	return b.cfg.Prefix + "_" + s
}

// Streams returns the configuration of every stream.
func (b *Bus) Streams() []jetstream.StreamConfig {
	c, s := b.cfg, b.Subjects
	base := func(name, desc string, subjects ...string) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name:        name,
			Description: desc,
			Subjects:    subjects,
			Storage:     c.Storage,
			Replicas:    c.Replicas,
			Duplicates:  c.DuplicateWindow,
			Discard:     jetstream.DiscardOld,
		}
	}
	triggers := base(b.StreamTriggers(), "skillbus trigger events, kept so they can be re-routed", s.Triggers())
	triggers.MaxAge = c.TriggerMaxAge
	// Jobs are kept after they ran (limits retention, not a work queue): the jobs of
	// a plan are its activation's record (see events.Subjects.Exec). Each pool's
	// consumer filters its own subjects, so every job still goes to one worker.
	jobs := base(b.StreamJobs(), "skillbus jobs: one message per skill execution, kept as the activation's record", s.AllExec())
	jobs.MaxAge = c.JobsMaxAge
	repair := base(b.StreamRepair(), "skillbus repair jobs", s.AllRepair())
	repair.Retention = jetstream.WorkQueuePolicy
	dead := base(b.StreamDead(), "skillbus dead letters: jobs and triggers that could not run, with the reason", s.AllDead())
	dead.MaxAge = c.DeadMaxAge
	evs := base(b.StreamEvents(), "skillbus plans, progress and results", s.AllEvents())
	evs.MaxAge = c.EventsMaxAge
	// Confirmation timeouts are scheduled messages in EVENTS: a denial "by timeout"
	// that the server publishes when the deadline passes, purged if a human answers.
	evs.AllowMsgSchedules = true
	// No direct gets (AllowDirect, left false and set back if changed): a worker
	// reads a run's outcome and checkpoints before it runs it again, and a direct
	// get may be answered by a replica that has not caught up with the leader.
	return []jetstream.StreamConfig{triggers, jobs, repair, dead, evs}
}

// Buckets returns the configuration of every KV bucket.
func (b *Bus) Buckets() []jetstream.KeyValueConfig {
	c := b.cfg
	kv := func(name, desc string) jetstream.KeyValueConfig {
		return jetstream.KeyValueConfig{Bucket: name, Description: desc, Storage: c.Storage, Replicas: c.Replicas}
	}
	skills := kv(b.BucketSkills(), "skillbus catalog: one compiled skill per key")
	skills.History = 16
	runs := kv(b.BucketRuns(), "skillbus execution claims and paused executions")
	runs.TTL = 7 * 24 * time.Hour
	// Per-key TTLs: a paused skill's hold and its held jobs are written never to
	// expire (control.PutKept). Markers tell watchers of the keys that do expire.
	runs.LimitMarkerTTL = time.Minute
	stats := kv(b.BucketStats(), "skillbus terminal results per skill version: one key per worker process and minute")
	stats.TTL = 25 * time.Hour // a day of results for the routers' success rates, and some
	workers := kv(b.BucketWorkers(), "skillbus worker heartbeats")
	workers.TTL = 30 * time.Second
	cache := kv(b.BucketCache(), "skillbus cached step results")
	cache.LimitMarkerTTL = time.Minute
	repairs := kv(b.BucketRepairs(), "skillbus repairs: one record per skill version and fault, and the executions parked on it")
	repairs.TTL = 7 * 24 * time.Hour
	// One key per webhook body taken, each kept for its hook's replay window.
	hooks := kv(b.BucketHooks(), "skillbus webhook deliveries: one key per hook and body digest, kept for the hook's replay window")
	hooks.LimitMarkerTTL = time.Minute
	// The schedulers' lease and each scheduled skill's last tick (package
	// schedule); only routers write it. Delayed triggers, which senders write, are
	// in a bucket of their own (BucketDelayed, not among these: see DelayedStream).
	schedules := kv(b.BucketSchedules(), "skillbus schedules: the scheduler lease, each scheduled skill's last tick (and delayed triggers stored by earlier versions)")
	// The triggers each rate-limited skill took in its current windows, one key per
	// trigger, each expiring after its window (package router).
	ratelimits := kv(b.BucketRateLimits(), "skillbus rate limits: one key per trigger a rate-limited skill took, kept for its window")
	ratelimits.LimitMarkerTTL = time.Minute
	return []jetstream.KeyValueConfig{skills, runs, stats, workers, cache, repairs, hooks, schedules, ratelimits}
}

// NoJetStream adds to err, when JetStream did not answer (no responders) and the
// server this bus is connected to says it does not run JetStream, that it must:
// a nats-server started without -js answers nothing on the JetStream API, which
// reads like an outage. Other errors, and nil, are returned as they are.
func (b *Bus) NoJetStream(err error) error {
	if err == nil || !(errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled)) || b.NC == nil {
		return err
	}
	if !b.NoJetStreamThere() {
		return err
	}
	return fmt.Errorf("%w (the NATS server at %s does not run JetStream: start it with -js, or with jetstream {} in its configuration file)", err, b.NC.ConnectedUrlRedacted())
}

// NoJetStreamThere reports whether the server this bus is connected to says, in
// its INFO, that it does not run JetStream (false while disconnected).
func (b *Bus) NoJetStreamThere() bool {
	if b.NC == nil || !b.NC.IsConnected() {
		return false
	}
	on, _ := b.NC.ConnectedServerJetStream()
	return !on
}

// Ensure creates or updates every stream and bucket. It is idempotent and safe to run
// from every process at start.
func (b *Bus) Ensure(ctx context.Context) (err error) {
	defer func() { err = b.NoJetStream(err) }()
	for _, sc := range b.Streams() {
		if err := b.migrateJobs(ctx, sc); err != nil {
			return err
		}
		if set, ok := b.ageSet[sc.Name]; ok && !set {
			if err := b.ensureKeepingAge(ctx, sc); err != nil {
				return fmt.Errorf("bus: stream %s: %w", sc.Name, err)
			}
			continue
		}
		if _, err := b.JS.CreateOrUpdateStream(ctx, sc); err != nil {
			return fmt.Errorf("bus: stream %s: %w", sc.Name, err)
		}
	}
	for _, kc := range b.Buckets() {
		if _, err := b.JS.CreateOrUpdateKeyValue(ctx, kc); err != nil {
			return fmt.Errorf("bus: bucket %s: %w", kc.Bucket, err)
		}
	}
	if err := b.ensureDelayed(ctx); err != nil {
		return fmt.Errorf("bus: bucket %s: %w", b.BucketDelayed(), err)
	}
	return b.LearnRetention(ctx)
}

// ensureKeepingAge creates sc with its default retention if it does not exist, and
// otherwise updates it keeping the retention it has, and only if something else
// differs: a process started without a retention never writes one over another
// process's, even when both start at once (a create that finds the stream made in
// the meantime reads it again; an update that would change nothing is not sent).
func (b *Bus) ensureKeepingAge(ctx context.Context, sc jetstream.StreamConfig) error {
	for range 3 {
		st, err := b.JS.Stream(ctx, sc.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			_, err = b.JS.CreateStream(ctx, sc)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				continue // made by another process meanwhile: keep its retention
			}
			return err
		}
		if err != nil {
			return err
		}
		have := st.CachedInfo().Config
		sc.MaxAge = have.MaxAge
		if sameStream(have, sc) {
			return nil
		}
		_, err = b.JS.UpdateStream(ctx, sc)
		return err
	}
	return errors.New("created and deleted again while starting")
}

// sameStream reports whether have already is want in every field Streams sets.
func sameStream(have, want jetstream.StreamConfig) bool {
	return have.Description == want.Description && slices.Equal(have.Subjects, want.Subjects) &&
		have.Storage == want.Storage && have.Replicas == want.Replicas && have.Duplicates == want.Duplicates &&
		have.Discard == want.Discard && have.Retention == want.Retention && have.AllowMsgSchedules == want.AllowMsgSchedules &&
		have.MaxAge == want.MaxAge && have.AllowDirect == want.AllowDirect
}

// LearnRetention reads how long the streams really keep what they hold into the
// configuration (Config), which may differ from this process's own: a stream keeps
// the retention the process that set it gave. Ensure calls it; a process that does
// not ensure the streams calls it once they exist. Readers of Config (a
// confirmation's longest timeout is bounded by the events' retention) then see the
// streams' own.
func (b *Bus) LearnRetention(ctx context.Context) (err error) {
	defer func() { err = b.NoJetStream(err) }()
	for name, age := range map[string]*time.Duration{
		b.StreamTriggers(): &b.cfg.TriggerMaxAge, b.StreamJobs(): &b.cfg.JobsMaxAge,
		b.StreamDead(): &b.cfg.DeadMaxAge, b.StreamEvents(): &b.cfg.EventsMaxAge,
	} {
		st, err := b.JS.Stream(ctx, name)
		if err != nil {
			return fmt.Errorf("bus: stream %s: %w", name, err)
		}
		if d := st.CachedInfo().Config.MaxAge; d > 0 {
			*age = d
		}
	}
	return nil
}

// migrateJobs replaces a JOBS stream made by an earlier skillbus as a work queue,
// whose retention JetStream cannot change in place: an empty one is deleted (with
// its consumers, which workers create again), and one that still holds jobs is an
// error that says how to go on.
func (b *Bus) migrateJobs(ctx context.Context, sc jetstream.StreamConfig) error {
	if sc.Name != b.StreamJobs() {
		return nil
	}
	st, err := b.JS.Stream(ctx, sc.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bus: stream %s: %w", sc.Name, err)
	}
	info := st.CachedInfo()
	if info.Config.Retention != jetstream.WorkQueuePolicy {
		return nil
	}
	if info.State.Msgs > 0 {
		return fmt.Errorf("bus: stream %s is a work queue made by an earlier skillbus and still holds %d jobs; "+
			"let the old workers finish them (or move them elsewhere), then start again: the stream is replaced when empty", sc.Name, info.State.Msgs)
	}
	if err := b.JS.DeleteStream(ctx, sc.Name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("bus: replace the work-queue stream %s: %w", sc.Name, err)
	}
	return nil
}

// KV returns a bucket that Ensure created.
func (b *Bus) KV(ctx context.Context, bucket string) (jetstream.KeyValue, error) {
	kv, err := b.JS.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("bus: bucket %s: %w", bucket, err)
	}
	return kv, nil
}
