package bus

import (
	"sync"

	"github.com/nats-io/nats.go"
)

// The buffers and header maps of the messages a handler gives a Batch
// (Batch.Give) are used again: a job or an outcome is a few kilobytes encoded
// once, published once, and dropped as soon as JetStream has it, which made them
// the largest share of the bytes a handler allocates.
//
// Who owns a buffer: Event.PooledMsg and PooledJobMsgOf take one from here, and a
// header map, and hand them to the caller as the message's Data and Header; the
// caller owns them until it gives the message to a Batch (Give, GiveCreate),
// which owns them from then on. The Batch puts them back here in Wait, once
// JetStream has acknowledged the message (it is then no longer needed to publish
// it again) and after Wait has read what it reads of it, and sets the message's
// Data and Header to nil, so that a caller that kept the message finds nothing
// rather than another message's. A message that is never given, or whose publish
// ever fails (the batch keeps it for Resend), leaves them to the garbage
// collector, even once resent and acknowledged: a publish of it that no Wait
// waits for any more may still be in flight, and send it again.
//
// A class holds buffers of one capacity, so that each is stored as a pointer to
// an array, which costs no allocation to put back, unlike a slice.
var (
	buf2k  sync.Pool // *[2 << 10]byte
	buf4k  sync.Pool // *[4 << 10]byte
	buf8k  sync.Pool // *[8 << 10]byte
	buf16k sync.Pool // *[16 << 10]byte
	buf32k sync.Pool // *[32 << 10]byte
)

// pooledMax is the largest buffer kept: a larger message is rare, and a buffer
// that size would hold more memory idle than it saves.
const pooledMax = 32 << 10

// getBuf returns an empty buffer with room for at least n bytes: a pooled one up
// to pooledMax, a new one of exactly n beyond.
func getBuf(n int) []byte {
	switch {
	case n <= 2<<10:
		if a, _ := buf2k.Get().(*[2 << 10]byte); a != nil {
			return a[:0]
		}
		return make([]byte, 0, 2<<10)
	case n <= 4<<10:
		if a, _ := buf4k.Get().(*[4 << 10]byte); a != nil {
			return a[:0]
		}
		return make([]byte, 0, 4<<10)
	case n <= 8<<10:
		if a, _ := buf8k.Get().(*[8 << 10]byte); a != nil {
			return a[:0]
		}
		return make([]byte, 0, 8<<10)
	case n <= 16<<10:
		if a, _ := buf16k.Get().(*[16 << 10]byte); a != nil {
			return a[:0]
		}
		return make([]byte, 0, 16<<10)
	case n <= pooledMax:
		if a, _ := buf32k.Get().(*[32 << 10]byte); a != nil {
			return a[:0]
		}
		return make([]byte, 0, 32<<10)
	}
	return make([]byte, 0, n)
}

// putBuf keeps b, which its owner no longer uses, for getBuf. A buffer of a
// capacity no class has (one that grew, or was not made by getBuf) is dropped.
func putBuf(b []byte) {
	switch cap(b) {
	case 2 << 10:
		buf2k.Put((*[2 << 10]byte)(b[:cap(b)]))
	case 4 << 10:
		buf4k.Put((*[4 << 10]byte)(b[:cap(b)]))
	case 8 << 10:
		buf8k.Put((*[8 << 10]byte)(b[:cap(b)]))
	case 16 << 10:
		buf16k.Put((*[16 << 10]byte)(b[:cap(b)]))
	case 32 << 10:
		buf32k.Put((*[32 << 10]byte)(b[:cap(b)]))
	}
}

// headers holds emptied header maps (nats.Header) of given messages.
var headers sync.Pool

// getHeader returns an empty header map with room for a few headers.
func getHeader() nats.Header {
	if h, _ := headers.Get().(nats.Header); h != nil {
		return h
	}
	return make(nats.Header, 3)
}

// putHeader empties h, which its owner no longer uses, and keeps it for
// getHeader; a map that grew past a few headers is dropped.
func putHeader(h nats.Header) {
	if h == nil || len(h) > 4 {
		return
	}
	clear(h)
	headers.Put(h)
}
