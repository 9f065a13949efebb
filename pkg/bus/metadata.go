package bus

import (
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Metadata returns a delivered message's JetStream metadata as msg.Metadata()
// does, read from its reply subject the same way, but as a value: Metadata
// allocates nothing, where msg.Metadata() allocates the struct it returns, for
// every job a worker runs. Its errors are jetstream's: ErrMsgNoReply, or
// ErrNotJSMessage for a reply subject that is no JetStream acknowledgement's.
func Metadata(msg jetstream.Msg) (jetstream.MsgMetadata, error) {
	return ackMetadata(msg.Reply())
}

// The tokens of an acknowledgement subject, as jetstream numbers them:
// $JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>[.<token>],
// or, from an older server, without the domain and account hash.
const (
	ackDomain = iota + 2
	ackAccHash
	ackStream
	ackConsumer
	ackDelivered
	ackStreamSeq
	ackConsumerSeq
	ackTime
	ackPending
)

func ackMetadata(reply string) (jetstream.MsgMetadata, error) {
	if reply == "" {
		return jetstream.MsgMetadata{}, jetstream.ErrMsgNoReply
	}
	var t [ackPending + 1]string
	const v1, v2 = 9, 12
	n := strings.Count(reply, ".") + 1
	switch {
	case n < v1 || n > v1 && n < v2-1:
		return jetstream.MsgMetadata{}, fmt.Errorf("%w: invalid format of ACK subject", jetstream.ErrNotJSMessage)
	case !strings.HasPrefix(reply, "$JS.ACK."):
		return jetstream.MsgMetadata{}, fmt.Errorf("%w: invalid format of ACK subject: subject should start with $JS.ACK", jetstream.ErrNotJSMessage)
	}
	s := reply
	for i := range t {
		if n == v1 && (i == ackDomain || i == ackAccHash) {
			continue
		}
		t[i], s, _ = strings.Cut(s, ".")
	}
	if t[ackDomain] == "_" {
		t[ackDomain] = ""
	}
	md := jetstream.MsgMetadata{
		Domain:       t[ackDomain],
		NumDelivered: ackNum(t[ackDelivered]),
		NumPending:   ackNum(t[ackPending]),
		Timestamp:    time.Unix(0, int64(ackNum(t[ackTime]))),
		Stream:       t[ackStream],
		Consumer:     t[ackConsumer],
	}
	md.Sequence.Stream = ackNum(t[ackStreamSeq])
	md.Sequence.Consumer = ackNum(t[ackConsumerSeq])
	return md, nil
}

// ackNum reads a decimal token; anything else is 0, as jetstream reads it.
func ackNum(d string) (n uint64) {
	for i := 0; i < len(d); i++ {
		c := d[i]
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + uint64(c-'0')
	}
	return n
}
