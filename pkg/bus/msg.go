package bus

import "github.com/nats-io/nats.go"

// Msg is a message as the bus's readers see it: a jetstream.Msg is one, and
// FromNATS makes a core NATS message one.
type Msg interface {
	Subject() string
	Headers() nats.Header
	Data() []byte
}

// FromNATS returns m as a Msg, without copying it.
// A nil m is a nil Msg.
func FromNATS(m *nats.Msg) Msg {
	if m == nil {
		return nil
	}
	return natsMsg{m} // one pointer: held in the interface, not allocated
}

type natsMsg struct{ m *nats.Msg }

func (m natsMsg) Subject() string      { return m.m.Subject }
func (m natsMsg) Headers() nats.Header { return m.m.Header }
func (m natsMsg) Data() []byte         { return m.m.Data }
