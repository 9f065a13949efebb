package bus

import "github.com/nats-io/nats.go"

// Infos is how many consumer infos the loop's monitor has looked at.
func (l *Loop) Infos() int64 { return l.infos.Load() }

// ReadsStructuredItself reports whether DecodeFast reads m, a structured-mode
// event, without Decode.
func ReadsStructuredItself(m *nats.Msg) bool {
	_, ok := decodeStructuredFast(m, false)
	return ok
}

// Waits is how many Waits of bt are under way or waiting for their turn.
func (bt *Batch) Waits() int {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	return bt.waits
}
