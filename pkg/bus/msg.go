package bus

import "github.com/nats-io/nats.go"

// Msg is a message as the bus's readers see it: what Decode, DecodeFast,
// DecisionOfJob and the trace helpers of package bustrace read. A jetstream.Msg is
// one, as a consumer hands it over; FromNATS makes a core NATS message one, and
// MsgOf one read back from a stream (a jetstream.RawStreamMsg) or kept in a record.
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

// MsgOf returns the message of subject, headers h and payload data as a Msg: a
// message read back from a stream (jetstream.RawStreamMsg's Subject, Header and
// Data) or one kept in a record. The subject may be empty when the reader does
// not need it.
func MsgOf(subject string, h nats.Header, data []byte) Msg {
	return &parts{subject, h, data}
}

type parts struct {
	subject string
	h       nats.Header
	data    []byte
}

func (p *parts) Subject() string      { return p.subject }
func (p *parts) Headers() nats.Header { return p.h }
func (p *parts) Data() []byte         { return p.data }
