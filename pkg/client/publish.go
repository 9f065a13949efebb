package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/bus/bustrace"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// Every trigger skillbus publishes for someone — `skillbus trigger`, the HTTP
// gateway, a delayed or scheduled trigger, the skill tool — goes through Prepare
// and Send: it is checked, encoded and weighed the same way, carries the same
// headers and trace, and fails with the same errors, whoever sends it.

// Errors of Prepare.
var (
	// ErrInvalidEvent is a trigger refused before it is published: not a valid
	// CloudEvent, a type or skill that cannot be part of a subject, an id longer
	// than 200 characters, or data declared JSON that is not.
	ErrInvalidEvent = errors.New("invalid CloudEvent")
	// ErrTooLarge is a trigger heavier, headers and data, than the routers take
	// (WithMaxEventBytes): a router would only reject it.
	ErrTooLarge = errors.New("event too large")
)

// NotAcknowledgedError is a trigger Send sent that the server did not
// acknowledge in time: NATS unreachable (the connection keeps the publish and
// sends it once it reconnects), overloaded, or its store full. Whether it was
// stored is unknown — it may still be, and run — and sending it again with the
// same source and id is safe: it is deduplicated.
type NotAcknowledgedError struct {
	Subject, Source, ID string
	Err                 error // what the last attempt ended with
}

func (e *NotAcknowledgedError) Error() string {
	return fmt.Sprintf("publish %s: the server did not acknowledge the trigger in time (%v): NATS is unreachable, overloaded, or its store is full (see the services' /readyz); it may still have been stored, and sending it again with the same source and id (%s, %s) is safe: it is deduplicated",
		e.Subject, e.Err, e.Source, e.ID)
}

func (e *NotAcknowledgedError) Unwrap() error { return e.Err }

// ReservedSource begins the sources of skillbus's own triggers
// (events.ReservedSource): the scheduler's ticks, the skill tool's calls, the
// routers' debounced runs. Their ids are predictable, so CheckOutside refuses
// them, and routers take them only on the subjects skillbus's own roles publish
// (events.Subjects.TriggerInternal): Prepare puts a trigger from such a source
// there.
const ReservedSource = events.ReservedSource

// CheckOutside checks e as CheckEvent does, as a trigger from outside skillbus (the
// gateway, skillbus trigger): its source, compared as CloudEvents compares sources
// (percent-decoded), must not begin ReservedSource.
func CheckOutside(e *event.Event) error {
	if err := CheckEvent(e); err != nil {
		return err
	}
	return CheckOutsideSource(e.Source())
}

// CheckOutsideSource reports, wrapping ErrInvalidEvent, a source an outside
// sender may not use (ReservedSource).
func CheckOutsideSource(source string) error {
	if events.IsReservedSource(source) {
		return fmt.Errorf("%w: source %q: sources beginning %s or skillbus: are skillbus's own (its scheduler, its skill tool, its routers, its records' ids), whose ids are predictable; use a source of your own", ErrInvalidEvent, source, ReservedSource)
	}
	return nil
}

// maxIDLength bounds a trigger's id: it is part of ids and keys downstream.
const maxIDLength = 200

// CheckEvent checks e as a trigger: a valid CloudEvent whose type can be part of a
// subject, whose id is at most 200 characters long, whose source does not begin
// events.SourceDebounced (the routers' own), and whose data, when it is declared
// JSON (or not declared, which the router reads as JSON), is JSON. The error
// wraps ErrInvalidEvent.
func CheckEvent(e *event.Event) error {
	if err := e.Validate(); err != nil {
		// sdk-go ends each attribute's problem with a line break: one line, "; " between.
		return fmt.Errorf("%w: %s", ErrInvalidEvent, strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", " ; ")), " "))
	}
	if err := events.CheckType(e.Type()); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	if len(e.ID()) > maxIDLength {
		return fmt.Errorf("%w: id is %d characters long; at most %d", ErrInvalidEvent, len(e.ID()), maxIDLength)
	}
	if strings.HasPrefix(e.Source(), events.SourceDebounced) {
		return fmt.Errorf("%w: source %q: sources beginning %s are the runs of debounced skills, which only routers publish", ErrInvalidEvent, e.Source(), events.SourceDebounced)
	}
	if strings.HasPrefix(e.Type(), "skill.") {
		// Its subject would be skillbus.trigger.skill.…, where explicit invocations
		// and the routers' debounced runs are published, not a type's.
		return fmt.Errorf("%w: type %q: types beginning skill. are reserved (skillbus.trigger.skill.<name> invokes a skill: name it with the skill extension, skillbus trigger --skill, or ?skill= over HTTP)", ErrInvalidEvent, e.Type())
	}
	if d := e.Data(); len(d) > 0 && jsonMediaType(e.DataContentType()) {
		var v any
		if err := events.DecodeValue(d, &v); err != nil {
			return fmt.Errorf("%w: data is not valid JSON (datacontenttype %q): %v", ErrInvalidEvent, e.DataContentType(), err)
		}
	}
	return nil
}

// jsonMediaType reports whether data of content type ct is read as JSON.
func jsonMediaType(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	switch strings.ToLower(strings.TrimSpace(mt)) {
	case "", "application/json", "text/json":
		return true
	}
	return false
}

// Outgoing is a trigger checked, encoded and weighed by Prepare, its PRODUCER span
// started: Send publishes it, Abandon gives it up.
type Outgoing struct {
	// Activation is what the trigger sets off once sent; Send fills in Seq and
	// Duplicate.
	Activation Activation
	// Size is its weight as a router weighs it (bus.EventSize).
	Size int
	msg  *nats.Msg
	ctx  context.Context // carries the PRODUCER span
	span trace.Span
}

// Header returns the headers the trigger is published with.
func (o *Outgoing) Header() nats.Header { return o.msg.Header }

// Abandon ends the trigger's span with err, for a trigger that will not be sent
// (another of its batch was refused).
func (o *Outgoing) Abandon(err error) { telemetry.End(o.span, err) }

// Prepare checks e (CheckEvent), and skill when set, and encodes e as the trigger
// to publish: in binary content mode on its subject — skill's explicit-invocation
// subject when skill is set, else its type's — with the activation id (the hash of
// its source and id) as Nats-Msg-Id, so the same event published twice sets off
// one activation. It starts the PRODUCER span of publishing it, continuing the
// trace e carries in its traceparent extension, else the one in ctx, and sets e's
// traceparent to that span. A trigger heavier than the client's limit is refused
// with ErrTooLarge and its span ended.
func (c *Client) Prepare(ctx context.Context, e *event.Event, skill string) (*Outgoing, error) {
	subject, err := c.subject(e, skill)
	if err != nil {
		return nil, err
	}
	var attrs []attribute.KeyValue
	if skill != "" {
		attrs = append(attrs, telemetry.AttrSkillName.String(skill))
	}
	ctx, span := bustrace.StartPublishEvent(bustrace.ExtractEvent(ctx, e), subject, e, attrs...)
	m, size, err := c.encode(subject, e)
	if err != nil {
		telemetry.End(span, err)
		return nil, err
	}
	act := Activation{ID: m.Header.Get(bus.HeaderMsgID), Subject: subject, Source: e.Source(), EventID: e.ID()}
	return &Outgoing{Activation: act, Size: size, msg: m, ctx: ctx, span: span}, nil
}

// Check checks t as Publish does, without publishing it: a trigger kept to be
// published later (schedule.At) is refused when it is given, not when it is due.
func (c *Client) Check(t Trigger) error {
	e, err := t.event()
	if err != nil {
		return err
	}
	subject, err := c.subject(&e, t.Skill)
	if err == nil {
		_, _, err = c.encode(subject, &e)
	}
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	return nil
}

// subject checks e, and skill when set, and returns the subject to publish e on.
func (c *Client) subject(e *event.Event, skill string) (string, error) {
	if err := CheckEvent(e); err != nil {
		return "", err
	}
	internal := events.IsReservedSource(e.Source())
	if skill == "" {
		if internal {
			return "", fmt.Errorf("%w: source %q: a trigger from one of skillbus's own sources (%s) must name its skill", ErrInvalidEvent, e.Source(), ReservedSource)
		}
		return c.b.Subjects.Trigger(e.Type()), nil
	}
	if err := events.CheckToken("skill", skill); err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	if internal {
		// Where only skillbus's own roles publish, and the only place routers
		// take such a source.
		return c.b.Subjects.TriggerInternal(skill), nil
	}
	return c.b.Subjects.TriggerSkill(skill), nil
}

// encode writes e for subject with its activation id as its message id, and
// weighs it against the client's limit.
func (c *Client) encode(subject string, e *event.Event) (*nats.Msg, int, error) {
	// CloudEvents makes an event unique by source and id together, so two
	// sources' id "1" are two triggers.
	m := bus.Encode(subject, events.ActivationID(e.Source(), e.ID()), e)
	size := bus.EventSize(bus.FromNATS(m))
	if size > c.maxEventBytes {
		return nil, size, fmt.Errorf("%w: event %s is %d bytes (headers and data); the limit is %d bytes", ErrTooLarge, e.ID(), size, c.maxEventBytes)
	}
	return m, size, nil
}

// Send publishes o and ends its span. While JetStream cannot take it — no
// responders (a stream electing a leader, a server restarting) or no answer in
// time — it is sent again, under the same message id, until retryUntil (a zero
// time: sent once). A repeat that was stored after all is a duplicate.
func (c *Client) Send(ctx context.Context, o *Outgoing, retryUntil time.Time) (act Activation, err error) {
	defer func() { telemetry.End(o.span, err) }()
	ack, unanswered, err := c.publishRetrying(o.ctx, o.msg, retryUntil)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return Activation{}, ctx.Err()
		}
		// Sent and not answered (by this attempt or an earlier one): it may
		// have been stored — a publish made while the connection is down is
		// buffered and sent when it is back — so not "not published".
		if unanswered || ctx.Err() != nil {
			return Activation{}, &NotAcknowledgedError{Subject: o.msg.Subject, Source: o.Activation.Source, ID: o.Activation.EventID, Err: err}
		}
		if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
			if c.b.NoJetStreamThere() {
				return Activation{}, c.b.NoJetStream(fmt.Errorf("publish %s: no stream takes it: %w", o.msg.Subject, nats.ErrNoResponders))
			}
			return Activation{}, fmt.Errorf("publish %s: no stream takes it (%w); is skillbus running here, with prefix %q?", o.msg.Subject, err, c.b.Subjects.Prefix)
		}
		return Activation{}, fmt.Errorf("publish %s: %w", o.msg.Subject, err)
	}
	if ack.Duplicate {
		if ack, err = c.ownDuplicate(o.ctx, o, ack); err != nil {
			return Activation{}, err
		}
	}
	act = o.Activation
	act.Seq, act.Duplicate = ack.Sequence, ack.Duplicate
	return act, nil
}

// ownDuplicate checks a duplicate of one of skillbus's own triggers (a tick, a
// skill tool's call: on a TriggerInternal subject). JetStream's duplicate check
// is stream-wide, and a sender may set any Nats-Msg-Id on a trigger of its own:
// one stored first under the id this trigger's activation gives it would have
// the tick or the call dropped as a repeat, and never run. So a duplicate counts
// only if the stored message is this trigger on this subject; otherwise the
// trigger is published again with no id. Stored twice (a genuine repeat raced
// it), it is still routed once: an activation's jobs are created once.
func (c *Client) ownDuplicate(ctx context.Context, o *Outgoing, ack *jetstream.PubAck) (*jetstream.PubAck, error) {
	m := o.msg
	if _, own := c.b.Subjects.SkillFromInternal(m.Subject); !own {
		return ack, nil
	}
	st, err := c.b.Stream(ctx, ack.Stream)
	if err != nil {
		return nil, fmt.Errorf("publish %s: reading what its message id repeats: %w", m.Subject, err)
	}
	prev, err := st.GetMsg(ctx, ack.Sequence)
	if err != nil {
		return nil, fmt.Errorf("publish %s: reading what its message id repeats (sequence %d): %w", m.Subject, ack.Sequence, err)
	}
	h := events.HeaderCEID
	if prev.Subject == m.Subject && prev.Header.Get(h) == m.Header.Get(h) && prev.Header.Get(events.HeaderCESource) == m.Header.Get(events.HeaderCESource) {
		return ack, nil
	}
	c.log.Error("client: another message took the id of one of skillbus's own triggers; publishing it again without the id",
		"subject", m.Subject, "msgid", m.Header.Get(bus.HeaderMsgID), "taken_by", prev.Subject, "seq", ack.Sequence)
	again := nats.NewMsg(m.Subject)
	again.Data = m.Data
	for k, v := range m.Header {
		if k != bus.HeaderMsgID {
			again.Header[k] = v
		}
	}
	ack, err = c.b.Publish(ctx, again)
	if noAnswer(err) {
		// Sent and not answered: it may have been stored.
		return nil, &NotAcknowledgedError{Subject: m.Subject, Source: o.Activation.Source, ID: o.Activation.EventID, Err: err}
	}
	return ack, err
}

// publishAttemptTimeout bounds one attempt of a retried publish: a publish to a
// leader that died is never answered.
const publishAttemptTimeout = 2 * time.Second

// publishRetrying reports, with the error of the last attempt, whether any attempt
// went unanswered: sent, and maybe stored.
func (c *Client) publishRetrying(ctx context.Context, m *nats.Msg, deadline time.Time) (ack *jetstream.PubAck, unanswered bool, err error) {
	if deadline.IsZero() {
		ack, err = c.b.Publish(ctx, m)
		return ack, noAnswer(err), err
	}
	delay := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		until := time.Now().Add(publishAttemptTimeout)
		if deadline.Before(until) {
			until = deadline
		}
		actx, cancel := context.WithDeadline(ctx, until)
		// No retries inside: an attempt that ends past its deadline was then sent
		// and not answered, not refused for no responders again and again.
		ack, err = c.b.Publish(actx, m, jetstream.WithRetryAttempts(0))
		cancel()
		unanswered = unanswered || noAnswer(err)
		if err == nil || !Unavailable(err) || ctx.Err() != nil || time.Now().Add(delay).After(deadline) {
			return ack, unanswered, err
		}
		c.log.Warn("client: JetStream did not take the trigger; sending it again", "subject", m.Subject, "attempt", attempt, "retry_in", delay, "err", err)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, unanswered, ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, time.Second)
	}
}

// noAnswer reports whether a publish ended without an answer from the server:
// whether it was stored is unknown.
func noAnswer(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
}

// Unavailable reports whether a publish failed because JetStream could not take
// it just then, rather than because it refused the message.
func Unavailable(err error) bool {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected):
		return true
	case errors.As(err, &apiErr):
		return apiErr.Code == http.StatusServiceUnavailable // cluster or stream not available
	}
	return false
}

// Publish publishes t and returns its activation (Prepare, then Send once). It
// records the PRODUCER span of the publication, whose context the trigger carries
// in its traceparent extension, so the whole activation joins one trace.
func (c *Client) Publish(ctx context.Context, t Trigger) (Activation, error) {
	e, err := t.event()
	if err != nil {
		return Activation{}, err
	}
	o, err := c.Prepare(ctx, &e, t.Skill)
	if err != nil {
		return Activation{}, fmt.Errorf("client: %w", err)
	}
	return c.Send(ctx, o, time.Time{})
}

// event is t as a CloudEvent, its defaults applied: io.skillbus.invoke for a
// skill's invocation without a type, a source and id when it has none, the time
// of publishing when it has none, its data as JSON, and Meta's trace context as its traceparent.
func (t *Trigger) event() (event.Event, error) {
	if t.Type == "" {
		if t.Skill == "" {
			return event.Event{}, errors.New("client: a trigger needs a Type or a Skill")
		}
		t.Type = events.TriggerInvoke
	}
	t.defaults()
	e := event.New()
	e.SetID(t.ID)
	e.SetSource(t.Source)
	e.SetType(t.Type)
	if t.Time.IsZero() {
		e.SetTime(time.Now())
	} else {
		e.SetTime(t.Time)
	}
	for k, v := range t.Extensions {
		e.SetExtension(k, v)
	}
	if t.Meta.TraceParent != "" {
		e.SetExtension(events.ExtTraceParent, t.Meta.TraceParent)
		if t.Meta.TraceState != "" {
			e.SetExtension(events.ExtTraceState, t.Meta.TraceState)
		}
	}
	if len(t.Data) > 0 {
		e.SetDataContentType("application/json")
		e.DataEncoded = t.Data
	}
	return e, nil
}
