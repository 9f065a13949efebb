package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/repair"
	"github.com/skillbus/skillbus/pkg/repair/service"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/telemetry"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// Repair: the skill failed with a repairable fault that a repair may fix. The
// execution is parked (no worker holds it) until the repair of its skill version and
// fault ends; executions failing with the same fault wait for the same repair.
type Repair struct {
	Step  string
	Fault *failure.Fault
	Err   error
}

func (Repair) decision() {}

// maxRepairedRuns bounds how many repaired versions one execution runs on: as many
// as one fault's repair budget has attempts.
var maxRepairedRuns = repair.Budget{}.WithDefaults().MaxAttempts

// maxSeen bounds the values of a repair job's diagnosis.
const maxSeen = 4 << 10

// repairable says whether a failure becomes a Repair decision: the fleet repairs, the
// skill allows it, the error carries a fault, and the execution's earlier repairs of
// the same fault did not leave it failing the same way.
func (w *Worker) repairable(j *job, step string, err error) (Decision, bool) {
	if !w.cfg.Repair || j.skill == nil || failure.ClassOf(err) != failure.Repairable {
		return nil, false
	}
	f := failure.FaultOf(err)
	if f == nil || j.skill.Repair == skill.RepairOff {
		reason := "the error names no fault a repairer could act on"
		if f != nil {
			reason = "the skill says repair: off"
		}
		w.emit(j, events.TypeRepairSkipped, "", events.RepairProgress{ExecutionID: j.data.ExecutionID, Skill: j.skill.Name, Reason: reason})
		w.cfg.Metrics.Repair(context.Background(), j.skill.Name, telemetry.RepairSkipped)
		return nil, false
	}
	if f.Step == "" {
		f.Step = step
	}
	return Repair{Step: step, Fault: f, Err: err}, true
}

// repair parks the execution on the repair of its fault: it asks the repair
// service to park it (and to ask for the repair if nobody has yet). The job is
// acked once the request and repair.requested are persisted.
func (w *Worker) repair(ctx context.Context, j *job, d Repair) error {
	if err := w.ensureClaim(ctx, j); err != nil {
		return err
	}
	f := d.Fault
	bkey := repair.BudgetKey(j.skill.Name, f)
	if jr := j.data.Repair; jr != nil && jr.BudgetKey == bkey {
		// The repaired version failed with the same fault: no improvement.
		w.emit(j, events.TypeRepairNoImprovement, "", events.RepairProgress{
			RepairID: jr.ID, ExecutionID: j.data.ExecutionID, Skill: j.skill.Name, Attempt: jr.Attempts,
			Reason: "the repaired version fails with the same fault: " + d.Err.Error(),
		})
		w.cfg.Metrics.Repair(ctx, j.skill.Name, telemetry.RepairNoImprovement)
		return w.fail(ctx, j, d.Step, d.Err)
	}
	if jr := j.data.Repair; jr != nil && jr.Attempts >= maxRepairedRuns {
		// Repairs that undo each other (A→B→A) would park and release it for ever.
		reason := fmt.Sprintf("it ran on %d repaired versions already and failed on each; the limit is %d", jr.Attempts, maxRepairedRuns)
		w.emit(j, events.TypeRepairSkipped, "", events.RepairProgress{ExecutionID: j.data.ExecutionID, Skill: j.skill.Name, Reason: reason})
		w.cfg.Metrics.Repair(ctx, j.skill.Name, telemetry.RepairSkipped)
		return w.fail(ctx, j, d.Step, d.Err)
	}
	id := repair.Fingerprint(j.skill.Digest, f)
	fault := events.RepairFault{Kind: string(f.Kind), Name: f.Name, Have: f.Have, Value: f.Value, Field: f.Field, Step: f.Step, File: f.File, Line: f.Line}
	parked := service.Parked{
		ExecutionID: j.data.ExecutionID, RepairID: id, Step: d.Step, Class: string(failure.Repairable), Error: d.Err.Error(), Job: j.data,
		Meta:     map[string]string{events.ExtCorrelationID: j.meta.CorrelationID, events.ExtTraceParent: j.meta.TraceParent, events.ExtTraceState: j.meta.TraceState},
		ParkedAt: time.Now().UTC(),
	}
	diag := repair.Diagnosis{ID: id, Skill: j.skill.Name, Version: j.data.Skill.Version, Digest: j.skill.Digest, Fault: *f, Error: d.Err.Error(), Seen: seen(f)}
	// Another execution asked for this repair already: this one waits on it.
	waiting := false
	if kv, err := w.repairsKV(ctx); err == nil {
		_, _, err := service.Load(ctx, kv, id)
		waiting = err == nil
	}
	// The repair service parks it (only it writes KV repairs); acked once the
	// request and repair.requested are persisted.
	m := j.meta
	m.ExecutionID, m.CausationID = j.data.ExecutionID, j.msgID()
	subject := w.cfg.Bus.Subjects.RepairParked(j.skill.Name)
	_, span := telemetry.StartPublishMeta(ctx, telemetry.Message{Destination: subject, Template: w.cfg.Bus.Subjects.RepairParkedTemplate(), ID: id + ".park"},
		&m.TraceParent, &m.TraceState, telemetry.AttrSkillName.String(j.skill.Name), telemetry.AttrExecutionID.String(j.data.ExecutionID))
	service.Park(j.batch, w.cfg.Bus, w.cfg.Source, m, service.ParkRequest{Parked: parked, Diagnosis: diag})
	span.End()
	w.emit(j, events.TypeRepairRequested, "", events.RepairRequested{
		ExecutionID: j.data.ExecutionID, Skill: j.skill.Name, Version: j.data.Skill.Version, Digest: j.skill.Digest,
		RepairID: id, Fault: fault, Error: d.Err.Error(), Waiting: waiting,
	})
	if err := j.batch.Wait(ctx); err != nil {
		return err
	}
	w.cfg.Metrics.Repair(ctx, j.skill.Name, telemetry.RepairRequested)
	if rev, ok := j.claimRev(); ok {
		// The resumed job takes the claim path; don't make it wait for this lease.
		_ = w.runs.Delete(ctx, claimKey(j.data.ExecutionID), jetstream.LastRevision(rev))
	}
	w.cfg.Log.Info("worker: execution parked for repair", "execution", j.data.ExecutionID, "repair", id, "fault", f.Kind, "name", f.Name, "waiting", waiting)
	return j.msg.Ack()
}

// declined ends an execution whose repair did not come, as it would have ended
// without repair.
func (w *Worker) declined(ctx context.Context, j *job) error {
	jr := j.data.Repair
	err := failure.New(failure.Repairable, "%s (%s)", jr.Error, jr.Declined)
	return w.fail(ctx, j, jr.Step, err)
}

// reuse picks, for a job released on a repaired version, the loaded checkpoints the
// run may resume from: those the repaired version wrote itself (an earlier delivery
// of this job), and those of the steps before the failed one that the repair left
// alone (see repair.Reusable), which are then taken as the repaired version's. The
// rest are dropped, so those steps run again. Only such jobs pay for it — one
// lookup of the broken version, usually in the catalog's memory; every other job
// gets its checkpoints as they are, with no read or write more.
func (w *Worker) reuse(ctx context.Context, j *job, saved map[string]workflow.Checkpoint) map[string]workflow.Checkpoint {
	jr := j.data.Repair
	if jr == nil || jr.From == "" || jr.Declined != "" || j.skill == nil || jr.From == j.skill.Digest || len(saved) == 0 {
		return saved
	}
	var keep map[string]bool
	if broken, err := w.cfg.Catalog.LookupVersion(ctx, j.skill.Name, jr.From); err == nil {
		keep = repair.Reusable(broken, j.skill, jr.Step)
	} else {
		w.cfg.Log.Warn("worker: the version a repaired execution failed on is gone; its steps run again", "execution", j.data.ExecutionID, "err", err)
	}
	ref := checkpointRef(j.skill)
	out := make(map[string]workflow.Checkpoint, len(saved))
	reused := 0
	for id, cp := range saved {
		switch {
		case cp.Skill == ref:
			out[id] = cp
		case keep[id]:
			cp.Skill = ref
			out[id] = cp
			reused++
		}
	}
	w.cfg.Log.Info("worker: repaired execution resumes from the steps the repair left alone", "execution", j.data.ExecutionID, "repair", jr.ID, "reused", reused)
	return out
}

// checkpointRef is the skill version a checkpoint names, as the workflow engine
// writes it (name@digest prefix); the engine ignores every checkpoint of a run when
// one names another version.
func checkpointRef(s *skill.Skill) string {
	if len(s.Digest) >= 12 {
		return s.Name + "@" + s.Digest[:12]
	}
	return s.Ref()
}

// repaired names the repair an execution was released from, and the version it
// runs on, for its outcome; both empty for every other execution.
func (j *job) repaired() (id, digest string) {
	if j.data.Repair == nil {
		return "", ""
	}
	return j.data.Repair.ID, j.data.Skill.Digest
}

func (w *Worker) repairsKV(ctx context.Context) (jetstream.KeyValue, error) {
	w.repairsOnce.Do(func() {
		w.repairs, w.repairsErr = w.cfg.Bus.KV(ctx, w.cfg.Bus.BucketRepairs())
	})
	return w.repairs, w.repairsErr
}

// seen is what the failing step saw, for the diagnosis: the names around the fault,
// cut to size. Values themselves are left out: they may hold secrets.
func seen(f *failure.Fault) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"value": f.Value, "names": f.Have, "field": f.Field})
	if len(b) > maxSeen {
		have := f.Have
		for len(b) > maxSeen && len(have) > 1 {
			have = have[:len(have)/2]
			b, _ = json.Marshal(map[string]any{"value": f.Value, "names": have, "field": f.Field, "cut": true})
		}
	}
	return b
}
