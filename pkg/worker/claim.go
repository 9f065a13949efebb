package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/run"
)

// Who runs an execution.
//
// JetStream hands a job to one worker at a time and counts its deliveries, and that
// is enough while the server keeps its consumer state. When nats-server is killed and
// restarts, the deliveries of its last moments can be forgotten: a job that a worker
// is still running comes back with NumDelivered == 1, to another worker. So the
// delivery count alone never decides that an execution is new.
//
// The fast path, taken by almost every job: the first delivery of a job that was
// stored after this worker's connection epoch began (the JOBS stream's last sequence
// when the worker started, or when its connection to the server was last
// re-established). Such a job cannot have been handed to anyone before a server
// restart, so it runs with no claim and no checkpoint to load: no write and no read
// beyond the job itself.
//
// Every other delivery (a redelivery, a resumed confirmation, a recovered job, or a
// first delivery of a job older than the epoch) takes the claim path: the execution's
// outcome is looked up first (it may have ended already), then the worker claims the
// execution in KV runs with a create-only write or a compare-and-set on an expired
// lease. A claim is a lease renewed with the job's heartbeats; another worker that
// finds a live lease hands the job back with a delay instead of running it. A worker
// whose renewal fails (someone else holds the execution now) stops its run.
//
// When a worker's connection comes back after a disconnect, it claims every
// execution it is running on the fast path at once, before the server could hand
// their jobs to someone else; a delivery of an unclaimed job arriving within
// ReclaimGrace of such a reconnect waits for those claims instead of racing them
// (after a restart the server may have kept the delivery count or forgotten it:
// either way it is no proof). A worker that finishes while the server is away keeps
// the finished work and publishes it when the server is back (see settle).

// claimKey is the runs key of an execution's claim.
func claimKey(executionID string) string { return events.RunClaimKey(executionID) }

// claimRecord is an execution's claim in KV runs.
type claimRecord struct {
	ExecutionID string `json:"execution_id"`
	Worker      string `json:"worker"`
	// Process names the worker process that wrote the claim, apart from its name:
	// a worker restarted under the same name (skillbus dev names its workers
	// <host>-dev-N) is another process, and finding its predecessor's claim is a
	// takeover, a crash counted against the crash allowance.
	Process    string    `json:"process,omitempty"`
	Delivery   string    `json:"delivery"`
	LeaseUntil time.Time `json:"lease_until"`
	// Takeovers counts the claims taken over after their holder's lease ran out:
	// workers that died running the execution. Hand-backs (waiting for another
	// holder, for a reconnect, for the server) are not counted, so only real
	// crash loops reach the crash allowance.
	Takeovers int `json:"takeovers,omitempty"`
	// Retries counts the runs of the execution that ended in a retryable failure;
	// the next run is attempt Retries+1. This is the attempt number's durable
	// record: JetStream's delivery count is not (a server restart can forget it, and
	// every hand-back raises it without a run).
	Retries int `json:"retries,omitempty"`
	// Released: the holder handed the execution back on purpose (for a retry, or to
	// wait for a confirmation) and its lease is over; the next claim is not a
	// takeover.
	Released bool `json:"released,omitempty"`
}

// errLostClaim means another worker holds the execution: this delivery must stop
// without publishing anything.
var errLostClaim = errors.New("another worker holds this execution")

// claim takes the claim path for j. It returns handled == true when it settled the
// delivery itself (the execution had ended, or someone else holds it); otherwise j
// holds the execution's claim and runs.
func (w *Worker) claim(ctx context.Context, j *job) (handled bool, err error) {
	out, err := run.Load(ctx, w.events, w.cfg.Bus.Subjects, j.data.ExecutionID)
	if err != nil {
		return false, err
	}
	if out != nil {
		return true, w.redrive(ctx, j, out)
	}
	key := claimKey(j.data.ExecutionID)
	e, err := w.runs.Get(ctx, key)
	j.attempt = 1 // unless the claim says how many runs failed retryably before
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		if wait := w.epoch.Young(w.cfg.ReclaimGrace); wait > 0 {
			// A worker that was running this job before the server restarted is
			// claiming its executions right now; give it the time to.
			return true, j.msg.NakWithDelay(wait)
		}
		rev, err := w.runs.Create(ctx, key, w.claimValue(j))
		if errors.Is(err, jetstream.ErrKeyExists) {
			return true, j.msg.NakWithDelay(w.cfg.Backoff.Base)
		}
		if err != nil {
			return false, err
		}
		j.setClaim(rev)
	case err != nil:
		return false, err
	default:
		var c claimRecord
		if err := json.Unmarshal(e.Value(), &c); err == nil && !w.wrote(c) && time.Now().Before(c.LeaseUntil) {
			w.cfg.Log.Info("worker: execution held by another worker; handed back", "execution", j.data.ExecutionID, "holder", c.Worker, "until", c.LeaseUntil)
			return true, j.msg.NakWithDelay(min(time.Until(c.LeaseUntil)+time.Second, w.cfg.AckWait))
		}
		if wait := w.epoch.Young(w.cfg.ReclaimGrace); err == nil && !w.wrote(c) && !c.Released && wait > 0 {
			// The lease ran out while the server was away; its holder may be alive
			// and renewing it now that it is back.
			return true, j.msg.NakWithDelay(wait)
		}
		if err == nil {
			j.attempt, j.retries, j.takeovers = uint64(c.Retries)+1, c.Retries, c.Takeovers
			if !w.wrote(c) && !c.Released {
				j.takeovers++
			}
		}
		rev, err := w.runs.Update(ctx, key, w.claimValue(j), e.Revision())
		if err != nil {
			if isWrongLastSequence(err) {
				return true, j.msg.NakWithDelay(w.cfg.Backoff.Base)
			}
			return false, err
		}
		j.setClaim(rev)
	}
	return false, nil
}

// upgrade claims an execution j runs on the fast path, because the connection was
// re-established while it ran. When someone else holds it, j's run is stopped.
// The reconnect watcher and the job's own settle may both upgrade it: one at a time,
// and a claim found already written by this very delivery (the first upgrade, or a
// create whose answer was lost with the connection) is the job's own.
func (w *Worker) upgrade(ctx context.Context, j *job) error {
	j.claim.upgrading.Lock()
	defer j.claim.upgrading.Unlock()
	if _, ok := j.claimRev(); ok {
		return nil
	}
	key := claimKey(j.data.ExecutionID)
	rev, err := w.runs.Create(ctx, key, w.claimValue(j))
	if errors.Is(err, jetstream.ErrKeyExists) {
		if rev, ok := w.ownClaim(ctx, j); ok {
			j.setClaim(rev)
			return nil
		}
		w.cfg.Log.Warn("worker: execution claimed by another worker after a reconnect; stopping this run", "execution", j.data.ExecutionID)
		j.lost()
		return errLostClaim
	}
	if err != nil {
		return fmt.Errorf("claim after reconnect: %w", err)
	}
	j.setClaim(rev)
	return nil
}

// release hands the execution back on purpose, before its job is naked for a retry
// (retries: the runs that have now failed retryably) or acked to wait for a
// confirmation: the claim records the retries and its lease ends, so the next
// delivery, on any worker, claims it at once without counting a takeover and runs
// attempt retries+1. A fast-path job that holds no claim writes one only to record a
// retry.
func (w *Worker) release(ctx context.Context, j *job, retries int) error {
	j.claim.upgrading.Lock()
	defer j.claim.upgrading.Unlock()
	j.claim.mu.Lock()
	j.retries, j.released = retries, true
	rev, held := j.claim.rev, j.claim.held
	j.claim.mu.Unlock()
	key, v := claimKey(j.data.ExecutionID), w.claimValue(j)
	var err error
	switch {
	case held:
		rev, err = w.runs.Update(ctx, key, v, rev)
	case retries > 0:
		rev, err = w.runs.Create(ctx, key, v)
	default:
		return nil
	}
	if isWrongLastSequence(err) {
		// Written already by this delivery (an answer lost with the connection), or
		// someone else's now.
		if own, ok := w.ownClaim(ctx, j); ok {
			rev, err = w.runs.Update(ctx, key, v, own)
		}
	}
	if isWrongLastSequence(err) {
		w.cfg.Log.Warn("worker: execution claimed by another worker before it was handed back", "execution", j.data.ExecutionID)
		j.lost()
		return errLostClaim
	}
	if err != nil {
		return fmt.Errorf("record the retry in the claim: %w", err)
	}
	j.setClaim(rev)
	return nil
}

// renew extends j's lease; a failed compare-and-set means another worker took the
// execution over, and j's run stops.
func (w *Worker) renew(ctx context.Context, j *job) {
	rev, ok := j.claimRev()
	if !ok {
		return
	}
	next, err := w.runs.Update(ctx, claimKey(j.data.ExecutionID), w.claimValue(j), rev)
	if err != nil {
		if isWrongLastSequence(err) {
			if own, ok := w.ownClaim(ctx, j); ok {
				// An earlier renewal was written but its answer lost.
				j.setClaim(own)
				return
			}
			w.cfg.Log.Warn("worker: lost the claim of a running execution; stopping it", "execution", j.data.ExecutionID)
			j.lost()
		}
		return
	}
	j.setClaim(next)
}

// ensureClaim is called before a fast-path job publishes what it caused: if the
// connection was re-established since the job started, the execution is claimed
// first, so a copy the server may have handed out meanwhile cannot also publish.
func (w *Worker) ensureClaim(ctx context.Context, j *job) error {
	if j.isLost() {
		return errLostClaim
	}
	if !j.fast || w.cfg.Bus.Reconnects() == j.reconnects {
		return nil
	}
	return w.upgrade(ctx, j)
}

// watchReconnects claims every fast-path execution in flight as soon as the
// connection is re-established, and renews the claims of the others (their leases
// may have run out while the server was away).
func (w *Worker) watchReconnects(ch <-chan nats.Status) {
	for range ch {
		w.epoch.Invalidate()
		for _, j := range w.inflight.all() {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), w.cfg.AckWait)
				defer cancel()
				if !j.fast {
					w.renew(ctx, j)
					return
				}
				if err := w.upgrade(ctx, j); err != nil && !errors.Is(err, errLostClaim) {
					w.cfg.Log.Warn("worker: could not claim a running execution after a reconnect", "execution", j.data.ExecutionID, "err", err)
				}
			}()
		}
	}
}

// ownClaim reads the execution's claim and returns its revision when this delivery
// of j wrote it.
func (w *Worker) ownClaim(ctx context.Context, j *job) (uint64, bool) {
	e, err := w.runs.Get(ctx, claimKey(j.data.ExecutionID))
	if err != nil {
		return 0, false
	}
	var c claimRecord
	if json.Unmarshal(e.Value(), &c) != nil || !w.wrote(c) || c.Delivery != j.deliveryID() {
		return 0, false
	}
	return e.Revision(), true
}

func (w *Worker) claimValue(j *job) []byte {
	j.claim.mu.Lock()
	c := claimRecord{ExecutionID: j.data.ExecutionID, Worker: w.cfg.Name, Process: w.instance, Delivery: j.deliveryID(),
		LeaseUntil: time.Now().Add(w.leaseFor(j)), Takeovers: j.takeovers, Retries: j.retries, Released: j.released}
	j.claim.mu.Unlock()
	if c.Released {
		c.LeaseUntil = time.Now()
	}
	b, _ := json.Marshal(c)
	return b
}

// wrote reports whether this worker process wrote claim c.
func (w *Worker) wrote(c claimRecord) bool {
	return c.Worker == w.cfg.Name && c.Process == w.instance
}

// leaseFor is how long a claim holds without renewal: as long as JetStream waits
// for the job's ack, so a dead holder's lease ends when its job comes back.
func (w *Worker) leaseFor(*job) time.Duration { return w.cfg.AckWait }

// mayHaveWaited reports whether the delivery being handled, of a job stored at
// stored, may have waited in this process's client buffer for more than a
// quarter of AckWait before a handler got it. Its ack wait ran on all the while,
// unextended, so the server may have delivered it again to another worker, which
// runs it through the claim path; on the fast path, which writes no claim, both
// would run it. Such a delivery takes the claim path too.
//
// The wait is bounded twice: by bus.Waited (how long the loop took to hand out
// as many messages as it can hold), which is small while jobs flow but grows
// while the handlers are all busy, or idle; and by the job's age, since it
// cannot have arrived before it was stored (this assumes the worker's clock is
// within a quarter of AckWait of the server's). Only a job both old and handed
// out slowly takes the claim path: one that waited behind long runs. A quarter
// leaves the job's first heartbeat, AckWait/3 after it starts, well within its
// ack wait, with room for the work before it (the tools it needs).
func (w *Worker) mayHaveWaited(ctx context.Context, stored time.Time) bool {
	waited, ok := bus.Waited(ctx)
	if !ok {
		return false
	}
	if age := time.Since(stored); age < waited {
		waited = age
	}
	return waited > w.cfg.AckWait/4
}

func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
	}
	return errors.Is(err, jetstream.ErrKeyExists)
}

// claim state of a job, shared by its handler, its heartbeat and the reconnect
// watcher.
type claimState struct {
	upgrading sync.Mutex // one upgrade at a time
	mu        sync.Mutex
	rev       uint64
	held      bool
	gone      bool
	finished  bool         // the run has returned its decision: what is left is to settle it
	run       *runDeadline // the run's context, once it runs: cancelled when the claim is lost
}

func (j *job) setClaim(rev uint64) {
	j.claim.mu.Lock()
	j.claim.rev, j.claim.held = rev, true
	j.claim.mu.Unlock()
}

func (j *job) claimRev() (uint64, bool) {
	j.claim.mu.Lock()
	defer j.claim.mu.Unlock()
	return j.claim.rev, j.claim.held
}

func (j *job) lost() {
	j.claim.mu.Lock()
	j.claim.gone = true
	run := j.claim.run
	j.claim.mu.Unlock()
	if run != nil {
		run.cancel()
	}
}

// loseSlot stops j's run, as lost does, for a concurrency slot another run may
// hold now, and reports true; unless the run has already returned its decision:
// then there is nothing left to stop, only what it caused to publish, and
// stopping it would run its steps again (its job handed back), so it reports false.
func (j *job) loseSlot() bool {
	j.claim.mu.Lock()
	if j.claim.finished {
		j.claim.mu.Unlock()
		return false
	}
	j.claim.mu.Unlock()
	j.lost()
	return true
}

// finish records that j's run has returned its decision (see loseSlot).
func (j *job) finish() {
	j.claim.mu.Lock()
	j.claim.finished = true
	j.claim.mu.Unlock()
}

func (j *job) isLost() bool {
	j.claim.mu.Lock()
	defer j.claim.mu.Unlock()
	return j.claim.gone
}
