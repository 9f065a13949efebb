package router

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
)

// publishRun publishes m, the run of a batch or a debounced burst, on the
// router-only subject TriggerDebounced(name). Its Nats-Msg-Id makes a second
// publish of the same run (its timer delivered again) a duplicate. JetStream's
// duplicate check is stream-wide, though, and any publisher may set any id on an
// ordinary trigger subject: a message stored first under the run's id would make
// the run's publish a duplicate, and the run would never happen. So a duplicate
// is taken as this run only if the stored message is on this skill's debounced
// subject with this run's event id; otherwise the run is published again with no
// id. Published twice (this router dies before its timer is acked), the run is
// still routed once: its jobs are created only once per activation.
func (r *Router) publishRun(ctx context.Context, m *nats.Msg, name string) error {
	ack, err := r.cfg.Bus.Publish(ctx, m)
	if err != nil || !ack.Duplicate {
		return err
	}
	st, err := r.cfg.Bus.Stream(ctx, ack.Stream)
	if err != nil {
		return fmt.Errorf("reading the stream of the run's duplicate: %w", err)
	}
	prev, err := st.GetMsg(ctx, ack.Sequence)
	if err != nil {
		return fmt.Errorf("reading the run's duplicate at %d: %w", ack.Sequence, err)
	}
	if prev.Subject == m.Subject && prev.Header.Get(events.HeaderCEID) == m.Header.Get(events.HeaderCEID) {
		return nil
	}
	r.cfg.Log.Error("router: another message took the id of a batch or debounced run; publishing the run again without it",
		"skill", name, "msgid", m.Header.Get(bus.HeaderMsgID), "subject", prev.Subject, "seq", ack.Sequence)
	again := nats.NewMsg(m.Subject)
	again.Data = m.Data
	for k, v := range m.Header {
		if k != bus.HeaderMsgID {
			again.Header[k] = v
		}
	}
	_, err = r.cfg.Bus.Publish(ctx, again)
	return err
}
