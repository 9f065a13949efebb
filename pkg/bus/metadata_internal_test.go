package bus

import (
	"errors"
	"reflect"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var ackSubjects = []string{
	"$JS.ACK.SKILLBUS_JOBS.worker-default.1.12.7.1764262664230195691.0",
	"$JS.ACK._.Ahash.SKILLBUS_JOBS.worker-default.3.12.7.1764262664230195691.4.rnd",
	"$JS.ACK.hub.Ahash.S.c.1.2.3.4.5",
	"$JS.ACK.hub.Ahash.S.c.1.2.3.4.5.x.y",
	"$JS.ACK.S.c.x.2.3.4.5",
	"$JS.ACK.S.c.1.2.3.4",
	"$JS.NAK.S.c.1.2.3.4.5",
	"$JS.ACK.S.c.1.2.3.4.5.6",
	"$JS.ACK.S.c.18446744073709551616.2.3.4.5",
	"$JS.ACK...........",
	"_INBOX.x",
}

// ackMetadata reads every reply subject as nats.go does: the same metadata, and
// an error exactly when it errs.
func TestAckMetadataAsNATS(t *testing.T) {
	for _, s := range ackSubjects {
		checkAckMetadata(t, s)
	}
}

func FuzzAckMetadata(f *testing.F) {
	for _, s := range ackSubjects {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkAckMetadata(t, s) })
}

func checkAckMetadata(t *testing.T, reply string) {
	t.Helper()
	got, err := ackMetadata(reply)
	// nats.go's other API reads the subject with the same parser.
	want, wantErr := (&nats.Msg{Reply: reply, Sub: &nats.Subscription{}}).Metadata()
	switch {
	case (err != nil) != (wantErr != nil):
		t.Fatalf("%q: err = %v, want %v", reply, err, wantErr)
	case err != nil:
		if reply != "" && !errors.Is(err, jetstream.ErrNotJSMessage) {
			t.Fatalf("%q: err = %v, want ErrNotJSMessage", reply, err)
		}
	default:
		w := jetstream.MsgMetadata{
			Sequence:     jetstream.SequencePair{Stream: want.Sequence.Stream, Consumer: want.Sequence.Consumer},
			NumDelivered: want.NumDelivered, NumPending: want.NumPending, Timestamp: want.Timestamp,
			Stream: want.Stream, Consumer: want.Consumer, Domain: want.Domain,
		}
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("%q: %+v, want %+v", reply, got, w)
		}
	}
}

func TestAckMetadataAllocs(t *testing.T) {
	s := ackSubjects[1]
	if n := testing.AllocsPerRun(100, func() { _, _ = ackMetadata(s) }); n != 0 {
		t.Errorf("ackMetadata allocates %v times", n)
	}
}
