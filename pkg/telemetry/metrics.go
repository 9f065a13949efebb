package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// Metric names, as OpenTelemetry names them; Prometheus shows them with dots as
// underscores, the unit as a suffix (_seconds) and counters ending in _total.
const (
	MetricExecutions        = "skillbus.executions"
	MetricExecutionDuration = "skillbus.execution.duration"
	MetricStepDuration      = "skillbus.step.duration"
	MetricRetries           = "skillbus.retries"
	MetricFallbacks         = "skillbus.fallbacks"
	MetricDeadLetters       = "skillbus.dead_letters"
	MetricRepairs           = "skillbus.repairs"
	MetricRouteDecisions    = "skillbus.route.decisions"
	MetricRouteDuration     = "skillbus.route.duration"
	MetricConsumerPending   = "skillbus.consumer.pending"
	MetricConsumerAckPend   = "skillbus.consumer.ack_pending"
)

// Outcomes in the skillbus.outcome attribute.
const (
	OutcomeCompleted = "completed"
	OutcomeFailed    = "failed"
	OutcomeRouted    = "routed"
	OutcomeUnmatched = "unmatched"
	OutcomeRejected  = "rejected"
)

// durationBuckets spans a quick tool call to a long model conversation, in seconds.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// Metrics holds skillbus's instruments. A nil *Metrics records nothing, so a
// component may take one optionally.
type Metrics struct {
	meter             metric.Meter
	executions        metric.Int64Counter
	executionDuration metric.Float64Histogram
	stepDuration      metric.Float64Histogram
	retries           metric.Int64Counter
	fallbacks         metric.Int64Counter
	deadLetters       metric.Int64Counter
	repairs           metric.Int64Counter
	routeDecisions    metric.Int64Counter
	routeDuration     metric.Float64Histogram
	pending           metric.Int64ObservableGauge
	ackPending        metric.Int64ObservableGauge
	// sets are the attribute sets of the measurements made on every execution and
	// every routing decision, by their values: building a set sorts and copies its
	// attributes, which would otherwise cost each of them an allocation or more. The
	// SDK keeps a series per distinct set anyway, so this holds no more than it does.
	setsMu sync.RWMutex
	sets   map[setKey]metric.MeasurementOption
}

// setKey names an attribute set: which measurement (kind) and its values.
type setKey struct {
	kind    byte
	a, b, c string
}

// Kinds of setKey.
const (
	setExecution = iota // skill, version, outcome
	setStep             // skill, step kind, outcome
	setRoute            // outcome, route method
)

// set returns the attribute set k names, made the first time it is asked for.
func (m *Metrics) set(k setKey) metric.MeasurementOption {
	m.setsMu.RLock()
	o, ok := m.sets[k]
	m.setsMu.RUnlock()
	if ok {
		return o
	}
	// The key is kept for as long as the process runs: its strings may be slices
	// of a message's data (a job read in place), which they would keep alive.
	k.a, k.b, k.c = strings.Clone(k.a), strings.Clone(k.b), strings.Clone(k.c)
	var attrs []attribute.KeyValue
	switch k.kind {
	case setExecution:
		attrs = []attribute.KeyValue{AttrSkillName.String(k.a), AttrSkillVersion.String(k.b), AttrOutcome.String(k.c)}
	case setStep:
		attrs = []attribute.KeyValue{AttrSkillName.String(k.a), AttrStepKind.String(k.b), AttrOutcome.String(k.c)}
	case setRoute:
		attrs = []attribute.KeyValue{AttrOutcome.String(k.a), AttrRouteMethod.String(k.b)}
	}
	o = metric.WithAttributeSet(attribute.NewSet(attrs...))
	m.setsMu.Lock()
	if m.sets == nil {
		m.sets = map[setKey]metric.MeasurementOption{}
	}
	m.sets[k] = o
	m.setsMu.Unlock()
	return o
}

// NewMetrics creates the instruments on mp.
func NewMetrics(mp metric.MeterProvider) (*Metrics, error) {
	m := &Metrics{meter: mp.Meter(ScopeName)}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	hist := func(name, desc string) metric.Float64Histogram {
		h, err := m.meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		errs = append(errs, err)
		return h
	}
	gauge := func(name, desc string) metric.Int64ObservableGauge {
		g, err := m.meter.Int64ObservableGauge(name, metric.WithUnit("{message}"), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	m.executions = counter(MetricExecutions, "{execution}", "Executions of skills that ended, by skill, version and outcome.")
	m.executionDuration = hist(MetricExecutionDuration, "How long an execution of a skill took, from its job's first delivery to its result.")
	m.stepDuration = hist(MetricStepDuration, "How long a step of a skill took, by skill, step kind and outcome.")
	m.retries = counter(MetricRetries, "{retry}", "Jobs handed back for another attempt after a retryable failure.")
	m.fallbacks = counter(MetricFallbacks, "{fallback}", "Executions that failed and passed their activation to the next skill of the plan.")
	m.deadLetters = counter(MetricDeadLetters, "{message}", "Jobs sent to the dead-letter stream.")
	m.repairs = counter(MetricRepairs, "{repair}", "Repair attempts of repairable failures, by outcome.")
	m.routeDecisions = counter(MetricRouteDecisions, "{decision}", "Triggers routed, by outcome (routed, unmatched, rejected) and method.")
	m.routeDuration = hist(MetricRouteDuration, "How long routing one trigger took.")
	m.pending = gauge(MetricConsumerPending, "Messages in a pool's stream not yet delivered to its consumer.")
	m.ackPending = gauge(MetricConsumerAckPend, "Messages delivered to a pool's consumer and not yet acknowledged.")
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("telemetry: creating instruments: %w", err)
	}
	return m, nil
}

// Execution records an ended execution of a skill: outcome is OutcomeCompleted or
// OutcomeFailed (or another word for how it ended); d is how long it ran.
func (m *Metrics) Execution(ctx context.Context, skill, version, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	set := m.set(setKey{setExecution, skill, version, outcome})
	m.executions.Add(ctx, 1, set)
	m.executionDuration.Record(ctx, d.Seconds(), set)
}

// Step records a step of a skill that ended.
func (m *Metrics) Step(ctx context.Context, skill, kind, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.stepDuration.Record(ctx, d.Seconds(), m.set(setKey{setStep, skill, kind, outcome}))
}

// Retry records a job handed back for another attempt; class is its failure class.
func (m *Metrics) Retry(ctx context.Context, skill, class string) {
	if m == nil {
		return
	}
	m.retries.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(AttrSkillName.String(skill), AttrFailureClass.String(class))))
}

// Fallback records an execution of skill falling back to the next of its plan.
func (m *Metrics) Fallback(ctx context.Context, skill, class string) {
	if m == nil {
		return
	}
	m.fallbacks.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(AttrSkillName.String(skill), AttrFailureClass.String(class))))
}

// DeadLetter records a job of skill sent to the dead-letter stream.
func (m *Metrics) DeadLetter(ctx context.Context, skill, class string) {
	if m == nil {
		return
	}
	m.deadLetters.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(AttrSkillName.String(skill), AttrFailureClass.String(class))))
}

// Outcomes of skillbus.repairs.
const (
	RepairRequested     = "requested"      // an execution was parked on a repair
	RepairSkipped       = "skipped"        // a repairable failure that is not repaired
	RepairNoImprovement = "no_improvement" // the repaired version failed the same way
	RepairSucceeded     = "succeeded"      // a repair was applied and its executions released
	RepairFailed        = "failed"         // rejected, expired, out of budget or unpublishable
)

// Repair records a step in the repair of skill's failures; outcome is one of the
// Repair* outcomes.
func (m *Metrics) Repair(ctx context.Context, skill, outcome string) {
	if m == nil {
		return
	}
	m.repairs.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(AttrSkillName.String(skill), AttrOutcome.String(outcome))))
}

// Route records a routing decision: outcome is OutcomeRouted, OutcomeUnmatched or
// OutcomeRejected; method how the skill was chosen ("explicit", "rule", "semantic",
// ...; "" when none was); d how long routing took.
func (m *Metrics) Route(ctx context.Context, outcome, method string, d time.Duration) {
	if m == nil {
		return
	}
	set := m.set(setKey{setRoute, outcome, method, ""})
	m.routeDecisions.Add(ctx, 1, set)
	m.routeDuration.Record(ctx, d.Seconds(), set)
}

// ConsumerStat is the state of one JetStream consumer, as its ConsumerInfo reports
// it (NumPending and NumAckPending).
type ConsumerStat struct {
	Pool       string // the worker pool, or "" for a consumer of no pool (the router)
	Stream     string
	Consumer   string
	Pending    int64
	AckPending int64
}

// ObserveConsumers registers fn to report the consumers' pending and ack-pending
// counts each time the metrics are collected (each scrape of /metrics). fn should
// answer from a recent ConsumerInfo and return promptly; it is called with the
// scrape's context. Unregister stops the reports.
func (m *Metrics) ObserveConsumers(fn func(ctx context.Context) []ConsumerStat) (unregister func() error, err error) {
	if m == nil {
		return func() error { return nil }, nil
	}
	reg, err := m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		for _, s := range fn(ctx) {
			set := metric.WithAttributeSet(attribute.NewSet(
				AttrPool.String(s.Pool),
				semconv.MessagingConsumerGroupName(s.Consumer),
				attribute.String("skillbus.stream", s.Stream),
			))
			o.ObserveInt64(m.pending, s.Pending, set)
			o.ObserveInt64(m.ackPending, s.AckPending, set)
		}
		return nil
	}, m.pending, m.ackPending)
	if err != nil {
		return nil, fmt.Errorf("telemetry: registering the consumer gauges: %w", err)
	}
	return reg.Unregister, nil
}

// Consumer names a JetStream durable consumer whose backlog ObserveConsumers
// reports, with the pool it feeds.
type Consumer struct {
	Pool, Stream, Name string
}
