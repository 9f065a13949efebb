package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/repair/service"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// maxRunEvents bounds the events one run page reads.
const maxRunEvents = 2000

type runView struct {
	ID      string
	Run     Run
	Indexed bool
	Trigger *triggerView
	Decided *events.RouteDecided
	// Flow are the flow-control verdicts of the decision (flowVerdicts).
	Flow      []string
	Inputs    string
	Events    []eventView
	Log       *workflow.Log
	Result    *run.Record
	Paused    *run.Paused
	Skill     string
	History   []events.Attempt
	Answers   []events.ConfirmationRecorded
	TraceID   string
	TraceURL  string
	Answered  string // approve | deny, after an answer given here
	Cancelled string // what a cancel given here did
	Repairs   []string
	// Repairing is set while the run is parked on a repair.
	Repairing *repairingView
}

type repairingView struct {
	Line     string // the one line every view of a parked run shows
	RepairID string
	Error    string
	Waiting  bool // a proposed patch waits for approval
}

type triggerView struct {
	events.TriggerRef
	Time time.Time
	Data string
}

type eventView struct {
	Time    time.Time
	Kind    string
	Summary string
	Data    string
	Failed  bool
}

func (c *Console) runPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := events.CheckToken("execution id", id); err != nil {
		c.renderCode(w, r, http.StatusBadRequest, "run", "Run", runView{ID: id})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.cfg.RequestTimeout)
	defer cancel()
	v, err := c.loadRun(ctx, id)
	if err != nil {
		c.cfg.Log.Error("console: load run", "execution", id, "err", err)
		http.Error(w, "reading run "+id+": "+err.Error(), http.StatusBadGateway)
		return
	}
	v.Answered = r.URL.Query().Get("answered")
	v.Cancelled = r.URL.Query().Get("cancelled")
	code := http.StatusOK
	if !v.Indexed && v.Result == nil && v.Paused == nil && v.Repairing == nil && len(v.Events) == 0 {
		code = http.StatusNotFound
	}
	c.renderCode(w, r, code, "run", "Run "+id, v)
}

func (c *Console) loadRun(ctx context.Context, id string) (*runView, error) {
	b := c.cfg.Bus
	v := &runView{ID: id}
	v.Run, v.Indexed = c.idx.Get(id)
	v.Skill = v.Run.Skill
	stream, err := b.Stream(ctx, b.StreamEvents())
	if err != nil {
		return nil, err
	}
	msgs, err := readEvents(ctx, b, b.Subjects.Events(id))
	if err != nil {
		return nil, err
	}
	scan := eventScan{activation: v.Run.ActivationID}
	for _, m := range msgs {
		v.addEvent(m, &scan)
	}
	if v.Result, err = run.Load(ctx, stream, b.Subjects, id); err != nil {
		return nil, err
	}
	if err := c.loadParked(ctx, v); err != nil {
		return nil, err
	}
	v.decodeLog()
	if err := c.loadDecision(ctx, v, scan.activation); err != nil {
		return nil, err
	}
	c.loadTrigger(ctx, v)
	v.setInputs(scan.started)
	if v.TraceID != "" && c.cfg.TraceURL != "" {
		v.TraceURL = strings.ReplaceAll(c.cfg.TraceURL, "{trace_id}", v.TraceID)
	}
	return v, nil
}

// eventScan carries what reading a run's events finds beyond the views
// themselves: the activation that decided the run and its start event.
type eventScan struct {
	activation string
	started    *events.ExecutionStarted
}

// addEvent appends the view of one stored event and takes from it what the
// page shows elsewhere: skill, trace, repairs, answers and retry history.
func (v *runView) addEvent(m storedMsg, scan *eventScan) {
	// Events are structured-mode CloudEvents; those of earlier versions, binary.
	typ, data, traceparent, at := m.Headers().Get(events.HeaderCEType), m.Data(), m.Headers().Get(events.HeaderCETraceParent), m.Headers().Get(events.HeaderCETime)
	if e, err := bus.DecodeFast(m.Msg); err == nil {
		typ, data, traceparent, at = e.Type, e.Data, e.Ext(events.ExtTraceParent), e.Time
	}
	ev := eventView{Time: m.time, Kind: events.Kind(typ), Data: prettyJSON(data)}
	// A scheduled message, written as the run parked, is shown at that time as
	// what it will be when it falls due, unless an answer or an event comes first.
	var due string
	switch events.TimerOf(m.Subject()) {
	case events.TimerConfirmation:
		ev.Kind, typ = "confirmation.timeout (scheduled)", ""
	case events.TimerWait:
		ev.Kind, typ = "wait.ended (scheduled)", ""
	}
	if typ == "" && at != "" {
		due = "due=" + at
	}
	var d map[string]any
	_ = json.Unmarshal(data, &d)
	ev.Summary = strings.TrimSpace(due + " " + summarize(d))
	ev.Failed = failedType(typ)
	v.noteFields(d, scan)
	if v.TraceID == "" {
		v.TraceID = traceID(traceparent)
	}
	switch typ {
	case events.TypeExecutionStarted:
		scan.started = &events.ExecutionStarted{}
		_ = json.Unmarshal(data, scan.started)
	case events.TypeConfirmationRecorded:
		var a events.ConfirmationRecorded
		if json.Unmarshal(data, &a) == nil {
			v.Answers = append(v.Answers, a)
		}
	case events.TypeExecutionFailed:
		var f events.ExecutionFailed
		if json.Unmarshal(data, &f) == nil {
			v.History = f.History
		}
	}
	v.Events = append(v.Events, ev)
}

// failedType reports whether events of type typ are shown as failures.
func failedType(typ string) bool {
	switch typ {
	case events.TypeExecutionFailed, events.TypeStepFailed, events.TypeExecutionFallback, events.TypeExecutionRetrying:
		return true
	}
	return false
}

// noteFields takes the activation, repairs and skill an event's data names,
// keeping the first activation and skill seen.
func (v *runView) noteFields(d map[string]any, scan *eventScan) {
	if s, ok := d["activation_id"].(string); ok && scan.activation == "" {
		scan.activation = s
	}
	if s, ok := d["repair_id"].(string); ok && s != "" {
		v.addRepair(s)
	}
	if s, ok := d["skill"].(string); ok && v.Skill == "" {
		v.Skill = s
	}
}

func (v *runView) addRepair(id string) {
	if !slices.Contains(v.Repairs, id) {
		v.Repairs = append(v.Repairs, id)
	}
}

// traceID returns the trace id of a W3C traceparent, or "" when tp is not one.
func traceID(tp string) string {
	if parts := strings.Split(tp, "-"); len(parts) == 4 {
		return parts[1]
	}
	return ""
}

// loadParked reads whether the run is paused and, when it has no result,
// whether it is parked on a repair.
func (c *Console) loadParked(ctx context.Context, v *runView) error {
	b := c.cfg.Bus
	if runs, err := b.KV(ctx, b.BucketRuns()); err == nil {
		if v.Paused, _, err = run.LoadPaused(ctx, runs, v.ID); err != nil {
			return err
		}
	}
	if v.Result != nil {
		return nil
	}
	repairs, err := b.KV(ctx, b.BucketRepairs())
	if err != nil {
		return nil
	}
	p, rec, err := service.FindParked(ctx, repairs, v.ID)
	if err != nil || p == nil {
		return err
	}
	v.Repairing = &repairingView{Line: service.Repairing(p, rec), RepairID: p.RepairID, Error: p.Error,
		Waiting: rec != nil && rec.Status == service.StatusProposed && !rec.Auto}
	if v.Skill == "" {
		v.Skill = p.Job.Skill.Name
	}
	v.addRepair(p.RepairID)
	return nil
}

// decodeLog decodes the step log of the run's result, or of its pause.
func (v *runView) decodeLog() {
	var logJSON json.RawMessage
	switch {
	case v.Result != nil:
		logJSON = v.Result.Log
	case v.Paused != nil:
		logJSON = v.Paused.Log
	}
	if len(logJSON) > 0 {
		var l workflow.Log
		if json.Unmarshal(logJSON, &l) == nil {
			v.Log = &l
		}
	}
}

// loadDecision puts the route decision of activation first among the events:
// its own event at the full events level, otherwise the route its plan's jobs
// carry. A run whose decision is not kept shows none.
func (c *Console) loadDecision(ctx context.Context, v *runView, activation string) error {
	if activation == "" {
		return nil
	}
	d, at, err := c.cfg.Bus.Decision(ctx, activation)
	if errors.Is(err, bus.ErrNoDecision) {
		return nil
	}
	if err != nil {
		return err
	}
	data, _ := json.Marshal(d)
	v.Decided = &d
	v.Flow = flowVerdicts(c.cfg.Bus.Subjects, &d)
	v.Events = append([]eventView{{Time: at, Kind: events.Kind(events.TypeRouteDecided),
		Summary: "primary=" + d.Plan.Primary.Name + " candidates=" + strconv.Itoa(len(d.Candidates)), Data: prettyJSON(data)}}, v.Events...)
	v.Trigger = &triggerView{TriggerRef: d.Trigger}
	return nil
}

// loadTrigger reads the trigger the decision names; one no longer stored is
// shown by reference only.
func (c *Console) loadTrigger(ctx context.Context, v *runView) {
	if v.Trigger == nil || v.Trigger.Seq == 0 {
		return
	}
	b := c.cfg.Bus
	ts, err := b.Stream(ctx, b.StreamTriggers())
	if err != nil {
		return
	}
	if m, err := ts.GetMsg(ctx, v.Trigger.Seq); err == nil {
		v.Trigger.Time, v.Trigger.Data = m.Time, prettyJSON(m.Data)
	}
}

// setInputs shows the inputs the run started with, or those of its paused job.
func (v *runView) setInputs(started *events.ExecutionStarted) {
	switch {
	case started != nil && len(started.Inputs) > 0:
		v.Inputs = prettyJSON(started.Inputs)
	case v.Paused != nil:
		var j events.Job
		if json.Unmarshal(v.Paused.Job, &j) == nil && len(j.Inputs) > 0 {
			v.Inputs = prettyJSON(j.Inputs)
		}
	}
}

type storedMsg struct {
	bus.Msg
	time time.Time
}

// readEvents reads the events on subject from the EVENTS stream, oldest first.
func readEvents(ctx context.Context, b *bus.Bus, subject string) ([]storedMsg, error) {
	cons, err := b.OrderedConsumer(ctx, b.StreamEvents(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, InactiveThreshold: 2 * time.Second})
	if err != nil {
		return nil, err
	}
	// Deleted as soon as it is read: left to its inactivity threshold (5 minutes),
	// every request, even for an id that does not exist, would hold a consumer.
	defer func() {
		if info := cons.CachedInfo(); info != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			_ = b.DeleteConsumer(dctx, b.StreamEvents(), info.Name)
		}
	}()
	var out []storedMsg
	for len(out) < maxRunEvents {
		batch, err := cons.FetchNoWait(200)
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			out = append(out, storedMsg{Msg: m, time: md.Timestamp})
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, err
		}
		if n == 0 {
			break
		}
	}
	return out, nil
}

// summarize picks the fields of an event that say what happened.
func summarize(d map[string]any) string {
	keys := []string{"repair_id", "step_id", "status", "tool", "by", "approved", "message", "next", "class", "error", "reason", "delay_ms", "attempt", "duration_ms"}
	var parts []string
	for _, k := range keys {
		if val, ok := d[k]; ok && val != "" && val != nil {
			s, _ := json.Marshal(val)
			str := strings.Trim(string(s), `"`)
			if len(str) > 200 {
				str = str[:200] + "…"
			}
			parts = append(parts, k+"="+str)
		}
	}
	return strings.Join(parts, " ")
}
